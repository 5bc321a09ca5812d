"""Per-item adversarial filtering: withdraw the queries whose reference items stand out.

The audit's gates look at totals: a tell carried by a third of the
references can leave the classifier's AUC under its gate while each of those
references is easy to pick out. The filter works item by item. Each
classifier the audit fits across users (reference vs other user turns,
reference-credited vs other facts, and the structural features of turns and
of sessions, and the clause each news item's sentence adds to it,
:mod:`memoryquest.audit.wording`) gives every item an out-of-fold score, from
a model that never saw that item's user. A reference item's p-value is the
share of the other items of the same fold that score at least as high (each
fold is scored by its own model, so each is its own yardstick); a query's
items' p-values, and that of their mean rank, are combined into the query's
(the Cauchy combination, valid for dependent p-values), and a query stands out
when the Benjamini-Hochberg procedure over every query of a classifier keeps
it at the false discovery rate ``audit.filter_fdr``: without a tell next to
nothing is withdrawn, however many queries are tested. It is withdrawn with
reason ``tell``, and the
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
from memoryquest.contracts import Query, RejectedCandidate, RejectingStage, RejectionReason, Stage
from memoryquest.dataset import GeneratedDataset
from memoryquest.generation.common import rejected
from memoryquest.settings import AuditSettings, Settings

MATERIAL_STAGES: dict[str, RejectingStage] = {
    "user_turns": Stage.DIALOGUES,
    "news_wording": Stage.DIALOGUES,
    "structure_turns": Stage.DIALOGUES,
    "structure_sessions": Stage.TIMELINES,
    "facts": Stage.MEMORY,
}
"""The classifiers whose items are filtered, in the order their stage is chosen for a rejected row."""

ITEM_NOUNS = {
    "user_turns": "user turn",
    "news_wording": "sentence's added clause",
    "structure_turns": "turn's place in its session",
    "structure_sessions": "session's place and domain",
    "facts": "credited fact",
}


@dataclass(frozen=True)
class StandingOut:
    """A reference item of a query that stands out: the item's own out-of-fold p-value, its
    query's (all of the query's items of this material combined), and the cutoff that met."""

    material: str
    reference_id: str
    p_value: float
    query_p_value: float
    cutoff: float


@dataclass(frozen=True)
class _Ranked:
    reference_id: str
    rank: float  # share of the fold's other items scored below it (ties count half)
    p_value: float  # share of the fold's other items scored at or above it (+1 on both sides)


def _ranked(scored: ScoredMaterial) -> Iterator[_Ranked]:
    """Each scored reference item with its rank and p-value among its fold's other items."""
    oof = scored.out_of_fold
    for fold in sorted(set(oof.folds.tolist()) - {-1}):
        in_fold = oof.folds == fold
        others = np.sort(oof.scores[in_fold & ~oof.labels])
        if others.size == 0:
            continue
        for row in np.flatnonzero(in_fold & oof.labels):
            score = float(oof.scores[row])
            left = int(np.searchsorted(others, score, "left"))
            right = int(np.searchsorted(others, score, "right"))
            p_value = (others.size - left + 1) / (others.size + 1)
            for reference_id in scored.references[row]:
                yield _Ranked(reference_id, (left + right) / 2 / others.size, p_value)


def mean_rank_p_value(ranks: Sequence[float]) -> float:
    """How often the mean rank of as many items drawn from the other items is at least this
    high (ranks uniform on [0, 1]: the Irwin-Hall distribution, by its normal approximation)."""
    from scipy.stats import norm

    spread = np.sqrt(1 / (12 * len(ranks)))
    return float(norm.sf((float(np.mean(ranks)) - 0.5) / spread))


P_VALUE_CAP = 0.9
"""An item scored below the rest of its fold argues no more against a tell than one at this
p-value: uncapped, the Cauchy transform of a p-value near 1 is near minus infinity and would
cancel any signal of the query's other items."""


def cauchy_combination(p_values: Sequence[float]) -> float:
    """One p-value for several (the Cauchy combination test, Liu & Xie 2020): the mean of their
    Cauchy transforms, valid for p-values that depend on each other, as a query's items scored by
    one classifier do; one strong signal carries it."""
    capped = np.clip(np.asarray(p_values, dtype=float), 1e-15, P_VALUE_CAP)
    statistic = float(np.mean(np.tan((0.5 - capped) * np.pi)))
    return float(0.5 - np.arctan(statistic) / np.pi)


