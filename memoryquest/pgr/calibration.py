"""How often each retrieval judge is wrong, measured on the run's own ground truth.

A recall figure is only as good as the judge behind it. The provenance judge is
exact (a fact descends from the reference or it does not), so the other judges
can be put to the test on items whose answer is known, for every query:

* ``right`` — a fact credited to the reference (it was extracted from the
  sentence that says it): a judge that rejects it under-counts recall;
* ``other_query`` — a fact of the same user credited to a reference of another
  query: plainly about something else;
* ``near_miss`` — a fact of the same user from a session in the reference's own
  domain, credited to none of this query's references: the same topic, other
  content, the wrong answer a lenient judge is most likely to accept.

Each fact is judged alone, as a one-fact retrieval, by the same judge code
that scores the methods (the model judge reads every calibration fact of a
query in one call, as it reads every method's retrieval). The report gives each
judge's false-accept rate (over both kinds of wrong fact, and each kind apart)
and false-reject rate with Wilson 95% intervals, and Cohen's κ between judges
over the verdicts they both gave on the methods' retrievals.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence

from memoryquest.contracts import Domain, JudgeKind, Query, ValidationResult
from memoryquest.llm.client import LLMOutputError, ModelClient
from memoryquest.memory.snapshot import MemoryItem
from memoryquest.pgr.calibration_contracts import (
    CALIBRATION_SUFFIX,
    CalibrationItem,
    JudgeAgreementRow,
    JudgeCalibrationReport,
    JudgeErrorRow,
    wilson_interval,
)
from memoryquest.pgr.judges import Judge
from memoryquest.pgr.metrics import verdicts_by_reference
from memoryquest.pgr.retrieval import MemoryIndex

__all__ = [
    "CALIBRATION_SUFFIX",
    "CalibrationItem",
    "JudgeAgreementRow",
    "JudgeCalibrationReport",
    "JudgeErrorRow",
    "calibration_items",
    "calibration_report",
    "cohen_kappa",
    "judge_calibration",
    "wilson_interval",
]

RIGHT, OTHER_QUERY, NEAR_MISS = "right", "other_query", "near_miss"
KINDS = (RIGHT, OTHER_QUERY, NEAR_MISS)


def _pick(candidates: Sequence[MemoryItem], salt: str, count: int) -> list[MemoryItem]:
    """``count`` of ``candidates`` in an order drawn from their ids: reproducible, not the store's."""

    def draw(item: MemoryItem) -> str:
        return hashlib.sha256(f"{salt}\x1f{item.fid}".encode()).hexdigest()

    return sorted(candidates, key=draw)[:count]


def calibration_items(
    query: Query,
    snapshot: Sequence[MemoryItem],
    session_domains: Mapping[str, Domain],
    per_kind: int,
) -> list[tuple[str, str, MemoryItem]]:
    """(reference id, kind, fact) triples for one query, at most ``per_kind`` of each kind."""
    own = {r.reference_id for r in query.references}
    picked: list[tuple[str, str, MemoryItem]] = []
    for reference in query.references:
        right = [i for i in snapshot if reference.reference_id in i.source_reference_ids]
        unrelated = [i for i in snapshot if not own & set(i.source_reference_ids)]
        other = [i for i in unrelated if i.source_reference_ids]
        near = [
            i
            for i in unrelated
            if not i.source_reference_ids
            and reference.domain in {session_domains.get(s) for s in i.session_ids}
        ]
        for kind, pool in ((RIGHT, right), (OTHER_QUERY, other), (NEAR_MISS, near)):
            salt = f"{kind}\x1f{reference.reference_id}"
            picked += [(reference.reference_id, kind, i) for i in _pick(pool, salt, per_kind)]
    return picked


async def judge_calibration(
    query: Query,
    index: MemoryIndex,
    judges: Sequence[Judge],
    client: ModelClient,
    session_domains: Mapping[str, Domain],
    per_kind: int,
) -> list[CalibrationItem]:
    """Every calibration fact of ``query`` judged alone by each judge but the exact one."""
    triples = calibration_items(query, index.items, session_domains, per_kind)
    facts = list({item.fid: item for _, _, item in triples}.values())
    if not facts:
        return []
    position = {item.fid: n for n, item in enumerate(facts)}
    order = {r.reference_id: n for n, r in enumerate(query.references)}
    verdicts: list[CalibrationItem] = []
    for judge in judges:
        if judge.kind is JudgeKind.PROVENANCE:
            continue  # the ground truth itself
        per_set = await judge.judge_sets(query, [[item] for item in facts], index, client)
        verdicts += [
            CalibrationItem(
                query_id=query.query_id,
                reference_id=reference_id,
                fid=item.fid,
                kind=kind,
                judge=judge.kind,
                accepted=per_set[position[item.fid]][order[reference_id]].found,
            )
            for reference_id, kind, item in triples
        ]
    return verdicts


