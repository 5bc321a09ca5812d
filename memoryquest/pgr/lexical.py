"""BM25 ranking over a memory snapshot: the lexical query-only baseline.

Lexical retrieval on the bare query text is the yardstick for leakage: when
BM25 on the query already finds a query's references, the query gives its
answers away in words. The audit uses it, and so do the budget-matched
baselines (:mod:`memoryquest.pgr.baselines`).

Scoring is delegated to ``bm25s`` (BM25 with Lucene's idf, k1 = 1.5,
b = 0.75). ``benchmarks/bench_bm25.py`` compares it with ``rank_bm25``:
bm25s scores a 600-fact index about 10x faster, while rank_bm25 builds a
small index about 2x faster, so one index per snapshot and query costs
~1.5 s more CPU over a 450-query audit with bm25s. bm25s is kept: it is a
declared, maintained dependency, and its idf is always positive, so a
score above 0 means exactly "shares a word with the query" (rank_bm25's
Okapi idf drops to a floor for words in half the documents or more, and
that floor is negative in small snapshots).

Documents and queries are tokenised by :func:`memoryquest.text.content_words`
(stemmed, no stop-words), the same tokens every other word-overlap rule of
the project uses.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

import bm25s
import numpy as np

from memoryquest.text import content_words

__all__ = ["B", "K1", "BM25Index", "bm25_rank"]

K1 = 1.5
B = 0.75

logging.getLogger("bm25s").setLevel(logging.WARNING)


class BM25Index:
    """A BM25 index over a fixed list of documents, built once and scored by many queries."""

    def __init__(self, documents: Sequence[str]) -> None:
        self._build([content_words(document) for document in documents])

    @classmethod
    def from_tokens(cls, tokens: Sequence[list[str]]) -> BM25Index:
        """An index over documents already tokenised by :func:`~memoryquest.text.content_words` (to reuse tokens across snapshots)."""
        index = cls.__new__(cls)
        index._build(tokens)
        return index

    def _build(self, tokens: Sequence[list[str]]) -> None:
        self.size = len(tokens)
        self._retriever: bm25s.BM25 | None = None
        if any(tokens):
            self._retriever = bm25s.BM25(k1=K1, b=B, method="lucene")
            self._retriever.index(list(tokens), show_progress=False)

    def __len__(self) -> int:
        return self.size

    def scores(self, query: str) -> np.ndarray:
        """BM25 score of every document for ``query`` (all zeros when no query word is indexed)."""
        terms = content_words(query)
        ids = self._retriever.get_tokens_ids(terms) if self._retriever is not None and terms else []
        if self._retriever is None or not ids:
            return np.zeros(self.size, dtype=np.float32)
        return np.asarray(self._retriever.get_scores_from_ids(ids), dtype=np.float32)

    def rank(self, query: str, k: int) -> list[int]:
        """Indices of the ``k`` best documents, best first; equal scores go to the lower index.

        Documents sharing no word with the query (score 0) are never returned,
        so the list can be shorter than ``k``: lexical retrieval has no
        evidence for them, and padding a budget is the caller's choice.
        """
        if k <= 0 or self.size == 0:
            return []
        scores = self.scores(query)
        order = np.lexsort((np.arange(self.size), -scores))[:k]
        return [int(i) for i in order if scores[i] > 0]


def bm25_rank(documents: Sequence[str], query: str, k: int) -> list[int]:
    """Indices of the ``k`` best ``documents`` for ``query`` with a positive BM25 score, best first.

    One-shot; build a :class:`BM25Index` once to score several queries.
    """
    return BM25Index(documents).rank(query, k)
