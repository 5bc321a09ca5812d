"""Does the query give its references away? Lexical retrieval and word overlap on the bare query.

The benchmark claims that a query alone does not find its references. Dense
query-only recall (the validation table) measures that for one embedder;
BM25 on the query text measures it for plain word matching, which a low-γ
filter on embeddings does not control. Shared content words between a query
and each reference are the direct cause of lexical leakage.

Both are read against chance: the recall that k facts drawn at random from
the same memory would have. A query-only recall near it means the query's
words and meaning point at its references no more than at any other fact, so
the set measures noise rather than difficulty.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from functools import lru_cache

from pydantic import BaseModel, Field

from memoryquest.contracts import Query, ValidationResult
from memoryquest.memory.snapshot import MemoryItem
from memoryquest.pgr.lexical import BM25Index
from memoryquest.pgr.metrics import query_difficulty
from memoryquest.text import content_words, shared_content_words

SHARED_WORDS_NOTED = 3
"""References sharing this many content words with their query are counted."""


class Leakage(BaseModel):
    k: int = Field(description="Facts retrieved per query.")
    queries: int
    bm25_recall: float | None = Field(
        description="Mean over queries of the share of references credited in BM25's top k."
    )
    bm25_recall_exact: float | None = Field(
        description="Share of queries with every reference in BM25's top k."
    )
    dense_recall: float | None = Field(
        description="Mean query-only recall under the provenance judge from the validation table; null when absent."
    )
    dense_queries: int = Field(description="Queries with a dense query-only result.")
    chance_recall: float | None = Field(
        default=None,
        description="Mean over queries of the expected recall of k facts drawn at random from the memory on the query date.",
    )
    references: int
    shared_words_mean: float | None
    shared_words_max: int
    references_sharing_3_plus: int


def query_recall(
    query: Query,
    memory: Sequence[MemoryItem],
    k: int,
    tokens: Callable[[str], list[str]] = content_words,
) -> float:
    """Share of ``query``'s references with a credited fact among BM25's top ``k`` on the query text.

    ``tokens`` tokenises a fact; pass a cached :func:`~memoryquest.text.content_words` when many snapshots share facts.
    """
    if not query.references:
        return 0.0
    ranked = BM25Index.from_tokens([tokens(item.info) for item in memory]).rank(query.text, k)
    found = {ref for i in ranked for ref in memory[i].source_reference_ids}
    return sum(r.reference_id in found for r in query.references) / len(query.references)


def chance_recall(query: Query, memory: Sequence[MemoryItem], k: int) -> float:
    """Expected share of ``query``'s references credited among ``k`` facts drawn at random from ``memory``.

    A reference credited by m of the N facts is missed only when all k draws
    fall among the other N - m: probability C(N - m, k) / C(N, k).
    """
    if not query.references:
        return 0.0
    size = len(memory)
    credited = Counter(ref for item in memory for ref in set(item.source_reference_ids))
    draws = min(k, size)

    def found(m: int) -> float:
        return 1.0 - math.comb(size - m, draws) / math.comb(size, draws) if m else 0.0

    return math.fsum(found(credited[r.reference_id]) for r in query.references) / len(
        query.references
    )


def leakage(
    queries: Sequence[Query],
    memories: Mapping[str, Sequence[MemoryItem]],
    validation: Sequence[ValidationResult],
    k: int,
) -> Leakage:
    """BM25 and dense query-only recall side by side, plus query-reference word overlap."""
    tokens = lru_cache(maxsize=None)(content_words)  # snapshots of one user share most facts
    recalls = [query_recall(q, memories[q.query_id], k, tokens) for q in queries]
    chance = [chance_recall(q, memories[q.query_id], k) for q in queries]
    dense = query_difficulty(validation)  # the dense query-only recall of each query
    dense_values = [dense[q.query_id] for q in queries if q.query_id in dense]
    shared = [len(shared_content_words(q.text, r.text)) for q in queries for r in q.references]
    return Leakage(
        k=k,
        queries=len(queries),
        bm25_recall=math.fsum(recalls) / len(recalls) if recalls else None,
        bm25_recall_exact=sum(r == 1.0 for r in recalls) / len(recalls) if recalls else None,
        dense_recall=math.fsum(dense_values) / len(dense_values) if dense_values else None,
        dense_queries=len(dense_values),
        chance_recall=math.fsum(chance) / len(chance) if chance else None,
        references=len(shared),
        shared_words_mean=math.fsum(shared) / len(shared) if shared else None,
        shared_words_max=max(shared, default=0),
        references_sharing_3_plus=sum(n >= SHARED_WORDS_NOTED for n in shared),
    )
