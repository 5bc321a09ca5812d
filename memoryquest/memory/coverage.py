"""Ground-truth coverage: every reference must be findable in memory on its query's date.

A reference is covered when at least one fact credited to it (extracted from
the sentence that states it, or a later revision or merge of such a fact) is
visible in the memory as it stood on the query date. A query with an uncovered
reference cannot be scored, so the pipeline withdraws it with reason
``uncovered``; ``validate`` and the audit report any that remain.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from memoryquest.contracts import Fact, Query, RejectedCandidate, RejectionReason
from memoryquest.memory.snapshot import MemoryItem, memory_as_of
from memoryquest.stages.common import rejected


def uncovered_in(query: Query, snapshot: Iterable[MemoryItem]) -> list[str]:
    """Ids of ``query``'s references that no fact of ``snapshot`` (memory on the query date) is credited to."""
    credited = {ref for item in snapshot for ref in item.source_reference_ids}
    return [r.reference_id for r in query.references if r.reference_id not in credited]


def uncovered_references(query: Query, facts: Sequence[Fact]) -> list[str]:
    """Ids of ``query``'s references with no credited fact visible on the query date."""
    return uncovered_in(query, memory_as_of(list(facts), query.query_date))


def withdraw_uncovered(
    queries: Sequence[Query], facts: Sequence[Fact]
) -> tuple[list[str], list[RejectedCandidate]]:
    """Queries to withdraw (ids) and one ``uncovered`` rejection for each, naming the references."""
    withdrawn: list[str] = []
    rejections: list[RejectedCandidate] = []
    by_persona: dict[str, list[Fact]] = {}
    for fact in facts:
        by_persona.setdefault(fact.persona_id, []).append(fact)
    for query in queries:
        missing = uncovered_references(query, by_persona.get(query.persona_id, []))
        if not missing:
            continue
        withdrawn.append(query.query_id)
        detail = (
            f"query {query.query_id}: no fact credited to reference(s) {', '.join(missing)} "
            f"is in memory on {query.query_date}; its sessions stay in the history"
        )
        rejections.append(
            rejected(
                query.persona_id,
                "memory",
                RejectionReason.UNCOVERED,
                detail,
                query,
                query.query_id,
                "uncovered",
            )
        )
    return withdrawn, rejections
