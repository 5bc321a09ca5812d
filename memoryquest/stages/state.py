"""One persona's rows so far: what every stage group reads.

A stage group takes the state, returns its own output, and its ``apply``
adds that output to the state (:mod:`memoryquest.pipeline` does the
bookkeeping). The state holds contract rows only, so this module imports
nothing but the contracts and the dataset: a stage that imports it does not
take the other stages into its cache fingerprint (:mod:`memoryquest.fingerprint`).
"""

from __future__ import annotations

from collections.abc import Collection, Sequence

from pydantic import BaseModel, Field

from memoryquest.contracts import (
    Fact,
    Persona,
    Query,
    RejectedCandidate,
    ReviewTally,
    Session,
    Timeline,
    ValidationResult,
)
from memoryquest.dataset import DATASET_TABLES, GeneratedDataset, added_tally


class PersonaState(BaseModel):
    persona: Persona
    queries: list[Query] = Field(
        default_factory=list,
        description="The queries still standing: a stage that cannot serve a query withdraws it.",
    )
    timelines: list[Timeline] = Field(default_factory=list)
    sessions: list[Session] = Field(
        default_factory=list, description="The persona's history, merged and dated."
    )
    facts: list[Fact] = Field(default_factory=list)
    validation: list[ValidationResult] = Field(default_factory=list)
    rejected: list[RejectedCandidate] = Field(default_factory=list)
    review: ReviewTally | None = Field(
        default=None, description="What the blind reviewer read and flagged (generation.review)."
    )

    def add(
        self,
        *,
        queries: Sequence[Query] = (),
        timelines: Sequence[Timeline] = (),
        sessions: Sequence[Session] = (),
        facts: Sequence[Fact] = (),
        validation: Sequence[ValidationResult] = (),
        rejected: Sequence[RejectedCandidate] = (),
        review: ReviewTally | None = None,
    ) -> PersonaState:
        """A new state with these rows after the ones already there (and ``review`` added to its tally)."""
        return self.model_copy(
            update={
                "queries": [*self.queries, *queries],
                "timelines": [*self.timelines, *timelines],
                "sessions": [*self.sessions, *sessions],
                "facts": [*self.facts, *facts],
                "validation": [*self.validation, *validation],
                "rejected": [*self.rejected, *rejected],
                "review": added_tally(self.review, review),
            }
        )

    def without_queries(self, query_ids: Collection[str]) -> PersonaState:
        """A new state without these queries. Their timelines and sessions stay: they are
        part of the persona's history either way, and why a query went is in ``rejected``."""
        dropped = set(query_ids)
        return self.model_copy(
            update={"queries": [q for q in self.queries if q.query_id not in dropped]}
        )

    def dataset(self) -> GeneratedDataset:
        """The persona's rows as a dataset of one persona (no manifest: that is the run's)."""
        rows = {name: getattr(self, name) for name in DATASET_TABLES if name != "personas"}
        return GeneratedDataset(personas=[self.persona], review=self.review, **rows)
