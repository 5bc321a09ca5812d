"""The text the audit inspects, cut into exchanges: one user turn and the assistant's reply.

A reference is stated in a user turn, and the assistant's reply to it is where
a generator tends to acknowledge it ("thanks for telling me ..."), so the unit
of "reference material" is the pair. Everything else of the history — filler
sessions and the other turns of reference sessions — is "filler material".
"""

from __future__ import annotations

from collections.abc import Sequence, Set
from dataclasses import dataclass

from memoryquest.contracts import Role, Session


@dataclass(frozen=True)
class Exchange:
    """One user turn, the assistant turn right after it ("" when none), and whether it states a reference."""

    persona_id: str
    session_id: str
    user: str
    assistant: str
    reference: bool
    reference_id: str | None = None  # the reference it states, when it does


def reference_turns(session: Session, standing: Set[str] | None = None) -> set[int]:
    """User turns that state the session's reference: the listed indices plus the turns of its spans.

    Older data has no spans; the listed turn indices alone then mark the whole turn. With
    ``standing`` (the references of the dataset's queries), a withdrawn query's session is
    an ordinary one: its reference is no longer ground truth.
    """
    if session.reference_id is None or (
        standing is not None and session.reference_id not in standing
    ):
        return set()
    marked = set(session.reference_turn_indices) | {
        span.turn_index for span in session.reference_spans
    }
    return {i for i in marked if i < len(session.turns) and session.turns[i].role is Role.USER}


def exchanges(sessions: Sequence[Session], standing: Set[str] | None = None) -> list[Exchange]:
    """Every user turn of every session with its reply, in history order (``standing``: see
    :func:`reference_turns`)."""
    result: list[Exchange] = []
    for session in sorted(sessions, key=lambda s: (s.persona_id, s.position, s.session_id)):
        marked = reference_turns(session, standing)
        turns = session.turns
        for index, turn in enumerate(turns):
            if turn.role is not Role.USER:
                continue
            following = turns[index + 1] if index + 1 < len(turns) else None
            reply = (
                following.content
                if following is not None and following.role is Role.ASSISTANT
                else ""
            )
            stated = index in marked
            result.append(
                Exchange(
                    session.persona_id,
                    session.session_id,
                    turn.content,
                    reply,
                    stated,
                    session.reference_id if stated else None,
                )
            )
    return result


def session_halves(sessions: Sequence[Session]) -> dict[str, str]:
    """Session id -> "early" or "late" half of its user's history, for a within-user split."""
    halves: dict[str, str] = {}
    by_user: dict[str, list[Session]] = {}
    for session in sessions:
        by_user.setdefault(session.persona_id, []).append(session)
    for history in by_user.values():
        history.sort(key=lambda s: (s.position, s.date, s.session_id))
        middle = len(history) // 2
        for number, session in enumerate(history):
            halves[session.session_id] = "early" if number < middle else "late"
    return halves
