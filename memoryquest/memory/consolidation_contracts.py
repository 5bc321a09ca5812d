"""Prompt contract of memory consolidation: ``memory_consolidation``.

The inputs model is what :mod:`memoryquest.memory.consolidation` sends (and
the offline simulator answers from); the output model is the answer's shape.
See :mod:`memoryquest.prompt_inputs` for the convention.
"""

from __future__ import annotations

from typing import ClassVar

from pydantic import BaseModel, ConfigDict, Field, with_config
from typing_extensions import TypedDict

from memoryquest.contracts import FactType, Stage
from memoryquest.prompt_inputs import ROW, PromptInputs, one_of, says, stated

# --------------------------------------------------------------------------- what the model answers


class MergedFactAnswer(BaseModel):
    """The model's single fact standing for a group (ids and provenance are ours to keep)."""

    model_config = ConfigDict(extra="forbid")

    info: str = Field(
        min_length=1, description="One coherent sentence carrying every detail of the group."
    )
    type: FactType = Field(description="The most fitting type among the group's types.")
    frequency: int = Field(ge=1, description="Sum of the group's frequencies.")
    related_entities: list[str] = Field(description="A compact set of the important entities.")


# --------------------------------------------------------------------------- what the model is given


@with_config(ROW)
class GroupFact(TypedDict):
    """One fact of a group that consolidation folds into one."""

    fid: str
    info: str
    type: str
    frequency: int
    related_entities: list[str]
    updated_on: str


class ConsolidationInputs(PromptInputs):
    """A group of similar facts close in time, to be merged into one."""

    template_id: ClassVar[str] = "memory_consolidation"
    stage: ClassVar[Stage] = Stage.MEMORY
    output_model: ClassVar[type[BaseModel]] = MergedFactAnswer

    facts: list[GroupFact]

    def answer_model(self) -> type[BaseModel]:
        """One of the group's types, and a frequency from 1 to the group's sum."""
        types = sorted({fact["type"] for fact in self.facts})
        total = max(1, sum(fact["frequency"] for fact in self.facts))
        return stated(
            MergedFactAnswer,
            type=says(whole=True, type="string", **one_of(types)),
            frequency=says(**one_of(range(1, total + 1))),
        )
