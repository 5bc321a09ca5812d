"""bm25s against rank_bm25 on memory-sized corpora (why :mod:`memoryquest.pgr.lexical` uses bm25s).

Documents are fact-like sentences from the bundled PersonaLens sample
(interaction summaries split into sentences); queries are the sample's task
intents. Both libraries get the same pre-tokenised input
(:func:`memoryquest.text.content_words`), so only indexing and scoring are
timed. Two access patterns:

1. one index of ``--facts`` documents scored by ``--queries`` queries
   (a budget baseline over one snapshot);
2. one index per query over a snapshot of half to all of the documents
   (the audit: every query sees the memory of its own date).

Each figure is the best of ``--rounds`` runs. The two libraries' top-20 lists
are compared as a sanity check (they differ only where idf variants break ties).

Run: ``.venv/bin/python benchmarks/bench_bm25.py [--facts 600] [--queries 450] [--rounds 3]``
"""

from __future__ import annotations

import argparse
import logging
import random
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path

import bm25s
import numpy as np
from rank_bm25 import BM25Okapi

from memoryquest.intake import PersonaSelection, load_personas
from memoryquest.text import content_words, split_sentences

REPO = Path(__file__).resolve().parents[1]
K = 20

logging.getLogger("bm25s").setLevel(logging.WARNING)


def corpus(facts: int, queries: int, seed: int = 0) -> tuple[list[list[str]], list[list[str]]]:
    """Tokenised fact-like sentences and task intents from the bundled personas."""
    personas = load_personas(REPO / "personas" / "personalens", PersonaSelection()).personas
    sentences = [s for p in personas for i in p.interactions for s in split_sentences(i.summary)]
    intents = [t.user_intent for p in personas for t in p.tasks]
    rng = random.Random(seed)
    documents = [content_words(s) for s in rng.sample(sentences, min(facts, len(sentences)))]
    asked = [content_words(q) for q in rng.choices(intents, k=queries)]
    return documents, [q for q in asked if q] or [["travel"]]


def top_bm25s(documents: list[list[str]], queries: list[list[str]]) -> list[list[int]]:
    retriever = bm25s.BM25(k1=1.5, b=0.75, method="lucene")
    retriever.index(documents, show_progress=False)
    ranked = []
    for query in queries:
        ids = retriever.get_tokens_ids(query)
        scores = retriever.get_scores_from_ids(ids) if ids else np.zeros(len(documents))
        ranked.append(np.lexsort((np.arange(len(documents)), -scores))[:K].tolist())
    return ranked


def top_rank_bm25(documents: list[list[str]], queries: list[list[str]]) -> list[list[int]]:
    index = BM25Okapi(documents, k1=1.5, b=0.75)
    ranked = []
    for query in queries:
        scores = np.asarray(index.get_scores(query))
        ranked.append(np.lexsort((np.arange(len(documents)), -scores))[:K].tolist())
    return ranked


Ranker = Callable[[list[list[str]], list[list[str]]], list[list[int]]]


def best_of(rounds: int, work: Callable[[], object]) -> float:
    times = []
    for _ in range(rounds):
        started = time.perf_counter()
        work()
        times.append(time.perf_counter() - started)
    return min(times)


def one_index(ranker: Ranker, documents: list[list[str]], queries: list[list[str]]) -> None:
    ranker(documents, queries)


def index_per_query(
    ranker: Ranker, documents: list[list[str]], queries: list[list[str]], seed: int = 0
) -> None:
    rng = random.Random(seed)
    for query in queries:
        size = rng.randint(len(documents) // 2, len(documents))
        ranker(documents[:size], [query])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--facts", type=int, default=600)
    parser.add_argument("--queries", type=int, default=450)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    documents, queries = corpus(args.facts, args.queries)
    print(f"{len(documents)} documents, {len(queries)} queries, top-{K}, best of {args.rounds}")
    rankers: dict[str, Ranker] = {"bm25s": top_bm25s, "rank_bm25": top_rank_bm25}
    print(f"{'library':<10} {'1 index, all queries':>22} {'1 index per query':>19}")
    for name, ranker in rankers.items():
        shared = best_of(args.rounds, partial(one_index, ranker, documents, queries))
        each = best_of(args.rounds, partial(index_per_query, ranker, documents, queries))
        print(f"{name:<10} {shared * 1000:>19.1f} ms {each * 1000:>16.1f} ms")
    agree = [
        len(set(a[:10]) & set(b[:10])) / 10
        for a, b in zip(
            top_bm25s(documents, queries), top_rank_bm25(documents, queries), strict=True
        )
    ]
    print(f"top-10 overlap between the two: mean {sum(agree) / len(agree):.2f}")


if __name__ == "__main__":
    main()
