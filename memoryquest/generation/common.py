"""Small pieces every generation stage needs: persona variables, parsing, checks."""

from __future__ import annotations

import datetime as dt
import json
import re
from collections.abc import Sequence
from typing import Any, TypeVar

import numpy as np
from pydantic import BaseModel

from memoryquest.contracts import (
    Persona,
    PersonaTask,
    Query,
    RejectedCandidate,
    RejectingStage,
    RejectionReason,
    TaskBrief,
    parse_date,
    parse_domain,
)
from memoryquest.ids import make_id
from memoryquest.llm.client import LLMContextLengthError
from memoryquest.settings import GenerationSettings
from memoryquest.text import (
    announcement,
    contains_verbatim,
    forward_cue,
    normalise_text,
    shared_content_words,
)

__all__ = [
    "contains_verbatim",
    "normalise_text",
    "parse_date",
    "parse_domain",
]  # shared with other layers


def task_variables(task: PersonaTask) -> dict[str, Any]:
    """A task as a model needs it: its brief, without the goal and affinity types."""
    return task.model_dump(mode="json", include=set(TaskBrief.model_fields))


# How much of a long list a prompt shows, fullest first: all of it, then fewer until none.
# Stages walk these when the model's context window is too small for the whole prompt.
TRIM_LEVELS: tuple[int | None, ...] = (None, 24, 12, 6, 3, 1, 0)

T = TypeVar("T")


def spread(items: Sequence[T], keep: int | None) -> list[T]:
    """At most ``keep`` of ``items`` (all for None), one domain after another so every domain
    keeps its share, in their original order."""
    if keep is None or len(items) <= keep:
        return list(items)
    by_domain: dict[object, list[int]] = {}
    for index, item in enumerate(items):
        by_domain.setdefault(domain_of(item), []).append(index)
    chosen: list[int] = []
    queues = list(by_domain.values())
    while len(chosen) < keep and any(queues):
        for queue in queues:
            if queue and len(chosen) < keep:
                chosen.append(queue.pop(0))
    return [items[i] for i in sorted(chosen)]


def persona_variables(persona: Persona, keep: int | None = None) -> dict[str, Any]:
    """The persona's real content, JSON-ready, for a prompt (and the simulator).

    ``keep``: at most this many tasks and interactions, and three times as many
    affinities, spread over the domains (for a model whose window the whole
    persona does not fit; see :data:`TRIM_LEVELS`).
    """
    return {
        "persona_id": persona.persona_id,
        "demographics": persona.demographics.model_dump(mode="json"),
        "interests": [d.value for d in persona.interests],
        "affinities": [
            a.model_dump(mode="json")
            for a in spread(persona.affinities, None if keep is None else 3 * keep)
        ],
        "interactions": [i.model_dump(mode="json") for i in spread(persona.interactions, keep)],
        "tasks": [task_variables(t) for t in spread(persona.tasks, keep)],
    }


def domain_of(item: Any) -> object:
    """The domain an item of a prompt's list belongs to (a task's first), for :func:`spread`."""
    domains = getattr(item, "domains", None)
    if domains is not None:
        return domains[0] if domains else None
    return item.domain


def failure_reason(exc: BaseException) -> RejectionReason:
    """Why an item whose model call failed is rejected: its prompt did not fit, or its answer."""
    if isinstance(exc, LLMContextLengthError):
        return RejectionReason.CONTEXT_LENGTH
    return RejectionReason.SCHEMA


def cosine_rows(vectors: np.ndarray, left: list[int], right: list[int]) -> np.ndarray:
    """Cosine matrix between rows ``left`` and ``right`` of L2-normalised ``vectors``."""
    if not left or not right:
        return np.zeros((len(left), len(right)), dtype=np.float32)
    return np.asarray(vectors[left] @ vectors[right].T, dtype=np.float64)


def rejected(
    persona_id: str,
    stage: RejectingStage,
    reason: RejectionReason,
    detail: str,
    payload: BaseModel | dict[str, Any] | str,
    *key: object,
    gamma: float | None = None,
    embedder: str | None = None,
) -> RejectedCandidate:
    """A rejected-candidate row; ``key`` makes its id stable and unique within the stage."""
    if isinstance(payload, BaseModel):
        payload_json = payload.model_dump_json()
    elif isinstance(payload, str):
        payload_json = payload
    else:
        payload_json = json.dumps(payload, ensure_ascii=False, default=str)
    return RejectedCandidate(
        rejected_id=make_id("rejected", persona_id, stage, *key),
        persona_id=persona_id,
        stage=stage,
        reason=reason,
        detail=detail,
        payload_json=payload_json,
        gamma=gamma,
        embedder=embedder,
    )


def final_text_problem(
    sentence: str, cosine: float, query: Query, settings: GenerationSettings
) -> tuple[RejectionReason, str] | None:
    """Why a text that carries a reference gives its request away, or None.

    The drafted reference passed these gates; the sentence said in the
    conversation and the facts extracted from it are what retrieval searches,
    so they must pass them too (``cosine``: the text's to the request): no more
    than ``shared_words_max`` content words shared with the request
    (``word_overlap``), no cosine to it above ``reference_cosine_max``
    (``reference_leak``), no naming of
    the request's date nor pointing ahead (``foreshadow``), and no announcing of
    itself (``marked``). A domain name is no marker: "events" or "shopping" are
    everyday words a reference may need.
    """
    shared = shared_content_words(sentence, query.text)
    if len(shared) > settings.shared_words_max:
        return (
            RejectionReason.WORD_OVERLAP,
            f"the text carrying the reference shares {len(shared)} content words with the "
            f"request ({', '.join(sorted(shared))}; max {settings.shared_words_max}): {sentence!r}",
        )
    if cosine > settings.reference_cosine_max:
        return (
            RejectionReason.REFERENCE_LEAK,
            f"the text carrying the reference reaches cosine {cosine:.3f} to the request "
            f"(> {settings.reference_cosine_max}): {sentence!r}",
        )
    if names_date(sentence, query.query_date):
        return (
            RejectionReason.FORESHADOW,
            f"the text carrying the reference names the request's date "
            f"({query.query_date.isoformat()}): {sentence!r}",
        )
    return marker_problem(sentence, "the text carrying the reference")


def marker_problem(sentence: str, what: str) -> tuple[RejectionReason, str] | None:
    """Why ``sentence`` (named ``what`` in the reason) points ahead or announces itself, or None."""
    cue = forward_cue(sentence)
    if cue is not None:
        return (RejectionReason.FORESHADOW, f"{what} points ahead ({cue!r}): {sentence!r}")
    marker = announcement(sentence)
    if marker is not None:
        return (RejectionReason.MARKED, f"{what} announces itself ({marker!r}): {sentence!r}")
    return None


def names_date(text: str, date: dt.date) -> bool:
    """Whether ``text`` names ``date``: ISO form, or its month and day in either order."""
    month, day = date.strftime("%B"), date.day
    pattern = (
        rf"{date.isoformat()}|\b{month}\s+{day}(?:st|nd|rd|th)?\b"
        rf"|\b{day}(?:st|nd|rd|th)?\s+(?:of\s+)?{month}\b"
    )
    return re.search(pattern, text, re.IGNORECASE) is not None
