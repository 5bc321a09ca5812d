"""The ``pgr-validation`` stage group: every standing query through the bundled PGR runner.

:func:`~memoryquest.pgr.runner.validate_queries` runs query-only retrieval
and PGR (``pgr.methods``, each with its budget-matched baselines) over the
memory as it stood on each query's date and scores recall per judge. A query ×
method whose model answers cannot be used is recorded in ``rejected`` (stage
``pgr``) with its reason, and leaves no rows. Each
query's ``difficulty`` (its query-only recall under the provenance judge) is
set from those results here, so it is the same however the run was
orchestrated. With no ``pgr.methods`` the group does not run.
"""

from __future__ import annotations

from pydantic import BaseModel, Field

from memoryquest.contracts import RejectedCandidate, ValidationResult
from memoryquest.llm.client import ModelClient
from memoryquest.pgr.metrics import with_difficulty
from memoryquest.pgr.runner import validate_queries
from memoryquest.settings import Settings
from memoryquest.stages.state import PersonaState


class ValidationStageResult(BaseModel):
    results: list[ValidationResult] = Field(default_factory=list)
    rejected: list[RejectedCandidate] = Field(default_factory=list)


def enabled(settings: Settings) -> bool:
    return bool(settings.pgr.methods)


async def run(
    state: PersonaState, client: ModelClient, settings: Settings
) -> ValidationStageResult:
    """One result per standing query × method × judge (and baseline), over the persona's facts."""
    failures: list[RejectedCandidate] = []
    results = await validate_queries(
        state.queries, state.facts, client, settings.pgr, failures=failures
    )
    return ValidationStageResult(results=results, rejected=failures)


def apply(state: PersonaState, result: ValidationStageResult) -> PersonaState:
    """The results are recorded, and each query's difficulty is set from them."""
    scored = state.model_copy(update={"queries": with_difficulty(state.queries, result.results)})
    return scored.add(validation=result.results, rejected=result.rejected)
