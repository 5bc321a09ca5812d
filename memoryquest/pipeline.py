"""The pipeline, declared once: which stage groups run for a persona, in which order. Start here.

Every persona goes through the stage groups of :data:`STAGE_GROUPS`, in order. A
stage group is a plain typed async function that takes the persona's state
so far (:class:`~memoryquest.stages.state.PersonaState`: the persona, the
queries still standing, the history, the facts) and returns its pydantic
output; the group's ``apply`` adds that output to the state. Nothing here
knows about Prefect: every way of running executes this one declaration —

* in one process, without Prefect (:func:`generate_dataset`; ``estimate``
  and the tests), and on a Dask worker (:mod:`memoryquest.orchestration.spread`);
* as a Prefect flow (:mod:`memoryquest.orchestration.flow`), one cached task per
  persona × stage group, keyed on the group's inputs and its code
  (:mod:`memoryquest.fingerprint`, whose stages are these);
* across Prefect workers, as shards of that flow (:mod:`memoryquest.orchestration.spread`).

A group runs one or more stages (``StageGroup.stages``): the names of
:class:`memoryquest.contracts.Stage` (queries, timelines, dialogues, review, memory, pgr,
pgr_judge), which rejected rows, usage rows and logs use. A group's name
(:class:`memoryquest.contracts.StageGroupName`) is its Prefect task's.

Run setup and teardown (settings, personas, lock, manifest, save, publish)
are in :mod:`memoryquest.orchestration.lifecycle`.

Where each stage group lives (paths below ``memoryquest/``, ``prompts/`` and ``tests/``;
``→`` marks the modules a group's own module calls):

================  ==========================  ============================  ==============  ==============================
stage group       module                      prompt templates (``.md``)    simulator       tests
================  ==========================  ============================  ==============  ==============================
queries           stages/queries.py           query_generation,             simulator/      test_stages_queries.py,
                                              reference_relevance           queries.py,     test_stages_query_gates.py,
                                                                            relevance.py    test_simulator_queries.py
conversations     stages/conversations.py     timeline_synthesis,           simulator/      test_stages_timelines.py,
                  → stages/timelines.py,      dialogue_expansion,           timelines.py,   test_stages_dialogues.py,
                  stages/timeline_slots.py,   session_review                dialogues.py,   test_simulator_dialogues.py,
                  stages/dialogues.py,                                      review.py       test_stages_review.py
                  stages/review.py,
                  stages/history.py,
                  generation/ledger.py
memory            stages/memory.py            memory_extraction,            simulator/      test_memory_extraction.py,
                  → memory/extraction.py,     memory_consolidation          memory.py       test_memory_consolidation.py,
                  memory/consolidation.py,                                                  test_memory_quotes.py,
                  memory/coverage.py                                                        test_memory_simulator.py
pgr-validation    stages/pgr_validation.py    pgr_augment, pgr_summary,     simulator/      test_pgr_runner.py,
                  → pgr/runner.py,            pgr_cot_initial/_refine,      pgr.py,         test_pgr_prospection.py,
                  pgr/prospection_run.py,     pgr_tot_initial/_refine,      pgr_plan.py,    test_pgr_judges.py,
                  pgr/judges.py               pgr_answer, judge_references  pgr_judges.py   test_pgr_baselines.py,
                                                                                            test_pgr_simulator.py
================  ==========================  ============================  ==============  ==============================

What every stage that asks a model for text shares sits below the stages, memory and PGR, in
``generation/`` (the generation toolkit): the regenerate-check-reject loop
(``generation/regeneration.py``), the shared checks and parsing (``generation/common.py``) and the
ledger of what a user said (``generation/ledger.py``), tested by ``test_generation_regeneration.py``
and ``test_generation_ledger.py``. The layers of the whole package, what each may import, and one
walk from a PersonaLens profile to a Parquet row are in ``docs/architecture.md``
(``test_architecture.py`` fails on an import that climbs a layer, or an import circle).

Each prompt template's typed inputs and output models are in a
``*_contracts`` module beside the module that asks for it
(``stages/queries_contracts.py``, ``stages/timelines_contracts.py``,
``stages/dialogues_contracts.py``, ``stages/review_contracts.py``, ``memory/extraction_contracts.py``,
``memory/consolidation_contracts.py``, ``pgr/prospection_contracts.py``,
``pgr/judges_contracts.py``, ``pgr/winrate_contracts.py``); the simulator's answer for a template takes its
inputs model (:mod:`memoryquest.prompt_inputs`, ``test_prompt_contracts.py``).

The whole sequence is tested by ``test_pipeline.py`` (this declaration),
``test_orchestration_flow.py`` (the flow, resumed after a kill),
``test_orchestration_spread.py`` (shards and Dask give the in-process result) and
``test_reliability_*.py`` (a faulty endpoint, a killed run).

Grouping follows the cost of orchestration: Prefect records a few dozen task
runs per second, so a task is a persona × stage group, never an LLM call; the
concurrency inside a group comes from asyncio and the client's limiter.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, Generic, Protocol, TypeVar

from pydantic import BaseModel

from memoryquest.contracts import Persona, Stage, StageGroupName
from memoryquest.dataset import GeneratedDataset
from memoryquest.llm.client import ModelClient
from memoryquest.manifest import build_manifest
from memoryquest.orchestration.lockstep import Lockstep
from memoryquest.settings import Settings
from memoryquest.stages import conversations, memory, pgr_validation, queries
from memoryquest.stages.state import PersonaState

OutputT = TypeVar("OutputT", bound=BaseModel)


def _always(settings: Settings) -> bool:
    return True


@dataclass(frozen=True)
class StageGroup(Generic[OutputT]):
    """One stage group: its name (the Prefect task's, and :mod:`memoryquest.fingerprint`'s), the
    stages it runs (the names rejected and usage rows give them), how it runs, how its output
    joins the persona's state, and whether the settings ask for it."""

    name: StageGroupName
    stages: tuple[Stage, ...]
    run: Callable[[PersonaState, ModelClient, Settings], Awaitable[OutputT]]
    apply: Callable[[PersonaState, OutputT], PersonaState]
    enabled: Callable[[Settings], bool] = _always

    @property
    def module(self) -> str:
        """The module the group's code starts from (what its cache fingerprint covers)."""
        return self.run.__module__


