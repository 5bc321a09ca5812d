"""Ground-truth coverage: every reference must be findable in memory on its query's date.

A reference is covered when at least one fact credited to it (extracted from
the sentence that states it, or a later revision or merge of such a fact) is
visible in the memory as it stood on the query date. A query with an uncovered
reference cannot be scored, so the pipeline withdraws it with reason
``uncovered``; ``validate`` and the audit report any that remain.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Final

import numpy as np

from memoryquest.contracts import Fact, Query, RejectedCandidate, RejectionReason, Stage
from memoryquest.generation.common import final_text_problem, rejected
from memoryquest.llm.client import ModelClient
from memoryquest.memory.snapshot import MemoryItem, memory_as_of
from memoryquest.settings import GenerationSettings

STAGE: Final = Stage.MEMORY


def uncovered_in(query: Query, snapshot: Iterable[MemoryItem]) -> list[str]:
    """Ids of ``query``'s references that no fact of ``snapshot`` (memory on the query date) is credited to."""
    credited = {ref for item in snapshot for ref in item.source_reference_ids}
    return [r.reference_id for r in query.references if r.reference_id not in credited]


def uncovered_references(query: Query, facts: Sequence[Fact]) -> list[str]:
    """Ids of ``query``'s references with no credited fact visible on the query date."""
    return uncovered_in(query, memory_as_of(list(facts), query.query_date))


async def withdraw_leaking(
    queries: Sequence[Query],
    facts: Sequence[Fact],
    client: ModelClient,
    settings: GenerationSettings,
) -> tuple[list[str], list[RejectedCandidate]]:
    """Queries to withdraw (ids) because the facts credited to their references give the request
    away, one rejection each: a single fact fails
    :func:`~memoryquest.generation.common.final_text_problem`, or γ over them (per reference the
    mean cosine of its credited facts to the request, averaged over the references) is above
    ``gamma_max`` (``similarity``).

    Retrieval reads the facts, not the drafted references: a fact that repeats the
    request's words or date would let the query alone find it. The fact cannot be
    asked for again without replaying the memory, so the query goes (one embedding call).
    """
    credited: list[tuple[Query, Fact]] = []
    for query in queries:
        ids = {r.reference_id for r in query.references}
        credited += [
            (query, f)
            for f in facts
            if f.persona_id == query.persona_id and ids & set(f.source_reference_ids)
        ]
    if not credited:
        return [], []
    texts = list(dict.fromkeys([q.text for q, _ in credited] + [f.info for _, f in credited]))
    vectors = await client.embed(texts, stage=STAGE)
    row = {text: index for index, text in enumerate(texts)}
    withdrawn: list[str] = []
    rejections: list[RejectedCandidate] = []

    def withdraw(query: Query, reason: RejectionReason, detail: str) -> None:
        withdrawn.append(query.query_id)
        rejections.append(
            rejected(
                query.persona_id,
                STAGE,
                reason,
                f"query {query.query_id}: {detail}",
                query,
                query.query_id,
                reason.value,
            )
        )

    by_reference: dict[tuple[str, str], list[float]] = {}
    for query, fact in credited:
        if query.query_id in withdrawn:
            continue
        cosine = float(vectors[row[fact.info]] @ vectors[row[query.text]])
        for reference_id in fact.source_reference_ids:
            by_reference.setdefault((query.query_id, reference_id), []).append(cosine)
        problem = final_text_problem(fact.info, cosine, query, settings)
        if problem is not None:
            reason, detail = problem
            withdraw(query, reason, f"fact {fact.fid}, credited to its reference: {detail}")
    for query in {q.query_id: q for q, _ in credited}.values():
        if query.query_id in withdrawn:
            continue
        per_reference = [
            float(np.mean(cosines))
            for r in query.references
            if (cosines := by_reference.get((query.query_id, r.reference_id)))
        ]
        gamma = float(np.mean(per_reference))
        if gamma > settings.gamma_max:
            withdraw(
                query,
                RejectionReason.SIMILARITY,
                f"γ over the facts credited to its references is {gamma:.3f} "
                f"(> {settings.gamma_max})",
            )
    return withdrawn, rejections


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
                STAGE,
                RejectionReason.UNCOVERED,
                detail,
                query,
                query.query_id,
                "uncovered",
            )
        )
    return withdrawn, rejections