def fdr_cutoff(p_values: Sequence[float], rate: float) -> float | None:
    """The Benjamini-Hochberg cutoff: the largest p-value p_(k) with p_(k) <= k / m * rate, or
    None when no hypothesis is rejected (the false discovery rate is held at ``rate``)."""
    ordered = sorted(p_values)
    m = len(ordered)
    passing = [p for k, p in enumerate(ordered, start=1) if p <= k / m * rate]
    return passing[-1] if passing else None


def query_p_values(scored: ScoredMaterial, owners: dict[str, str]) -> dict[str, float]:
    """Each query's p-value under ``scored``: its reference items' p-values (how many of their
    fold's other items score at least as high) and, with two or more, the p-value of their mean
    rank (a tell in every reference, each only somewhat high, adds up), combined."""
    by_query: dict[str, list[_Ranked]] = {}
    for item in _ranked(scored):
        if item.reference_id in owners:
            by_query.setdefault(owners[item.reference_id], []).append(item)
    combined: dict[str, float] = {}
    for query, items in by_query.items():
        p_values = [i.p_value for i in items]
        if len(items) > 1:
            p_values.append(mean_rank_p_value([i.rank for i in items]))
        combined[query] = cauchy_combination(p_values)
    return combined


def standing_out(scored: ScoredMaterial, rate: float, owners: dict[str, str]) -> list[StandingOut]:
    """The reference items of the queries that stand out under ``scored``.

    Each query is a hypothesis (:func:`query_p_values`), and the Benjamini-Hochberg procedure
    keeps the expected share of ordinary queries among those flagged at ``rate``: on data
    without a tell, next to nothing stands out, however many queries are tested; with one, the
    queries that carry it do. Counting queries, not items, keeps a query with a tell from
    counting once per item towards the discoveries that let ordinary items through.
    """
    combined = query_p_values(scored, owners)
    cutoff = fdr_cutoff(list(combined.values()), rate)
    if cutoff is None:
        return []
    return [
        StandingOut(scored.material, i.reference_id, i.p_value, combined[query], cutoff)
        for i in _ranked(scored)
        if (query := owners.get(i.reference_id, "")) in combined and combined[query] <= cutoff
    ]


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


def _rejection(query: Query, items: Sequence[StandingOut], rate: float) -> RejectedCandidate:
    """The ``tell`` row of a withdrawn query: the stage of its first standing-out material, each item named."""
    stage = next(MATERIAL_STAGES[m] for m in MATERIAL_STAGES if any(i.material == m for i in items))
    named = "; ".join(
        f"reference {i.reference_id}'s {ITEM_NOUNS[i.material]} out of fold: p = {i.p_value:.3g}"
        f" (its query's, combined: {i.query_p_value:.3g}, cutoff {i.cutoff:.3g})"
        for i in items
    )
    detail = (
        f"query {query.query_id}: {named}, Benjamini-Hochberg at a false discovery rate of "
        f"{rate:g}; its timeline and sessions stay in the history"
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
    dataset: GeneratedDataset, flagged: Sequence[StandingOut], rate: float
) -> tuple[GeneratedDataset, list[str]]:
    """``dataset`` without the queries of ``flagged`` items, each in ``rejected``; and their ids."""
    owner = {r.reference_id: q for q in dataset.queries for r in q.references}
    by_query: dict[str, list[StandingOut]] = {}
    for item in flagged:
        query = owner.get(item.reference_id)
        if query is not None:
            by_query.setdefault(query.query_id, []).append(item)
    queries = {q.query_id: q for q in dataset.queries}
    rows = [_rejection(queries[q], items, rate) for q, items in by_query.items()]
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
        for item in standing_out(scored, settings.filter_fdr, owners)
    ]


def filter_tells(dataset: GeneratedDataset, settings: Settings) -> FilterResult:
    """Withdraw, round by round, the queries whose reference items stand out (see the module's doc).

    Raises :class:`~memoryquest.audit.AuditError` when the dataset cannot be audited.
    """
    config = settings.audit
    rate = config.filter_fdr
    current = dataset
    audit = audit_with_scores(
        current, settings, wording="news_wording" in config.filter_classifiers
    )
    before = _gated_aucs(audit.report)
    rounds: list[FilterRound] = []
    stopped = f"stopped at the round limit ({config.filter_rounds_max}); the last round still withdrew queries"
    for number in range(1, config.filter_rounds_max + 1):
        flagged = _flagged(audit, current, config)
        current, removed = _withdraw(current, flagged, rate)
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
        audit = audit_with_scores(
            current, settings, wording="news_wording" in config.filter_classifiers
        )
    summary = FilterSummary(
        fdr=rate,
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
