"""Retrieval baselines that take a fact budget: dense query-only, BM25, seeded random, recency, and
two query expansions (multi-query, hypothetical facts).

Why they exist: query-only retrieves K = 20 facts while PGR retrieves as many
as its steps find (often about twice that), and recall grows with the number
of facts returned. Comparing recall at unequal budgets flatters PGR. So for
every PGR run the runner also asks each baseline for exactly the number of
facts PGR returned for that query (its budget K′), over the same memory
snapshot, and scores those rows with the same judges.

* dense — the query-only retrieval itself (cosine, τ = ``query_only_tau``) at K = K′;
  it returns fewer than K′ only when fewer facts clear τ;
* bm25 — Okapi BM25 on the query's content words (:mod:`memoryquest.pgr.lexical`);
  when fewer than K′ facts share a word with the query, the rest of the budget
  is filled with the other facts in fid order (opaque hashes, so no signal), so
  BM25 is not penalised for returning fewer facts than PGR;
* random — K′ facts drawn without replacement from the snapshot, seeded by
  ``baseline_seed`` and the query id. The draw is a prefix of one seeded
  permutation, so a smaller budget's facts are a subset of a larger one's;
* recency — the K′ facts of the snapshot whose latest revision is most recent
  (ties in fid order). Every reference is at most ``reference_window_days`` old
  on its query's date, so "what the user said lately" is a baseline any
  memory system must beat;
* multi_query / hypothetical_facts — one model call writes ``expansion_texts``
  search queries (or facts the user might have told, HyDE); the request and
  each text are searched densely (one embedding request) at K′ each, and the
  lists are fused by reciprocal rank (k = 60) into K′ facts. They are what any
  query expansion gets in one shot, beside PGR's iterative prospection.

Only the two expansions call a language model (once per query: the same request for every
budget, so the response cache answers the second); dense costs one embedding request.
"""

from __future__ import annotations

import datetime as dt
import hashlib
from collections.abc import Iterable

import numpy as np

from memoryquest.contracts import Query, RetrievalMethod
from memoryquest.llm.client import ModelClient
from memoryquest.pgr.expansion_contracts import (
    ExpansionInputs,
    ExpansionTexts,
    HypotheticalFactsInputs,
    MultiQueryInputs,
)
from memoryquest.pgr.lexical import BM25Index
from memoryquest.pgr.retrieval import Hit, MemoryIndex, Retriever

__all__ = [
    "BASELINE_METHODS",
    "LexicalCache",
    "bm25_hits",
    "budget_hits",
    "dense_hits",
    "parse_baselines",
    "random_hits",
    "random_seed",
    "recency_hits",
    "expansion_texts",
    "fused_hits",
]

BASELINE_METHODS: tuple[RetrievalMethod, ...] = (
    RetrievalMethod.QUERY_ONLY,
    RetrievalMethod.BM25,
    RetrievalMethod.RANDOM,
    RetrievalMethod.RECENCY,
    RetrievalMethod.MULTI_QUERY,
    RetrievalMethod.HYPOTHETICAL_FACTS,
)
"""Methods that can be run at an arbitrary budget (PGR decides its own)."""

EXPANSIONS: tuple[RetrievalMethod, ...] = (
    RetrievalMethod.MULTI_QUERY,
    RetrievalMethod.HYPOTHETICAL_FACTS,
)
"""The baselines that ask the model for texts to search with (see EXPANSION_INPUTS)."""

RRF_K = 60  # the usual constant of reciprocal rank fusion


def parse_baselines(names: Iterable[RetrievalMethod | str]) -> list[RetrievalMethod]:
    """Validated baseline methods, in the order given, without repeats."""
    parsed: list[RetrievalMethod] = []
    for name in names:
        try:
            method = RetrievalMethod(name)
        except ValueError:
            method = None
        if method not in BASELINE_METHODS:
            choices = ", ".join(m.value for m in BASELINE_METHODS)
            raise ValueError(f"unknown budget baseline {name!r}; choose from {choices}")
        if method is not None and method not in parsed:
            parsed.append(method)
    return parsed


def random_seed(seed: int, query_id: str) -> int:
    """A 64-bit seed from the configured seed and the query id (stable across runs and platforms)."""
    digest = hashlib.sha256(f"random-baseline\x1f{seed}\x1f{query_id}".encode()).digest()
    return int.from_bytes(digest[:8], "big")


def random_hits(index: MemoryIndex, k: int, *, seed: int, query_id: str) -> list[Hit]:
    """``min(k, len(index))`` distinct facts of the snapshot in a seeded random order (score 0)."""
    if k <= 0 or len(index) == 0:
        return []
    order = np.random.default_rng(random_seed(seed, query_id)).permutation(len(index))[:k]
    return [Hit(index.items[int(i)].fid, 0.0) for i in order]


