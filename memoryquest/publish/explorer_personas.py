"""The explorer's data file of each persona: its profile, its queries with their references,
timeline and every retrieval with each judge's verdicts, its sessions, facts and rejected
candidates, from rows grouped and sorted so the same dataset gives the same bytes."""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from memoryquest.contracts import (
    Fact,
    JudgeKind,
    Persona,
    Query,
    RejectedCandidate,
    RetrievalMethod,
    Session,
    Timeline,
    ValidationResult,
)
from memoryquest.dataset import GeneratedDataset
from memoryquest.pgr.baselines import BASELINE_METHODS

FORMAT_VERSION = 1
_PERSONA_FILE = re.compile(r"^[a-z]_[0-9a-f]{16}$")
_DIGITS = 4  # cosines, γ and recall are rounded to this many decimals

_METHOD_ORDER = [
    m.value for m in (RetrievalMethod.QUERY_ONLY, RetrievalMethod.PGR_COT, RetrievalMethod.PGR_TOT)
]
_BASELINE_ORDER = [m.value for m in BASELINE_METHODS]
_JUDGE_ORDER = [j.value for j in (JudgeKind.PROVENANCE, JudgeKind.LLM, JudgeKind.EMBEDDING)]


class ExplorerError(ValueError):
    pass


def rounded(value: float | None) -> float | None:
    return None if value is None else round(float(value), _DIGITS)


def _natural(text: str) -> tuple[object, ...]:
    """'user10' after 'user9'."""
    return tuple(int(part) if part.isdigit() else part for part in re.split(r"(\d+)", text))


def _method_key(row: ValidationResult) -> str:
    return (
        row.method.value
        if row.baseline_for is None
        else f"{row.method.value}@{row.baseline_for.value}"
    )


def _method_sort(key: str) -> tuple[int, int, str]:
    method, _, target = key.partition("@")
    if not target:
        rank = _METHOD_ORDER.index(method) if method in _METHOD_ORDER else len(_METHOD_ORDER)
        return (0, rank, method)
    target_rank = _METHOD_ORDER.index(target) if target in _METHOD_ORDER else len(_METHOD_ORDER)
    method_rank = (
        _BASELINE_ORDER.index(method) if method in _BASELINE_ORDER else len(_BASELINE_ORDER)
    )
    return (1 + target_rank, method_rank, key)


def _judge_sort(judge: str) -> tuple[int, str]:
    return (_JUDGE_ORDER.index(judge) if judge in _JUDGE_ORDER else len(_JUDGE_ORDER), judge)


def _about(persona: Persona | None) -> str:
    if persona is None:
        return ""
    d = persona.demographics
    parts = [d.age, d.gender, d.employment_status, d.reside_country]
    return " · ".join(p for p in parts if p)


def _persona_payload(persona: Persona | None, persona_id: str) -> dict[str, Any]:
    if persona is None:
        return {
            "id": persona_id,
            "user": persona_id,
            "source": None,
            "demographics": {},
            "interests": [],
            "affinities": [],
            "interactions": [],
        }
    return {
        "id": persona.persona_id,
        "user": persona.source_user_id,
        "source": persona.source.value,
        "demographics": persona.demographics.model_dump(mode="json", exclude_none=True),
        "interests": [d.value for d in persona.interests],
        "affinities": [[a.domain.value, a.name, a.values] for a in persona.affinities],
        "interactions": [[i.domain.value, i.summary] for i in persona.interactions],
    }


def _fact_refs(facts: Sequence[Fact]) -> Callable[[str], int | str]:
    """A fact id as its position in the persona's ``facts`` list (the id itself when it is not there)."""
    position = {fact.fid: number for number, fact in enumerate(facts)}

    def fact_ref(fid: str) -> int | str:
        return position.get(fid, fid)

    return fact_ref


def _verdicts(
    row: ValidationResult, query: Query, fact_ref: Callable[[str], int | str]
) -> list[list[Any] | None]:
    """One ``[found, reason, supporting facts]`` per reference of the query, in its order (null when not judged)."""
    by_reference = {j.reference_id: j for j in row.judgements}
    verdicts: list[list[Any] | None] = []
    for reference in query.references:
        judgement = by_reference.get(reference.reference_id)
        verdicts.append(
            None
            if judgement is None
            else [
                judgement.found,
                judgement.reason,
                [fact_ref(f) for f in judgement.supporting_fids],
            ]
        )
    return verdicts


