"""A small MemoryQuest-shaped dataset with known ground truth, for demos, tests and benchmarks.

The memory of a bundled PersonaLens user is built from their real profile
(affinities become preference facts, interaction summaries become activity
facts), and a hand-written scenario (``data/sample_scenario.json``) adds two
queries whose required references each feed one fact — so every judge's answer
is known in advance. The scenario also carries the temporal traps a snapshot
must handle: a fact revised after its query date (the query must see the
earlier wording) and a fact first learnt after the query date (the query must
not see it at all).
"""

from __future__ import annotations

import datetime as dt
import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from importlib import resources

import numpy as np
from pydantic import TypeAdapter

from memoryquest.contracts import (
    Domain,
    Fact,
    FactRevision,
    FactState,
    FactType,
    Persona,
    Query,
    Reference,
    Stage,
)
from memoryquest.dataset import GeneratedDataset
from memoryquest.ids import make_id
from memoryquest.intake.load import load_personas
from memoryquest.intake.selection import PersonaSelection
from memoryquest.llm.client import ModelClient
from memoryquest.memory.store import fact_with_history
from memoryquest.resources import data_dir

MEMORY_START = dt.date(2024, 1, 2)


def bundled_personas(user_ids: Sequence[str]) -> list[Persona]:
    source = data_dir("personas") / "personalens"
    result = load_personas(source, PersonaSelection(user_ids=list(user_ids)))
    if not result.personas:
        problems = "; ".join(str(e) for e in result.errors) or "no such users"
        raise ValueError(f"could not load {', '.join(user_ids)} from {source}: {problems}")
    return result.personas


@dataclass(frozen=True)
class Statement:
    domain: Domain
    text: str
    type: FactType
    entities: tuple[str, ...]


def _join(values: Sequence[str]) -> str:
    values = list(values)
    return values[0] if len(values) == 1 else ", ".join(values[:-1]) + " and " + values[-1]


def persona_statements(persona: Persona) -> list[Statement]:
    """Atomic, fact-like sentences from a persona's affinities and interaction summaries."""
    statements = []
    for affinity in persona.affinities:
        if not affinity.values:
            continue
        name = affinity.name[:1].lower() + affinity.name[1:]
        verb = "include" if len(affinity.values) > 1 else "is"
        statements.append(
            Statement(
                affinity.domain,
                f"For {affinity.domain.value.lower()}, {name} {verb} {_join(affinity.values)}",
                FactType.PREFERENCE,
                (affinity.domain.value, *affinity.values[:3]),
            )
        )
    for interaction in persona.interactions:
        for sentence in re.split(r"(?<=[.!?])\s+", interaction.summary):
            words = sentence.replace("The user", "User").split()
            if len(words) < 8:
                continue
            statements.append(
                Statement(
                    interaction.domain,
                    " ".join(words[:30]).rstrip("."),
                    FactType.ACTIVITY,
                    (interaction.domain.value,),
                )
            )
    return statements


def make_fact(
    persona_id: str,
    key: str,
    revisions: Sequence[tuple[dt.date, str]],
    *,
    type: FactType = FactType.EVENT,
    entities: Sequence[str] = (),
    reference_ids: Sequence[str] = (),
) -> Fact:
    """A fact with one revision per (date, text); every revision keeps the same provenance."""
    fid = make_id("fact", persona_id, key)
    history = []
    for number, (date, info) in enumerate(revisions, start=1):
        history.append(
            FactRevision(
                valid_from=date,
                info=info,
                type=type,
                frequency=number,
                related_entities=list(entities),
                session_ids=[make_id("session", persona_id, key, n) for n in range(1, number + 1)],
                source_reference_ids=list(reference_ids),
                state=FactState.ADD if number == 1 else FactState.UPDATE,
            )
        )
    return fact_with_history(fid, persona_id, history)


