"""The per-persona pipeline as plain async functions; the Prefect flow only orchestrates them.

Grouping follows the cost of orchestration: a Prefect task per persona × stage
group (never per LLM call), with the concurrency inside a group coming from
asyncio and the client's limiter.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import hashlib
import time
import uuid

from pydantic import BaseModel, Field

import memoryquest
from memoryquest.contracts import (
    Persona,
    PromptVersion,
    Query,
    RejectedCandidate,
    RunManifest,
    Session,
    Timeline,
    ValidationResult,
)
from memoryquest.dataset import GeneratedDataset
from memoryquest.llm.client import ModelClient
from memoryquest.llm.prompts import all_templates
from memoryquest.memory.coverage import withdraw_uncovered
from memoryquest.memory.extraction import MemoryStageResult, build_memory
from memoryquest.pgr.metrics import with_difficulty
from memoryquest.pgr.runner import validate_queries
from memoryquest.settings import Settings
from memoryquest.stages.dialogues import expand_dialogues
from memoryquest.stages.history import merge_history
from memoryquest.stages.queries import QueryStageResult, generate_queries
from memoryquest.stages.timelines import synthesise_timeline


class ConversationsResult(BaseModel):
    timelines: list[Timeline] = Field(default_factory=list)
    sessions: list[Session] = Field(default_factory=list)
    rejected: list[RejectedCandidate] = Field(default_factory=list)
    dropped_query_ids: list[str] = Field(
        default_factory=list, description="Kept queries whose timeline or dialogues were rejected."
    )


async def queries_for(persona: Persona, client: ModelClient, settings: Settings) -> QueryStageResult:
    return await generate_queries(persona, client, settings.generation, seed=settings.seed)


async def conversations_for(
    persona: Persona, queries: list[Query], client: ModelClient, settings: Settings
) -> ConversationsResult:
    """Timelines and dialogues for every kept query, merged into one dated history."""

    async def one(query: Query) -> tuple[Query, Timeline | None, list[Session], list[RejectedCandidate]]:
        timeline_result = await synthesise_timeline(persona, query, client, settings.generation, seed=settings.seed)
        rejected = list(timeline_result.rejected)
        if timeline_result.timeline is None:
            return query, None, [], rejected
        dialogue_result = await expand_dialogues(
            persona, query, timeline_result.timeline, client, settings.generation, seed=settings.seed
        )
        rejected.extend(dialogue_result.rejected)
        if len(dialogue_result.sessions) != len(timeline_result.timeline.events):
            return query, None, [], rejected
        return query, timeline_result.timeline, dialogue_result.sessions, rejected

    result = ConversationsResult()
    for query, timeline, sessions, rejected in await asyncio.gather(*(one(q) for q in queries)):
        result.rejected.extend(rejected)
        if timeline is None:
            result.dropped_query_ids.append(query.query_id)
            continue
        result.timelines.append(timeline)
        result.sessions.extend(sessions)
    result.sessions = merge_history(result.sessions)
    return result


async def memory_for(
    persona: Persona, queries: list[Query], history: list[Session], client: ModelClient, settings: Settings
) -> MemoryStageResult:
    """The fact store, and the queries withdrawn because memory does not cover their references."""
    result = await build_memory(persona, history, client, settings.generation, seed=settings.seed)
    withdrawn, rejections = withdraw_uncovered(queries, result.facts)
    result.withdrawn_query_ids = withdrawn
    result.rejected.extend(rejections)
    return result


def prompt_versions() -> list[PromptVersion]:
    return [PromptVersion(template_id=t.template_id, version=t.version, sha256=t.sha256) for t in all_templates()]


def code_fingerprint() -> str:
    """Changes whenever the package version or any prompt template changes."""
    material = memoryquest.__version__ + "".join(f"{p.template_id}{p.version}{p.sha256}" for p in prompt_versions())
    return hashlib.sha256(material.encode()).hexdigest()[:16]


def build_manifest(
    dataset: GeneratedDataset, client: ModelClient, settings: Settings, started: float
) -> RunManifest:
    usage = client.usage()
    return RunManifest(
        run_id=uuid.uuid4().hex,
        created_at=dt.datetime.now(dt.UTC),
        package_version=memoryquest.__version__,
        simulated=client.simulated,
        backend=client.chat_backend.name,
        base_url=client.chat_backend.base_url,
        chat_model=client.chat_backend.model,
        embedder=client.embedder_name,
        seed=settings.seed,
        settings=settings.masked(),
        prompts=prompt_versions(),
        usage=usage,
        total_cost_usd=round(sum(u.cost_usd for u in usage), 6),
        persona_ids=[p.persona_id for p in dataset.personas],
        wall_seconds=round(time.perf_counter() - started, 3),
    )


def assemble_persona(
    persona: Persona,
    queries: QueryStageResult,
    conversations: ConversationsResult,
    memory: MemoryStageResult,
    validation: list[ValidationResult],
) -> GeneratedDataset:
    """One persona's rows; queries whose timeline or dialogues were rejected, or whose references
    memory does not cover, are left out. An uncovered query's timeline and sessions stay: they are
    part of the user's history, and the query itself is kept in ``rejected``.

    This is where queries meet their validation (in-process, Prefect and Dask
    runs alike), so each query's ``difficulty`` — its query-only recall under
    the provenance judge — is set here."""
    dropped = set(conversations.dropped_query_ids) | set(memory.withdrawn_query_ids)
    kept = [q for q in queries.queries if q.query_id not in dropped]
    return GeneratedDataset(
        personas=[persona],
        queries=with_difficulty(kept, validation),
        timelines=conversations.timelines,
        sessions=conversations.sessions,
        facts=memory.facts,
        validation=validation,
        rejected=[*queries.rejected, *conversations.rejected, *memory.rejected],
    )


def kept_queries(
    queries: QueryStageResult, conversations: ConversationsResult, memory: MemoryStageResult | None = None
) -> list[Query]:
    dropped = set(conversations.dropped_query_ids) | set(memory.withdrawn_query_ids if memory else ())
    return [q for q in queries.queries if q.query_id not in dropped]


async def generate_persona(persona: Persona, client: ModelClient, settings: Settings) -> GeneratedDataset:
    """Every stage for one persona, in order."""
    queries = await queries_for(persona, client, settings)
    conversations = await conversations_for(persona, queries.queries, client, settings)
    memory = await memory_for(persona, kept_queries(queries, conversations), conversations.sessions, client, settings)
    validation: list[ValidationResult] = []
    if settings.pgr.methods:
        validation = await validate_queries(kept_queries(queries, conversations, memory), memory.facts, client, settings.pgr)
    return assemble_persona(persona, queries, conversations, memory, validation)


async def generate_dataset(personas: list[Persona], client: ModelClient, settings: Settings) -> GeneratedDataset:
    """The whole pipeline in one process without Prefect (used by ``estimate`` and Dask workers)."""
    started = time.perf_counter()
    dataset = GeneratedDataset()
    for part in await asyncio.gather(*(generate_persona(p, client, settings) for p in personas)):
        dataset.extend(part)
    dataset.manifest = build_manifest(dataset, client, settings, started)
    return dataset
