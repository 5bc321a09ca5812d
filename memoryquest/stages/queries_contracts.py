"""Prompt contracts of the queries stage: ``query_generation`` and ``reference_relevance``.

The inputs models are what :mod:`memoryquest.stages.queries` sends (and the
offline simulator answers from); the output models are the answers' shapes.
See :mod:`memoryquest.prompt_inputs` for the convention.
"""

from __future__ import annotations

from typing import Annotated, Any, ClassVar

from pydantic import BaseModel, Field, WithJsonSchema, with_config
from typing_extensions import TypedDict

from memoryquest.contracts import Stage
from memoryquest.prompt_inputs import (
    ISO_DATE,
    ONE_OF_THE_DOMAINS,
    ROW,
    JudgeInputs,
    PromptInputs,
    items_between,
    one_of,
    says,
    stated,
)

# --------------------------------------------------------------------------- what the model answers


class ReferenceDraft(BaseModel):
    text: str = Field(description="Short, atomic statement about the user.")
    date: str = Field(
        description="ISO date (YYYY-MM-DD) when this became true or was said.",
        json_schema_extra=ISO_DATE,
    )
    domain: str = Field(
        description="One of the 20 PersonaLens domains, not the query's.",
        json_schema_extra=ONE_OF_THE_DOMAINS,
    )
    rationale: str = Field(
        default="", description="One sentence: which part of the request this changes."
    )
    valid_until: Annotated[str, WithJsonSchema({"type": "string", **ISO_DATE})] | None = Field(
        default=None,
        description="ISO date of the last day a time-bounded statement holds; null otherwise.",
    )


class QueryCandidateDraft(BaseModel):
    query: str = Field(description="The in-situ request the user makes, in the first person.")
    query_date: str = Field(
        description="ISO date (YYYY-MM-DD) the user makes the request.",
        json_schema_extra=ISO_DATE,
    )
    reasoning: str = Field(description="Why the references matter for a good answer.")
    domain: str = Field(
        description="The request's task domain.", json_schema_extra=ONE_OF_THE_DOMAINS
    )
    references: list[ReferenceDraft]


class QueryCandidatesDraft(BaseModel):
    candidates: list[QueryCandidateDraft]


class RelevanceVerdict(BaseModel):
    """The rationale comes before the verdict, so the verdict follows from it."""

    index: int = Field(description="Index of the statement judged.")
    rationale: str = Field(
        description="One sentence naming the part of the request it affects, or why none."
    )
    relevant: bool = Field(
        description="Would knowing it change how the assistant handles the request?"
    )


class RelevanceAnswer(BaseModel):
    verdicts: list[RelevanceVerdict]


# --------------------------------------------------------------------------- what the model is given


class QueryGenerationInputs(PromptInputs):
    """One persona's real content and the rules its candidate queries must follow.

    The persona blobs are the JSON dumps of :class:`~memoryquest.contracts.Persona`
    parts, as :func:`memoryquest.generation.common.persona_variables` writes them.
    """

    template_id: ClassVar[str] = "query_generation"
    stage: ClassVar[Stage] = Stage.QUERIES
    temperature: ClassVar[float] = 0.9
    output_model: ClassVar[type[BaseModel]] = QueryCandidatesDraft
    not_in_prompt: ClassVar[dict[str, str]] = {
        "persona_id": "groups one persona's requests in the provider's prompt cache",
        "interests": "the simulator grounds requests in them; the prompt shows the affinities",
    }
    unread_offline: ClassVar[dict[str, str]] = {
        "news_words_min": "the simulator's references are written in the news form already",
        "news_words_max": "the simulator's references are written in the news form already",
    }

    persona_id: str
    demographics: dict[str, Any]
    interests: list[str]
    affinities: list[dict[str, Any]]
    interactions: list[dict[str, Any]]
    tasks: list[dict[str, Any]]
    count: int
    references_min: int
    references_max: int
    query_date_start: str
    query_date_end: str
    reference_window_days: int
    news_words_min: int
    news_words_max: int
    domains: list[str]
    already_proposed: list[str]

    def answer_model(self) -> type[BaseModel]:
        """``count`` candidates of ``references_min..references_max`` references each."""
        candidate = stated(
            QueryCandidateDraft,
            references=says(
                item_model=stated(ReferenceDraft),
                **items_between(self.references_min, self.references_max),
            ),
        )
        return stated(
            QueryCandidatesDraft,
            candidates=says(item_model=candidate, **items_between(*[self.count] * 2)),
        )


@with_config(ROW)
class RelevanceReference(TypedDict):
    """A reference as the relevance judge sees it."""

    index: int
    text: str
    date: str
    domain: str


class ReferenceRelevanceInputs(JudgeInputs):
    """One candidate query and its references, for the judge of each reference's relevance."""

    template_id: ClassVar[str] = "reference_relevance"
    stage: ClassVar[Stage] = Stage.QUERIES
    output_model: ClassVar[type[BaseModel]] = RelevanceAnswer

    query_domain: str
    references: list[RelevanceReference]

    def answer_model(self) -> type[BaseModel]:
        """One verdict for each reference, by its index."""
        count = len(self.references)
        verdict = stated(
            RelevanceVerdict, index=says(**one_of(r["index"] for r in self.references))
        )
        return stated(
            RelevanceAnswer, verdicts=says(item_model=verdict, **items_between(count, count))
        )
