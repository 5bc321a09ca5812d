"""All of one user's sessions, across all their queries, as one chronological history."""

from __future__ import annotations

from memoryquest.contracts import Session


def merge_history(sessions: list[Session]) -> list[Session]:
    """Sessions sorted by (persona, date, query, given order), ``position`` 0..n-1 within each persona.

    Sessions of one query on the same day keep the order they were given in
    (their timeline's event order); different queries on the same day are
    ordered by query id so the result does not depend on how the caller
    gathered them. Returns new Session objects; the inputs are not modified.
    """
    order = sorted(
        range(len(sessions)),
        key=lambda i: (sessions[i].persona_id, sessions[i].date, sessions[i].query_id, i),
    )
    merged: list[Session] = []
    positions: dict[str, int] = {}
    seen: set[str] = set()
    for index in order:
        session = sessions[index]
        if session.session_id in seen:
            raise ValueError(f"session {session.session_id} appears twice in the history")
        seen.add(session.session_id)
        position = positions.get(session.persona_id, 0)
        positions[session.persona_id] = position + 1
        merged.append(session.model_copy(update={"position": position}))
    return merged
