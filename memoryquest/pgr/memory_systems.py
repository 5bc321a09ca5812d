"""Any memory system, evaluated on the benchmark from the history alone.

A memory system is anything with a name, a version and two coroutines:

* ``ingest(persona_id, session)`` — one dated session of a user's history (its id, date
  and turns: nothing else, no label), called in date order;
* ``retrieve(persona_id, query, date, budget)`` — at most ``budget`` texts it recalls for
  the request ``query`` made on ``date``.

The harness (:func:`evaluate_memory`) replays each user's history: before each query it
ingests every session dated before the query's date, and no later one, so no system
can see the future whatever it does. It then asks the model judge which retrieved texts
state each required reference (a foreign system has no fact ids to trace provenance
through), and reports recall per system, overall and per query category, with 95%
bootstrap intervals over queries.

Systems are found by name: the built-ins below, then the ``memoryquest.memory_systems``
entry-point group (a package declares ``[project.entry-points."memoryquest.memory_systems"]
mine = "my_package.memory:build"``), or a ``module:attribute`` path. Each name resolves to a
factory that takes :class:`MemoryResources` and returns the system.

Built in:

* ``facts`` — the pipeline's own fact store as it stood on the query date (extracted from
  the history), searched densely on the request: today's memory;
* ``turns`` — the raw history cut into exchanges (a user turn and the assistant's answer),
  embedded as they arrive, searched densely on the request;
* ``long_context`` — every user turn so far, newest first, whatever the budget: what a
  model with the whole history in its window would have (reported as unbounded).
"""

from __future__ import annotations

import asyncio
import datetime as dt
import importlib
import importlib.metadata
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Protocol, runtime_checkable

import numpy as np
from pydantic import BaseModel, Field

import memoryquest
from memoryquest.contracts import (
    Fact,
    FactType,
    Query,
    ReferenceJudgement,
    Role,
    Session,
    Turn,
)
from memoryquest.llm.client import LLMOutputError, ModelClient
from memoryquest.memory.snapshot import MemoryItem
from memoryquest.pgr.judges import LLMJudge
from memoryquest.pgr.metrics import bootstrap_ci
from memoryquest.pgr.retrieval import EMBED_STAGE, IndexCache, MemoryIndex

ENTRY_POINT_GROUP = "memoryquest.memory_systems"


class DatedSession(BaseModel):
    """What a memory system under test is given of one session: nothing that scores it."""

    session_id: str
    date: dt.date
    turns: list[Turn]


@runtime_checkable
class MemorySystem(Protocol):
    name: str
    version: str

    async def ingest(self, persona_id: str, session: DatedSession) -> None: ...

    async def retrieve(
        self, persona_id: str, query: str, date: dt.date, budget: int
    ) -> Sequence[str]: ...


@dataclass(frozen=True)
class MemoryResources:
    """What a system's factory may use: the one client layer (embeddings, chat) and the
    dataset's fact store (the pipeline's memory, extracted from the history)."""

    client: ModelClient
    facts: Sequence[Fact] = ()


Factory = Callable[[MemoryResources], MemorySystem]


# --------------------------------------------------------------------------- built-in systems


class FactStore:
    """The pipeline's extracted facts, as of the query date, searched densely."""

    name = "facts"
    version = memoryquest.__version__

    def __init__(self, resources: MemoryResources) -> None:
        self.client = resources.client
        self.facts = list(resources.facts)
        self.indexes = IndexCache()

    async def ingest(self, persona_id: str, session: DatedSession) -> None:
        """Nothing to do: the store was extracted from these very sessions."""

    async def retrieve(self, persona_id: str, query: str, date: dt.date, budget: int) -> list[str]:
        index = await self.indexes.get(persona_id, date, self.facts, self.client)
        if not len(index) or budget <= 0:
            return []
        vector = await self.client.embed([query], stage=EMBED_STAGE)
        (hits,) = index.search(np.asarray(vector, dtype=np.float32), budget, -1.0)
        return [index.item(hit.fid).info for hit in hits]


@dataclass
class _Chunks:
    texts: list[str] = field(default_factory=list)
    vectors: list[np.ndarray] = field(default_factory=list)