STAGE_GROUPS: tuple[StageGroup[Any], ...] = (
    StageGroup(StageGroupName.QUERIES, (Stage.QUERIES,), queries.run, queries.apply),
    StageGroup(
        StageGroupName.CONVERSATIONS,
        (Stage.TIMELINES, Stage.DIALOGUES, Stage.REVIEW),
        conversations.run,
        conversations.apply,
    ),
    StageGroup(StageGroupName.MEMORY, (Stage.MEMORY,), memory.run, memory.apply),
    StageGroup(
        StageGroupName.PGR_VALIDATION,
        (Stage.PGR, Stage.PGR_JUDGE),
        pgr_validation.run,
        pgr_validation.apply,
        pgr_validation.enabled,
    ),
)
"""Every stage group, in the order it runs."""


def group_named(name: str) -> StageGroup[Any]:
    for stage in STAGE_GROUPS:
        if stage.name == name:
            return stage
    raise ValueError(f"unknown stage {name!r}; known: {', '.join(s.name for s in STAGE_GROUPS)}")


Execute = Callable[[StageGroup[Any], PersonaState], Awaitable[BaseModel]]
"""Runs one stage group on a state and returns its output (the Prefect flow runs it as a cached task)."""


class PipelineObserver(Protocol):
    """Told as each persona moves through the stage groups, so progress can be shown without the
    stages knowing who watches (:class:`memoryquest.progress.RunFigures` is the one in use)."""

    def stage_finished(self, persona: Persona, stage: StageGroupName, state: PersonaState) -> None:
        """``stage`` is done for ``persona``; ``state`` is the persona's state with its output applied."""

    def persona_finished(self, persona: Persona, state: PersonaState) -> None:
        """Every enabled stage group is done for ``persona``."""


def enabled_groups(settings: Settings) -> list[StageGroup[Any]]:
    """The stage groups these settings run, in order."""
    return [stage for stage in STAGE_GROUPS if stage.enabled(settings)]


async def run_persona(
    persona: Persona,
    client: ModelClient,
    settings: Settings,
    execute: Execute | None = None,
    observer: PipelineObserver | None = None,
    lockstep: Lockstep | None = None,
) -> GeneratedDataset:
    """Every stage group the settings ask for, in order, for one persona; its rows without a manifest.

    ``execute`` runs one group; by default the group runs here, in this process.
    ``observer`` is told as each group and the persona finish. With ``lockstep``
    (Batch API mode: :func:`lockstep_for`) a group starts once every persona has reached it.
    """
    state = PersonaState(persona=persona)
    with lockstep.member() if lockstep is not None else contextlib.nullcontext():
        for stage in enabled_groups(settings):
            if lockstep is not None:
                await lockstep.reach(stage.name)
            if execute is None:
                output = await stage.run(state, client, settings)
            else:
                output = await execute(stage, state)
            state = stage.apply(state, output)
            if observer is not None:
                observer.stage_finished(persona, stage.name, state)
    if observer is not None:
        observer.persona_finished(persona, state)
    return state.dataset()


def lockstep_for(personas: list[Persona], client: ModelClient) -> Lockstep | None:
    """In Batch API mode the personas go through the stage groups in lockstep, so the same step of
    every persona shares one batch (:mod:`memoryquest.orchestration.lockstep`); online, each runs at its own pace."""
    return Lockstep(len(personas)) if client.batch is not None and personas else None


async def generate_dataset(
    personas: list[Persona],
    client: ModelClient,
    settings: Settings,
    observer: PipelineObserver | None = None,
) -> GeneratedDataset:
    """The whole pipeline in one process without Prefect (``estimate``, the tests), with its manifest."""
    started = time.perf_counter()
    dataset = GeneratedDataset()
    lockstep = lockstep_for(personas, client)
    runs = (
        run_persona(p, client, settings, observer=observer, lockstep=lockstep) for p in personas
    )
    for part in await asyncio.gather(*runs):
        dataset.extend(part)
    dataset.manifest = build_manifest(dataset, client, settings, started)
    return dataset
