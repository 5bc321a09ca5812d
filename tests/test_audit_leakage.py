"""BM25 ranking (memoryquest.pgr.lexical) and the audit's leakage numbers on hand-built memories."""

from __future__ import annotations

import datetime as dt
import itertools

import pytest

from memoryquest.audit.leakage import chance_recall, leakage, query_recall
from memoryquest.contracts import (
    Domain,
    FactType,
    JudgeKind,
    Query,
    Reference,
    ReferenceJudgement,
    RetrievalMethod,
    ValidationResult,
)
from memoryquest.ids import make_id
from memoryquest.memory.snapshot import MemoryItem
from memoryquest.pgr.lexical import BM25Index, bm25_rank
from memoryquest.pgr.metrics import query_difficulty

FACTS = [
    "Prefers aisle seats on long flights",
    "Is training for the Porto half marathon in October",
    "Keeps a vegetarian diet since last year",
    "Booked a cooking class on Italian pasta",
]


# --------------------------------------------------------------------------- BM25


def test_bm25_puts_the_lexical_match_first() -> None:
    assert bm25_rank(FACTS, "Any vegetarian restaurants near the marathon route in Porto?", 2) == [
        1,
        2,
    ]
    assert bm25_rank(FACTS, "a flight with an aisle seat", 1) == [0]


def test_bm25_matches_stems_not_stop_words() -> None:
    assert bm25_rank(FACTS, "cooking classes", 4) == [3]  # "classes" -> "class"
    assert bm25_rank(FACTS, "is the on for", 4) == []  # stop-words only: no lexical evidence


def test_bm25_index_scores_every_document_and_breaks_ties_by_position() -> None:
    index = BM25Index(["red apple", "green pear", "red apple"])
    assert len(index) == index.size == 3
    scores = index.scores("apple")
    assert scores[0] == scores[2] > 0 and scores[1] == 0
    assert index.rank("apple", 5) == [0, 2]
    assert index.rank("apple", 1) == [0] and index.rank("apple", 0) == []


def test_bm25_handles_empty_corpora_and_documents() -> None:
    assert bm25_rank([], "anything", 3) == []
    assert bm25_rank(["", "the of and"], "anything", 3) == []
    assert BM25Index.from_tokens([["appl"], []]).rank("apples", 2) == [0]


# --------------------------------------------------------------------------- leakage


def item(number: int, info: str, *references: str) -> MemoryItem:
    return MemoryItem(
        fid=make_id("fact", number),
        info=info,
        type=FactType.PREFERENCE,
        date=dt.date(2024, 3, 1),
        related_entities=(),
        session_ids=(),
        source_reference_ids=references,
    )


def query(text: str, *reference_texts: str) -> Query:
    query_id = make_id("query", text)
    return Query(
        query_id=query_id,
        persona_id=make_id("persona", "one"),
        query_date=dt.date(2024, 4, 1),
        text=text,
        reasoning="",
        domain=Domain.RESTAURANTS,
        references=[
            Reference(
                reference_id=make_id("reference", query_id, i),
                date=dt.date(2024, 3, 1),
                text=t,
                domain=Domain.FINANCE,
                cosine=0.1,
            )
            for i, t in enumerate(reference_texts)
        ],
        gamma=0.1,
        embedder="test",
        rank=0,
    )


def vegetarian_dinner() -> Query:
    return query(
        "Book a vegetarian dinner in Porto", "Keeps a vegetarian diet", "Dislikes loud places"
    )


def test_query_recall_counts_references_credited_in_the_top_k() -> None:
    q = vegetarian_dinner()
    veg, loud = (r.reference_id for r in q.references)
    memory = [
        item(0, "Keeps a vegetarian diet", veg),
        item(1, "Avoids loud bars and clubs", loud),
        item(2, "Lives in Porto near the river"),
    ]
    assert query_recall(q, memory, 20) == pytest.approx(0.5)  # "loud" is not in the query
    assert query_recall(q, memory, 1) == pytest.approx(0.5)  # the vegetarian fact ranks first
    assert query_recall(q, [], 20) == 0.0


