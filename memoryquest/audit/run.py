"""``audit_dataset``: every audit measurement on one dataset, turned into pass/fail checks.

The audit looks only at the published tables (sessions, facts, queries,
validation), never at how they were generated, so it applies to any backend's
output. Gates (a threshold in :class:`~memoryquest.settings.AuditSettings`)
decide ``passed``; the other checks are reported for the dataset card, some
against a target (dense query-only recall in a band, varied user turns) that
a usable benchmark meets: a missed target is listed, and fails nothing.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from memoryquest.audit.detectability import (
    ClassifierScore,
    ExclusiveNgrams,
    GroupedSplit,
    Material,
    OutOfFold,
    embedding_classifier,
    exclusive_ngrams,
    grouped_split,
    structure_classifier,
    text_classifier,
)
from memoryquest.audit.diversity import Diversity, diversity
from memoryquest.audit.ground_truth import GroundTruth, ReferenceIssue, ground_truth
from memoryquest.audit.leakage import SHARED_WORDS_NOTED, Leakage, leakage
from memoryquest.audit.material import Exchange, exchanges, session_halves
from memoryquest.audit.report import AuditCheck, AuditReport, DatasetSize, FilterSummary
from memoryquest.audit.structure import (
    SESSION_FEATURES,
    TURN_FEATURES,
    query_domains,
    session_units,
    turn_units,
)
from memoryquest.audit.wording import news_units
from memoryquest.contracts import Fact, RejectedCandidate, Role, Stage
from memoryquest.dataset import GeneratedDataset
from memoryquest.memory.snapshot import MemoryItem, memory_as_of
from memoryquest.settings import AuditSettings, Settings

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
FILTERING_KEY = "filtering"
"""Where a dataset's manifest (``audit``) records the tell filter that made it (:mod:`memoryquest.audit.filtering`)."""


class AuditError(ValueError):
    """The dataset or the settings do not allow an audit."""


def _percent(share: float) -> str:
    text = f"{share * 100:.1f}".removesuffix(".0")
    return f"{text}%"


@dataclass(frozen=True)
class ScoredMaterial:
    """One classifier's out-of-fold scores, each row with the references it carries (none for the rest)."""

    material: str
    out_of_fold: OutOfFold
    references: list[tuple[str, ...]]  # one per row of the out-of-fold scores, same order


def standing_references(dataset: GeneratedDataset) -> set[str]:
    """The references of the dataset's queries: the ground truth (a withdrawn query's are not)."""
    return {r.reference_id for q in dataset.queries for r in q.references}


class _Grouping:
    """Users as groups; a one-user dataset is split into early and late halves of its history."""

    def __init__(self, dataset: GeneratedDataset) -> None:
        users = {s.persona_id for s in dataset.sessions} | {f.persona_id for f in dataset.facts}
        self.within = len(users) == 1
        self.halves = session_halves(dataset.sessions) if self.within else {}

    def __call__(self, persona_id: str, session_id: str | None) -> str:
        return self.halves.get(session_id or "", "early") if self.within else persona_id

    def split(
        self, labels: Sequence[bool], owners: Sequence[tuple[str, str | None]], seed: int
    ) -> GroupedSplit:
        """The classifiers' split of rows labelled ``labels``, each of ``(persona_id, session_id)``."""
        groups = [self(persona_id, session_id) for persona_id, session_id in owners]
        return grouped_split(labels, groups, within_user=self.within, seed=seed)


def _scored(
    material: str, out_of_fold: OutOfFold | None, references: Sequence[tuple[str, ...]]
) -> list[ScoredMaterial]:
    if out_of_fold is None:
        return []
    return [ScoredMaterial(material, out_of_fold, [references[i] for i in out_of_fold.rows])]


