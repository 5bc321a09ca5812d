"""Prompt contract of the dialogue stage: ``dialogue_expansion``.

The inputs model is what :mod:`memoryquest.stages.dialogues` sends (and the
offline simulator answers from); the output model is the answer's shape.
See :mod:`memoryquest.prompt_inputs` for the convention.
"""

from __future__ import annotations

from typing import Any, ClassVar

from pydantic import BaseModel, Field, with_config
from typing_extensions import TypedDict

from memoryquest.prompt_inputs import ROW, PromptInputs

# --------------------------------------------------------------------------- what the model answers


class TurnDraft(BaseModel):
    role: str = Field(description="'user' or 'assistant'.")
    content: str


class DialogueDraft(BaseModel):
    turns: list[TurnDraft]
    reference_turn_indices: list[int] = Field(
        description="Indices of the user turns that convey the reference; empty for filler."
    )
    reference_sentence: str = Field(
        default="",
        description="The sentence of a reference turn that states the reference, copied exactly; empty for filler.",
    )


# --------------------------------------------------------------------------- what the model is given


@with_config(ROW)
class DialogueEvent(TypedDict):
    """The timeline event a session expands."""

    date: str
    weekday: str
    domain: str
    kind: str
    description: str


@with_config(ROW)
class DialogueReference(TypedDict):
    """The reference an event carries (none for filler)."""

    text: str
    date: str
    domain: str


class DialogueInputs(PromptInputs):
    """One timeline event and the persona's material in its domain, for writing the session."""

    template_id: ClassVar[str] = "dialogue_expansion"
    stage: ClassVar[str] = "dialogues"
    temperature: ClassVar[float] = 0.9
    output_model: ClassVar[type[BaseModel]] = DialogueDraft
    unread_offline: ClassVar[dict[str, str]] = {
        "ledger": "what the user said before: the simulator writes no contradiction, so it needs none"
    }

    event: DialogueEvent
    reference: DialogueReference | None
    demographics: dict[str, Any]
    interaction_summary: str | None
    affinities: list[dict[str, Any]]
    situations: list[dict[str, str]]
    turns_min: int
    turns_max: int
    ledger: list[str] = []  # what the user said before, one dated line each
