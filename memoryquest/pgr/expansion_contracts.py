"""Prompt contracts of the query-expansion baselines: ``pgr_expand_queries`` and
``pgr_hypothetical_facts``.

Both baselines ask the model once per query, then retrieve densely with the request and
every text the model wrote, fusing the lists at PGR's budget
(:mod:`memoryquest.pgr.baselines`). They answer a reviewer's question: how much of
prospection's gain would any query expansion get, without its iterative planning?
See :mod:`memoryquest.prompt_inputs` for the convention.
"""

from __future__ import annotations

from typing import ClassVar

from pydantic import BaseModel, Field

from memoryquest.pgr.prospection_contracts import QueryInputs
from memoryquest.prompt_inputs import says, stated

# --------------------------------------------------------------------------- what the model answers


class ExpansionTexts(BaseModel):
    """An expansion's answer: the texts to search with, whatever the template calls them."""

    @property
    def texts(self) -> list[str]:
        raise NotImplementedError


class SearchQueries(ExpansionTexts):
    queries: list[str] = Field(min_length=1, description="Search queries, one per angle.")

    @property
    def texts(self) -> list[str]:
        return self.queries


class HypotheticalFacts(ExpansionTexts):
    facts: list[str] = Field(
        min_length=1, description="Short facts about the user that would change the answer."
    )

    @property
    def texts(self) -> list[str]:
        return self.facts


# --------------------------------------------------------------------------- what the model is given


class ExpansionInputs(QueryInputs):
    """The request, its date and how many texts to write."""

    temperature: ClassVar[float] = 0.3

    count: int


class MultiQueryInputs(ExpansionInputs):
    """Multi-query expansion: the request rewritten as several memory searches."""

    template_id: ClassVar[str] = "pgr_expand_queries"
    output_model: ClassVar[type[BaseModel]] = SearchQueries

    def answer_model(self) -> type[BaseModel]:
        """At most the ``count`` searches asked for."""
        return stated(SearchQueries, queries=says(maxItems=max(1, self.count)))


class HypotheticalFactsInputs(ExpansionInputs):
    """Hypothetical-fact expansion (HyDE): facts the user may have told, written to be searched with."""

    template_id: ClassVar[str] = "pgr_hypothetical_facts"
    output_model: ClassVar[type[BaseModel]] = HypotheticalFacts

    def answer_model(self) -> type[BaseModel]:
        """At most the ``count`` facts asked for."""
        return stated(HypotheticalFacts, facts=says(maxItems=max(1, self.count)))
