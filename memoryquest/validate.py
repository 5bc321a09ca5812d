"""Check a generated dataset against every invariant of SPEC §2–3.

``validate_dataset`` returns one :class:`Violation` per broken rule and row;
an empty list means the dataset is sound. Rules are named (``Rule``) so tests
and scripts can match them exactly.

Cosines are recomputed only for queries whose ``embedder`` matches the
embedder passed in: a different embedding model gives different cosines, so
comparing across models would be meaningless. Queries with another embedder
are still checked for internal consistency (γ equals the mean of the stored
cosines, γ within the threshold) and are listed by
:func:`queries_not_recomputed`.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import functools
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from enum import StrEnum
from typing import Any, Protocol, TypeVar

import numpy as np

from memoryquest.contracts import (
    EventKind,
    Query,
    RejectionReason,
    Role,
    Session,
    Timeline,
    TimelineEvent,
)
from memoryquest.dataset import GeneratedDataset
from memoryquest.generation.bounds import count_problem
from memoryquest.memory.coverage import uncovered_references
from memoryquest.settings import Settings
from memoryquest.text import contains_verbatim, shared_content_words


class Rule(StrEnum):
    DUPLICATE_ID = "duplicate_id"
    DANGLING_ID = "dangling_id"
    REFERENCE_COUNT = "reference_count"
    REFERENCE_DATE = "reference_date"
    REFERENCE_DOMAIN = "reference_domain"
    GAMMA_MEAN = "gamma_mean"
    GAMMA_THRESHOLD = "gamma_threshold"
    COSINE_RECOMPUTED = "cosine_recomputed"
    QUERIES_PER_USER = "queries_per_user"
    QUERY_RANK = "query_rank"
    TIMELINE_PER_QUERY = "timeline_per_query"
    EVENT_COUNT = "event_count"
    EVENT_ORDER = "event_order"
    TIMELINE_START = "timeline_start"
    TIMELINE_END = "timeline_end"
    EVENT_KIND = "event_kind"
    REFERENCE_IN_ONE_EVENT = "reference_in_one_event"
    REFERENCE_EVENT_MATCH = "reference_event_match"
    FILLER_CARRIES_REFERENCE = "filler_carries_reference"
    SESSION_PER_EVENT = "session_per_event"
    SESSION_MATCHES_EVENT = "session_matches_event"
    TURN_COUNT = "turn_count"
    TURN_ROLES = "turn_roles"
    REFERENCE_TURN_INDICES = "reference_turn_indices"
    REFERENCE_VERBATIM = "reference_verbatim"
    REFERENCE_LEAK = "reference_leak"
    HISTORY_POSITIONS = "history_positions"
    REFERENCE_COSINE_MAX = "reference_cosine_max"
    REFERENCE_WORD_OVERLAP = "reference_word_overlap"
    REFERENCE_STALE = "reference_stale"
    REFERENCE_SPAN = "reference_span"
    REFERENCE_UNCOVERED = "reference_uncovered"
    FACT_PROVENANCE = "fact_provenance"
    FACT_REFERENCE_CONSISTENCY = "fact_reference_consistency"
    MERGED_FIDS = "merged_fids"


@dataclass(frozen=True)
class Violation:
    table: str
    row_id: str
    rule: Rule
    message: str

    def __str__(self) -> str:
        return f"{self.table} {self.row_id} [{self.rule.value}] {self.message}"


@dataclass(frozen=True)
class EmbeddingFunction:
    """An embedding model by name, callable synchronously (rows L2-normalised)."""

    name: str
    embed: Callable[[list[str]], np.ndarray]

    @classmethod
    def of(cls, backend: Any) -> EmbeddingFunction:
        """From a LocalEmbedder (``embed_sync``), an embedding backend or a ModelClient (async ``embed``)."""
        if hasattr(backend, "embed_sync"):
            return cls(name=backend.name, embed=backend.embed_sync)
        name = getattr(backend, "embedder_name", None) or backend.name

        def run(texts: list[str]) -> np.ndarray:
            async def call() -> np.ndarray:
                if hasattr(backend, "embedder_name"):  # a ModelClient
                    return await backend.embed(texts, stage="validate")
                return await backend.embed(texts)

            # A worker thread has no running loop, so this works inside async callers too.
            with concurrent.futures.ThreadPoolExecutor(max_workers=1) as pool:
                return pool.submit(asyncio.run, call()).result()

        return cls(name=name, embed=run)


def count_within(
    flag: Callable[[Rule, str], None], rule: Rule, n: int, bounds: tuple[int, int], what: str
) -> None:
    """Flag ``rule`` unless ``n`` (of ``what``) lies within ``bounds``, as the stages check it."""
    problem = count_problem(n, bounds, what)
    if problem is not None:
        flag(rule, problem)


class _PersonaRow(Protocol):
    @property
    def persona_id(self) -> str: ...


_PersonaRowT = TypeVar("_PersonaRowT", bound=_PersonaRow)


def persona_row(
    flag: Callable[[Rule, str], None],
    rule: Rule,
    row: _PersonaRowT | None,
    persona_id: str,
    what: str,
) -> _PersonaRowT | None:
    """``row``, which ``what`` names; flags ``rule`` when it does not exist or belongs to another
    persona than ``persona_id`` (returned all the same: the checks after it still apply)."""
    if row is None:
        flag(rule, f"{what} does not exist")
    elif row.persona_id != persona_id:
        flag(rule, f"{what} belongs to another persona")
    return row


def queries_not_recomputed(
    dataset: GeneratedDataset, embedder: EmbeddingFunction | None
) -> list[Query]:
    """Queries whose cosines cannot be recomputed with ``embedder`` (another model, or none given)."""
    return [q for q in dataset.queries if embedder is None or q.embedder != embedder.name]


class _Checker:
    def __init__(
        self, dataset: GeneratedDataset, settings: Settings, embedder: EmbeddingFunction | None
    ) -> None:
        self.d = dataset
        self.g = settings.generation
        self.embedder = embedder
        self.out: list[Violation] = []
        self.personas = {p.persona_id: p for p in dataset.personas}
        # Queries withdrawn as uncovered, or by the audit's tell filter, keep their timeline and
        # sessions in the history.
        withdrawn = [
            Query.model_validate_json(r.payload_json)
            for r in dataset.rejected
            if r.reason in (RejectionReason.UNCOVERED, RejectionReason.TELL)
        ]
        self.queries = {q.query_id: q for q in [*withdrawn, *dataset.queries]}
        self.references = {
            r.reference_id: (q, r) for q in self.queries.values() for r in q.references
        }
        self.sessions = {s.session_id: s for s in dataset.sessions}
        self.facts = {f.fid: f for f in dataset.facts}
        self.events: dict[str, tuple[Timeline, int, TimelineEvent]] = {
            e.event_id: (t, i, e) for t in dataset.timelines for i, e in enumerate(t.events)
        }

    def add(self, table: str, row_id: str, rule: Rule, message: str) -> None:
        self.out.append(Violation(table, row_id, rule, message))

    def row(self, table: str, row_id: str) -> Callable[[Rule, str], None]:
        """:meth:`add` for one row: the checks of that row then name only the rule and the problem."""
        return functools.partial(self.add, table, row_id)

    # ------------------------------------------------------------------ ids

    def unique_ids(self) -> None:
        tables: list[tuple[str, Iterable[str]]] = [
            ("personas", (p.persona_id for p in self.d.personas)),
            ("queries", (q.query_id for q in self.d.queries)),
            ("queries", (r.reference_id for q in self.d.queries for r in q.references)),
            ("timelines", (t.timeline_id for t in self.d.timelines)),
            ("timelines", (e.event_id for t in self.d.timelines for e in t.events)),
            ("sessions", (s.session_id for s in self.d.sessions)),
            ("facts", (f.fid for f in self.d.facts)),
            ("rejected", (r.rejected_id for r in self.d.rejected)),
        ]
        for table, ids in tables:
            seen: set[str] = set()
            for row_id in ids:
                if row_id in seen:
                    self.add(table, row_id, Rule.DUPLICATE_ID, "id occurs more than once")
                seen.add(row_id)

    def persona_exists(self, table: str, row_id: str, persona_id: str) -> None:
        if persona_id not in self.personas:
            self.add(table, row_id, Rule.DANGLING_ID, f"persona_id {persona_id} does not exist")

    def exactly_one(
        self, table: str, row_ids: Iterable[str], counts: Counter[str], rule: Rule, what: str
    ) -> None:
        """Each row of ``table`` must have exactly one of ``what`` (``counts``: row id -> how many)."""
        for row_id in row_ids:
            if counts[row_id] != 1:
                self.add(table, row_id, rule, f"{counts[row_id]} {what}; need exactly one")

    # ------------------------------------------------------------------ queries

    def queries_(self) -> None:
        per_persona: dict[str, list[Query]] = defaultdict(list)
        for q in self.d.queries:
            self.persona_exists("queries", q.query_id, q.persona_id)
            flag_query = self.row("queries", q.query_id)
            per_persona[q.persona_id].append(q)
            count_within(
                flag_query,
                Rule.REFERENCE_COUNT,
                len(q.references),
                (self.g.references_min, self.g.references_max),
                "references",
            )
            for r in q.references:
                if r.date >= q.query_date:
                    flag_query(
                        Rule.REFERENCE_DATE,
                        f"reference {r.reference_id} dated {r.date} is not before the query date {q.query_date}",
                    )
                if r.cosine > self.g.reference_cosine_max + self.g.cosine_tolerance:
                    flag_query(
                        Rule.REFERENCE_COSINE_MAX,
                        f"reference {r.reference_id} has cosine {r.cosine:.4f} > {self.g.reference_cosine_max}",
                    )
                shared = shared_content_words(q.text, r.text)
                if len(shared) > self.g.shared_words_max:
                    flag_query(
                        Rule.REFERENCE_WORD_OVERLAP,
                        f"reference {r.reference_id} shares {len(shared)} content words with the query "
                        f"({', '.join(sorted(shared))}; at most {self.g.shared_words_max})",
                    )
                if r.valid_until is not None and r.valid_until < q.query_date:
                    flag_query(
                        Rule.REFERENCE_STALE,
                        f"reference {r.reference_id} held until {r.valid_until}, before the query date {q.query_date}",
                    )
                if r.domain == q.domain:
                    flag_query(
                        Rule.REFERENCE_DOMAIN,
                        f"reference {r.reference_id} is in the query's own domain {q.domain.value}",
                    )
            if q.references:
                mean = float(np.mean([r.cosine for r in q.references]))
                if abs(mean - q.gamma) > self.g.cosine_tolerance:
                    flag_query(
                        Rule.GAMMA_MEAN,
                        f"gamma {q.gamma:.4f} is not the mean of its cosines ({mean:.4f})",
                    )
            if q.gamma > self.g.gamma_max:
                flag_query(
                    Rule.GAMMA_THRESHOLD,
                    f"gamma {q.gamma:.4f} > {self.g.gamma_max}",
                )
        for persona_id, queries in per_persona.items():
            flag_persona = self.row("queries", persona_id)
            if len(queries) > self.g.queries_per_user:
                flag_persona(
                    Rule.QUERIES_PER_USER,
                    f"persona {persona_id} has {len(queries)} queries; at most {self.g.queries_per_user}",
                )
            # Ranks may have gaps: a query dropped later (no valid timeline) keeps the others' ranks.
            by_rank = sorted(queries, key=lambda q: q.rank)
            ranks = [q.rank for q in by_rank]
            if len(set(ranks)) != len(ranks):
                flag_persona(
                    Rule.QUERY_RANK,
                    f"persona {persona_id} has repeated ranks {ranks}",
                )
            elif any(
                b.gamma < a.gamma - self.g.cosine_tolerance
                for a, b in zip(by_rank, by_rank[1:], strict=False)
            ):
                flag_persona(
                    Rule.QUERY_RANK,
                    f"ranks of persona {persona_id} are not in ascending gamma",
                )
        self.recompute()

    def recompute(self) -> None:
        if self.embedder is None:
            return
        targets = [q for q in self.d.queries if q.embedder == self.embedder.name]
        texts = [t for q in targets for t in (q.text, *(r.text for r in q.references))]
        if not texts:
            return
        vectors = self.embedder.embed(texts)
        row = 0
        for q in targets:
            flag_query = self.row("queries", q.query_id)
            query_vector = vectors[row]
            for offset, r in enumerate(q.references, start=1):
                cosine = float(vectors[row + offset] @ query_vector)
                if abs(cosine - r.cosine) > self.g.cosine_tolerance:
                    flag_query(
                        Rule.COSINE_RECOMPUTED,
                        f"reference {r.reference_id}: stored cosine {r.cosine:.4f}, recomputed {cosine:.4f} with {self.embedder.name}",
                    )
            row += 1 + len(q.references)

    # ------------------------------------------------------------------ timelines

    def timelines_(self) -> None:
        per_query: Counter[str] = Counter()
        for t in self.d.timelines:
            per_query[t.query_id] += 1
            self.persona_exists("timelines", t.timeline_id, t.persona_id)
            flag_timeline = self.row("timelines", t.timeline_id)
            q = self.queries.get(t.query_id)
            if q is None:
                flag_timeline(
                    Rule.DANGLING_ID,
                    f"query_id {t.query_id} does not exist",
                )
                continue
            if q.persona_id != t.persona_id:
                flag_timeline(
                    Rule.DANGLING_ID,
                    f"persona_id {t.persona_id} differs from its query's {q.persona_id}",
                )
            self.timeline(t, q)
        self.exactly_one(
            "queries",
            (q.query_id for q in self.d.queries),
            per_query,
            Rule.TIMELINE_PER_QUERY,
            "timelines",
        )

    def timeline(self, t: Timeline, q: Query) -> None:
        flag_timeline = self.row("timelines", t.timeline_id)
        count_within(
            flag_timeline,
            Rule.EVENT_COUNT,
            len(t.events),
            (self.g.events_min, self.g.events_max),
            "events",
        )
        for a, b in zip(t.events, t.events[1:], strict=False):
            if b.date < a.date:
                flag_timeline(
                    Rule.EVENT_ORDER,
                    f"event {b.event_id} ({b.date}) comes after {a.event_id} ({a.date})",
                )
        if t.events and q.references:
            earliest = min(r.date for r in q.references)
            first = min(e.date for e in t.events)
            if first > earliest or (earliest - first).days > self.g.lead_days_max:
                flag_timeline(
                    Rule.TIMELINE_START,
                    f"first event {first} is not within {self.g.lead_days_max} days before the earliest reference {earliest}",
                )
            last = max(e.date for e in t.events)
            if last >= q.query_date:
                flag_timeline(
                    Rule.TIMELINE_END,
                    f"last event {last} is not before the query date {q.query_date}",
                )
        carried: dict[str, int] = defaultdict(int)
        refs = {r.reference_id: r for r in q.references}
        for e in t.events:
            flag_event = self.row("timelines", e.event_id)
            if (e.kind == EventKind.REFERENCE) != (e.reference_id is not None):
                flag_event(
                    Rule.EVENT_KIND,
                    f"kind {e.kind.value} with reference_id {e.reference_id}",
                )
            if e.reference_id is None:
                for r in q.references:
                    if contains_verbatim(e.description, r.text):
                        flag_event(
                            Rule.FILLER_CARRIES_REFERENCE,
                            f"filler repeats reference {r.reference_id}",
                        )
                continue
            ref = refs.get(e.reference_id)
            if ref is None:
                flag_event(
                    Rule.DANGLING_ID,
                    f"reference_id {e.reference_id} is not a reference of query {q.query_id}",
                )
                continue
            carried[e.reference_id] += 1
            if e.date != ref.date or e.domain != ref.domain:
                flag_event(
                    Rule.REFERENCE_EVENT_MATCH,
                    f"event {e.date}/{e.domain.value} carries reference dated {ref.date} in {ref.domain.value}",
                )
        for r in q.references:
            if carried.get(r.reference_id, 0) != 1:
                flag_timeline(
                    Rule.REFERENCE_IN_ONE_EVENT,
                    f"reference {r.reference_id} is carried by {carried.get(r.reference_id, 0)} events; must be exactly one",
                )

    # ------------------------------------------------------------------ sessions

    def sessions_(self) -> None:
        per_event: Counter[str] = Counter()
        for s in self.d.sessions:
            self.persona_exists("sessions", s.session_id, s.persona_id)
            flag_session = self.row("sessions", s.session_id)
            if s.query_id not in self.queries:
                flag_session(
                    Rule.DANGLING_ID,
                    f"query_id {s.query_id} does not exist",
                )
            found = self.events.get(s.event_id)
            if found is None:
                flag_session(
                    Rule.DANGLING_ID,
                    f"event_id {s.event_id} does not exist",
                )
            else:
                per_event[s.event_id] += 1
                self.session(s, *found)
            self.turns(s)
        self.exactly_one(
            "timelines",
            (e.event_id for t in self.d.timelines for e in t.events),
            per_event,
            Rule.SESSION_PER_EVENT,
            "sessions",
        )

    def session(self, s: Session, t: Timeline, _index: int, e: TimelineEvent) -> None:
        flag_session = self.row("sessions", s.session_id)
        mismatches = []
        if s.query_id != t.query_id:
            mismatches.append(f"query {s.query_id} vs {t.query_id}")
        if s.persona_id != t.persona_id:
            mismatches.append(f"persona {s.persona_id} vs {t.persona_id}")
        if s.date != e.date:
            mismatches.append(f"date {s.date} vs {e.date}")
        if s.domain != e.domain:
            mismatches.append(f"domain {s.domain.value} vs {e.domain.value}")
        if s.reference_id != e.reference_id:
            mismatches.append(f"reference {s.reference_id} vs {e.reference_id}")
        if mismatches:
            flag_session(
                Rule.SESSION_MATCHES_EVENT,
                "differs from its event: " + "; ".join(mismatches),
            )
        q = self.queries.get(s.query_id)
        if q is None:
            return
        for r in q.references:
            for i, turn in enumerate(s.turns):
                if contains_verbatim(turn.content, r.text):
                    flag_session(
                        Rule.REFERENCE_VERBATIM,
                        f"turn {i} repeats reference {r.reference_id} word for word",
                    )
            if s.reference_id == r.reference_id and s.date >= q.query_date:
                flag_session(
                    Rule.REFERENCE_LEAK,
                    f"dated {s.date}, on or after the query date {q.query_date}, yet carries its reference",
                )

    def turns(self, s: Session) -> None:
        flag_session = self.row("sessions", s.session_id)
        n = len(s.turns)
        count_within(
            flag_session, Rule.TURN_COUNT, n, (self.g.turns_min, self.g.turns_max), "turns"
        )
        for i, turn in enumerate(s.turns):
            expected = Role.USER if i % 2 == 0 else Role.ASSISTANT
            if turn.role != expected:
                flag_session(
                    Rule.TURN_ROLES,
                    f"turn {i} is {turn.role.value}; expected {expected.value}",
                )
                break
        indices = s.reference_turn_indices
        if s.reference_id is None:
            if indices:
                flag_session(
                    Rule.REFERENCE_TURN_INDICES,
                    "a filler session names reference turns",
                )
            return
        if not indices:
            flag_session(
                Rule.REFERENCE_TURN_INDICES,
                "no turn is named as conveying the reference",
            )
        for i in indices:
            if not 0 <= i < n or s.turns[i].role != Role.USER:
                flag_session(
                    Rule.REFERENCE_TURN_INDICES,
                    f"index {i} is not a user turn of this session",
                )
        for span in s.reference_spans:
            if span.turn_index not in indices:
                flag_session(
                    Rule.REFERENCE_SPAN,
                    f"span in turn {span.turn_index}, not a reference turn",
                )
            elif not span.start < span.end <= len(s.turns[span.turn_index].content):
                flag_session(
                    Rule.REFERENCE_SPAN,
                    f"span {span.start}:{span.end} is outside turn {span.turn_index}",
                )

    def history(self) -> None:
        per_persona: dict[str, list[Session]] = defaultdict(list)
        for s in self.d.sessions:
            per_persona[s.persona_id].append(s)
        for persona_id, sessions in per_persona.items():
            ordered = sorted(sessions, key=lambda s: s.position)
            if [s.position for s in ordered] != list(range(len(ordered))):
                self.add(
                    "sessions",
                    persona_id,
                    Rule.HISTORY_POSITIONS,
                    f"positions of persona {persona_id} are not 0..{len(ordered) - 1}",
                )
                continue
            for a, b in zip(ordered, ordered[1:], strict=False):
                if b.date < a.date:
                    self.add(
                        "sessions",
                        b.session_id,
                        Rule.HISTORY_POSITIONS,
                        f"position {b.position} ({b.date}) is earlier than position {a.position} ({a.date})",
                    )

    # ------------------------------------------------------------------ facts

    def facts_(self) -> None:
        for f in self.d.facts:
            self.persona_exists("facts", f.fid, f.persona_id)
            flag_fact = self.row("facts", f.fid)
            if not f.session_ids:
                flag_fact(Rule.FACT_PROVENANCE, "no session behind the fact")
            groups = [("fact", f.session_ids, f.source_reference_ids)] + [
                (f"revision {i}", r.session_ids, r.source_reference_ids)
                for i, r in enumerate(f.revisions)
            ]
            for label, session_ids, reference_ids in groups:
                carried = set()
                for sid in session_ids:
                    session = persona_row(
                        flag_fact,
                        Rule.FACT_PROVENANCE,
                        self.sessions.get(sid),
                        f.persona_id,
                        f"{label}: session {sid}",
                    )
                    if session is not None and session.reference_id:
                        carried.add(session.reference_id)
                for rid in reference_ids:
                    if rid not in self.references:
                        flag_fact(
                            Rule.FACT_REFERENCE_CONSISTENCY,
                            f"{label}: reference {rid} does not exist",
                        )
                    elif rid not in carried:
                        flag_fact(
                            Rule.FACT_REFERENCE_CONSISTENCY,
                            f"{label}: reference {rid} is not carried by any of its sessions",
                        )
            for merged in f.merged_fids:
                persona_row(
                    flag_fact,
                    Rule.MERGED_FIDS,
                    self.facts.get(merged),
                    f.persona_id,
                    f"merged fid {merged}",
                )
            if f.merged_into is not None and f.merged_into not in self.facts:
                flag_fact(Rule.MERGED_FIDS, f"merged_into {f.merged_into} does not exist")

    def coverage(self) -> None:
        facts_by_persona: dict[str, list[Any]] = defaultdict(list)
        for f in self.d.facts:
            facts_by_persona[f.persona_id].append(f)
        for q in self.d.queries:
            flag_query = self.row("queries", q.query_id)
            for rid in uncovered_references(q, facts_by_persona.get(q.persona_id, [])):
                flag_query(
                    Rule.REFERENCE_UNCOVERED,
                    f"reference {rid} has no credited fact in memory on the query date {q.query_date}",
                )

    def rejected_(self) -> None:
        for r in self.d.rejected:
            self.persona_exists("rejected", r.rejected_id, r.persona_id)

    def run(self) -> list[Violation]:
        self.unique_ids()
        self.queries_()
        self.timelines_()
        self.sessions_()
        self.history()
        self.facts_()
        self.coverage()
        self.rejected_()
        return self.out


def validate_dataset(
    dataset: GeneratedDataset, settings: Settings, embedder: EmbeddingFunction | None = None
) -> list[Violation]:
    """Every broken invariant, in table order; [] when the dataset is sound."""
    return _Checker(dataset, settings, embedder).run()


__all__ = ["EmbeddingFunction", "Rule", "Violation", "queries_not_recomputed", "validate_dataset"]
