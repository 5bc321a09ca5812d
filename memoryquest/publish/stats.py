"""Statistics shown in the dataset card, computed from the tables themselves.

Sums use ``math.fsum`` so the numbers (and therefore the card's bytes) do not
depend on the order rows arrived in; bootstrap intervals are seeded and taken
over rows sorted by id for the same reason.

Validation is summarised twice: each method at its own default budget
(budget-matched baseline rows left out), and each PGR method against the
baselines that were given exactly its budget, with 95% bootstrap intervals —
the only comparison the card draws conclusions from.
"""

from __future__ import annotations

import math
import statistics
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

from memoryquest.contracts import (
    FactType,
    JudgeKind,
    RejectionReason,
    RetrievalMethod,
    Role,
)
from memoryquest.dataset import DATASET_TABLES, GeneratedDataset
from memoryquest.pgr.metrics import (
    DEFAULT_BOOTSTRAP_SAMPLES,
    BudgetComparison,
    bootstrap_ci,
    budget_comparisons,
)


@dataclass(frozen=True)
class Distribution:
    count: int
    min: float
    median: float
    mean: float
    max: float

    @classmethod
    def of(cls, values: Sequence[float]) -> Distribution | None:
        if not values:
            return None
        ordered = sorted(values)
        return cls(
            count=len(ordered),
            min=ordered[0],
            median=float(statistics.median(ordered)),
            mean=math.fsum(ordered) / len(ordered),
            max=ordered[-1],
        )


@dataclass(frozen=True)
class MethodScore:
    """Validation results of one retrieval method under one judge."""

    method: str
    judge: str
    queries: int
    mean_recall: float
    recall_exact: float  # fraction of queries with every reference found
    mean_llm_calls: float
    mean_retrieved: float  # mean facts retrieved per query: the method's own budget
    recall_low: float  # 95% bootstrap interval of mean_recall
    recall_high: float


@dataclass(frozen=True)
class JudgeAgreement:
    """How often the LLM judge's verdict on a reference matches the provenance judge's (the
    exact one) over the same retrieved facts: how far the model-judged figures can be trusted."""

    verdicts: int
    agree: int
    llm_only: int  # found by the LLM judge, not by provenance
    provenance_only: int

    @property
    def share(self) -> float:
        return self.agree / self.verdicts if self.verdicts else 0.0


def judge_agreement(dataset: GeneratedDataset) -> JudgeAgreement | None:
    """Reference by reference, on every retrieval both judges scored; None when one judge did not run."""
    found: dict[tuple[str, str, str | None, str], dict[str, bool]] = {}
    for row in dataset.validation:
        if row.judge not in (JudgeKind.LLM, JudgeKind.PROVENANCE):
            continue
        baseline = row.baseline_for.value if row.baseline_for else None
        for judgement in row.judgements:
            key = (row.query_id, row.method.value, baseline, judgement.reference_id)
            found.setdefault(key, {})[row.judge.value] = judgement.found
    pairs = [v for v in found.values() if len(v) == 2]
    if not pairs:
        return None
    llm, exact = JudgeKind.LLM.value, JudgeKind.PROVENANCE.value
    return JudgeAgreement(
        verdicts=len(pairs),
        agree=sum(v[llm] == v[exact] for v in pairs),
        llm_only=sum(v[llm] and not v[exact] for v in pairs),
        provenance_only=sum(v[exact] and not v[llm] for v in pairs),
    )


@dataclass(frozen=True)
class DatasetStatistics:
    users: int
    queries: int
    sessions: int
    facts: int
    rejected: int
    queries_per_user: Distribution | None
    sessions_per_user: Distribution | None
    turns_per_session: Distribution | None
    exchanges_per_session: Distribution | None
    references_per_query: Distribution | None
    gamma: Distribution | None
    gamma_values: tuple[float, ...]
    gamma_said: Distribution | None
    facts_by_type: dict[str, int]
    facts_by_status: dict[str, int]
    rejected_by_reason: dict[str, int]
    validation: tuple[MethodScore, ...]
    budget_matched: tuple[BudgetComparison, ...] = ()
    bootstrap_samples: int = DEFAULT_BOOTSTRAP_SAMPLES
    judge_agreement: JudgeAgreement | None = None


def _ordered(values: set[str], preferred: Sequence[str]) -> list[str]:
    """Known enum values in their documented order, then anything else alphabetically."""
    return [v for v in preferred if v in values] + sorted(values - set(preferred))


def _per_user(user_ids: list[str], owners: list[str]) -> Distribution | None:
    counts = Counter(owners)
    return Distribution.of([float(counts.get(user, 0)) for user in user_ids])


