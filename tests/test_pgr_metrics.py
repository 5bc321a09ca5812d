"""Bootstrap intervals, the budget-matched summary and per-query difficulty, on hand-made rows."""

from __future__ import annotations

import datetime as dt
import statistics

import numpy as np
import pytest

from memoryquest.contracts import (
    Domain,
    JudgeKind,
    Query,
    Reference,
    ReferenceJudgement,
    RetrievalMethod,
    ValidationResult,
)
from memoryquest.ids import make_id
from memoryquest.pgr import metrics
from memoryquest.pgr.metrics import (
    bootstrap_ci,
    paired_bootstrap_ci,
    summarise,
    summary_markdown,
    with_difficulty,
)

PID = make_id("persona", "metrics")
DAY = dt.date(2024, 5, 1)
QO, COT, TOT = RetrievalMethod.QUERY_ONLY, RetrievalMethod.PGR_COT, RetrievalMethod.PGR_TOT
BM25, RANDOM = RetrievalMethod.BM25, RetrievalMethod.RANDOM
PROV, EMB = JudgeKind.PROVENANCE, JudgeKind.EMBEDDING


def qid(n: int) -> str:
    return make_id("query", "metrics", n)


def row(
    query: int,
    method: RetrievalMethod,
    found: int,
    *,
    of: int = 4,
    budget: int = 20,
    judge: JudgeKind = PROV,
    baseline_for: RetrievalMethod | None = None,
) -> ValidationResult:
    """A result whose judge found ``found`` of ``of`` references among ``budget`` facts."""
    judgements = [
        ReferenceJudgement(reference_id=make_id("reference", query, i), found=i < found)
        for i in range(of)
    ]
    return ValidationResult(
        result_id=make_id("result", query, method, judge, baseline_for),
        query_id=qid(query),
        persona_id=PID,
        method=method,
        judge=judge,
        memory_as_of=DAY,
        memory_size=100,
        baseline_for=baseline_for,
        budget=budget,
        retrieved_fids=[make_id("fact", query, i) for i in range(budget)],
        judgements=judgements,
        recall=found / of,
        recall_exact=found == of,
        ndcg=0.5,
        llm_calls=0 if method in (QO, BM25, RANDOM) else 4,
        embedding_calls=1,
    )


# --------------------------------------------------------------------------- bootstrap


def test_constant_values_give_a_degenerate_interval() -> None:
    assert bootstrap_ci([0.1] * 37, samples=500, seed=3) == (0.1, 0.1)
    assert bootstrap_ci([2 / 3] * 5, samples=100, seed=0) == (2 / 3, 2 / 3)
    assert bootstrap_ci([0.25], samples=100, seed=0) == (0.25, 0.25)


def test_interval_contains_the_mean_and_matches_the_normal_approximation() -> None:
    values = [0.0, 1.0] * 50  # mean 0.5, standard error 0.05
    low, high = bootstrap_ci(values, samples=4000, seed=1)
    assert low < 0.5 < high
    assert low == pytest.approx(0.5 - 1.96 * 0.05, abs=0.02)
    assert high == pytest.approx(0.5 + 1.96 * 0.05, abs=0.02)

    skewed = [0.0] * 18 + [1.0, 0.5]
    low, high = bootstrap_ci(skewed, samples=2000, seed=0)
    assert 0.0 <= low <= statistics.fmean(skewed) <= high <= 1.0


def test_interval_is_seeded_and_narrows_with_more_data() -> None:
    rng = np.random.default_rng(7)
    small = rng.uniform(size=20).tolist()
    assert bootstrap_ci(small, 1000, seed=5) == bootstrap_ci(small, 1000, seed=5)
    assert bootstrap_ci(small, 1000, seed=5) != bootstrap_ci(small, 1000, seed=6)
    large = rng.uniform(size=2000).tolist()
    small_low, small_high = bootstrap_ci(small, 1000, seed=5)
    large_low, large_high = bootstrap_ci(large, 1000, seed=5)
    assert large_high - large_low < (small_high - small_low) / 4