def _query_detail(
    query: Query,
    timeline: Timeline | None,
    results: list[ValidationResult],
    fact_ref: Callable[[str], int | str],
) -> dict[str, Any]:
    groups: dict[str, list[ValidationResult]] = defaultdict(list)
    for row in results:
        groups[_method_key(row)].append(row)
    retrievals = []
    for key in sorted(groups, key=_method_sort):
        rows = sorted(groups[key], key=lambda r: (_judge_sort(r.judge.value), r.result_id))
        first = rows[0]
        retrieved = [fact_ref(f) for f in first.retrieved_fids]
        steps = [
            [iteration.iteration, step.step_id, step.parent, step.action, len(step.retrieved_fids)]
            for iteration in first.iterations
            for step in iteration.steps
        ]
        judged = []
        for row in rows:
            entry: dict[str, Any] = {
                "judge": row.judge.value,
                "recall": rounded(row.recall),
                "exact": row.recall_exact,
                "ndcg": rounded(row.ndcg),
                "verdicts": _verdicts(row, query, fact_ref),
            }
            if row.retrieved_fids != first.retrieved_fids:
                entry["retrieved"] = [fact_ref(f) for f in row.retrieved_fids]
            judged.append(entry)
        retrieval: dict[str, Any] = {
            "key": key,
            "budget": first.budget,
            "memory_size": first.memory_size,
            "memory_as_of": first.memory_as_of.isoformat(),
            "retrieved": retrieved,
            "judges": judged,
        }
        if first.augmented_query:
            retrieval["augmented_query"] = first.augmented_query
        if first.summary:
            retrieval["summary"] = first.summary
        if steps:
            retrieval["steps"] = steps
        retrievals.append(retrieval)
    return {
        "id": query.query_id,
        "reasoning": query.reasoning,
        "embedder": query.embedder,
        "references": [
            {
                "id": r.reference_id,
                "date": r.date.isoformat(),
                "text": r.text,
                "domain": r.domain.value,
                "cosine": rounded(r.cosine),
                "valid_until": r.valid_until.isoformat() if r.valid_until else None,
                "rationale": r.rationale,
                "relevance": r.relevance,
            }
            for r in query.references
        ],
        "timeline": None
        if timeline is None
        else {
            "id": timeline.timeline_id,
            "events": [
                {
                    "id": e.event_id,
                    "date": e.date.isoformat(),
                    "domain": e.domain.value,
                    "kind": e.kind.value,
                    "description": e.description,
                    "reference_id": e.reference_id,
                }
                for e in sorted(timeline.events, key=lambda e: (e.date, e.event_id))
            ],
        },
        "retrievals": retrievals,
    }


def _session_payload(session: Session) -> dict[str, Any]:
    return {
        "id": session.session_id,
        "query_id": session.query_id,
        "event_id": session.event_id,
        "date": session.date.isoformat(),
        "domain": session.domain.value,
        "position": session.position,
        "reference_id": session.reference_id,
        "reference_turns": session.reference_turn_indices,
        "spans": [[s.turn_index, s.start, s.end] for s in session.reference_spans],
        "turns": [[t.role.value, t.content] for t in session.turns],
    }


def _fact_payload(fact: Fact) -> dict[str, Any]:
    payload: dict[str, Any] = {
        "id": fact.fid,
        "info": fact.info,
        "type": fact.type.value,
        "status": fact.status.value,
        "frequency": fact.frequency,
        "created_on": fact.created_on.isoformat(),
        "updated_on": fact.updated_on.isoformat(),
        "sessions": fact.session_ids,
        "references": fact.source_reference_ids,
        "revisions": len(fact.revisions),
    }
    if fact.merged_into:
        payload["merged_into"] = fact.merged_into
    if fact.merged_fids:
        payload["merged"] = fact.merged_fids
    if fact.retired_on:
        payload["retired_on"] = fact.retired_on.isoformat()
    return payload


