"""The invariants' names, a broken one as a row, and the small checks every table shares."""

from __future__ import annotations

import asyncio
import concurrent.futures
from collections.abc import Callable
from dataclasses import dataclass
from enum import StrEnum
from typing import Any, Protocol, TypeVar

import numpy as np

from memoryquest.contracts import Query, Stage
from memoryquest.dataset import GeneratedDataset
from memoryquest.generation.bounds import count_problem


class Rule(StrEnum):
    DUPLICATE_ID = "duplicate_id"
    DANGLING_ID = "dangling_id"
    REFERENCE_COUNT = "reference_count"
    REFERENCE_DATE = "reference_date"
    REFERENCE_DOMAIN = "reference_domain"
    GAMMA_MEAN = "gamma_mean"
    GAMMA_THRESHOLD = "gamma_threshold"
    COSINE_RECOMPUTED = "cosine_recomputed"
    QUERIES_PER_USER = "queries_per_user"
    QUERY_RANK = "query_rank"
    TIMELINE_PER_QUERY = "timeline_per_query"
    EVENT_COUNT = "event_count"
    EVENT_ORDER = "event_order"
    TIMELINE_START = "timeline_start"
    TIMELINE_END = "timeline_end"
    EVENT_KIND = "event_kind"
    REFERENCE_IN_ONE_EVENT = "reference_in_one_event"
    REFERENCE_EVENT_MATCH = "reference_event_match"
    FILLER_CARRIES_REFERENCE = "filler_carries_reference"
    SESSION_PER_EVENT = "session_per_event"
    SESSION_MATCHES_EVENT = "session_matches_event"
    TURN_COUNT = "turn_count"
    TURN_ROLES = "turn_roles"
    REFERENCE_TURN_INDICES = "reference_turn_indices"
    REFERENCE_VERBATIM = "reference_verbatim"
    REFERENCE_LEAK = "reference_leak"
    HISTORY_POSITIONS = "history_positions"
    REFERENCE_COSINE_MAX = "reference_cosine_max"
    REFERENCE_WORD_OVERLAP = "reference_word_overlap"
    REFERENCE_STALE = "reference_stale"
    REFERENCE_SPAN = "reference_span"
    REFERENCE_UNCOVERED = "reference_uncovered"
    FACT_PROVENANCE = "fact_provenance"
    FACT_REFERENCE_CONSISTENCY = "fact_reference_consistency"
    MERGED_FIDS = "merged_fids"


@dataclass(frozen=True)
class Violation:
    table: str
    row_id: str
    rule: Rule
    message: str

    def __str__(self) -> str:
        return f"{self.table} {self.row_id} [{self.rule.value}] {self.message}"


@dataclass(frozen=True)
class EmbeddingFunction:
    """An embedding model by name, callable synchronously (rows L2-normalised)."""

    name: str
    embed: Callable[[list[str]], np.ndarray]

    @classmethod
    def of(cls, backend: Any) -> EmbeddingFunction:
        """From a LocalEmbedder (``embed_sync``), an embedding backend or a ModelClient (async ``embed``)."""
        if hasattr(backend, "embed_sync"):
            return cls(name=backend.name, embed=backend.embed_sync)
        name = getattr(backend, "embedder_name", None) or backend.name

        def run(texts: list[str]) -> np.ndarray:
            async def call() -> np.ndarray:
                if hasattr(backend, "embedder_name"):  # a ModelClient
                    return await backend.embed(texts, stage=Stage.INVARIANTS)
                return await backend.embed(texts)

            # A worker thread has no running loop, so this works inside async callers too.
            with concurrent.futures.ThreadPoolExecutor(max_workers=1) as pool:
                return pool.submit(asyncio.run, call()).result()

        return cls(name=name, embed=run)


def count_within(
    flag: Callable[[Rule, str], None], rule: Rule, n: int, bounds: tuple[int, int], what: str
) -> None:
    """Flag ``rule`` unless ``n`` (of ``what``) lies within ``bounds``, as the stages check it."""
    problem = count_problem(n, bounds, what)
    if problem is not None:
        flag(rule, problem)


class _PersonaRow(Protocol):
    @property
    def persona_id(self) -> str: ...


_PersonaRowT = TypeVar("_PersonaRowT", bound=_PersonaRow)


def persona_row(
    flag: Callable[[Rule, str], None],
    rule: Rule,
    row: _PersonaRowT | None,
    persona_id: str,
    what: str,
) -> _PersonaRowT | None:
    """``row``, which ``what`` names; flags ``rule`` when it does not exist or belongs to another
    persona than ``persona_id`` (returned all the same: the checks after it still apply)."""
    if row is None:
        flag(rule, f"{what} does not exist")
    elif row.persona_id != persona_id:
        flag(rule, f"{what} belongs to another persona")
    return row


def queries_not_recomputed(
    dataset: GeneratedDataset, embedder: EmbeddingFunction | None
) -> list[Query]:
    """Queries whose cosines cannot be recomputed with ``embedder`` (another model, or none given)."""
    return [q for q in dataset.queries if embedder is None or q.embedder != embedder.name]
