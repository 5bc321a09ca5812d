"""Prompt contract of the timeline stage: ``timeline_synthesis``.

The inputs model is what :mod:`memoryquest.stages.timelines` sends (and the
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


class EventDraft(BaseModel):
    slot: int = Field(description="Index of the slot this event writes (each slot exactly once).")
    description: str = Field(description="What happens in this conversation, in the third person.")
    news: list[str] = Field(
        default=[],
        description="The personal updates the user mentions in this conversation, as many as the "
        "slot asks for, each one subject-less statement about the user.",
    )


class TimelineDraft(BaseModel):
    events: list[EventDraft]


# --------------------------------------------------------------------------- what the model is given


@with_config(ROW)
class TimelineQuery(TypedDict):
    """The accepted query a timeline leads up to (the prompt shows its date only)."""

    query_id: str
    text: str
    query_date: str
    domain: str


@with_config(ROW)
class UserRequest(TypedDict):
    """Another request of the same user: what a filler update may matter to instead."""

    domain: str
    text: str


@with_config(ROW)
class TimelineSlot(TypedDict):
    """One conversation as code planned it: when, in which domain, how many news items.

    Nothing in it says whether code will put a reference among its news."""

    slot: int
    date: str
    domain: str
    news: int


class TimelineInputs(PromptInputs):
    """The dated slots before one query and the persona's material, for writing the conversations.

    The prompt is blind twice over. It shows the request's date, never its text,
    its reasoning or the user's other requests, so a model cannot write an event
    as "... which matters for her October hike". And it shows the slots code
    planned (date, domain, how many news items) without saying which will carry
    a reference: code chose them from ids and puts each reference into its
    slot's news afterwards, so the model writes every slot alike.
    ``user_references`` are the texts of all the user's queries' references,
    which no news may repeat or contradict (the same for every timeline of the
    user, so they sit in the prompt's cached prefix); nothing ties one to a slot.
    """

    template_id: ClassVar[str] = "timeline_synthesis"
    stage: ClassVar[Stage] = Stage.TIMELINES
    temperature: ClassVar[float] = 0.8
    output_model: ClassVar[type[BaseModel]] = TimelineDraft
    not_in_prompt: ClassVar[dict[str, str]] = {
        "user_requests": "the user's requests, this one among them: read by the offline "
        "simulator only (its distractors bridge to them); a model shown them foreshadows",
        "own_references": "this query's reference texts, in text order and tied to no slot: read "
        "by the offline simulator only (its news keep off their needs, and match the others')",
    }

    query: TimelineQuery
    slots: list[TimelineSlot]
    user_references: list[str] = []
    own_references: list[str] = []
    user_requests: list[UserRequest] = []
    demographics: dict[str, Any]
    affinities: list[dict[str, Any]]
    tasks: list[dict[str, Any]]
    news_words_min: int
    news_words_max: int

    def answer_model(self) -> type[BaseModel]:
        """One event for each slot, by its index, with as many news items as the slots ask for."""
        count = len(self.slots)
        news = [slot["news"] for slot in self.slots] or [0]
        event = stated(
            EventDraft,
            slot=says(**one_of(slot["slot"] for slot in self.slots)),
            news=says(**items_between(min(news), max(news))),
        )
        return stated(TimelineDraft, events=says(item_model=event, **items_between(count, count)))
