"""Prompt contract of the pairwise judge: ``judge_pairwise``.

The inputs model is what :func:`memoryquest.pgr.winrate.pairwise_winrate`
sends (and the offline simulator answers from); the output model is the
answer's shape. See :mod:`memoryquest.prompt_inputs` for the convention.
"""

from __future__ import annotations

from typing import ClassVar

from pydantic import BaseModel, Field, with_config
from typing_extensions import TypedDict

from memoryquest.prompt_inputs import ROW, PromptInputs

TIE = "tie"

# --------------------------------------------------------------------------- what the model answers


class PairwiseVerdict(BaseModel):
    """The comparison comes before the choice, so the choice follows from it."""

    reasoning: str = Field(description="A short comparison of the two responses.")
    choice: str = Field(description="The label of the more useful response, or 'tie'.")


# --------------------------------------------------------------------------- what the model is given


@with_config(ROW)
class UserFact(TypedDict):
    date: str
    info: str


class PairwiseInputs(PromptInputs):
    """Two responses to one request, and what the judge may know of the user.

    Each response carries an opaque label (no order, no method name) that the
    choice names: a label such as "first" or "A" invites position bias.
    """

    template_id: ClassVar[str] = "judge_pairwise"
    judge: ClassVar[bool] = True
    stage: ClassVar[str] = "pgr_judge"
    temperature: ClassVar[float] = 0.0
    output_model: ClassVar[type[BaseModel]] = PairwiseVerdict

    query: str
    query_date: str
    user_facts: list[UserFact]
    references: list[str]
    first_label: str
    first_response: str
    second_label: str
    second_response: str
