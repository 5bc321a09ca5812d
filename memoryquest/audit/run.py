"""``audit_dataset``: every audit measurement on one dataset, turned into pass/fail checks
(each check and its wording: :mod:`memoryquest.audit.checks`).

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

from memoryquest.audit.checks import (
    classifier_check,
    diversity_checks,
    ground_truth_checks,
    leakage_checks,
    ngram_check,
    structure_check,
)
from memoryquest.audit.detectability import (
    ClassifierScore,
    GroupedSplit,
    Material,
    OutOfFold,
    embedding_classifier,
    exclusive_ngrams,
    grouped_split,
    structure_classifier,
    text_classifier,
)
from memoryquest.audit.diversity import diversity
from memoryquest.audit.ground_truth import ground_truth
from memoryquest.audit.leakage import leakage
from memoryquest.audit.material import Exchange, exchanges, session_halves
from memoryquest.audit.report import AuditReport, DatasetSize, FilterSummary
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
from memoryquest.settings import Settings

FILTERING_KEY = "filtering"
"""Where a dataset's manifest (``audit``) records the tell filter that made it (:mod:`memoryquest.audit.filtering`)."""


class AuditError(ValueError):
    """The dataset or the settings do not allow an audit."""


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
        ngram_check(ngram_result, config),
        *(classifier_check(score, config) for score in classifiers),
        *(structure_check(score, config) for score in structure),
        *leakage_checks(leak, config),
        *(check for result in diversities for check in diversity_checks(result, config)),
        *ground_truth_checks(truth, config),
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
