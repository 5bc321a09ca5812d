"""Retrieval metrics and the per method × judge summary of a validation run.

Definitions (all per query, then averaged):

* Recall — fraction of the query's required references the judge found.
* RecallExact — 1 when every required reference was found, else 0.
* recall@K — fraction of references with a supporting fact among the first K
  facts of the ranked retrieval list. Query-only ranks by cosine; PGR ranks by
  the order facts were first retrieved (augmentation + Phase 1 first, then
  each refinement), and by best cosine within one round.
* nDCG — binary relevance: a retrieved fact is relevant when its visible
  revision descends from a required reference (provenance). The ideal list
  puts every relevant fact of the memory snapshot first, truncated to the
  length of the retrieved list.

Recall rises with the number of facts retrieved, so a method is only
compared with baselines given the same budget: the summary pairs each PGR
method with its budget-matched baseline rows (``baseline_for``) query by
query and reports both means and their paired difference with 95% percentile
bootstrap intervals over queries. A difference whose interval lies above 0 is
the only evidence the card accepts that PGR beats a baseline.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from statistics import fmean

import numpy as np
from pydantic import BaseModel, Field

from memoryquest.contracts import (
    JudgeKind,
    Query,
    ReferenceJudgement,
    RetrievalMethod,
    ValidationResult,
)
from memoryquest.memory.snapshot import MemoryItem

DEFAULT_BOOTSTRAP_SAMPLES = 2000
CONFIDENCE = 0.95
_BOOTSTRAP_CELLS = (
    4_000_000  # resampled values held in memory at once (bounds memory for large datasets)
)


def recall(judgements: Sequence[ReferenceJudgement]) -> float:
    if not judgements:
        raise ValueError("recall needs at least one reference judgement")
    return sum(j.found for j in judgements) / len(judgements)


def recall_exact(judgements: Sequence[ReferenceJudgement]) -> bool:
    if not judgements:
        raise ValueError("recall_exact needs at least one reference judgement")
    return all(j.found for j in judgements)


def provenance_support(
    reference_ids: Iterable[str], items: Iterable[MemoryItem]
) -> dict[str, list[str]]:
    """reference id -> fids (in the given order) whose visible revision descends from it."""
    support: dict[str, list[str]] = {rid: [] for rid in reference_ids}
    for item in items:
        for rid in item.source_reference_ids:
            if rid in support:
                support[rid].append(item.fid)
    return support


def recall_at_k(ranked_fids: Sequence[str], support: Mapping[str, Iterable[str]], k: int) -> float:
    """Share of references with a supporting fact in the first ``k`` ranked facts."""
    if k < 1:
        raise ValueError(f"k must be at least 1, got {k}")
    if not support:
        raise ValueError("recall@K needs at least one reference")
    top = set(ranked_fids[:k])
    return sum(bool(top & set(fids)) for fids in support.values()) / len(support)


def ndcg(ranked_fids: Sequence[str], relevant_fids: Iterable[str]) -> float:
    """Binary-relevance nDCG of the whole ranked list (0 when nothing relevant exists or was retrieved)."""
    relevant = set(relevant_fids)
    if not ranked_fids or not relevant:
        return 0.0
    dcg = sum(
        1.0 / math.log2(rank + 1)
        for rank, fid in enumerate(ranked_fids, start=1)
        if fid in relevant
    )
    ideal_hits = min(len(relevant), len(ranked_fids))
    idcg = sum(1.0 / math.log2(rank + 1) for rank in range(1, ideal_hits + 1))
    return dcg / idcg


def relevant_fids(reference_ids: Iterable[str], items: Iterable[MemoryItem]) -> set[str]:
    """Facts of a snapshot that descend from any of the references."""
    wanted = set(reference_ids)
    return {item.fid for item in items if wanted.intersection(item.source_reference_ids)}


# --------------------------------------------------------------------------- bootstrap


def bootstrap_ci(
    values: Sequence[float],
    samples: int = DEFAULT_BOOTSTRAP_SAMPLES,
    seed: int = 0,
    *,
    level: float = CONFIDENCE,
) -> tuple[float, float]:
    """Percentile bootstrap interval of the mean of ``values``.

    ``samples`` resamples of ``len(values)`` values with replacement, drawn
    from a generator seeded with ``seed``, so the same input always gives the
    same interval. Values are sorted first, so the interval depends on the
    values and not on the order rows arrived in (the CLI, the card and the
    overall table agree to the last digit). The bounds are clipped to
    [min, max] of the values: every resample mean lies there, and clipping
    only removes rounding error (so constant values give exactly (c, c)).
    """
    data = np.sort(np.asarray(values, dtype=np.float64))
    if data.ndim != 1 or data.size == 0:
        raise ValueError("bootstrap_ci needs a non-empty sequence of numbers")
    if samples < 1:
        raise ValueError(f"samples must be at least 1, got {samples}")
    if not 0.0 < level < 1.0:
        raise ValueError(f"level must be between 0 and 1, got {level}")
    rng = np.random.default_rng(seed)
    block = max(1, _BOOTSTRAP_CELLS // data.size)
    means = np.empty(samples, dtype=np.float64)
    for start in range(0, samples, block):
        stop = min(samples, start + block)
        means[start:stop] = data[rng.integers(0, data.size, size=(stop - start, data.size))].mean(
            axis=1
        )
    tail = (1.0 - level) / 2.0
    low, high = np.quantile(means, [tail, 1.0 - tail])
    lowest, highest = float(data.min()), float(data.max())
    return float(np.clip(low, lowest, highest)), float(np.clip(high, lowest, highest))


def paired_bootstrap_ci(
    left: Sequence[float],
    right: Sequence[float],
    samples: int = DEFAULT_BOOTSTRAP_SAMPLES,
    seed: int = 0,
    *,
    level: float = CONFIDENCE,
) -> tuple[float, float]:
    """Percentile bootstrap interval of mean(left − right) over paired items.

    Pairs are resampled together (left[i] with right[i], e.g. one query's
    recall under two methods), which keeps the per-query correlation and so
    gives a much tighter, honest interval than comparing two separate intervals.
    """
    if len(left) != len(right):
        raise ValueError(f"paired bootstrap needs equal lengths, got {len(left)} and {len(right)}")
    differences = np.asarray(left, dtype=np.float64) - np.asarray(right, dtype=np.float64)
    return bootstrap_ci(differences.tolist(), samples, seed, level=level)


# --------------------------------------------------------------------------- difficulty


def query_difficulty(results: Iterable[ValidationResult]) -> dict[str, float]:
    """query id -> query-only recall under the provenance judge (the K = query_only_k row, not a baseline)."""
    return {
        r.query_id: r.recall
        for r in results
        if r.method is RetrievalMethod.QUERY_ONLY
        and r.judge is JudgeKind.PROVENANCE
        and r.baseline_for is None
    }


def with_difficulty(queries: Sequence[Query], results: Iterable[ValidationResult]) -> list[Query]:
    """The queries with ``difficulty`` set from their query-only provenance recall.

    A query without such a result keeps the difficulty it had (usually None):
    no evidence, no number.
    """
    difficulty = query_difficulty(results)
    return [
        q.model_copy(update={"difficulty": difficulty[q.query_id]})
        if q.query_id in difficulty
        else q
        for q in queries
    ]


# --------------------------------------------------------------------------- summary


class PGRSummaryRow(BaseModel):
    """One method at its own default budget (query-only: K; PGR: whatever it retrieved) under one judge."""

    method: RetrievalMethod
    judge: JudgeKind
    n: int = Field(description="Queries scored.")
    recall: float = Field(description="Mean fraction of required references found.")
    recall_low: float = Field(
        description="Lower bound of the 95% bootstrap interval of mean recall."
    )
    recall_high: float = Field(
        description="Upper bound of the 95% bootstrap interval of mean recall."
    )
    recall_exact: float = Field(description="Share of queries with every reference found.")
    ndcg: float
    llm_calls: float = Field(
        description="Mean retrieval/generation LLM calls per query (judge calls excluded)."
    )
    embedding_calls: float = Field(description="Mean query-time embedding requests per query.")
    facts_retrieved: float = Field(description="Mean unique facts retrieved per query.")
    phase1_facts: float | None = Field(None, description="PGR: mean facts after Phase 1.")
    phase2_new_facts: float | None = Field(
        None, description="PGR: mean facts added by Phase 2 refinements."
    )
    refinements: float | None = Field(None, description="PGR: mean Phase 2 iterations run.")


class BudgetComparison(BaseModel):
    """A PGR method against one baseline given the same number of facts, per query, under one judge."""

    method: RetrievalMethod = Field(description="The PGR method.")
    baseline: RetrievalMethod = Field(description="The baseline run at the PGR method's budget.")
    judge: JudgeKind
    n: int = Field(description="Queries with both rows.")
    budget: float = Field(description="Mean budget: facts the PGR method retrieved per query.")
    method_recall: float
    method_low: float
    method_high: float
    baseline_recall: float
    baseline_low: float
    baseline_high: float
    difference: float = Field(description="Mean over queries of method recall − baseline recall.")
    difference_low: float
    difference_high: float

    @property
    def beats(self) -> bool:
        """True only when the whole 95% interval of the paired difference is above 0."""
        return self.difference_low > 0.0


class PGRSummary(BaseModel):
    rows: list[PGRSummaryRow]
    queries: int = Field(description="Distinct queries in the results.")
    comparisons: list[BudgetComparison] = Field(default_factory=list)
    bootstrap_samples: int = DEFAULT_BOOTSTRAP_SAMPLES

    def row(self, method: RetrievalMethod | str, judge: JudgeKind | str) -> PGRSummaryRow:
        for row in self.rows:
            if row.method == method and row.judge == judge:
                return row
        raise KeyError(f"no summary row for method {method} and judge {judge}")

    def comparison(
        self, method: RetrievalMethod | str, baseline: RetrievalMethod | str, judge: JudgeKind | str
    ) -> BudgetComparison:
        for comparison in self.comparisons:
            if (
                comparison.method == method
                and comparison.baseline == baseline
                and comparison.judge == judge
            ):
                return comparison
        raise KeyError(
            f"no budget-matched comparison of {method} with {baseline} under judge {judge}"
        )


def budget_comparisons(
    results: Sequence[ValidationResult], samples: int = DEFAULT_BOOTSTRAP_SAMPLES, seed: int = 0
) -> list[BudgetComparison]:
    """Each PGR method beside each of its budget-matched baselines, per judge, paired by query.

    Only queries with both the method's row and the baseline's row count, so
    both means are over the same queries. Order: methods, then baselines,
    then judges, as they first appear in ``results``.
    """
    own: dict[tuple[RetrievalMethod, JudgeKind], dict[str, ValidationResult]] = {}
    matched: dict[
        tuple[RetrievalMethod, RetrievalMethod, JudgeKind], dict[str, ValidationResult]
    ] = {}
    for r in results:
        if r.baseline_for is None:
            own.setdefault((r.method, r.judge), {})[r.query_id] = r
        else:
            matched.setdefault((r.baseline_for, r.method, r.judge), {})[r.query_id] = r
    comparisons = []
    for (method, baseline, judge), rows in matched.items():
        mine = own.get((method, judge), {})
        query_ids = [q for q in rows if q in mine]
        if not query_ids:
            continue
        ours = [mine[q].recall for q in query_ids]
        theirs = [rows[q].recall for q in query_ids]
        method_ci = bootstrap_ci(ours, samples, seed)
        baseline_ci = bootstrap_ci(theirs, samples, seed)
        difference_ci = paired_bootstrap_ci(ours, theirs, samples, seed)
        comparisons.append(
            BudgetComparison(
                method=method,
                baseline=baseline,
                judge=judge,
                n=len(query_ids),
                budget=fmean(rows[q].budget for q in query_ids),
                method_recall=fmean(ours),
                method_low=method_ci[0],
                method_high=method_ci[1],
                baseline_recall=fmean(theirs),
                baseline_low=baseline_ci[0],
                baseline_high=baseline_ci[1],
                difference=fmean(a - b for a, b in zip(ours, theirs, strict=True)),
                difference_low=difference_ci[0],
                difference_high=difference_ci[1],
            )
        )
    methods = list(dict.fromkeys(c.method for c in comparisons))
    baselines = list(dict.fromkeys(c.baseline for c in comparisons))
    judges = list(dict.fromkeys(c.judge for c in comparisons))
    return sorted(
        comparisons,
        key=lambda c: (methods.index(c.method), baselines.index(c.baseline), judges.index(c.judge)),
    )


def summarise(
    results: Sequence[ValidationResult], *, samples: int = DEFAULT_BOOTSTRAP_SAMPLES, seed: int = 0
) -> PGRSummary:
    """Means per method × judge at the methods' own budgets, in the order the pairs first appear,
    plus every PGR method against its budget-matched baselines (:func:`budget_comparisons`)."""
    groups: dict[tuple[RetrievalMethod, JudgeKind], list[ValidationResult]] = {}
    for result in results:
        if result.baseline_for is None:
            groups.setdefault((result.method, result.judge), []).append(result)
    rows = []
    for (method, judge), group in groups.items():
        prospective = method in (RetrievalMethod.PGR_COT, RetrievalMethod.PGR_TOT)
        low, high = bootstrap_ci([r.recall for r in group], samples, seed)
        rows.append(
            PGRSummaryRow(
                method=method,
                judge=judge,
                n=len(group),
                recall=fmean(r.recall for r in group),
                recall_low=low,
                recall_high=high,
                recall_exact=fmean(float(r.recall_exact) for r in group),
                ndcg=fmean(r.ndcg for r in group),
                llm_calls=fmean(r.llm_calls for r in group),
                embedding_calls=fmean(r.embedding_calls for r in group),
                facts_retrieved=fmean(len(r.retrieved_fids) for r in group),
                phase1_facts=fmean(_phase1(r) for r in group) if prospective else None,
                phase2_new_facts=fmean(_phase2(r) for r in group) if prospective else None,
                refinements=fmean(max(len(r.iterations) - 1, 0) for r in group)
                if prospective
                else None,
            )
        )
    return PGRSummary(
        rows=rows,
        queries=len({r.query_id for r in results}),
        comparisons=budget_comparisons(results, samples, seed),
        bootstrap_samples=samples,
    )


class RetrievalJudgeErrors(BaseModel):
    """A judge's reference verdicts on a run's own retrievals, against the exact provenance judge."""

    judge: JudgeKind
    unsupported: int = Field(description="Verdicts where provenance found no supporting fact.")
    accepted_unsupported: int = Field(description="Of those, the ones this judge said found.")
    supported: int = Field(description="Verdicts where provenance found a supporting fact.")
    rejected_supported: int = Field(description="Of those, the ones this judge said not found.")


VerdictKey = tuple[str, str, str | None, str]  # query, method, baseline for, reference


def verdicts_by_reference(
    results: Sequence[ValidationResult],
) -> dict[VerdictKey, dict[JudgeKind, bool]]:
    """Every judge's verdict on each reference of each retrieval, so judges can be compared
    on the very same retrieved facts."""
    found: dict[VerdictKey, dict[JudgeKind, bool]] = {}
    for row in results:
        baseline = row.baseline_for.value if row.baseline_for else None
        for judgement in row.judgements:
            key = (row.query_id, row.method.value, baseline, judgement.reference_id)
            found.setdefault(key, {})[row.judge] = judgement.found
    return found


def judge_errors_on_retrievals(results: Sequence[ValidationResult]) -> list[RetrievalJudgeErrors]:
    """Each non-exact judge beside provenance on the same retrieval's same reference: the wrong
    facts a judge meets there are the ones the methods retrieve, not drawn at random."""
    found = verdicts_by_reference(results)
    rows = []
    for judge in JudgeKind:
        both = [
            (v[JudgeKind.PROVENANCE], v[judge])
            for v in found.values()
            if judge is not JudgeKind.PROVENANCE and judge in v and JudgeKind.PROVENANCE in v
        ]
        if both:
            rows.append(
                RetrievalJudgeErrors(
                    judge=judge,
                    unsupported=sum(not exact for exact, _ in both),
                    accepted_unsupported=sum(not exact and said for exact, said in both),
                    supported=sum(exact for exact, _ in both),
                    rejected_supported=sum(exact and not said for exact, said in both),
                )
            )
    return rows


def _phase1(result: ValidationResult) -> int:
    return len(result.iterations[0].new_fids) if result.iterations else 0


def _phase2(result: ValidationResult) -> int:
    return sum(len(it.new_fids) for it in result.iterations[1:])


def _cell(value: float | None, digits: int = 3) -> str:
    return "–" if value is None else f"{value:.{digits}f}"


def _interval(low: float, high: float, digits: int = 3) -> str:
    return f"[{low:.{digits}f}, {high:.{digits}f}]"


def _signed_interval(low: float, high: float) -> str:
    return f"[{low:+.3f}, {high:+.3f}]"


def comparison_markdown(summary: PGRSummary) -> list[str]:
    """Lines of the budget-matched table: each PGR method beside each baseline at its budget."""
    if not summary.comparisons:
        return []
    lines = [
        f"Budget-matched: each baseline retrieves exactly as many facts as the PGR method did for that query. "
        f"95% percentile bootstrap intervals over queries ({summary.bootstrap_samples} resamples); "
        "the difference is paired by query.",
        "",
        "| Method | Baseline | Judge | n | Budget (facts/query) | Method recall [95% CI] | Baseline recall [95% CI] "
        "| Difference [95% CI] | Beats baseline |",
        "| --- | --- | --- | ---: | ---: | ---: | ---: | ---: | --- |",
    ]
    for c in summary.comparisons:
        lines.append(
            f"| {c.method.value} | {c.baseline.value}@{c.method.value} | {c.judge.value} | {c.n} | {c.budget:.2f} "
            f"| {c.method_recall:.3f} {_interval(c.method_low, c.method_high)} "
            f"| {c.baseline_recall:.3f} {_interval(c.baseline_low, c.baseline_high)} "
            f"| {c.difference:+.3f} {_signed_interval(c.difference_low, c.difference_high)} "
            f"| {'yes' if c.beats else 'no'} |"
        )
    return lines


def summary_markdown(summary: PGRSummary) -> str:
    """A Markdown table shaped like the paper's Tables 1 and 7, then the budget-matched comparison."""
    if not summary.rows:
        return "No PGR validation results.\n"
    lines = [
        f"PGR validation over {summary.queries} queries. Each method at its own budget: query-only returns "
        "its K best facts, PGR whatever its steps found — recall grows with the budget, so compare methods "
        "in the budget-matched table below.",
        "",
        "| Method | Judge | n | Recall | RecallExact | nDCG | LLM calls/query | Embedding requests/query "
        "| Budget: facts retrieved/query | Phase-1 facts | Phase-2 new facts | Refinements | Recall 95% CI |",
        "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for row in summary.rows:
        lines.append(
            f"| {row.method.value} | {row.judge.value} | {row.n} | {_cell(row.recall)} | {_cell(row.recall_exact)} "
            f"| {_cell(row.ndcg)} | {_cell(row.llm_calls, 2)} | {_cell(row.embedding_calls, 2)} "
            f"| {_cell(row.facts_retrieved, 2)} | {_cell(row.phase1_facts, 2)} | {_cell(row.phase2_new_facts, 2)} "
            f"| {_cell(row.refinements, 2)} | {_interval(row.recall_low, row.recall_high)} |"
        )
    comparison = comparison_markdown(summary)
    if comparison:
        lines += ["", *comparison]
    return "\n".join(lines) + "\n"
