"""What every table's checks share: the dataset indexed by id, and the list of violations."""

from __future__ import annotations

import functools
from collections import Counter
from collections.abc import Callable, Iterable

from memoryquest.contracts import (
    Query,
    RejectionReason,
    Timeline,
    TimelineEvent,
)
from memoryquest.dataset import GeneratedDataset
from memoryquest.invariants.rules import EmbeddingFunction, Rule, Violation
from memoryquest.settings import Settings


class Checker:
    """The dataset indexed by id; each table's checks add their :class:`Violation` rows here."""

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
