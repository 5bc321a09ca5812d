"""The ``conversations`` stage group: a timeline and its dialogues for every standing query, as one history.

Per query, :func:`~memoryquest.stages.timelines.synthesise_timeline` dates the
events (each reference in exactly one), then
:func:`~memoryquest.stages.dialogues.expand_dialogues` turns every event into a
session. A query whose timeline is rejected, or whose events did not all
become sessions, is dropped from the persona's queries; its rejections are
kept. The queries run concurrently (the client's limiter paces them), and all
the persona's sessions are merged into one dated history
(:func:`~memoryquest.stages.history.merge_history`).
"""

from __future__ import annotations

import asyncio

from pydantic import BaseModel, Field

from memoryquest.contracts import Persona, Query, RejectedCandidate, Session, Timeline
from memoryquest.llm.client import ModelClient
from memoryquest.settings import Settings
from memoryquest.stages.dialogues import expand_dialogues
from memoryquest.stages.history import merge_history
from memoryquest.stages.state import PersonaState
from memoryquest.stages.timelines import synthesise_timeline


class ConversationsResult(BaseModel):
    timelines: list[Timeline] = Field(default_factory=list)
    sessions: list[Session] = Field(default_factory=list)
    rejected: list[RejectedCandidate] = Field(default_factory=list)
    dropped_query_ids: list[str] = Field(
        default_factory=list, description="Kept queries whose timeline or dialogues were rejected."
    )


async def _one_query(
    persona: Persona,
    query: Query,
    client: ModelClient,
    settings: Settings,
    user_queries: list[Query],
) -> tuple[Timeline | None, list[Session], list[RejectedCandidate]]:
    """The query's timeline and sessions, or None and the reasons."""
    timeline_result = await synthesise_timeline(
        persona,
        query,
        client,
        settings.generation,
        seed=settings.seed,
        user_queries=user_queries,
    )
    rejected = list(timeline_result.rejected)
    if timeline_result.timeline is None:
        return None, [], rejected
    dialogue_result = await expand_dialogues(
        persona, query, timeline_result.timeline, client, settings.generation, seed=settings.seed
    )
    rejected.extend(dialogue_result.rejected)
    if len(dialogue_result.sessions) != len(timeline_result.timeline.events):
        return None, [], rejected
    return timeline_result.timeline, dialogue_result.sessions, rejected


async def run(state: PersonaState, client: ModelClient, settings: Settings) -> ConversationsResult:
    """Timelines and dialogues for every standing query, merged into one dated history."""
    answers = await asyncio.gather(
        *(
            _one_query(state.persona, query, client, settings, state.queries)
            for query in state.queries
        )
    )
    result = ConversationsResult()
    for query, (timeline, sessions, rejected) in zip(state.queries, answers, strict=True):
        result.rejected.extend(rejected)
        if timeline is None:
            result.dropped_query_ids.append(query.query_id)
            continue
        result.timelines.append(timeline)
        result.sessions.extend(sessions)
    result.sessions = merge_history(result.sessions)
    return result


def apply(state: PersonaState, result: ConversationsResult) -> PersonaState:
    """Dropped queries go; the timelines, the history and the rejections are recorded."""
    return state.without_queries(result.dropped_query_ids).add(
        timelines=result.timelines, sessions=result.sessions, rejected=result.rejected
    )