class TurnChunks:
    """The raw history as exchanges (a user turn with the assistant's answer), searched densely."""

    name = "turns"
    version = memoryquest.__version__

    def __init__(self, resources: MemoryResources) -> None:
        self.client = resources.client
        self.chunks: dict[str, _Chunks] = {}

    async def ingest(self, persona_id: str, session: DatedSession) -> None:
        texts = [
            f"{session.date.isoformat()}: user: {turn.content}"
            + (
                f" assistant: {session.turns[n + 1].content}"
                if n + 1 < len(session.turns) and session.turns[n + 1].role is Role.ASSISTANT
                else ""
            )
            for n, turn in enumerate(session.turns)
            if turn.role is Role.USER
        ]
        if not texts:
            return
        vectors = np.asarray(await self.client.embed(texts, stage=EMBED_STAGE), dtype=np.float32)
        store = self.chunks.setdefault(persona_id, _Chunks())
        store.texts += texts
        store.vectors += list(vectors)

    async def retrieve(self, persona_id: str, query: str, date: dt.date, budget: int) -> list[str]:
        store = self.chunks.get(persona_id)
        if store is None or not store.texts or budget <= 0:
            return []
        probe = np.asarray(await self.client.embed([query], stage=EMBED_STAGE), dtype=np.float32)
        scores = np.stack(store.vectors) @ probe[0]
        order = np.lexsort((np.arange(len(scores)), -scores))[:budget]
        return [store.texts[int(i)] for i in order]


class LongContext:
    """Every user turn so far, newest first: the whole history in the window, budget or not."""

    name = "long_context"
    version = memoryquest.__version__
    unbounded = True

    def __init__(self, resources: MemoryResources) -> None:
        self.turns: dict[str, list[str]] = {}

    async def ingest(self, persona_id: str, session: DatedSession) -> None:
        self.turns.setdefault(persona_id, []).extend(
            f"{session.date.isoformat()}: {turn.content}"
            for turn in session.turns
            if turn.role is Role.USER
        )

    async def retrieve(self, persona_id: str, query: str, date: dt.date, budget: int) -> list[str]:
        return list(reversed(self.turns.get(persona_id, [])))


BUILT_IN: dict[str, Factory] = {
    "facts": FactStore,
    "turns": TurnChunks,
    "long_context": LongContext,
}


class MemorySystemError(ValueError):
    pass


def memory_factory(name: str) -> Factory:
    """The factory a name stands for: a built-in, an entry point, or ``module:attribute``."""
    if name in BUILT_IN:
        return BUILT_IN[name]
    for entry in importlib.metadata.entry_points(group=ENTRY_POINT_GROUP):
        if entry.name == name:
            loaded: Factory = entry.load()
            return loaded
    if ":" in name:
        module_name, _, attribute = name.partition(":")
        try:
            module = importlib.import_module(module_name)
            found: Factory = getattr(module, attribute)
        except (ImportError, AttributeError) as exc:
            raise MemorySystemError(f"memory system {name!r} cannot be loaded: {exc}") from exc
        return found
    known = sorted(
        {*BUILT_IN, *(e.name for e in importlib.metadata.entry_points(group=ENTRY_POINT_GROUP))}
    )
    raise MemorySystemError(
        f"unknown memory system {name!r}; choose from {', '.join(known)} or give module:attribute"
    )


def build_memory_system(name: str, resources: MemoryResources) -> MemorySystem:
    system = memory_factory(name)(resources)
    if not isinstance(system, MemorySystem):
        raise MemorySystemError(
            f"memory system {name!r} lacks name, version, ingest() or retrieve()"
        )
    return system


# --------------------------------------------------------------------------- the harness


class MemoryResult(BaseModel):
    """One query, one memory system: what it recalled and which references that states."""

    system: str
    system_version: str
    query_id: str
    persona_id: str
    budget: int | None = Field(description="Texts the system was allowed; null when unbounded.")
    retrieved: list[str]
    judgements: list[ReferenceJudgement]
    recall: float
    recall_exact: bool


def dated_sessions(sessions: Sequence[Session]) -> dict[str, list[DatedSession]]:
    """Each user's history as a system under test gets it: id, date, turns; in date order."""
    history: dict[str, list[DatedSession]] = {}
    for session in sorted(sessions, key=lambda s: (s.date, s.session_id)):
        history.setdefault(session.persona_id, []).append(
            DatedSession(session_id=session.session_id, date=session.date, turns=session.turns)
        )
    return history


