"""Scoring what each method retrieved for a query: one validation row per outcome × judge,
with recall, RecallExact and nDCG, under a stable row id."""

from __future__ import annotations

from collections.abc import Sequence

from memoryquest.contracts import (
    JudgeKind,
    Query,
    ReferenceJudgement,
    RetrievalMethod,
    ValidationResult,
)
from memoryquest.ids import make_id
from memoryquest.llm.client import ModelClient
from memoryquest.pgr.judges import Judge
from memoryquest.pgr.metrics import ndcg, recall, recall_exact, relevant_fids
from memoryquest.pgr.outcomes import RetrievalOutcome
from memoryquest.pgr.retrieval import MemoryIndex


def result_id(
    query_id: str,
    method: RetrievalMethod,
    judge: JudgeKind,
    baseline_for: RetrievalMethod | None = None,
) -> str:
    """Stable row id; a budget-matched baseline also names the method whose budget it used."""
    if baseline_for is None:
        return make_id("result", query_id, method.value, judge.value)
    return make_id("result", query_id, method.value, judge.value, "budget_of", baseline_for.value)


async def score_outcomes(
    query: Query,
    outcomes: Sequence[RetrievalOutcome],
    index: MemoryIndex,
    judges: Sequence[Judge],
    client: ModelClient,
) -> list[ValidationResult]:
    """One validation row per outcome × judge, in that order; each judge sees every outcome of
    the query at once (the model judge reads them in one call)."""
    retrieved = [[index.item(fid) for fid in o.retrieved_fids] for o in outcomes]
    verdicts = [await judge.judge_sets(query, retrieved, index, client) for judge in judges]
    relevant = relevant_fids((r.reference_id for r in query.references), index.items)
    return [
        result_row(query, outcome, relevant, judge.kind, verdicts[j][o])
        for o, outcome in enumerate(outcomes)
        for j, judge in enumerate(judges)
    ]


_AS_RETRIEVED = tuple(
    name for name in ValidationResult.model_fields if name in RetrievalOutcome.model_fields
)
"""A validation row's fields that are the outcome's own, the same under every judge."""


def result_row(
    query: Query,
    outcome: RetrievalOutcome,
    relevant: set[str],
    judge: JudgeKind,
    judgements: list[ReferenceJudgement],
) -> ValidationResult:
    """One validation row: the outcome as one judge saw it (``relevant``: the facts that descend
    from the query's references, for nDCG)."""
    return ValidationResult(
        **{name: getattr(outcome, name) for name in _AS_RETRIEVED},
        result_id=result_id(query.query_id, outcome.method, judge, outcome.baseline_for),
        judge=judge,
        retrieved_fids=outcome.retrieved_fids,
        judgements=judgements,
        recall=recall(judgements),
        recall_exact=recall_exact(judgements),
        ndcg=ndcg(outcome.retrieved_fids, relevant),
    )