def _classifiers(
    units: Sequence[Exchange], dataset: GeneratedDataset, standing: set[str], seed: int
) -> tuple[list[ClassifierScore], list[ScoredMaterial]]:
    """One score per text material, and the out-of-fold scores the filter reads (user turns, facts)."""
    group = _Grouping(dataset)

    def exchange_score(
        material: Material, chosen: Sequence[Exchange], text: Callable[[Exchange], str]
    ) -> tuple[ClassifierScore, OutOfFold | None]:
        """The score of one side (``text``) of the ``chosen`` exchanges."""
        labels = [u.reference for u in chosen]
        split = group.split(labels, [(u.persona_id, u.session_id) for u in chosen], seed)
        return text_classifier(material, [text(u) for u in chosen], split)

    facts = dataset.facts
    fact_references = [tuple(r for r in f.source_reference_ids if r in standing) for f in facts]
    user_turns, user_scores = exchange_score("user_turns", units, lambda u: u.user)
    replies, _ = exchange_score(
        "assistant_turns", [u for u in units if u.assistant], lambda u: u.assistant
    )
    fact_owners = [(f.persona_id, f.session_ids[0] if f.session_ids else None) for f in facts]
    fact_split = group.split([bool(refs) for refs in fact_references], fact_owners, seed)
    fact_score, fact_scores = text_classifier("facts", [f.info for f in facts], fact_split)
    turn_references = [(u.reference_id,) if u.reference_id else () for u in units]
    return [user_turns, replies, fact_score], [
        *_scored("user_turns", user_scores, turn_references),
        *_scored("facts", fact_scores, fact_references),
    ]


def _wording(
    dataset: GeneratedDataset, standing: set[str], seed: int
) -> tuple[ClassifierScore, list[ScoredMaterial]]:
    """Reference news items' added clauses against the filler news items' (:mod:`memoryquest.audit.wording`),
    on the local embedder's vectors."""
    from memoryquest.llm.factory import shared_local_embedder

    group = _Grouping(dataset)
    texts = {r.reference_id: r.text for q in dataset.queries for r in q.references}
    units = news_units(dataset.sessions, dataset.timelines, texts, standing)
    clauses = [u.clause for u in units]
    labels = [u.reference_id is not None for u in units]
    split = group.split(labels, [(u.persona_id, u.session_id) for u in units], seed)
    vectors = shared_local_embedder().embed_sync(clauses)
    score, out_of_fold = embedding_classifier("news_wording", clauses, vectors, split)
    references = [(u.reference_id,) if u.reference_id else () for u in units]
    return score, _scored("news_wording", out_of_fold, references)


def _structure(
    dataset: GeneratedDataset, standing: set[str], seed: int
) -> tuple[list[ClassifierScore], list[ScoredMaterial]]:
    """Structural features of user turns and of sessions, all together and one at a time; the
    out-of-fold scores of the two combined classifiers go to the filter."""
    group = _Grouping(dataset)
    domains = query_domains(dataset.queries, dataset.rejected)
    levels = [
        ("turns", TURN_FEATURES, turn_units(dataset.sessions, standing)),
        (
            "sessions",
            SESSION_FEATURES,
            session_units(dataset.sessions, dataset.timelines, domains, standing),
        ),
    ]
    scores: list[ClassifierScore] = []
    scored: list[ScoredMaterial] = []
    for level, names, units in levels:
        # One split for the level: every feature set of it is scored on the same rows and folds.
        split = group.split(
            [u.reference for u in units], [(u.persona_id, u.session_id) for u in units], seed
        )
        references = [(u.reference_id,) if u.reference_id else () for u in units]
        for material, chosen in [
            (f"structure_{level}", names),
            *((f"structure_{n}", (n,)) for n in names),
        ]:
            features = [{n: u.features[n] for n in chosen} for u in units]
            score, out_of_fold = structure_classifier(material, features, split)
            scores.append(score)
            if len(chosen) > 1:
                scored += _scored(material, out_of_fold, references)
    return scores, scored


def _memories(dataset: GeneratedDataset) -> dict[str, list[MemoryItem]]:
    """Query id -> the memory of its user as it stood on the query date."""
    by_persona: dict[str, list[Fact]] = {}
    for fact in dataset.facts:
        by_persona.setdefault(fact.persona_id, []).append(fact)
    return {
        q.query_id: memory_as_of(by_persona.get(q.persona_id, []), q.query_date)
        for q in dataset.queries
    }


# --------------------------------------------------------------------------- checks


def _ngram_check(result: ExclusiveNgrams, settings: AuditSettings) -> AuditCheck:
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


def _classifier_check(score: ClassifierScore, settings: AuditSettings) -> AuditCheck:
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


def _structure_check(score: ClassifierScore, settings: AuditSettings) -> AuditCheck:
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


def _leakage_checks(result: Leakage, settings: AuditSettings) -> list[AuditCheck]:
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


def _diversity_checks(result: Diversity, settings: AuditSettings) -> list[AuditCheck]:
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


def _ground_truth_checks(result: GroundTruth, settings: AuditSettings) -> list[AuditCheck]:
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


# --------------------------------------------------------------------------- entry point


