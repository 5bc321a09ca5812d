"""The invariants of the timelines, their sessions and turns, and the user's history."""

from __future__ import annotations

from collections import Counter, defaultdict

from memoryquest.contracts import (
    EventKind,
    Query,
    Role,
    Session,
    Timeline,
    TimelineEvent,
)
from memoryquest.invariants.checker import Checker
from memoryquest.invariants.rules import Rule, count_within
from memoryquest.text import contains_verbatim


class ConversationChecks(Checker):
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
