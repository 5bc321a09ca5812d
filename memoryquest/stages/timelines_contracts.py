"""Prompt contract of the timeline stage: ``timeline_synthesis``.

The inputs model is what :mod:`memoryquest.stages.timelines` sends (and the
offline simulator answers from); the output model is the answer's shape.
See :mod:`memoryquest.prompt_inputs` for the convention.
"""

from __future__ import annotations

from typing import Any, ClassVar

from pydantic import BaseModel, Field, with_config
from typing_extensions import TypedDict

from memoryquest.prompt_inputs import ISO_DATE, ONE_OF_THE_DOMAINS, ROW, PromptInputs

# --------------------------------------------------------------------------- what the model answers


class EventDraft(BaseModel):
    date: str = Field(description="ISO date (YYYY-MM-DD).", json_schema_extra=ISO_DATE)
    domain: str = Field(
        description="The event's PersonaLens domain.", json_schema_extra=ONE_OF_THE_DOMAINS
    )
    description: str = Field(description="What happens in this conversation, in the third person.")
    reference_index: int | None = Field(
        description="Index of the reference this event carries; null for filler."
    )
    news: list[str] = Field(
        default=[],
        description="Each personal update the user mentions in this conversation, one short "
        "sentence each; a reference event lists its reference among them.",
    )


class TimelineDraft(BaseModel):
    events: list[EventDraft]


# --------------------------------------------------------------------------- what the model is given


@with_config(ROW)
class TimelineQuery(TypedDict):
    """The accepted query a timeline leads up to."""

    query_id: str
    text: str
    query_date: str
    domain: str
    reasoning: str


@with_config(ROW)
class UserRequest(TypedDict):
    """Another request of the same user: what a filler update may matter to instead."""

    domain: str
    text: str


@with_config(ROW)
class TimelineReference(TypedDict):
    """One of the query's references, by its index in the query."""

    index: int
    text: str
    date: str
    domain: str


class TimelineInputs(PromptInputs):
    """One query, its references and the persona's material, for laying out the conversations.

    The prompt is blind: it shows the request's date, never its text, its
    reasoning or the user's other requests, so a model cannot write a
    reference's event as "... which matters for her October hike".
    ``user_references`` are the texts of all the user's queries' references,
    which this timeline's filler must not repeat (the same for every timeline of
    the user, so they sit in the prompt's cached prefix).
    """

    template_id: ClassVar[str] = "timeline_synthesis"
    stage: ClassVar[str] = "timelines"
    temperature: ClassVar[float] = 0.8
    output_model: ClassVar[type[BaseModel]] = TimelineDraft
    not_in_prompt: ClassVar[dict[str, str]] = {
        "user_requests": "the user's requests, this one among them: read by the offline "
        "simulator only (its distractors bridge to them); a model shown them foreshadows",
    }

    query: TimelineQuery
    references: list[TimelineReference]
    user_references: list[str] = []
    user_requests: list[UserRequest] = []
    demographics: dict[str, Any]
    affinities: list[dict[str, Any]]
    tasks: list[dict[str, Any]]
    events_min: int
    events_max: int
    lead_days_max: int