def cohen_kappa(first: Sequence[bool], second: Sequence[bool]) -> float | None:
    """Agreement beyond chance of two judges' yes/no verdicts on the same items."""
    n = len(first)
    if n == 0 or n != len(second):
        raise ValueError("cohen_kappa needs two equally long, non-empty lists of verdicts")
    observed = sum(a == b for a, b in zip(first, second, strict=True)) / n
    yes_first, yes_second = sum(first) / n, sum(second) / n
    expected = yes_first * yes_second + (1 - yes_first) * (1 - yes_second)
    return None if expected == 1.0 else (observed - expected) / (1 - expected)


def _rate(part: int, whole: int) -> float:
    return part / whole if whole else 0.0


def _error_row(judge: JudgeKind, items: Sequence[CalibrationItem]) -> JudgeErrorRow:
    by_kind = {kind: [i for i in items if i.kind == kind] for kind in KINDS}
    rejected_right = sum(not i.accepted for i in by_kind[RIGHT])
    accepted_other = sum(i.accepted for i in by_kind[OTHER_QUERY])
    accepted_near = sum(i.accepted for i in by_kind[NEAR_MISS])
    wrong = len(by_kind[OTHER_QUERY]) + len(by_kind[NEAR_MISS])
    accept_low, accept_high = wilson_interval(accepted_other + accepted_near, wrong)
    reject_low, reject_high = wilson_interval(rejected_right, len(by_kind[RIGHT]))
    return JudgeErrorRow(
        judge=judge,
        right=len(by_kind[RIGHT]),
        rejected_right=rejected_right,
        other_query=len(by_kind[OTHER_QUERY]),
        accepted_other_query=accepted_other,
        near_miss=len(by_kind[NEAR_MISS]),
        accepted_near_miss=accepted_near,
        false_accept=_rate(accepted_other + accepted_near, wrong),
        false_accept_low=accept_low,
        false_accept_high=accept_high,
        false_reject=_rate(rejected_right, len(by_kind[RIGHT])),
        false_reject_low=reject_low,
        false_reject_high=reject_high,
    )


def agreement_rows(results: Sequence[ValidationResult]) -> list[JudgeAgreementRow]:
    """Each pair of judges over the reference verdicts both gave on the same retrieval."""
    found = verdicts_by_reference(results)
    kinds = [k for k in JudgeKind if any(k in v for v in found.values())]
    rows = []
    for n, first in enumerate(kinds):
        for second in kinds[n + 1 :]:
            both = [v for v in found.values() if first in v and second in v]
            if not both:
                continue
            a, b = [v[first] for v in both], [v[second] for v in both]
            rows.append(
                JudgeAgreementRow(
                    first=first,
                    second=second,
                    verdicts=len(both),
                    agreement=sum(x == y for x, y in zip(a, b, strict=True)) / len(both),
                    kappa=cohen_kappa(a, b),
                )
            )
    return rows


def calibration_report(
    items: Sequence[CalibrationItem],
    results: Sequence[ValidationResult],
    per_kind: int,
    unjudged: Sequence[str] = (),
) -> JudgeCalibrationReport:
    judges = [k for k in JudgeKind if any(i.judge is k for i in items)]
    return JudgeCalibrationReport(
        facts_per_kind=per_kind,
        queries=len({i.query_id for i in items}),
        judges=[_error_row(k, [i for i in items if i.judge is k]) for k in judges],
        agreement=agreement_rows(results),
        unjudged=list(unjudged),
    )


async def calibrate_queries(
    queries: Sequence[Query],
    indexes: Mapping[str, MemoryIndex],
    judges: Sequence[Judge],
    client: ModelClient,
    session_domains: Mapping[str, Domain],
    per_kind: int,
) -> tuple[list[CalibrationItem], list[str]]:
    """Every query's calibration verdicts; a query the model judge cannot answer is named, not fatal."""
    items: list[CalibrationItem] = []
    unjudged: list[str] = []
    for query in queries:
        try:
            items += await judge_calibration(
                query, indexes[query.query_id], judges, client, session_domains, per_kind
            )
        except LLMOutputError as exc:
            unjudged.append(f"query {query.query_id}: {exc}")
    return items, unjudged