def test_chance_recall_is_the_mean_over_every_draw_of_k_facts() -> None:
    q = vegetarian_dinner()
    veg, loud = (r.reference_id for r in q.references)
    memory = [
        item(0, "Keeps a vegetarian diet", veg),
        item(1, "Went vegetarian in March", veg),
        item(2, "Avoids loud bars and clubs", loud),
        item(3, "Lives in Porto near the river"),
        item(4, "Sold the car in May"),
    ]
    for k in range(1, 7):
        draws = list(itertools.combinations(memory, min(k, len(memory))))
        found = [
            sum(any(r.reference_id in m.source_reference_ids for m in d) for r in q.references)
            for d in draws
        ]
        expected = sum(found) / len(draws) / len(q.references)
        assert chance_recall(q, memory, k) == pytest.approx(expected)
    assert chance_recall(q, memory, 1) == pytest.approx((2 / 5 + 1 / 5) / 2)
    assert chance_recall(q, memory, 5) == 1.0  # every fact drawn
    assert chance_recall(q, memory[3:], 20) == 0.0  # nothing credits either reference


def result(
    query_id: str,
    method: RetrievalMethod,
    judge: JudgeKind,
    recall: float,
    baseline_for: RetrievalMethod | None = None,
) -> ValidationResult:
    return ValidationResult(
        result_id=make_id("result", query_id, method.value, judge.value, str(baseline_for)),
        query_id=query_id,
        persona_id=make_id("persona", "one"),
        method=method,
        judge=judge,
        memory_as_of=dt.date(2024, 4, 1),
        memory_size=3,
        baseline_for=baseline_for,
        retrieved_fids=[],
        judgements=[ReferenceJudgement(reference_id=make_id("reference", 0), found=recall > 0)],
        recall=recall,
        recall_exact=recall == 1.0,
        ndcg=0.0,
        llm_calls=0,
        embedding_calls=1,
    )


def test_dense_recall_comes_from_plain_query_only_provenance_rows() -> None:
    qid = make_id("query", "x")
    rows = [
        result(qid, RetrievalMethod.QUERY_ONLY, JudgeKind.PROVENANCE, 0.25),
        result(qid, RetrievalMethod.QUERY_ONLY, JudgeKind.EMBEDDING, 0.75),
        result(
            qid,
            RetrievalMethod.QUERY_ONLY,
            JudgeKind.PROVENANCE,
            1.0,
            baseline_for=RetrievalMethod.PGR_TOT,
        ),
        result(qid, RetrievalMethod.PGR_TOT, JudgeKind.PROVENANCE, 1.0),
    ]
    assert query_difficulty(rows) == {qid: 0.25}


def test_leakage_reports_bm25_dense_and_shared_words() -> None:
    q = query(
        "Plan a vegetarian dinner in Porto",
        "Keeps a vegetarian diet in Porto restaurants",
        "Sold the car",
    )
    veg, car = (r.reference_id for r in q.references)
    memory = {
        q.query_id: [item(0, "Keeps a vegetarian diet", veg), item(1, "Sold the car in May", car)]
    }
    report = leakage([q], memory, [], k=20)
    assert report.bm25_recall == pytest.approx(0.5) and report.bm25_recall_exact == 0.0
    assert report.dense_recall is None and report.dense_queries == 0
    assert report.chance_recall == 1.0  # k = 20 draws take both facts
    assert leakage([q], memory, [], k=1).chance_recall == pytest.approx(0.5)
    assert report.references == 2 and report.shared_words_max == 2  # vegetarian, porto
    assert report.shared_words_mean == pytest.approx(1.0) and report.references_sharing_3_plus == 0
    with_dense = leakage(
        [q],
        memory,
        [result(q.query_id, RetrievalMethod.QUERY_ONLY, JudgeKind.PROVENANCE, 0.5)],
        k=20,
    )
    assert with_dense.dense_recall == pytest.approx(0.5) and with_dense.dense_queries == 1
