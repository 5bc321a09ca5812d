"""Retrieval φ(x; M, Θ): top-K facts with cosine ≥ τ over the memory as of a date.

The memory is always a snapshot (:func:`memory_as_of`) taken on the query
date, so a fact learnt in a later session can never be retrieved. Fact
vectors are computed once per snapshot; probe texts are embedded in one
batched request per retrieval phase, which keeps embedding cost proportional
to the number of phases, not the number of probes.
"""

from __future__ import annotations

import asyncio
import datetime as dt
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import NamedTuple

import numpy as np

from memoryquest.contracts import Fact, Stage
from memoryquest.llm.client import ModelClient
from memoryquest.memory.snapshot import MemoryItem, memory_as_of

EMBED_STAGE = Stage.PGR


class Hit(NamedTuple):
    fid: str
    score: float


@dataclass(frozen=True)
class MemoryIndex:
    """An immutable snapshot of one persona's memory with one unit vector per fact."""

    persona_id: str
    as_of: dt.date
    items: tuple[MemoryItem, ...]
    vectors: np.ndarray  # (len(items), dim), rows L2-normalised, in item (fid) order
    embedder_name: str
    _positions: dict[str, int] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if self.vectors.shape[0] != len(self.items):
            raise ValueError(
                f"index for {self.persona_id} as of {self.as_of}: {len(self.items)} facts but "
                f"{self.vectors.shape[0]} vectors"
            )
        object.__setattr__(self, "_positions", {item.fid: i for i, item in enumerate(self.items)})

    def __len__(self) -> int:
        return len(self.items)

    def item(self, fid: str) -> MemoryItem:
        try:
            return self.items[self._positions[fid]]
        except KeyError:
            raise KeyError(
                f"fact {fid} is not visible in the memory of {self.persona_id} as of {self.as_of}"
            ) from None

    def vector(self, fid: str) -> np.ndarray:
        self.item(fid)
        return self.vectors[self._positions[fid]]

    def search(self, probe_vectors: np.ndarray, k: int, tau: float) -> list[list[Hit]]:
        """Per probe row: at most ``k`` facts with cosine ≥ ``tau``, best first, ties by fid."""
        if k < 1:
            raise ValueError(f"k must be at least 1, got {k}")
        probes = np.atleast_2d(np.asarray(probe_vectors, dtype=np.float32))
        if len(self.items) == 0:
            return [[] for _ in range(probes.shape[0])]
        scores = probes @ self.vectors.T
        results: list[list[Hit]] = []
        for row in scores:
            candidates = np.flatnonzero(row >= tau)
            if candidates.size == 0:
                results.append([])
                continue
            # Items are sorted by fid, so the position is the fid tie-breaker.
            order = np.lexsort((candidates, -row[candidates]))[:k]
            results.append([Hit(self.items[i].fid, float(row[i])) for i in candidates[order]])
        return results


@dataclass
class Retriever:
    """One query's view of an index: embeds probes through the client and counts requests."""

    index: MemoryIndex
    client: ModelClient
    embedding_requests: int = 0

    async def embed(self, probes: Sequence[str]) -> np.ndarray:
        """All probes of one phase in a single embedding request."""
        if not probes:
            return np.zeros((0, self.index.vectors.shape[1]), dtype=np.float32)
        self.embedding_requests += 1
        return np.asarray(
            await self.client.embed(list(probes), stage=EMBED_STAGE), dtype=np.float32
        )

    async def retrieve(self, probes: Sequence[str], k: int, tau: float) -> list[list[Hit]]:
        """φ for every probe, with one batched embedding request."""
        if not probes:
            return []
        return self.index.search(await self.embed(probes), k, tau)


class IndexCache:
    """Snapshots per (embedder, persona, date), sharing vectors of texts already embedded.

    A fact whose text did not change between two query dates is embedded once
    for the whole run; each new snapshot costs at most one batched request for
    the texts not seen before.
    """

    def __init__(self) -> None:
        self._indexes: dict[tuple[str, str, dt.date], MemoryIndex] = {}
        self._vectors: dict[tuple[str, str], np.ndarray] = {}
        self._locks: dict[tuple[str, str, dt.date], asyncio.Lock] = {}
        self.embedding_requests = 0
        self.texts_embedded = 0

    async def get(
        self, persona_id: str, as_of: dt.date, facts: Sequence[Fact], client: ModelClient
    ) -> MemoryIndex:
        """The index of ``persona_id``'s memory as it stood on ``as_of``.

        ``facts`` may hold several personas' facts; only ``persona_id``'s are used.
        """
        key = (client.embedder_name, persona_id, as_of)
        if key in self._indexes:
            return self._indexes[key]
        lock = self._locks.setdefault(key, asyncio.Lock())
        async with lock:
            if key not in self._indexes:
                own = [fact for fact in facts if fact.persona_id == persona_id]
                items = memory_as_of(own, as_of)
                self._indexes[key] = MemoryIndex(
                    persona_id=persona_id,
                    as_of=as_of,
                    items=tuple(items),
                    vectors=await self._vectors_for([item.info for item in items], client),
                    embedder_name=client.embedder_name,
                )
        return self._indexes[key]

    async def _vectors_for(self, texts: list[str], client: ModelClient) -> np.ndarray:
        name = client.embedder_name
        missing = sorted({text for text in texts if (name, text) not in self._vectors})
        if missing:
            self.embedding_requests += 1
            self.texts_embedded += len(missing)
            vectors = np.asarray(await client.embed(missing, stage=EMBED_STAGE), dtype=np.float32)
            for text, vector in zip(missing, vectors, strict=True):
                self._vectors[(name, text)] = vector
        if not texts:
            return np.zeros((0, 0), dtype=np.float32)
        return np.stack([self._vectors[(name, text)] for text in texts])


async def build_index(
    persona_id: str, as_of: dt.date, facts: Sequence[Fact], client: ModelClient
) -> MemoryIndex:
    """A one-off index (no sharing with other snapshots)."""
    return await IndexCache().get(persona_id, as_of, facts, client)