def validation_scores(
    dataset: GeneratedDataset, samples: int = DEFAULT_BOOTSTRAP_SAMPLES, seed: int = 0
) -> tuple[MethodScore, ...]:
    """Each method at its own default budget under each judge (budget-matched baseline rows left out)."""
    groups: dict[tuple[str, str], list[tuple[float, bool, int, int]]] = {}
    for result in sorted(dataset.validation, key=lambda r: r.result_id):
        if result.baseline_for is not None:
            continue
        key = (str(result.method), str(result.judge))
        groups.setdefault(key, []).append(
            (result.recall, result.recall_exact, result.llm_calls, len(result.retrieved_fids))
        )
    methods = _ordered({m for m, _ in groups}, [m.value for m in RetrievalMethod])
    judges = _ordered({j for _, j in groups}, [j.value for j in JudgeKind])
    scores: list[MethodScore] = []
    for method in methods:
        for judge in judges:
            rows = groups.get((method, judge))
            if not rows:
                continue
            n = len(rows)
            low, high = bootstrap_ci([r[0] for r in rows], samples, seed)
            scores.append(
                MethodScore(
                    method=method,
                    judge=judge,
                    queries=n,
                    mean_recall=math.fsum(r[0] for r in rows) / n,
                    recall_exact=sum(1 for r in rows if r[1]) / n,
                    mean_llm_calls=math.fsum(r[2] for r in rows) / n,
                    mean_retrieved=math.fsum(r[3] for r in rows) / n,
                    recall_low=low,
                    recall_high=high,
                )
            )
    return tuple(scores)


def bootstrap_samples_of(dataset: GeneratedDataset) -> int:
    """The run's ``pgr.bootstrap_samples`` from its manifest, else the default."""
    if dataset.manifest is not None:
        pgr = dataset.manifest.settings.get("pgr")
        if isinstance(pgr, dict) and isinstance(pgr.get("bootstrap_samples"), int):
            return int(pgr["bootstrap_samples"])
    return DEFAULT_BOOTSTRAP_SAMPLES


def matched_scores(
    dataset: GeneratedDataset, samples: int = DEFAULT_BOOTSTRAP_SAMPLES, seed: int = 0
) -> tuple[BudgetComparison, ...]:
    """Each PGR method against its budget-matched baselines, in the documented enum order."""
    comparisons = budget_comparisons(
        sorted(dataset.validation, key=lambda r: r.result_id), samples, seed
    )
    methods = [m.value for m in RetrievalMethod]
    judges = [j.value for j in JudgeKind]
    return tuple(
        sorted(
            comparisons,
            key=lambda c: (
                methods.index(c.method.value),
                methods.index(c.baseline.value),
                judges.index(c.judge.value),
            ),
        )
    )


def compute_statistics(
    dataset: GeneratedDataset, *, bootstrap_samples: int | None = None
) -> DatasetStatistics:
    samples = bootstrap_samples if bootstrap_samples is not None else bootstrap_samples_of(dataset)
    user_ids = sorted({row.persona_id for name in DATASET_TABLES for row in getattr(dataset, name)})
    turns = [float(len(s.turns)) for s in dataset.sessions]
    exchanges = [float(sum(1 for t in s.turns if t.role is Role.USER)) for s in dataset.sessions]
    fact_types = Counter(str(f.type) for f in dataset.facts)
    fact_status = Counter(str(f.status) for f in dataset.facts)
    reasons = Counter(str(r.reason) for r in dataset.rejected)
    gammas = sorted(q.gamma for q in dataset.queries)
    return DatasetStatistics(
        users=len(user_ids),
        queries=len(dataset.queries),
        sessions=len(dataset.sessions),
        facts=len(dataset.facts),
        rejected=len(dataset.rejected),
        queries_per_user=_per_user(user_ids, [q.persona_id for q in dataset.queries]),
        sessions_per_user=_per_user(user_ids, [s.persona_id for s in dataset.sessions]),
        turns_per_session=Distribution.of(turns),
        exchanges_per_session=Distribution.of(exchanges),
        references_per_query=Distribution.of([float(len(q.references)) for q in dataset.queries]),
        gamma=Distribution.of(gammas),
        gamma_values=tuple(gammas),
        gamma_said=Distribution.of(
            [q.gamma_said for q in dataset.queries if q.gamma_said is not None]
        ),
        facts_by_type={t.value: fact_types.get(t.value, 0) for t in FactType}
        | {k: v for k, v in sorted(fact_types.items()) if k not in {t.value for t in FactType}},
        facts_by_status=dict(sorted(fact_status.items())),
        rejected_by_reason={r.value: reasons.get(r.value, 0) for r in RejectionReason}
        | {k: v for k, v in sorted(reasons.items()) if k not in {r.value for r in RejectionReason}},
        validation=validation_scores(dataset, samples),
        budget_matched=matched_scores(dataset, samples),
        bootstrap_samples=samples,
        judge_agreement=judge_agreement(dataset),
    )