def _rejected_payload(row: RejectedCandidate) -> dict[str, Any]:
    return {
        "id": row.rejected_id,
        "stage": row.stage,
        "reason": row.reason.value,
        "detail": row.detail,
        "gamma": rounded(row.gamma),
    }


def _group(rows: Iterable[Any]) -> dict[str, list[Any]]:
    grouped: dict[str, list[Any]] = defaultdict(list)
    for row in rows:
        grouped[row.persona_id].append(row)
    return grouped


class PersonaTables:
    """The dataset's rows grouped the way the explorer reads them, in a fixed order."""

    def __init__(self, dataset: GeneratedDataset) -> None:
        self.personas = {p.persona_id: p for p in dataset.personas}
        self.queries = _group(dataset.queries)
        self.sessions = _group(dataset.sessions)
        self.facts = _group(dataset.facts)
        self.rejected = _group(dataset.rejected)
        self.timelines = {
            t.query_id: t for t in sorted(dataset.timelines, key=lambda t: t.timeline_id)
        }
        self.results: dict[str, list[ValidationResult]] = defaultdict(list)
        for row in dataset.validation:
            self.results[row.query_id].append(row)
        self.method_keys = sorted({_method_key(r) for r in dataset.validation}, key=_method_sort)
        self.judges = sorted({r.judge.value for r in dataset.validation}, key=_judge_sort)
        ids = (
            set(self.personas)
            | set(self.queries)
            | set(self.sessions)
            | set(self.facts)
            | set(self.rejected)
        )
        for persona_id in ids:
            if not _PERSONA_FILE.match(persona_id):
                raise ExplorerError(
                    f"persona id {persona_id!r} is not a valid id; cannot name its data file"
                )
        self.persona_ids = sorted(ids, key=self._order)

    def _order(self, persona_id: str) -> tuple[object, ...]:
        persona = self.personas.get(persona_id)
        return (_natural(persona.source_user_id) if persona is not None else (), persona_id)

    def persona(self, persona_id: str) -> tuple[dict[str, Any], dict[str, Any]]:
        """(the persona's entry in the index, the payload of its data file)."""
        persona = self.personas.get(persona_id)
        persona_queries = sorted(
            self.queries.get(persona_id, []), key=lambda q: (q.rank, q.query_id)
        )
        persona_facts = sorted(self.facts.get(persona_id, []), key=lambda f: f.fid)
        persona_sessions = sorted(
            self.sessions.get(persona_id, []), key=lambda s: (s.position, s.date, s.session_id)
        )
        persona_rejected = sorted(self.rejected.get(persona_id, []), key=lambda r: r.rejected_id)
        fact_ref = _fact_refs(persona_facts)
        query_rows = []
        details = []
        for query in persona_queries:
            results = sorted(self.results.get(query.query_id, []), key=lambda r: r.result_id)
            recall: dict[str, list[float | None]] = {}
            for judge in self.judges:
                by_key = {_method_key(r): r.recall for r in results if r.judge.value == judge}
                recall[judge] = [rounded(by_key.get(key)) for key in self.method_keys]
            query_rows.append(
                {
                    "id": query.query_id,
                    "text": query.text,
                    "date": query.query_date.isoformat(),
                    "domain": query.domain.value,
                    "rank": query.rank,
                    "gamma": rounded(query.gamma),
                    "cosines": [rounded(r.cosine) for r in query.references],
                    "difficulty": rounded(query.difficulty),
                    "recall": recall,
                }
            )
            details.append(
                _query_detail(query, self.timelines.get(query.query_id), results, fact_ref)
            )
        profile = _persona_payload(persona, persona_id)
        entry = {
            "id": persona_id,
            "user": profile["user"],
            "source": profile["source"],
            "about": _about(persona),
            "sessions": len(persona_sessions),
            "facts": len(persona_facts),
            "rejected": len(persona_rejected),
            "queries": query_rows,
        }
        payload = {
            "format": FORMAT_VERSION,
            "persona": profile,
            "queries": details,
            "sessions": [_session_payload(s) for s in persona_sessions],
            "facts": [_fact_payload(f) for f in persona_facts],
            "rejected": [_rejected_payload(r) for r in persona_rejected],
        }
        return entry, payload
