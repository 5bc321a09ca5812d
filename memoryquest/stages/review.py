"""The blind review (``generation.review``): a second reader for what the dialogue gates cannot see.

The gates hold each conversation to word lists, and only the user turns the
model itself names as telling news. A real model words its faults in ways no
list foresees. With the review on, the judge model (``endpoint.judge_model``,
else the chat model) reads each conversation that passed the gates as a memory
system would meet it: the date and the turns as said, user's and assistant's,
and what the user said in the earlier conversations of the same timeline.
It is told nothing else: not the query, not the references, not which turn
was named for which news, not whether the event carries a reference
(:class:`~memoryquest.stages.review_contracts.SessionReviewInputs` has no field
that could hold them). It lists every sentence that points ahead, announces
itself or retells an earlier conversation.

A conversation with a flagged sentence is refused with the reason
``flagged``; the dialogue loop (:mod:`memoryquest.generation.regeneration`) asks
for it again, and once ``max_regenerations`` is spent the query goes with it.
A flag that quotes nothing the named turn says is a misreading and is
dropped. The requests are billed to the usage stage ``review``; the run's
tally (read, flagged) goes into the manifest and the card.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final

from memoryquest.contracts import (
    RejectedCandidate,
    RejectionReason,
    ReviewTally,
    Role,
    Session,
    Stage,
)
from memoryquest.generation.common import failure_reason, normalise_text, rejected
from memoryquest.llm.client import ModelClient
from memoryquest.llm.errors import LLMOutputError
from memoryquest.stages.review_contracts import (
    EarlierTurn,
    FlaggedSentence,
    ReviewTurn,
    SessionReview,
    SessionReviewInputs,
)

STAGE: Final = Stage.DIALOGUES  # a refused conversation is a dialogue candidate

Verdict = tuple[int, Session | RejectedCandidate]


def review_inputs(session: Session, earlier: Sequence[Session] = ()) -> SessionReviewInputs:
    """What the reviewer reads: ``session``'s date and turns, and the user turns of ``earlier``."""
    return SessionReviewInputs(
        date=session.date.isoformat(),
        turns=[
            ReviewTurn(index=index, role=turn.role.value, text=turn.content)
            for index, turn in enumerate(session.turns)
        ],
        earlier=[
            EarlierTurn(date=before.date.isoformat(), text=turn.content)
            for before in sorted(earlier, key=lambda s: s.date)
            for turn in before.turns
            if turn.role is Role.USER
        ],
    )


def flags_said(review: SessionReview, session: Session) -> list[FlaggedSentence]:
    """The review's flags that quote what the named turn says (a misquoted flag is dropped)."""
    said: list[FlaggedSentence] = []
    for flag in review.flagged:
        if not 0 <= flag.turn_index < len(session.turns):
            continue
        quote = normalise_text(flag.sentence)
        if quote and quote in normalise_text(session.turns[flag.turn_index].content):
            said.append(flag)
    return said


def flagged_detail(flags: Sequence[FlaggedSentence]) -> str:
    return "; ".join(
        f"turn {f.turn_index} {f.kind.value} ({f.reason}): {f.sentence!r}" for f in flags
    )


class SessionReviewer:
    """Reviews one timeline's conversations round by round, as the dialogue loop accepts them.

    A conversation is read with the user turns of the timeline's conversations dated
    before it: those passed in earlier rounds and this round's other candidates.
    """

    def __init__(self, persona_id: str, client: ModelClient) -> None:
        self.persona_id, self.client = persona_id, client
        self.passed: dict[str, Session] = {}  # by session id, across rounds
        self.tally = ReviewTally()

    async def review(self, verdicts: Sequence[Verdict], attempt: int) -> list[Verdict]:
        """``verdicts`` with each conversation the reviewer flags replaced by its rejection."""
        candidates = [(position, v) for position, v in verdicts if isinstance(v, Session)]
        if not candidates:
            return list(verdicts)
        pool = [*self.passed.values(), *(session for _, session in candidates)]
        requests = [
            review_inputs(session, [s for s in pool if s.date < session.date]).request(
                cache_scope=f"persona:{self.persona_id}:review"
            )
            for _, session in candidates
        ]
        answers = await self.client.complete_all(requests, return_exceptions=True)
        refused: dict[int, RejectedCandidate] = {}
        for (position, session), answer in zip(candidates, answers, strict=True):
            where = f"event {session.event_id}, attempt {attempt + 1}"
            if isinstance(answer, LLMOutputError):
                refused[position] = self._rejected(
                    session, failure_reason(answer), f"{where}: no usable review: {answer}", attempt
                )
                continue
            if isinstance(answer, BaseException):
                raise answer  # the endpoint failed, not this conversation
            self.tally = self.tally.plus(ReviewTally(sessions_reviewed=1))
            flags = flags_said(answer, session)
            if flags:
                self.tally = self.tally.plus(ReviewTally(sessions_flagged=1))
                detail = f"{where}: the blind reviewer flagged {flagged_detail(flags)}"
                refused[position] = self._rejected(
                    session, RejectionReason.FLAGGED, detail, attempt
                )
            else:
                self.passed[session.session_id] = session
        return [(position, refused.get(position, verdict)) for position, verdict in verdicts]

    def _rejected(
        self, session: Session, reason: RejectionReason, detail: str, attempt: int
    ) -> RejectedCandidate:
        return rejected(self.persona_id, STAGE, reason, detail, session, session.event_id, attempt)


__all__ = ["SessionReviewer", "flags_said", "review_inputs"]
