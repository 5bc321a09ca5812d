"""Real generated output (simulator + local embedder) shared by the stage and validate tests.

Runs the query, timeline and dialogue stages for a couple of bundled PersonaLens
users once per test process (cached), merges each user's history, and returns
everything as a GeneratedDataset plus the raw stage results.
"""

from __future__ import annotations

import asyncio
import functools
import json
import re
import time
from dataclasses import dataclass, field
from pathlib import Path

from memoryquest.contracts import Persona, Query, Reference
from memoryquest.dataset import GeneratedDataset
from memoryquest.intake import PersonaSelection, load_personas
from memoryquest.llm.client import ModelClient
from memoryquest.llm.factory import shared_local_embedder
from memoryquest.llm.simulated import SimulatedChatBackend
from memoryquest.settings import GenerationSettings, Settings
from memoryquest.simulator import simulate
from memoryquest.simulator.grammar import Person, shift_person
from memoryquest.simulator.persona_grounding import split_sentences
from memoryquest.stages.dialogues import DialogueStageResult, expand_dialogues
from memoryquest.stages.history import merge_history
from memoryquest.stages.queries import QueryStageResult, generate_queries
from memoryquest.stages.timeline_slots import Slot, plan_slots
from memoryquest.stages.timelines import (
    TimelineStageResult,
    synthesise_timeline,
    timeline_inputs,
)

REPO_ROOT = Path(__file__).resolve().parent.parent
USERS = ("user0", "user3")
SEED = 0


def simulated_client(seed: int = 0) -> ModelClient:
    """The offline client: simulator chat, real all-MiniLM-L6-v2 embeddings, no cache."""
    return ModelClient(SimulatedChatBackend(seed=seed), shared_local_embedder())


def load_users(*users: str) -> list[Persona]:
    result = load_personas(
        REPO_ROOT / "personas" / "personalens", PersonaSelection(user_ids=list(users))
    )
    assert not result.errors, result.errors
    return result.personas


def candidate_query(persona: Persona, candidate: dict, number: int = 0) -> Query:
    """A simulated query candidate (as the model answered it) as the query the stage keeps."""
    return Query(
        query_id=f"q_{number:016x}",
        persona_id=persona.persona_id,
        query_date=candidate["query_date"],
        text=candidate["query"],
        reasoning=candidate["reasoning"],
        domain=candidate["domain"],
        references=[
            Reference(
                reference_id=f"r_{number:08x}{i:08x}",
                date=r["date"],
                text=r["text"],
                domain=r["domain"],
                cosine=0.0,
            )
            for i, r in enumerate(candidate["references"])
        ],
        gamma=0.0,
        embedder="none",
        rank=0,
    )


def simulated_timeline(
    persona: Persona, candidate: dict, settings: GenerationSettings, seed: int = 0
) -> list[tuple[Slot, dict]]:
    """The simulator's timeline for a candidate over the stage's own slots: each slot with its
    answered event (the slot's date and domain merged in), as the model wrote it."""
    query = candidate_query(persona, candidate)
    slots = plan_slots(persona, query, settings)
    variables = timeline_inputs(persona, query, slots, settings, [query]).variables()
    events = json.loads(simulate("timeline_synthesis", variables, seed=seed))["events"]
    shown = variables["slots"]
    return [
        (slot, {"date": row["date"], "domain": row["domain"], **event})
        for slot, row, event in zip(slots, shown, events, strict=True)
    ]


@dataclass
class GeneratedRun:
    settings: Settings
    personas: list[Persona]
    queries: dict[str, QueryStageResult] = field(default_factory=dict)
    timelines: dict[str, TimelineStageResult] = field(default_factory=dict)  # by query id
    dialogues: dict[str, DialogueStageResult] = field(default_factory=dict)  # by query id
    dataset: GeneratedDataset = field(default_factory=GeneratedDataset)
    seconds: dict[str, float] = field(default_factory=dict)  # stage wall time for the first persona

    def persona(self, user: str) -> Persona:
        return next(p for p in self.personas if p.source_user_id == user)

    def kept(self) -> list[Query]:
        """The queries standing after the dialogues, as the conversations group leaves them: a
        query whose timeline or any conversation failed its gates is withdrawn there."""
        return [
            q
            for result in self.queries.values()
            for q in result.queries
            if (timeline := self.timelines[q.query_id].timeline) is not None
            and (dialogue := self.dialogues.get(q.query_id)) is not None
            and len(dialogue.sessions) == len(timeline.events)
        ]


