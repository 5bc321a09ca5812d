"""Prompt contract of the LLM reference judge: ``judge_references``.

The inputs model is what :class:`memoryquest.pgr.judges.LLMJudge` sends (and
the offline simulator answers from); the output model is the answer's shape.
See :mod:`memoryquest.prompt_inputs` for the convention.
"""

from __future__ import annotations

from typing import Any, ClassVar

from pydantic import BaseModel, Field, with_config
from typing_extensions import TypedDict

from memoryquest.contracts import Stage
from memoryquest.prompt_inputs import ROW, JudgeInputs, items_between, one_of, says, stated

# --------------------------------------------------------------------------- what the model answers


class ReferenceVerdict(BaseModel):
    """The reason comes before the verdict (the memories), so the verdict follows from it."""

    number: int = Field(description="The reference's number in the input list, from 1.")
    reason: str = Field(description="One line on why.")
    memories: list[int] = Field(
        description="Numbers of the retrieved memories that state the reference; empty when none."
    )


class ReferenceVerdicts(BaseModel):
    verdicts: list[ReferenceVerdict]


# --------------------------------------------------------------------------- what the model is given


@with_config(ROW)
class NumberedReference(TypedDict):
    """A reference of the query, numbered from 1 as the verdicts cite it."""

    number: int
    date: str
    text: str


@with_config(ROW)
class RetrievedFact(TypedDict):
    """A retrieved memory fact, numbered from 1 as the verdicts cite it."""

    number: int
    date: str
    info: str


class JudgeReferencesInputs(JudgeInputs):
    """A query's references and everything its methods retrieved, to judge which memory states which."""

    template_id: ClassVar[str] = "judge_references"
    stage: ClassVar[Stage] = Stage.PGR_JUDGE
    output_model: ClassVar[type[BaseModel]] = ReferenceVerdicts

    references: list[NumberedReference]
    retrieved: list[RetrievedFact]

    def answer_model(self) -> type[BaseModel]:
        """One verdict for each reference number, citing retrieved memories by their numbers."""
        count = len(self.references)
        memories = [fact["number"] for fact in self.retrieved]
        cited: dict[str, Any] = {"maxItems": 0}
        if memories:
            cited = {"items": {"type": "integer", **one_of(memories)}}
        verdict = stated(
            ReferenceVerdict,
            number=says(**one_of(r["number"] for r in self.references)),
            memories=says(**cited),
        )
        return stated(
            ReferenceVerdicts, verdicts=says(item_model=verdict, **items_between(count, count))
        )
