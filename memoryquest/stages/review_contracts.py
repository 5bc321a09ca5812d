"""Prompt contract of the blind session review: ``session_review``.

The inputs model is what :mod:`memoryquest.stages.review` sends (and the
offline simulator answers from); the output model is the answer's shape.
See :mod:`memoryquest.prompt_inputs` for the convention.

The review is blind by construction: its inputs hold the session's date and
turns as said, and the user's turns of the earlier conversations it may
retell, nothing else. No field can carry a reference, a query, an event kind
or which turn was named for which news item.
"""

from __future__ import annotations

from enum import StrEnum
from typing import ClassVar

from pydantic import BaseModel, Field, with_config
from typing_extensions import TypedDict

from memoryquest.contracts import Stage
from memoryquest.prompt_inputs import ROW, PromptInputs, one_of, says, stated

# --------------------------------------------------------------------------- what the model answers


class ReviewFlag(StrEnum):
    """What a flagged sentence does that a plain remark does not."""

    POINTS_AHEAD = "points_ahead"  # ties the detail to a later plan, occasion or use
    ANNOUNCES = "announces"  # an aside that flags the detail as worth noting
    RETELLS = "retells"  # tells again what an earlier conversation already told


class FlaggedSentence(BaseModel):
    """The reason comes before the kind, so the kind follows from it."""

    turn_index: int = Field(description="Index of the turn that says the sentence, from 0.")
    sentence: str = Field(description="The sentence, copied exactly as it is said in the turn.")
    reason: str = Field(description="One line on what in the sentence reads that way.")
    kind: ReviewFlag = Field(
        description="points_ahead, announces or retells (see the instructions)."
    )


class SessionReview(BaseModel):
    flagged: list[FlaggedSentence] = Field(
        default=[], description="Every sentence that points ahead, announces itself or retells."
    )


# --------------------------------------------------------------------------- what the model is given


@with_config(ROW)
class ReviewTurn(TypedDict):
    """One turn of the reviewed conversation, as said."""

    index: int
    role: str
    text: str


@with_config(ROW)
class EarlierTurn(TypedDict):
    """What the user said in an earlier conversation, with that conversation's date."""

    date: str
    text: str


class SessionReviewInputs(PromptInputs):
    """One conversation as said, and the user's earlier turns, for a reader who knows nothing else.

    It is graded like a judge's request (``judge``: the judge model answers it when
    ``endpoint.judge_model`` is set, at temperature 0) and billed to the usage stage
    ``review``.
    """

    template_id: ClassVar[str] = "session_review"
    stage: ClassVar[Stage] = Stage.REVIEW
    judge: ClassVar[bool] = True
    temperature: ClassVar[float] = 0.0
    output_model: ClassVar[type[BaseModel]] = SessionReview

    date: str
    turns: list[ReviewTurn]
    earlier: list[EarlierTurn] = []

    def answer_model(self) -> type[BaseModel]:
        """Flagged sentences name turns of this conversation by their indices."""
        if not self.turns:
            return self.output_model
        flagged = stated(FlaggedSentence, turn_index=says(**one_of(t["index"] for t in self.turns)))
        return stated(SessionReview, flagged=says(item_model=flagged))
