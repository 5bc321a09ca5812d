"""What one method retrieved for one query (:class:`RetrievalOutcome`), the growing set R
of facts a PGR run has found (:class:`RetrievedSet`), and the error of a query that could
not be run."""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable
from typing import TypedDict

from pydantic import BaseModel

from memoryquest.contracts import ProspectionIteration, Query, RetrievalMethod
from memoryquest.pgr.retrieval import Hit, Retriever


class PGRError(RuntimeError):
    """A query could not be run; the message names the query, method and round."""


class RankedFact(BaseModel):
    fid: str
    score: float
    iteration: int  # 0 = query / augmentation / Phase 1 (and query-only); 1.. = refinements


class RetrievalOutcome(BaseModel):
    """What one method retrieved for one query, and how."""

    query_id: str
    persona_id: str
    method: RetrievalMethod
    memory_as_of: dt.date
    memory_size: int
    ranked: list[RankedFact]
    budget: int = (
        0  # facts the method was allowed to return (query-only: K; PGR: what it retrieved)
    )
    baseline_for: RetrievalMethod | None = None  # the PGR method whose budget a baseline was given
    iterations: list[ProspectionIteration] = []
    llm_calls: int = 0
    embedding_calls: int = 0
    augmented_query: str | None = None
    summary: str | None = None
    answer: str | None = None
    repairs: list[str] = []

    @property
    def retrieved_fids(self) -> list[str]:
        return [fact.fid for fact in self.ranked]


class Searched(TypedDict):
    """The part of an outcome every method fills the same way: the query it answers, the memory
    it searched (the persona's facts as of the query date) and the embedding requests that took."""

    query_id: str
    persona_id: str
    memory_as_of: dt.date
    memory_size: int
    embedding_calls: int


def searched(query: Query, retriever: Retriever) -> Searched:
    return Searched(
        query_id=query.query_id,
        persona_id=query.persona_id,
        memory_as_of=retriever.index.as_of,
        memory_size=len(retriever.index),
        embedding_calls=retriever.embedding_requests,
    )


class RetrievedSet:
    """R: the accumulated facts, ranked by the round that first found them, then by best cosine."""

    def __init__(self) -> None:
        self._first: dict[str, tuple[int, float]] = {}

    def __contains__(self, fid: object) -> bool:
        return fid in self._first

    def __len__(self) -> int:
        return len(self._first)

    def add(self, iteration: int, hits: Iterable[Hit]) -> list[str]:
        """Add one round's hits; return the facts new to R, best first (Δ)."""
        best: dict[str, float] = {}
        for fid, score in hits:
            if fid not in self._first and score > best.get(fid, float("-inf")):
                best[fid] = score
        new = sorted(best, key=lambda fid: (-best[fid], fid))
        for fid in new:
            self._first[fid] = (iteration, best[fid])
        return new

    def ranked(self) -> list[RankedFact]:
        order = sorted(self._first.items(), key=lambda kv: (kv[1][0], -kv[1][1], kv[0]))
        return [RankedFact(fid=fid, score=score, iteration=it) for fid, (it, score) in order]
