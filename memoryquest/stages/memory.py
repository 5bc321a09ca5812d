"""The ``memory`` stage group: the persona's fact store, and the queries it cannot serve withdrawn.

:func:`~memoryquest.memory.extraction.build_memory` replays the history in
date order, extracting and consolidating atomic facts. Then
:func:`~memoryquest.memory.coverage.withdraw_uncovered` withdraws every query
with a reference that no fact is credited to: PGR could not find it in any
memory, so the query would measure nothing. A query whose credited fact gives
the request away is withdrawn too (:func:`~memoryquest.memory.coverage.withdraw_leaking`). A withdrawn query's timeline and
sessions stay in the history; the query itself is kept in ``rejected``.
"""

from __future__ import annotations

from memoryquest.llm.client import ModelClient
from memoryquest.memory.coverage import withdraw_leaking, withdraw_uncovered
from memoryquest.memory.extraction import MemoryStageResult, build_memory
from memoryquest.settings import Settings
from memoryquest.stages.state import PersonaState


async def run(state: PersonaState, client: ModelClient, settings: Settings) -> MemoryStageResult:
    """The fact store, and the queries withdrawn because memory does not cover their references."""
    result = await build_memory(
        state.persona, state.sessions, client, settings.generation, seed=settings.seed
    )
    withdrawn, rejections = withdraw_uncovered(state.queries, result.facts)
    standing = [q for q in state.queries if q.query_id not in withdrawn]
    leaking, leaks = await withdraw_leaking(standing, result.facts, client, settings.generation)
    result.withdrawn_query_ids = withdrawn + leaking
    result.rejected.extend(rejections + leaks)
    return result


def apply(state: PersonaState, result: MemoryStageResult) -> PersonaState:
    """Withdrawn queries go; the facts and the rejections are recorded."""
    return state.without_queries(result.withdrawn_query_ids).add(
        facts=result.facts, rejected=result.rejected
    )
