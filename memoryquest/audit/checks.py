"""Each audit measurement turned into pass/fail checks with a detail a reader can act on.

A gate (a threshold in :class:`~memoryquest.settings.AuditSettings`) decides ``passed``;
a reported check carries its value, and its target when it has one, for the dataset card.
"""

from __future__ import annotations

from collections.abc import Sequence

from memoryquest.audit.detectability import ClassifierScore, ExclusiveNgrams
from memoryquest.audit.diversity import Diversity
from memoryquest.audit.ground_truth import GroundTruth, ReferenceIssue
from memoryquest.audit.leakage import SHARED_WORDS_NOTED, Leakage
from memoryquest.audit.report import AuditCheck
from memoryquest.audit.structure import SESSION_FEATURES, TURN_FEATURES
from memoryquest.contracts import Role
from memoryquest.settings import AuditSettings

MATERIAL_NOUNS = {
    "user_turns": "user turns",
    "assistant_turns": "assistant turns",
    "facts": "facts",
    "news_wording": "news items' added clauses",
}
STRUCTURE_NOUNS = {
    **dict.fromkeys(("turns", *TURN_FEATURES), "user turns"),
    **dict.fromkeys(("sessions", *SESSION_FEATURES), "sessions"),
}


def _percent(share: float) -> str:
    text = f"{share * 100:.1f}".removesuffix(".0")
    return f"{text}%"


def ngram_check(result: ExclusiveNgrams, settings: AuditSettings) -> AuditCheck:
    limit = settings.exclusive_ngram_share_max
    value: float | None
    if result.reference_units == 0:
        value, passed, detail = None, True, "no reference turns"
    elif not result.top:
        value, passed = 0.0, True
        detail = f"no n-gram ({settings.ngram_min}-{settings.ngram_max} words) is in 2+ of {result.reference_units} reference exchanges and in no filler"
    else:
        best = result.top[0]
        value, passed = best.share, best.share < limit
        detail = f"'{best.ngram}' covers {_percent(best.share)} of reference turns ({best.units} of {result.reference_units})"
        if not passed:
            detail += f" (>= {_percent(limit)})"
    return AuditCheck(
        name="exclusive_ngram",
        value=value,
        threshold=limit,
        fails_if=">=",
        passed=passed,
        detail=detail,
    )


def classifier_check(score: ClassifierScore, settings: AuditSettings) -> AuditCheck:
    noun = MATERIAL_NOUNS[score.material]
    leans_on = ", ".join(f"'{term}'" for term in score.leans_on)
    return _auc_check(
        score,
        f"classifier_auc_{score.material}",
        settings.classifier_auc_max,
        noun=noun,
        what=noun,
        leans_on=leans_on,
    )


def structure_check(score: ClassifierScore, settings: AuditSettings) -> AuditCheck:
    level = score.material.removeprefix("structure_")
    noun = STRUCTURE_NOUNS[level]
    what = (
        f"every structural feature of {noun}"
        if level in ("turns", "sessions")
        else f"{level} of {noun}"
    )
    return _auc_check(
        score,
        f"structure_auc_{level}",
        settings.structure_auc_max,
        noun=noun,
        what=what,
        leans_on=", ".join(score.leans_on[:3]),
        unmeasured_prefix=f"{what}: ",
    )


def _auc_check(
    score: ClassifierScore,
    name: str,
    limit: float,
    *,
    noun: str,
    what: str,
    leans_on: str,
    unmeasured_prefix: str = "",
) -> AuditCheck:
    """A classifier's AUC held to ``limit`` (fails above it); passes when it cannot be measured."""
    counts = f"{score.positives} reference vs {score.negatives} other {noun}"
    if score.auc is None:
        detail = f"{unmeasured_prefix}not measurable: {counts}, {score.scheme}"
        return AuditCheck(
            name=name, value=None, threshold=limit, fails_if=">", passed=True, detail=detail
        )
    passed = score.auc <= limit
    detail = (
        f"{what} AUC {score.auc:.3f}"
        + ("" if passed else f" (> {limit:g})")
        + f"; {score.scheme}; {counts}"
        + (f"; leans on {leans_on}" if leans_on else "")
    )
    return AuditCheck(
        name=name, value=score.auc, threshold=limit, fails_if=">", passed=passed, detail=detail
    )


def _reported(
    name: str,
    value: float | None,
    detail: str,
    *,
    target: str | None = None,
    on_target: bool | None = None,
) -> AuditCheck:
    """A check for the dataset card alone: no threshold, so it never fails (a target only reports)."""
    return AuditCheck(
        name=name,
        value=value,
        threshold=None,
        passed=True,
        detail=detail,
        target=target,
        on_target=on_target,
    )


