"""Structural tells: where a reference sits, not how it is worded.

A generator can give references away without a telling word: the reference
always in the second turn, reference sessions shorter or with fewer news
items than the others, reference events always early in their timeline, or
never in the query's own domain while filler sometimes is. A memory system
that learnt such a habit could find references without remembering anything,
so the audit scores these features with the same cross-user classifier as the
text (:func:`~memoryquest.audit.detectability.structure_classifier`), one
feature at a time and all together, at two levels:

* **user turns** (a reference turn vs another user turn of the same session,
  drawn from ids): the turn's index in its session and the number of turns
  after it;
* **sessions** (a session that carries a reference vs every other session):
  its number of turns, its event's number of news items, the event's index in
  its timeline and the number of events after it, and whether its domain is the
  query's own.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence, Set
from dataclasses import dataclass

from memoryquest.audit.material import reference_turns
from memoryquest.contracts import Query, RejectedCandidate, Role, Session, Timeline
from memoryquest.ids import draw

TURN_FEATURES = ("turn_index", "turns_after")
SESSION_FEATURES = ("session_turns", "session_news", "event_index", "events_after", "same_domain")
OTHERS_PER_REFERENCE_TURN = 2
"""Other user turns of its own session scored beside each reference turn (fewer where a session
has fewer)."""
UNKNOWN = "unknown"  # a session whose event or query the dataset does not hold


@dataclass(frozen=True)
class StructureUnit:
    """One user turn or one session: its features, and the reference it carries (None for the rest)."""

    persona_id: str
    session_id: str
    features: Mapping[str, object]
    reference_id: str | None

    @property
    def reference(self) -> bool:
        return self.reference_id is not None


def turn_units(sessions: Sequence[Session], standing: Set[str]) -> list[StructureUnit]:
    """The reference turns of standing references, each beside as many other user turns of its
    own session (drawn from ids), with their places in the session.

    Matched within the session because a session carries one reference: over all user turns,
    a turn of a short session would be a reference more often than one of a long session
    whatever the generator did, and a turn's index and the turns after it give the session's
    length away. Within a session, only where the reference sits can tell it apart; the
    sessions' lengths are scored at the session level.
    """
    units: list[StructureUnit] = []
    for session in sessions:
        marked = reference_turns(session, standing)
        if not marked:
            continue
        others = sorted(
            (i for i, t in enumerate(session.turns) if t.role is Role.USER and i not in marked),
            key=lambda i: draw(session.session_id, i),
        )[: OTHERS_PER_REFERENCE_TURN * len(marked)]
        last = len(session.turns) - 1
        for index in sorted(marked | set(others)):
            units.append(
                StructureUnit(
                    session.persona_id,
                    session.session_id,
                    {"turn_index": index, "turns_after": last - index},
                    session.reference_id if index in marked else None,
                )
            )
    return units


def query_domains(
    queries: Sequence[Query], rejected: Sequence[RejectedCandidate]
) -> dict[str, str]:
    """Query id -> domain, for the queries standing and those withdrawn (their sessions stay in the history)."""
    domains: dict[str, str] = {}
    for row in rejected:
        try:
            payload = json.loads(row.payload_json)
        except ValueError:
            continue
        if isinstance(payload, dict) and {"query_id", "domain", "references"} <= payload.keys():
            domains[str(payload["query_id"])] = str(payload["domain"])
    domains.update({q.query_id: q.domain.value for q in queries})
    return domains


def session_units(
    sessions: Sequence[Session],
    timelines: Sequence[Timeline],
    domains: Mapping[str, str],
    standing: Set[str],
) -> list[StructureUnit]:
    """Every session, with its length, its event's news and place in the timeline, and its domain
    relative to its query's; the sessions of standing references marked."""
    events = {
        event.event_id: (event, index, len(timeline.events))
        for timeline in timelines
        for index, event in enumerate(timeline.events)
    }
    units: list[StructureUnit] = []
    for session in sessions:
        found = events.get(session.event_id)
        query_domain = domains.get(session.query_id)
        features: dict[str, object] = {
            "session_turns": len(session.turns),
            "session_news": UNKNOWN if found is None else len(found[0].news),
            "event_index": UNKNOWN if found is None else found[1],
            "events_after": UNKNOWN if found is None else found[2] - 1 - found[1],
            "same_domain": UNKNOWN
            if query_domain is None
            else session.domain.value == query_domain,
        }
        carried = session.reference_id if session.reference_id in standing else None
        units.append(StructureUnit(session.persona_id, session.session_id, features, carried))
    return units
