"""The ``conversations`` stage group: a timeline and its dialogues for every standing query, as one history.

Per query, :func:`~memoryquest.stages.timelines.synthesise_timeline` dates the
events (each reference in exactly one), then
:func:`~memoryquest.stages.dialogues.expand_dialogues` turns every event into a
session. A query whose timeline is rejected, or whose events did not all
become sessions, is dropped from the persona's queries; its rejections are
kept. The queries run concurrently (the client's limiter paces them), and all
the persona's sessions are merged into one dated history
(:func:`~memoryquest.stages.history.merge_history`). Each standing query gets
``gamma_said``: γ over the sentences its references are actually said with.
"""

from __future__ import annotations

import asyncio

import numpy as np
from pydantic import BaseModel, Field

from memoryquest.contracts import (
    Query,
    RejectedCandidate,
    ReviewTally,
    Session,
    Stage,
    Timeline,
)
from memoryquest.generation.ledger import SaidLedger
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
    gamma_said: dict[str, float] = Field(
        default_factory=dict,
        description="Per standing query: mean cosine between it and the sentences its references are said with.",
    )
    review: ReviewTally | None = Field(
        default=None, description="What the blind reviewer read and flagged (generation.review)."
    )


async def run(state: PersonaState, client: ModelClient, settings: Settings) -> ConversationsResult:
    """Timelines for every standing query, then their dialogues, merged into one dated history.

    Every timeline is drafted before any dialogue; the dialogues of all the queries are then
    written in bands of dates, so each conversation is written knowing what the user actually
    said in the bands before it, whichever query they belong to.
    """
    persona, queries = state.persona, state.queries
    drafted = await asyncio.gather(
        *(
            synthesise_timeline(
                persona, q, client, settings.generation, seed=settings.seed, user_queries=queries
            )
            for q in queries
        )
    )
    timelines = {q.query_id: d.timeline for q, d in zip(queries, drafted, strict=True)}
    standing = [q for q in queries if timelines[q.query_id] is not None]
    drawn = [t for t in timelines.values() if t is not None]

    said = SaidLedger(standing, drawn, settings.generation.ledger_waves)
    written = await asyncio.gather(
        *(
            expand_dialogues(
                persona,
                q,
                timeline,
                client,
                settings.generation,
                seed=settings.seed,
                said=said,
            )
            for q in standing
            if (timeline := timelines[q.query_id]) is not None
        )
    )
    dialogues = {q.query_id: w for q, w in zip(standing, written, strict=True)}
    result = ConversationsResult()
    for query, draft in zip(queries, drafted, strict=True):
        result.rejected.extend(draft.rejected)
        timeline = timelines[query.query_id]
        dialogue = dialogues.get(query.query_id)
        if dialogue is not None:
            result.rejected.extend(dialogue.rejected)
            if dialogue.review is not None:
                result.review = (result.review or ReviewTally()).plus(dialogue.review)
        if timeline is None or dialogue is None or len(dialogue.sessions) != len(timeline.events):
            result.dropped_query_ids.append(query.query_id)
            continue
        result.timelines.append(timeline)
        result.sessions.extend(dialogue.sessions)
    result.sessions = merge_history(result.sessions)
    kept = [q for q in queries if q.query_id not in result.dropped_query_ids]
    result.gamma_said = await gamma_said(kept, result.sessions, client)
    return result


async def gamma_said(
    queries: list[Query], sessions: list[Session], client: ModelClient
) -> dict[str, float]:
    """γ of what the conversations say: per query, the mean cosine between it and the sentence
    each of its references is said with (one embedding call for the persona)."""
    said: dict[str, str] = {}
    for session in sessions:
        if session.reference_id is not None and session.reference_spans:
            span = session.reference_spans[0]
            said[session.reference_id] = session.turns[span.turn_index].content[
                span.start : span.end
            ]
    pairs = [
        (q, [said[r.reference_id] for r in q.references if r.reference_id in said]) for q in queries
    ]
    pairs = [(q, sentences) for q, sentences in pairs if sentences]
    if not pairs:
        return {}
    texts = list(dict.fromkeys(t for q, sentences in pairs for t in (q.text, *sentences)))
    vectors = await client.embed(texts, stage=Stage.DIALOGUES)
    row = {text: index for index, text in enumerate(texts)}
    return {
        q.query_id: float(np.mean([vectors[row[s]] @ vectors[row[q.text]] for s in sentences]))
        for q, sentences in pairs
    }


def apply(state: PersonaState, result: ConversationsResult) -> PersonaState:
    """Dropped queries go; the standing ones get their γ as said; the timelines, the history and
    the rejections are recorded."""
    standing = state.without_queries(result.dropped_query_ids)
    said = standing.model_copy(
        update={
            "queries": [
                q.model_copy(update={"gamma_said": result.gamma_said.get(q.query_id)})
                for q in standing.queries
            ]
        }
    )
    return said.add(
        timelines=result.timelines,
        sessions=result.sessions,
        rejected=result.rejected,
        review=result.review,
    )
