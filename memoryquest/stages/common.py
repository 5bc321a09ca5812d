"""Small pieces every generation stage needs: persona variables, parsing, checks."""

from __future__ import annotations

import json
from typing import Any

import numpy as np
from pydantic import BaseModel

from memoryquest.contracts import (
    Persona,
    PersonaTask,
    RejectedCandidate,
    RejectionReason,
    TaskBrief,
    parse_date,
    parse_domain,
)
from memoryquest.ids import make_id
from memoryquest.text import contains_verbatim, normalise_text

__all__ = [
    "contains_verbatim",
    "normalise_text",
    "parse_date",
    "parse_domain",
]  # shared with other layers


def task_variables(task: PersonaTask) -> dict[str, Any]:
    """A task as a model needs it: its brief, without the goal and affinity types."""
    return task.model_dump(mode="json", include=set(TaskBrief.model_fields))


def persona_variables(persona: Persona) -> dict[str, Any]:
    """The persona's real content, JSON-ready, for a prompt (and the simulator)."""
    return {
        "persona_id": persona.persona_id,
        "demographics": persona.demographics.model_dump(mode="json"),
        "interests": [d.value for d in persona.interests],
        "affinities": [a.model_dump(mode="json") for a in persona.affinities],
        "interactions": [i.model_dump(mode="json") for i in persona.interactions],
        "tasks": [task_variables(t) for t in persona.tasks],
    }


def cosine_rows(vectors: np.ndarray, left: list[int], right: list[int]) -> np.ndarray:
    """Cosine matrix between rows ``left`` and ``right`` of L2-normalised ``vectors``."""
    if not left or not right:
        return np.zeros((len(left), len(right)), dtype=np.float32)
    return np.asarray(vectors[left] @ vectors[right].T, dtype=np.float64)


def rejected(
    persona_id: str,
    stage: str,
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