def recency_hits(index: MemoryIndex, k: int) -> list[Hit]:
    """The ``min(k, len(index))`` facts revised last before the snapshot's date, newest first.

    The score is the fact's age in days, negated, so that a higher score is still better.
    """
    if k <= 0:
        return []
    newest = sorted(index.items, key=lambda item: (-item.date.toordinal(), item.fid))[:k]
    return [Hit(item.fid, float((item.date - index.as_of).days)) for item in newest]


EXPANSION_INPUTS: dict[RetrievalMethod, type[ExpansionInputs]] = {
    RetrievalMethod.MULTI_QUERY: MultiQueryInputs,
    RetrievalMethod.HYPOTHETICAL_FACTS: HypotheticalFactsInputs,
}


async def expansion_texts(
    method: RetrievalMethod, query: Query, count: int, client: ModelClient
) -> list[str]:
    """The texts the model writes for an expansion baseline (one request, cached per query)."""
    inputs_model = EXPANSION_INPUTS.get(method)
    if inputs_model is None:
        raise ValueError(f"{method.value} is not a query expansion")
    inputs = inputs_model(query=query.text, query_date=query.query_date.isoformat(), count=count)
    answer: ExpansionTexts = await client.complete(
        inputs.request(cache_scope=f"query:{query.query_id}")
    )
    return [t.strip() for t in answer.texts if t.strip()][:count]


def fused_hits(ranked_lists: list[list[Hit]], k: int) -> list[Hit]:
    """Reciprocal rank fusion of several ranked lists, best first (ties in fid order)."""
    scores: dict[str, float] = {}
    for hits in ranked_lists:
        for rank, hit in enumerate(hits, start=1):
            scores[hit.fid] = scores.get(hit.fid, 0.0) + 1.0 / (RRF_K + rank)
    best = sorted(scores.items(), key=lambda item: (-item[1], item[0]))[:k]
    return [Hit(fid, score) for fid, score in best]


def bm25_hits(lexical: BM25Index, index: MemoryIndex, text: str, k: int) -> list[Hit]:
    """The ``min(k, len(index))`` best facts by BM25 against ``text``, with their scores.

    Facts with a positive score come first, best first; facts sharing no word
    with ``text`` pad the budget in snapshot (fid) order with score 0.
    """
    if len(lexical) != len(index):
        raise ValueError(
            f"lexical index has {len(lexical)} documents, memory snapshot {len(index)} facts"
        )
    if k <= 0:
        return []
    scores = np.asarray(lexical.scores(text), dtype=np.float64)
    # Best score first; equal scores (in particular all the zeros) in snapshot order.
    order = np.lexsort((np.arange(len(scores)), -scores))[:k]
    return [Hit(index.items[int(i)].fid, float(scores[i])) for i in order]


async def dense_hits(retriever: Retriever, text: str, k: int, tau: float) -> list[Hit]:
    """Query-only retrieval at K = ``k`` (no request at all for an empty budget)."""
    if k <= 0 or len(retriever.index) == 0:
        return []
    return (await retriever.retrieve([text], k, tau))[0]


class LexicalCache:
    """One BM25 index per memory snapshot, shared by every query and method on that snapshot."""

    def __init__(self) -> None:
        self._indexes: dict[tuple[str, dt.date], BM25Index] = {}

    def get(self, index: MemoryIndex) -> BM25Index:
        key = (index.persona_id, index.as_of)
        lexical = self._indexes.get(key)
        if lexical is None or len(lexical) != len(index):
            lexical = BM25Index([item.info for item in index.items])
            self._indexes[key] = lexical
        return lexical


async def budget_hits(
    method: RetrievalMethod,
    query: Query,
    retriever: Retriever,
    k: int,
    *,
    tau: float,
    seed: int,
    lexical: LexicalCache,
    expansion: int = 4,
) -> list[Hit]:
    """What baseline ``method`` retrieves for a query at budget ``k``, best first."""
    if method is RetrievalMethod.QUERY_ONLY:
        return await dense_hits(retriever, query.text, k, tau)
    if method is RetrievalMethod.BM25:
        return bm25_hits(lexical.get(retriever.index), retriever.index, query.text, k)
    if method is RetrievalMethod.RANDOM:
        return random_hits(retriever.index, k, seed=seed, query_id=query.query_id)
    if method is RetrievalMethod.RECENCY:
        return recency_hits(retriever.index, k)
    if method in EXPANSIONS:
        if k <= 0 or len(retriever.index) == 0:
            return []
        texts = await expansion_texts(method, query, expansion, retriever.client)
        return fused_hits(await retriever.retrieve([query.text, *texts], k, tau), k)
    raise ValueError(f"{method.value} is not a budget baseline")