def reasked_references(rejected: Sequence[RejectedCandidate]) -> set[str]:
    """The references some extraction attempt left unquoted (its rejection names them)."""
    reasked: set[str] = set()
    for row in rejected:
        if row.stage is Stage.MEMORY:
            payload = json.loads(row.payload_json)
            reasked.update(payload.get("unquoted_reference_ids", ()))
    return reasked


@dataclass(frozen=True)
class ScoredAudit:
    """An audit's report, and the out-of-fold scores behind its classifiers (what the filter reads)."""

    report: AuditReport
    scored: list[ScoredMaterial]


def recorded_filtering(dataset: GeneratedDataset) -> FilterSummary | None:
    """The tell filter that made ``dataset``, as its manifest records it (None when none did)."""
    audit = dataset.manifest.audit if dataset.manifest is not None else None
    recorded = audit.get(FILTERING_KEY) if isinstance(audit, dict) else None
    return FilterSummary.model_validate(recorded) if isinstance(recorded, dict) else None


def audit_dataset(dataset: GeneratedDataset, settings: Settings) -> AuditReport:
    """Detectability, leakage, diversity and ground-truth checks of ``dataset`` under ``settings.audit``."""
    return audit_with_scores(dataset, settings).report


def audit_with_scores(
    dataset: GeneratedDataset, settings: Settings, *, wording: bool = False
) -> ScoredAudit:
    """:func:`audit_dataset`, with the out-of-fold scores of its classifiers; with ``wording``,
    also the news items' added clauses on the local embedder (what the tell filter reads; it
    embeds a few thousand clauses, so a plain audit leaves it out)."""
    started = time.perf_counter()
    config = settings.audit
    if config.ngram_min > config.ngram_max:
        raise AuditError(
            f"audit.ngram_min ({config.ngram_min}) is above audit.ngram_max ({config.ngram_max})"
        )
    if not dataset.sessions and not dataset.queries:
        raise AuditError("nothing to audit: the dataset has no sessions and no queries")
    standing = standing_references(dataset)
    units = exchanges(dataset.sessions, standing)
    ngram_result = exclusive_ngrams(units, config.ngram_min, config.ngram_max)
    classifiers, scored = _classifiers(units, dataset, standing, settings.seed)
    structure, structure_scored = _structure(dataset, standing, settings.seed)
    if wording:
        wording_score, wording_scored = _wording(dataset, standing, settings.seed)
        classifiers.append(wording_score)
        scored += wording_scored
    memories = _memories(dataset)
    leak = leakage(dataset.queries, memories, dataset.validation, settings.pgr.query_only_k)
    diversities = [
        diversity(
            role.value,
            [t.content for s in dataset.sessions for t in s.turns if t.role is role],
            config.repeated_sentence_min,
        )
        for role in (Role.USER, Role.ASSISTANT)
    ]
    truth = ground_truth(dataset.queries, memories, reasked_references(dataset.rejected))
    checks = [
        _ngram_check(ngram_result, config),
        *(_classifier_check(score, config) for score in classifiers),
        *(_structure_check(score, config) for score in structure),
        *_leakage_checks(leak, config),
        *(check for result in diversities for check in _diversity_checks(result, config)),
        *_ground_truth_checks(truth, config),
    ]
    failures = [f"{c.name}: {c.detail}" for c in checks if not c.passed]
    targets_missed = [
        f"{c.name} {c.value:.3g} (target {c.target})"
        for c in checks
        if c.on_target is False and c.value is not None
    ]
    users = (
        {p.persona_id for p in dataset.personas}
        | {s.persona_id for s in dataset.sessions}
        | {q.persona_id for q in dataset.queries}
    )
    size = DatasetSize(
        users=len(users),
        queries=len(dataset.queries),
        references=sum(len(q.references) for q in dataset.queries),
        sessions=len(dataset.sessions),
        turns=sum(len(s.turns) for s in dataset.sessions),
        facts=len(dataset.facts),
    )
    report = AuditReport(
        passed=not failures,
        failures=failures,
        targets_missed=targets_missed,
        checks=checks,
        size=size,
        exclusive_ngrams=ngram_result,
        classifiers=classifiers,
        structure=structure,
        leakage=leak,
        diversity=diversities,
        ground_truth=truth,
        filtering=recorded_filtering(dataset),
        seconds=round(time.perf_counter() - started, 3),
    )
    return ScoredAudit(report, [*scored, *structure_scored])