def leakage_checks(result: Leakage, settings: AuditSettings) -> list[AuditCheck]:
    exact = (
        ""
        if result.bm25_recall_exact is None
        else f"; all references found for {_percent(result.bm25_recall_exact)} of queries"
    )
    dense = (
        f"query-only (dense) recall, provenance judge, from the validation table ({result.dense_queries} queries)"
        if result.dense_recall is not None
        else "no query-only provenance rows in the validation table"
    )
    chance = (
        ""
        if result.chance_recall is None
        else f"; {result.chance_recall:.3g} by chance ({result.k} facts drawn at random)"
    )
    low, high = settings.query_only_recall_min, settings.query_only_recall_max
    shared = (
        f"content words a reference shares with its query: max {result.shared_words_max}; "
        f"{result.references_sharing_3_plus} of {result.references} references share {SHARED_WORDS_NOTED} or more"
    )
    return [
        _reported(
            "bm25_query_only_recall",
            result.bm25_recall,
            f"BM25 on the query text, top {result.k} of the memory on the query date, {result.queries} queries{exact}{chance}",
        ),
        _reported(
            "dense_query_only_recall",
            result.dense_recall,
            dense + chance,
            target=f"{low:g}–{high:g}",
            on_target=None if result.dense_recall is None else low <= result.dense_recall <= high,
        ),
        _reported("shared_content_words", result.shared_words_mean, shared),
    ]


def diversity_checks(result: Diversity, settings: AuditSettings) -> list[AuditCheck]:
    role = f"{result.role}_turns"
    distinct = (
        f"distinct-2 {result.distinct_2_sample:.3f} on a sample of {result.sample_words} words (the value: "
        f"comparable across dataset sizes); distinct-1/2/3 {result.distinct_1:.3f} / {result.distinct_2:.3f} / "
        f"{result.distinct_3:.3f} over all {result.turns} turns"
    )
    # The targets are for what the user says; the assistant's turns are reported only.
    targeted = result.role == Role.USER.value
    repeated = f"of {result.sentences} sentences, share in a sentence seen {settings.repeated_sentence_min}+ times"
    if result.most_repeated:
        top = result.most_repeated[0]
        repeated += f"; most repeated: '{top.sentence}' x{top.count}"
    return [
        _reported(
            f"distinct_n_{role}",
            result.distinct_2_sample,
            distinct,
            target=f"≥ {settings.distinct_2_min:g}" if targeted else None,
            on_target=result.distinct_2_sample >= settings.distinct_2_min if targeted else None,
        ),
        _reported(
            f"repeated_sentences_{role}",
            result.repeated_sentence_share,
            repeated,
            target=f"≤ {settings.repeated_sentence_share_max:g}" if targeted else None,
            on_target=(
                result.repeated_sentence_share <= settings.repeated_sentence_share_max
                if targeted
                else None
            ),
        ),
    ]


def _listed(issues: Sequence[ReferenceIssue], total: int) -> str:
    named = ", ".join(f"{i.reference_id} of {i.query_id} ({i.detail})" for i in issues[:3])
    more = f" and {total - 3} more" if total > 3 else ""
    return f": {named}{more}" if named else ""


def _at_most(
    name: str, count: int, limit: int, detail: str, issues: Sequence[ReferenceIssue]
) -> AuditCheck:
    """A gate on a count of references: it fails above ``limit``, and then names the first few."""
    passed = count <= limit
    if not passed:
        detail += f" (> {limit})" + _listed(issues, count)
    return AuditCheck(
        name=name, value=count, threshold=limit, fails_if=">", passed=passed, detail=detail
    )


def ground_truth_checks(result: GroundTruth, settings: AuditSettings) -> list[AuditCheck]:
    uncovered = f"{result.uncovered} of {result.references} references have no credited fact in memory on their query date"
    stale = f"{result.stale} of {result.references} references expired before their query date"
    reasked = (
        f"{result.recovered_by_reask} of {result.covered} covered references were credited only "
        "after an extraction that left them unquoted was asked again"
    )
    return [
        _at_most(
            "uncovered_references",
            result.uncovered,
            settings.uncovered_max,
            uncovered,
            result.uncovered_references,
        ),
        _at_most(
            "stale_references", result.stale, settings.stale_max, stale, result.stale_references
        ),
        _reported("references_recovered_by_reask", result.recovered_by_reask, reasked),
    ]
