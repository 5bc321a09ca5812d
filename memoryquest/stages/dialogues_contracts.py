"""Prompt contract of the dialogue stage: ``dialogue_expansion``.

The inputs model is what :mod:`memoryquest.stages.dialogues` sends (and the
offline simulator answers from); the output model is the answer's shape.
See :mod:`memoryquest.prompt_inputs` for the convention.
"""

from __future__ import annotations

from typing import Any, ClassVar

from pydantic import BaseModel, Field, with_config
from typing_extensions import TypedDict

from memoryquest.contracts import Stage
from memoryquest.prompt_inputs import ROW, PromptInputs, items_between, one_of, says, stated

# --------------------------------------------------------------------------- what the model answers


class NewsSaid(BaseModel):
    """Where one item of the event's news is said."""

    news_index: int = Field(description="Index of the news item in the given list.")
    turn_index: int = Field(description="Index of the user turn that says it.")


class DialogueDraft(BaseModel):
    turns: list[str] = Field(
        description="The turns' texts in order: user, assistant, user, ... (the roles alternate)."
    )
    news_said: list[NewsSaid] = Field(
        default=[], description="Where each item of the event's news is said; empty without news."
    )


# --------------------------------------------------------------------------- what the model is given


@with_config(ROW)
class DialogueEvent(TypedDict):
    """The timeline event a session expands."""

    date: str
    weekday: str
    domain: str
    description: str


class DialogueInputs(PromptInputs):
    """One timeline event and the persona's material in its domain, for writing the session.

    The prompt is blind: it gives the event's news (its personal updates) without saying
    whether one of them is a reference, so every item is told the same way.
    """

    template_id: ClassVar[str] = "dialogue_expansion"
    stage: ClassVar[Stage] = Stage.DIALOGUES
    temperature: ClassVar[float] = 0.9
    output_model: ClassVar[type[BaseModel]] = DialogueDraft
    unread_offline: ClassVar[dict[str, str]] = {
        "ledger": "what the user said before: the simulator writes no contradiction, so it needs none"
    }

    event: DialogueEvent
    news: list[str]
    demographics: dict[str, Any]
    interaction_summary: str | None
    affinities: list[dict[str, Any]]
    situations: list[dict[str, str]]
    turns_min: int
    turns_max: int
    ledger: list[str] = []  # what the user said before, one dated line each

    def answer_model(self) -> type[BaseModel]:
        """``turns_min..turns_max`` turns; each news item said once, in a user turn (even index)."""
        count = len(self.news)
        turns = says(**items_between(self.turns_min, self.turns_max))
        if not count:
            return stated(DialogueDraft, turns=turns, news_said=says(**items_between(0, 0)))
        said = stated(
            NewsSaid,
            news_index=says(**one_of(range(count))),
            turn_index=says(**one_of(range(0, self.turns_max, 2))),
        )
        return stated(
            DialogueDraft,
            turns=turns,
            news_said=says(item_model=said, **items_between(count, count)),
        )