def test_resamples_are_drawn_in_blocks_for_large_inputs(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(metrics, "_BOOTSTRAP_CELLS", 50)  # 40 values: one resample per block
    values = [0.0, 1.0, 1.0, 0.5] * 10
    low, high = bootstrap_ci(values, samples=300, seed=2)
    assert low < statistics.fmean(values) < high


def test_bad_inputs_are_clear_errors() -> None:
    with pytest.raises(ValueError, match="non-empty"):
        bootstrap_ci([], 100, 0)
    with pytest.raises(ValueError, match="samples"):
        bootstrap_ci([1.0], 0, 0)
    with pytest.raises(ValueError, match="equal lengths"):
        paired_bootstrap_ci([1.0, 0.5], [1.0], 100, 0)


def test_paired_interval_is_the_interval_of_the_differences() -> None:
    left = [0.75, 0.5, 1.0, 0.25]
    right = [0.5, 0.25, 0.75, 0.0]  # always exactly 0.25 behind
    assert paired_bootstrap_ci(left, right, 500, 0) == (0.25, 0.25)
    # Unpaired intervals of these two overlap widely; the paired one does not reach 0.
    assert bootstrap_ci(left, 500, 0)[0] < bootstrap_ci(right, 500, 0)[1]
    noisy_left = [1.0, 0.0, 1.0, 0.0, 1.0, 0.0]
    noisy_right = [0.0, 1.0, 0.0, 1.0, 0.0, 1.0]
    low, high = paired_bootstrap_ci(noisy_left, noisy_right, 2000, 0)
    assert low < 0.0 < high
    assert (low, high) == bootstrap_ci(
        [a - b for a, b in zip(noisy_left, noisy_right, strict=True)], 2000, 0
    )


# --------------------------------------------------------------------------- summary


def budget_rows(
    pgr_found: list[int], baseline_found: dict[RetrievalMethod, list[int]]
) -> list[ValidationResult]:
    rows = []
    for q, found in enumerate(pgr_found):
        budget = 30 + q
        rows.append(row(q, QO, 1))
        rows.append(row(q, TOT, found, budget=budget))
        for baseline, founds in baseline_found.items():
            rows.append(row(q, baseline, founds[q], budget=budget, baseline_for=TOT))
    return rows


def test_summary_keeps_baseline_rows_out_of_the_overall_table() -> None:
    rows = budget_rows([4, 3, 4, 2], {QO: [3, 3, 4, 2], BM25: [1, 0, 2, 1]})
    summary = summarise(rows, samples=500)
    assert [(r.method, r.judge) for r in summary.rows] == [(QO, PROV), (TOT, PROV)]
    qo = summary.row(QO, PROV)
    assert qo.n == 4 and qo.recall == 0.25 and (qo.recall_low, qo.recall_high) == (0.25, 0.25)
    tot = summary.row(TOT, PROV)
    assert tot.facts_retrieved == pytest.approx(31.5) and tot.recall == pytest.approx(13 / 16)
    assert tot.recall_low <= tot.recall <= tot.recall_high
    assert summary.queries == 4 and summary.bootstrap_samples == 500


def test_summary_pairs_each_pgr_method_with_its_budget_matched_baselines() -> None:
    rows = budget_rows([4, 3, 4, 2, 4, 3], {QO: [3, 3, 4, 2, 3, 3], BM25: [1, 0, 2, 1, 1, 0]})
    summary = summarise(rows, samples=1000, seed=4)
    assert [(c.method, c.baseline, c.judge) for c in summary.comparisons] == [
        (TOT, QO, PROV),
        (TOT, BM25, PROV),
    ]
    dense = summary.comparison(TOT, QO, PROV)
    assert dense.n == 6 and dense.budget == pytest.approx(32.5)
    assert dense.method_recall == pytest.approx(20 / 24) and dense.baseline_recall == pytest.approx(
        18 / 24
    )
    assert dense.difference == pytest.approx(2 / 24)
    assert dense.difference_low <= 0.0 < dense.difference_high and not dense.beats
    lexical = summary.comparison(TOT, BM25, PROV)
    assert (
        lexical.difference == pytest.approx(15 / 24)
        and lexical.difference_low > 0
        and lexical.beats
    )
    assert (lexical.method_low, lexical.method_high) == (dense.method_low, dense.method_high)
    with pytest.raises(KeyError):
        summary.comparison(COT, QO, PROV)

    markdown = summary_markdown(summary)
    assert "Budget: facts retrieved/query" in markdown and "Budget-matched" in markdown
    assert "| pgr_tot | query_only@pgr_tot | provenance | 6 | 32.50 |" in markdown
    assert "| pgr_tot | bm25@pgr_tot | provenance | 6 | 32.50 |" in markdown
    assert markdown.count("| yes |") == 1 and markdown.count("| no |") == 1


def test_comparisons_use_only_queries_with_both_rows() -> None:
    rows = budget_rows([4, 0, 4], {RANDOM: [0, 0, 0]})
    rows = [r for r in rows if not (r.query_id == qid(1) and r.baseline_for is not None)]
    comparison = summarise(rows, samples=200).comparison(TOT, RANDOM, PROV)
    assert comparison.n == 2 and comparison.method_recall == 1.0 and comparison.difference == 1.0
    assert (comparison.difference_low, comparison.difference_high) == (1.0, 1.0)


def test_no_comparisons_without_baseline_rows() -> None:
    summary = summarise([row(0, QO, 2), row(0, TOT, 3, budget=40)], samples=200)
    assert summary.comparisons == []
    assert "Budget-matched" not in summary_markdown(summary)


# --------------------------------------------------------------------------- difficulty


def query(n: int) -> Query:
    return Query(
        query_id=qid(n),
        persona_id=PID,
        query_date=DAY,
        text=f"query {n}",
        reasoning="",
        domain=Domain.TRAVEL,
        references=[
            Reference(
                reference_id=make_id("reference", n, 0),
                date=DAY,
                text="r",
                domain=Domain.TRAVEL,
                cosine=0.1,
            )
        ],
        gamma=0.1,
        embedder="e",
        rank=n,
    )


def test_difficulty_is_query_only_provenance_recall_at_k() -> None:
    results = [
        row(0, QO, 1),  # 0.25: the K = 20 query-only row under provenance
        row(0, QO, 4, judge=EMB),  # another judge
        row(0, QO, 3, budget=35, baseline_for=TOT),  # budget-matched query-only: not the difficulty
        row(0, TOT, 4, budget=35),
        row(1, TOT, 2, budget=35),  # no query-only row for query 1
    ]
    queries = [query(0), query(1), query(2).model_copy(update={"difficulty": 0.5})]
    updated = with_difficulty(queries, results)
    assert [q.difficulty for q in updated] == [0.25, None, 0.5]
    assert queries[0].difficulty is None  # the input is not modified


def test_interval_does_not_depend_on_the_order_of_the_values() -> None:
    values = np.random.default_rng(3).uniform(size=50).tolist()
    assert bootstrap_ci(values, 500, seed=1) == bootstrap_ci(values[::-1], 500, seed=1)
