"""Prompt contract of memory extraction: ``memory_extraction``.

The inputs model is what :mod:`memoryquest.memory.extraction` sends (and the
offline simulator answers from); the output model is the answer's shape.
See :mod:`memoryquest.prompt_inputs` for the convention.
"""

from __future__ import annotations

from typing import Any, ClassVar, NotRequired

from pydantic import BaseModel, ConfigDict, Field, with_config
from typing_extensions import TypedDict

from memoryquest.contracts import FactType, Stage
from memoryquest.prompt_inputs import ROW, PromptInputs, one_of, says, stated

# --------------------------------------------------------------------------- what the model answers


class ExtractedFact(BaseModel):
    model_config = ConfigDict(extra="forbid")

    fid: str = Field(description="An existing fid to update, or NEW_<n> for a new fact.")
    info: str = Field(
        min_length=1, description="A short, atomic, third-person statement about the user."
    )
    type: FactType
    related_entities: list[str]
    # Ids, not copied text: the stage reads the session, turn and exact sentence from them, at a
    # few output tokens a fact instead of a quote and a session id.
    sentences: list[int] = Field(
        description="Ids of the user's sentences that state the fact, as numbered in the prompt."
    )


class ExtractionAnswer(BaseModel):
    model_config = ConfigDict(extra="forbid")

    facts: list[ExtractedFact] = Field(
        description="Only new or changed facts; empty when nothing new was said."
    )


# --------------------------------------------------------------------------- what the model is given


@with_config(ROW)
class ExistingFact(TypedDict):
    """A fact already in the store, which an answer may update by its fid."""

    fid: str  # a short name for this call ("F3"), mapped back to the stored fid
    info: str
    type: str
    related_entities: list[str]


@with_config(ROW)
class SessionTurn(TypedDict):
    """A turn as shown: an assistant's text whole; a user's split into sentences, each under
    the id a fact cites it by (ids run on across the call's sessions)."""

    role: str
    content: NotRequired[str]
    sentences: NotRequired[dict[str, str]]


@with_config(ROW)
class SessionView(TypedDict):
    """One session of the batch, user sentences numbered for evidence."""

    session_id: str
    date: str
    domain: str
    turns: list[SessionTurn]


class ExtractionInputs(PromptInputs):
    """The store's active facts and one batch of sessions to extract new or changed facts from."""

    template_id: ClassVar[str] = "memory_extraction"
    stage: ClassVar[Stage] = Stage.MEMORY
    output_model: ClassVar[type[BaseModel]] = ExtractionAnswer

    existing_facts: list[ExistingFact]
    sessions: list[SessionView]

    def answer_model(self) -> type[BaseModel]:
        """Facts that update a shown fid or add a ``NEW_<n>`` one, each citing shown sentences."""
        numbers = [
            int(number)
            for session in self.sessions
            for turn in session["turns"]
            for number in turn.get("sentences", {})
        ]
        new = {"type": "string", "pattern": "^NEW_[0-9]+$"}
        fid = [{"type": "string", **one_of(f["fid"] for f in self.existing_facts)}, new]
        cited: dict[str, Any] = {"minItems": 1}
        if numbers:
            cited["items"] = {"type": "integer", **one_of(numbers)}
        fact = stated(
            ExtractedFact,
            fid=says(anyOf=fid if self.existing_facts else [new]),
            sentences=says(**cited),
        )
        return stated(ExtractionAnswer, facts=says(item_model=fact))