def _as_memories(texts: Sequence[str], date: dt.date) -> list[MemoryItem]:
    return [
        MemoryItem(f"t_{n:016x}", text, FactType.EVENT, date, (), (), ())
        for n, text in enumerate(texts, start=1)
    ]


async def evaluate_memory(
    system: MemorySystem,
    queries: Sequence[Query],
    history: dict[str, list[DatedSession]],
    budget: int,
    judge_client: ModelClient,
) -> tuple[list[MemoryResult], list[str]]:
    """Replay each user's history into ``system`` and ask it before each query (date order)."""
    unbounded = bool(getattr(system, "unbounded", False))
    recalled: list[tuple[Query, list[str]]] = []
    by_persona: dict[str, list[Query]] = {}
    for query in queries:
        by_persona.setdefault(query.persona_id, []).append(query)
    for persona_id, own in by_persona.items():
        sessions = history.get(persona_id, [])
        given = 0
        for query in sorted(own, key=lambda q: (q.query_date, q.query_id)):
            while given < len(sessions) and sessions[given].date < query.query_date:
                await system.ingest(persona_id, sessions[given])
                given += 1
            texts = list(await system.retrieve(persona_id, query.text, query.query_date, budget))
            recalled.append((query, texts if unbounded else texts[:budget]))
    judge = LLMJudge()
    unjudged: list[str] = []
    empty = MemoryIndex("", dt.date.min, (), np.zeros((0, 1), dtype=np.float32), "")

    async def scored(query: Query, texts: list[str]) -> MemoryResult | None:
        try:
            (judgements,) = await judge.judge_sets(
                query, [_as_memories(texts, query.query_date)], empty, judge_client
            )
        except LLMOutputError as exc:
            unjudged.append(f"{system.name}, query {query.query_id}: {exc}")
            return None
        found = sum(j.found for j in judgements)
        return MemoryResult(
            system=system.name,
            system_version=str(system.version),
            query_id=query.query_id,
            persona_id=query.persona_id,
            budget=None if unbounded else budget,
            retrieved=texts,
            judgements=judgements,
            recall=found / len(judgements) if judgements else 0.0,
            recall_exact=bool(judgements) and found == len(judgements),
        )

    rows = await asyncio.gather(*(scored(q, t) for q, t in recalled))
    return [r for r in rows if r is not None], unjudged


# --------------------------------------------------------------------------- the report


class RecallCell(BaseModel):
    system: str
    category: str = Field(description="'all', or e.g. 'domain=Travel', 'references=4'.")
    n: int = Field(description="Queries (or references, for 'reference age') behind the figure.")
    recall: float
    low: float
    high: float


AGE_BUCKETS = ((0, 30), (31, 60), (61, 10_000))


def _age_bucket(days: int) -> str:
    for low, high in AGE_BUCKETS:
        if low <= days <= high:
            return (
                f"reference age={low}-{high} days"
                if high < 10_000
                else f"reference age>{low - 1} days"
            )
    return "reference age<0 days"


def recall_cells(
    results: Sequence[MemoryResult], queries: Sequence[Query], samples: int, seed: int = 0
) -> list[RecallCell]:
    """Recall per system: overall and per domain and number of references (over queries), and per
    reference age (over references), each with a 95% bootstrap interval."""
    by_id = {q.query_id: q for q in queries}
    cells: list[RecallCell] = []
    for system in dict.fromkeys(r.system for r in results):
        own = [r for r in results if r.system == system]
        groups: dict[str, list[float]] = {"all": [r.recall for r in own]}
        for r in own:
            query = by_id[r.query_id]
            groups.setdefault(f"domain={query.domain.value}", []).append(r.recall)
            groups.setdefault(f"references={len(query.references)}", []).append(r.recall)
            dates = {ref.reference_id: ref.date for ref in query.references}
            for judgement in r.judgements:
                age = (query.query_date - dates[judgement.reference_id]).days
                groups.setdefault(_age_bucket(age), []).append(float(judgement.found))
        for category, values in sorted(groups.items(), key=lambda kv: (kv[0] != "all", kv[0])):
            low, high = bootstrap_ci(values, samples, seed)
            cells.append(
                RecallCell(
                    system=system,
                    category=category,
                    n=len(values),
                    recall=float(np.mean(values)),
                    low=low,
                    high=high,
                )
            )
    return cells