async def run_stages(
    persona: Persona, client: ModelClient, settings: GenerationSettings, seed: int = SEED
) -> tuple[
    QueryStageResult,
    dict[str, TimelineStageResult],
    dict[str, DialogueStageResult],
    dict[str, float],
]:
    started = time.perf_counter()
    queries = await generate_queries(persona, client, settings, seed=seed)
    after_queries = time.perf_counter()
    timeline_results = await asyncio.gather(
        *(synthesise_timeline(persona, q, client, settings, seed=seed) for q in queries.queries)
    )
    after_timelines = time.perf_counter()
    dialogue_results = await asyncio.gather(
        *(
            expand_dialogues(persona, q, t.timeline, client, settings, seed=seed)
            for q, t in zip(queries.queries, timeline_results, strict=True)
            if t.timeline is not None
        )
    )
    finished = time.perf_counter()
    timelines = {q.query_id: t for q, t in zip(queries.queries, timeline_results, strict=True)}
    with_timeline = [q for q in queries.queries if timelines[q.query_id].timeline is not None]
    dialogues = {q.query_id: d for q, d in zip(with_timeline, dialogue_results, strict=True)}
    seconds = {
        "queries": after_queries - started,
        "timelines": after_timelines - after_queries,
        "dialogues": finished - after_timelines,
    }
    return queries, timelines, dialogues, seconds


@functools.cache
def generated(users: tuple[str, ...] = USERS, seed: int = SEED) -> GeneratedRun:
    settings = Settings()
    personas = load_users(*users)
    client = simulated_client()
    run = GeneratedRun(settings=settings, personas=personas)

    async def go() -> None:
        for index, persona in enumerate(personas):
            queries, timelines, dialogues, seconds = await run_stages(
                persona, client, settings.generation, seed
            )
            run.queries[persona.persona_id] = queries
            run.timelines.update(timelines)
            run.dialogues.update(dialogues)
            if index == 0:
                run.seconds = seconds

    asyncio.run(go())
    dataset = GeneratedDataset(personas=personas)
    standing = {q.query_id for q in run.kept()}
    for result in run.queries.values():
        dataset.queries.extend(q for q in result.queries if q.query_id in standing)
        dataset.rejected.extend(result.rejected)
    for query_id, timeline_result in run.timelines.items():
        dataset.rejected.extend(timeline_result.rejected)
        if timeline_result.timeline is not None and query_id in standing:
            dataset.timelines.append(timeline_result.timeline)
    sessions = []
    for query_id, dialogue_result in run.dialogues.items():
        dataset.rejected.extend(dialogue_result.rejected)
        if query_id in standing:
            sessions.extend(dialogue_result.sessions)
    dataset.sessions = merge_history(sessions)
    run.dataset = dataset
    return run


_BOILERPLATE = re.compile(
    r"year[- ]old|years old|aged \d|interacts? with the|engages? with the|native speaker|"
    r"working professional from|from (?:the )?[A-Z][a-z]+ (?:with|working)",
    re.IGNORECASE,
)


def interaction_sentences(summary: str | None, person: Person = "first") -> list[str]:
    """Sentences of an interaction summary said by (first) or to (second) the user: what a
    conversation must not paste."""
    out: list[str] = []
    for raw in split_sentences(summary or ""):
        if _BOILERPLATE.search(raw) or not 40 <= len(raw) <= 260:
            continue
        if not re.search(r"\b(the user|he|she|his|her)\b", raw, re.IGNORECASE):
            continue
        moved = shift_person(raw, person)
        if moved is not None and not re.search(r"\buser\b", moved, re.IGNORECASE):
            out.append(moved)
    return out
