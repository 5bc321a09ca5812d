"""Per-item adversarial filtering: withdraw the queries whose reference items stand out.

The audit's gates look at totals: a tell carried by a third of the
references can leave the classifier's AUC under its gate while each of those
references is easy to pick out. The filter works item by item. Each
classifier the audit fits across users (reference vs other user turns,
reference-credited vs other facts, and the structural features of turns and
of sessions) gives every item an out-of-fold score, from a model that never
saw that item's user. A reference item stands out when its score is above
what the other items of the same fold reach (``audit.filter_percentile``, the
99th percentile by default; folds are scored by different models, so each is
its own yardstick). Its query is withdrawn with reason ``tell``, and the
audit is run again, until no reference item stands out and every gate
passes, or ``audit.filter_rounds_max`` rounds have been run.

A withdrawn query goes the way the pipeline withdraws an uncovered one
(:func:`~memoryquest.memory.coverage.withdraw_uncovered`): the query, as its
payload, moves to ``rejected``; its timeline and sessions stay in the history,
where they are ordinary sessions (the audit holds to ground truth only the
references of the queries that stand). The rejected row's stage is the one
whose output the standing-out item is: ``dialogues`` for a user turn or its
place in the session, ``timelines`` for a session's place and domain,
``memory`` for a fact. The item is not regenerated: its query goes.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass

import numpy as np

from memoryquest.audit.report import AuditReport, FilterRound, FilterSummary
from memoryquest.audit.run import (
    FILTERING_KEY,
    ScoredAudit,
    ScoredMaterial,
    audit_with_scores,
)
from memoryquest.contracts import Query, RejectedCandidate, RejectionReason, Stage
from memoryquest.dataset import GeneratedDataset
from memoryquest.generation.common import rejected
from memoryquest.settings import AuditSettings, Settings

MATERIAL_STAGES = {
    "user_turns": Stage.DIALOGUES,
    "structure_turns": Stage.DIALOGUES,
    "structure_sessions": Stage.TIMELINES,
    "facts": Stage.MEMORY,
}
"""The classifiers whose items are filtered, in the order their stage is chosen for a rejected row."""

ITEM_NOUNS = {
    "user_turns": "user turn",
    "structure_turns": "turn's place in its session",
    "structure_sessions": "session's place and domain",
    "facts": "credited fact",
}


@dataclass(frozen=True)
class StandingOut:
    """A reference item scored above what the other items of its fold reach."""

    material: str
    reference_id: str
    score: float
    threshold: float


@dataclass(frozen=True)
class _Ranked:
    reference_id: str
    rank: float  # share of the fold's other items scored below it (ties count half)
    score: float


def _ranked(scored: ScoredMaterial, percentile: float) -> Iterator[tuple[_Ranked, float]]:
    """Each scored reference item with its rank, and the ``percentile`` of its fold's other items' scores."""
    oof = scored.out_of_fold
    for fold in sorted(set(oof.folds.tolist()) - {-1}):
        in_fold = oof.folds == fold
        others = np.sort(oof.scores[in_fold & ~oof.labels])
        if others.size == 0:
            continue
        threshold = float(np.percentile(others, percentile))
        for row in np.flatnonzero(in_fold & oof.labels):
            score = float(oof.scores[row])
            below = np.searchsorted(others, score, "left") + np.searchsorted(others, score, "right")
            for reference_id in scored.references[row]:
                yield _Ranked(reference_id, float(below) / 2 / others.size, score), threshold


def mean_rank_limit(items: int, percentile: float) -> float:
    """The ``percentile`` of the mean rank of ``items`` items drawn from the other items (ranks
    uniform on [0, 1]: the Irwin-Hall distribution, by its normal approximation, exact for one)."""
    from scipy.stats import norm

    if items == 1:
        return percentile / 100
    return float(0.5 + norm.ppf(percentile / 100) * np.sqrt(1 / (12 * items)))


def standing_out(
    scored: ScoredMaterial, percentile: float, owners: dict[str, str]
) -> list[StandingOut]:
    """The reference items of ``scored`` that stand out, alone or together with their query's others.

    Alone: the item's score is above ``percentile`` of the other items' scores in its fold.
    Together: the mean rank of a query's reference items is above what the mean rank of as
    many other items reaches at that percentile (a tell in every reference of a query, each
    only somewhat above the rest, adds up); every item of such a query is listed.
    """
    ranked = list(_ranked(scored, percentile))
    found = [
        StandingOut(scored.material, item.reference_id, item.score, threshold)
        for item, threshold in ranked
        if item.score > threshold
    ]
    by_query: dict[str, list[tuple[_Ranked, float]]] = {}
    for item, threshold in ranked:
        by_query.setdefault(owners.get(item.reference_id, ""), []).append((item, threshold))
    alone = {i.reference_id for i in found}
    for items in by_query.values():
        ranks = [item.rank for item, _ in items]
        if len(ranks) > 1 and float(np.mean(ranks)) > mean_rank_limit(len(ranks), percentile):
            found += [
                StandingOut(scored.material, item.reference_id, item.score, threshold)
                for item, threshold in items
                if item.reference_id not in alone
            ]
    return found


@dataclass(frozen=True)
class FilterResult:
    dataset: GeneratedDataset  # the filtered copy; the input is left as it was
    summary: FilterSummary
    report: AuditReport  # the audit of the filtered dataset, the summary attached


def _gated_aucs(report: AuditReport) -> dict[str, float | None]:
    return {
        c.name: c.value
        for c in report.checks
        if c.name.startswith(("classifier_auc_", "structure_auc_"))
    }


def _rejection(query: Query, items: Sequence[StandingOut], percentile: float) -> RejectedCandidate:
    """The ``tell`` row of a withdrawn query: the stage of its first standing-out material, each item named."""
    stage = next(MATERIAL_STAGES[m] for m in MATERIAL_STAGES if any(i.material == m for i in items))
    named = "; ".join(
        f"reference {i.reference_id}'s {ITEM_NOUNS[i.material]} scores {i.score:.3g} out of fold, "
        f"above {i.threshold:.3g}"
        for i in items
    )
    detail = (
        f"query {query.query_id}: {named} (the {percentile:g}th percentile of the other items of "
        "its fold); its timeline and sessions stay in the history"
    )
    return rejected(
        query.persona_id,
        stage,
        RejectionReason.TELL,
        detail,
        query,
        query.query_id,
        RejectionReason.TELL.value,
    )


def _withdraw(
    dataset: GeneratedDataset, flagged: Sequence[StandingOut], percentile: float
) -> tuple[GeneratedDataset, list[str]]:
    """``dataset`` without the queries of ``flagged`` items, each in ``rejected``; and their ids."""
    owner = {r.reference_id: q for q in dataset.queries for r in q.references}
    by_query: dict[str, list[StandingOut]] = {}
    for item in flagged:
        query = owner.get(item.reference_id)
        if query is not None:
            by_query.setdefault(query.query_id, []).append(item)
    queries = {q.query_id: q for q in dataset.queries}
    rows = [_rejection(queries[q], items, percentile) for q, items in by_query.items()]
    return (
        dataset.model_copy(
            update={
                "queries": [q for q in dataset.queries if q.query_id not in by_query],
                "rejected": [*dataset.rejected, *rows],
            }
        ),
        list(by_query),
    )


def _flagged(
    audit: ScoredAudit, dataset: GeneratedDataset, settings: AuditSettings
) -> list[StandingOut]:
    owners = {r.reference_id: q.query_id for q in dataset.queries for r in q.references}
    return [
        item
        for scored in audit.scored
        if scored.material in settings.filter_classifiers
        for item in standing_out(scored, settings.filter_percentile, owners)
    ]


def filter_tells(dataset: GeneratedDataset, settings: Settings) -> FilterResult:
    """Withdraw, round by round, the queries whose reference items stand out (see the module's doc).

    Raises :class:`~memoryquest.audit.AuditError` when the dataset cannot be audited.
    """
    config = settings.audit
    percentile = config.filter_percentile
    current = dataset
    audit = audit_with_scores(current, settings)
    before = _gated_aucs(audit.report)
    rounds: list[FilterRound] = []
    stopped = f"stopped at the round limit ({config.filter_rounds_max}); the last round still withdrew queries"
    for number in range(1, config.filter_rounds_max + 1):
        flagged = _flagged(audit, current, config)
        current, removed = _withdraw(current, flagged, percentile)
        counts = {m: sum(i.material == m for i in flagged) for m in MATERIAL_STAGES}
        rounds.append(
            FilterRound(
                round=number,
                aucs=_gated_aucs(audit.report),
                flagged_items=counts,
                queries_removed=removed,
            )
        )
        if not removed:
            failed = [f.split(":")[0] for f in audit.report.failures]
            stopped = "no reference item stands out" + (
                f", yet the audit still fails ({', '.join(failed)})"
                if failed
                else " and every gate passes"
            )
            break
        audit = audit_with_scores(current, settings)
    summary = FilterSummary(
        percentile=percentile,
        queries_before=len(dataset.queries),
        queries_removed=len(dataset.queries) - len(current.queries),
        rounds=rounds,
        aucs_before=before,
        aucs_after=_gated_aucs(audit.report),
        stopped=stopped,
    )
    if current.manifest is not None:
        current = current.model_copy(
            update={
                "manifest": current.manifest.model_copy(
                    update={"audit": {FILTERING_KEY: summary.model_dump(mode="json")}}
                )
            }
        )
    report = audit.report.model_copy(update={"filtering": summary})
    return FilterResult(current, summary, report)