def statement_facts(
    persona_id: str,
    statements: Sequence[Statement],
    *,
    start: dt.date = MEMORY_START,
    per_day: int = 4,
) -> list[Fact]:
    """Background facts, ``per_day`` learnt each day from ``start``."""
    return [
        make_fact(
            persona_id,
            f"statement-{i}",
            [(start + dt.timedelta(days=i // per_day), s.text)],
            type=s.type,
            entities=s.entities,
        )
        for i, s in enumerate(statements)
    ]


# --------------------------------------------------------------------------- the scenario


@dataclass(frozen=True)
class ScenarioReference:
    date: dt.date
    domain: Domain
    text: str  # the reference as the query generator states it
    fact: str  # how memory extraction recorded it
    entities: tuple[str, ...]
    later: tuple[tuple[dt.date, str], ...] = ()  # revisions after the query date


@dataclass(frozen=True)
class ScenarioQuery:
    date: dt.date
    domain: Domain
    text: str
    reasoning: str
    references: tuple[ScenarioReference, ...]


_SCENARIO_FILE = json.loads(
    (resources.files("memoryquest.pgr") / "data" / "sample_scenario.json").read_text(
        encoding="utf-8"
    )
)
SCENARIO = TypeAdapter(tuple[ScenarioQuery, ...]).validate_python(_SCENARIO_FILE["queries"])
"""The two queries and their references (``data/sample_scenario.json``)."""

LATE_FACT = TypeAdapter(tuple[dt.date, str]).validate_python(_SCENARIO_FILE["late_fact"])
"""Learnt after both query dates: no query may see it."""


async def sample_dataset(
    client: ModelClient, *, user: str = "user0", background: int = 200
) -> GeneratedDataset:
    """The scenario on ``user``'s real profile, with cosines computed by ``client``'s embedder."""
    (persona,) = bundled_personas([user])
    pid = persona.persona_id
    facts = statement_facts(pid, persona_statements(persona)[:background])
    texts = [q.text for q in SCENARIO] + [r.text for q in SCENARIO for r in q.references]
    vectors = np.asarray(await client.embed(texts, stage=Stage.PGR_SAMPLE), dtype=np.float32)
    query_vectors, reference_vectors = vectors[: len(SCENARIO)], iter(vectors[len(SCENARIO) :])
    queries = []
    for rank, (scenario, query_vector) in enumerate(zip(SCENARIO, query_vectors, strict=True)):
        qid = make_id("query", pid, scenario.text)
        references = []
        for position, ref in enumerate(scenario.references):
            rid = make_id("reference", qid, position)
            cosine = float(next(reference_vectors) @ query_vector)
            references.append(
                Reference(
                    reference_id=rid, date=ref.date, text=ref.text, domain=ref.domain, cosine=cosine
                )
            )
            facts.append(
                make_fact(
                    pid,
                    f"{qid}-{position}",
                    [(ref.date, ref.fact), *ref.later],
                    entities=ref.entities,
                    reference_ids=[rid],
                )
            )
        queries.append(
            Query(
                query_id=qid,
                persona_id=pid,
                query_date=scenario.date,
                text=scenario.text,
                reasoning=scenario.reasoning,
                domain=scenario.domain,
                references=references,
                gamma=float(np.mean([r.cosine for r in references])),
                embedder=client.embedder_name,
                rank=rank,
            )
        )
    facts.append(
        make_fact(
            pid, "late", [LATE_FACT], type=FactType.GOAL, entities=("pottery", "Queen Street")
        )
    )
    return GeneratedDataset(personas=[persona], queries=queries, facts=facts)


def large_store(n_facts: int, *, persona_id: str | None = None) -> tuple[str, list[Fact]]:
    """``n_facts`` real-sounding facts for one persona, drawn from every bundled user's profile."""
    users = [f"user{i}" for i in range(30)]
    statements: list[Statement] = []
    for persona in bundled_personas(users):
        statements.extend(persona_statements(persona))
        if len(statements) >= n_facts:
            break
    if len(statements) < n_facts:
        raise ValueError(
            f"the bundled profiles yield {len(statements)} statements, fewer than {n_facts}"
        )
    pid = persona_id or make_id("persona", "bench", n_facts)
    return pid, statement_facts(pid, statements[:n_facts], per_day=10)
