"""Is every reference scoreable on its query date? Covered by memory, and not expired.

A reference no visible fact is credited to cannot be found by any method, and
one that expired before the query date should not be required at all; either
makes recall wrong for every method alike. Coverage uses the same rule as
:mod:`memoryquest.memory.coverage`: a fact credited to the reference is visible
in the memory as it stood on the query date.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from collections.abc import Set as AbstractSet

from pydantic import BaseModel, Field

from memoryquest.contracts import Query
from memoryquest.memory.coverage import uncovered_in
from memoryquest.memory.snapshot import MemoryItem

LISTED = 20
"""Uncovered or stale references named in the report."""


class ReferenceIssue(BaseModel):
    query_id: str
    reference_id: str
    detail: str


class GroundTruth(BaseModel):
    references: int
    covered: int
    uncovered: int
    stale: int
    uncovered_references: list[ReferenceIssue] = Field(description=f"The first {LISTED}.")
    stale_references: list[ReferenceIssue] = Field(description=f"The first {LISTED}.")
    recovered_by_reask: int = Field(
        default=0,
        description="Covered references that an extraction attempt left unquoted, credited only "
        "after the extraction was asked again (a check the paper's pipeline does not have).",
    )


def ground_truth(
    queries: Sequence[Query],
    memories: Mapping[str, Sequence[MemoryItem]],
    reasked: AbstractSet[str] = frozenset(),
) -> GroundTruth:
    """Covered, uncovered and stale references over ``queries``; ``memories`` maps query id to its
    snapshot, ``reasked`` holds the references an extraction attempt left unquoted."""
    total = covered = recovered = 0
    uncovered: list[ReferenceIssue] = []
    stale: list[ReferenceIssue] = []
    for query in queries:
        missing = set(uncovered_in(query, memories[query.query_id]))
        for reference in query.references:
            total += 1
            if reference.reference_id not in missing:
                covered += 1
                recovered += reference.reference_id in reasked
            else:
                uncovered.append(
                    ReferenceIssue(
                        query_id=query.query_id,
                        reference_id=reference.reference_id,
                        detail=f"no credited fact in memory on {query.query_date}",
                    )
                )
            if reference.valid_until is not None and reference.valid_until < query.query_date:
                stale.append(
                    ReferenceIssue(
                        query_id=query.query_id,
                        reference_id=reference.reference_id,
                        detail=f"valid until {reference.valid_until}, query on {query.query_date}",
                    )
                )
    return GroundTruth(
        references=total,
        covered=covered,
        uncovered=len(uncovered),
        stale=len(stale),
        uncovered_references=uncovered[:LISTED],
        stale_references=stale[:LISTED],
        recovered_by_reask=recovered,
    )
