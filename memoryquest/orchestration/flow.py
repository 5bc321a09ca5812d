"""The Prefect flow: one cached task per persona × stage group of :mod:`memoryquest.pipeline`.

Why this shape:

* Prefect records a few dozen task runs per second on a small SQLite server,
  so a task is a persona × stage group, never an LLM call; the concurrency
  inside a task is asyncio plus the client's limiter.
* Tasks are async and share the flow's event loop, so one client (one
  limiter, one cache, one usage ledger) serves every persona of the run.
* Each task persists its result under ``<output>/.prefect`` with a cache key
  over its inputs (the stage's name, the persona's state so far, the
  settings), its source and the stage's fingerprint (the source of every
  module the stage can run, and the prompts: see :mod:`memoryquest.fingerprint`),
  so an interrupted run resumes where it stopped, across flow runs, and a
  changed stage is recomputed with every stage after it.
* The state and the settings enter that key as one sha256 of their JSON
  (:func:`inputs_digest`) and travel to the task ``quote``-d. Left to
  itself Prefect walks every object of every parameter looking for futures,
  and hashes each parameter with its own Python JSON encoder: about 0.2 s of
  a cached task's 0.27 s for a small persona, and more as the state grows.

The flow only orchestrates: the stages and their order are
:data:`memoryquest.pipeline.STAGE_GROUPS`, setup and teardown are :mod:`memoryquest.orchestration.lifecycle`.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

from prefect import flow, get_run_logger, task
from prefect.artifacts import (
    acreate_markdown_artifact,
    acreate_progress_artifact,
    aupdate_progress_artifact,
)
from prefect.cache_policies import INPUTS, TASK_SOURCE
from prefect.utilities.annotations import quote
from pydantic import BaseModel

from memoryquest.contracts import Persona, StageGroupName, StageUsage
from memoryquest.dataset import GeneratedDataset
from memoryquest.fingerprint import runs_simulator, stage_fingerprints
from memoryquest.intake import PersonaSelection
from memoryquest.llm.client import ModelClient
from memoryquest.orchestration.dask_personas import generate_with_dask
from memoryquest.orchestration.lifecycle import (
    Run,
    finish_run,
    generating,
    open_run,
    run_manifest,
    settings_from_parameters,
    write_run_report,
)
from memoryquest.orchestration.shards import generate_sharded
from memoryquest.orchestration.spread import DaskSpread, ShardSpread, Spread, SpreadRun
from memoryquest.orchestration.task_results import QuickLoadPickleSerializer, release_loaded_results
from memoryquest.orchestration.task_retries import retry_on_infrastructure_failure
from memoryquest.pipeline import STAGE_GROUPS, StageGroup, group_named, lockstep_for, run_persona
from memoryquest.progress import (
    ProgressMode,
    RunFigures,
    RunSummary,
    periodically,
    plain_line,
    showing,
)
from memoryquest.progress.display import DEFAULT_EVERY_SECONDS
from memoryquest.settings import Settings
from memoryquest.stages.state import PersonaState

FLOW_NAME = "memoryquest-generate"
DEFAULT_OUTPUT = "output/run"

# The client is runtime state, not an input: it must not enter the cache key.
# The state and the settings do, through ``inputs`` (their digest), not by themselves.
# Every stage group runs the same task function, so TASK_SOURCE alone does not
# tell them apart; the stage's name (an input) and fingerprint do.
STAGE_CACHE = (INPUTS - "client" - "state" - "settings") + TASK_SOURCE


def inputs_digest(state: PersonaState, settings: Settings) -> str:
    """What a stage task's cache key knows of its large inputs: a sha256 of their JSON.

    pydantic writes the JSON in Rust, so this costs a few milliseconds where
    Prefect's own hashing of the same objects costs tens; any change to a
    row of the state or to a setting still changes it.
    """
    digest = hashlib.sha256(state.model_dump_json().encode("utf-8"))
    digest.update(b"\0")
    digest.update(settings.model_dump_json().encode("utf-8"))
    return digest.hexdigest()


@task(
    retries=2,
    retry_delay_seconds=5,
    persist_result=True,
    result_serializer=QuickLoadPickleSerializer(),
    cache_policy=STAGE_CACHE,
    retry_condition_fn=retry_on_infrastructure_failure,  # LLM calls are the client's to retry
)
async def stage_task(
    stage: StageGroupName,
    state: PersonaState,
    settings: Settings,
    fingerprint: str,
    inputs: str,
    client: ModelClient,
) -> BaseModel:
    """One stage group for one persona (``fingerprint`` and ``inputs``, the digest of ``state`` and
    ``settings``, are there for the cache key only)."""
    return await group_named(stage).run(state, client, settings)


STAGE_TASKS = {stage.name: stage_task.with_options(name=stage.name) for stage in STAGE_GROUPS}
"""The task of each stage group, named after it (the names ``run_report.json`` counts by)."""


@dataclass
class StageRecord:
    """What one persona's stage tasks did: each one's Prefect state name (``Completed``, ``Cached``)
    and wall seconds, as ``run_report.json`` lists them."""

    states: dict[str, str] = field(default_factory=dict)
    seconds: dict[str, float] = field(default_factory=dict)


async def _cached(
    stage: StageGroup[Any], state: PersonaState, run: Run, client: ModelClient, record: StageRecord
) -> BaseModel:
    """Run one stage group as its task; note whether Prefect computed it or served it from its cache."""
    started = time.perf_counter()
    state_dir = (run.output_dir / ".prefect").resolve()
    task_obj: Any = STAGE_TASKS[
        stage.name
    ].with_options(  # Any: Prefect types an async task's state as not awaitable
        result_storage=state_dir / "results",
        cache_policy=STAGE_CACHE.configure(key_storage=state_dir / "keys"),
    )
    fingerprint = stage_fingerprints(runs_simulator(run.settings))[stage.name]
    task_state = await task_obj(
        stage.name,
        quote(state),
        quote(run.settings),
        fingerprint,
        inputs_digest(state, run.settings),
        quote(client),
        return_state=True,
    )
    output: BaseModel = await task_state.aresult()
    record.states[stage.name] = str(task_state.name)
    record.seconds[stage.name] = round(time.perf_counter() - started, 4)
    return output


async def _generate(
    run: Run, client: ModelClient, figures: RunFigures
) -> tuple[GeneratedDataset, dict[str, StageRecord]]:
    """Every persona through the stage groups, concurrently, counted in ``figures``; also what
    each persona's stage tasks did."""
    logger = get_run_logger()
    records: dict[str, StageRecord] = {}
    stage_fingerprints(runs_simulator(run.settings))  # once for the run, not in a first task
    lockstep = lockstep_for(run.personas, client)  # Batch API mode: one batch per step for all

    async def tracked(persona: Persona) -> GeneratedDataset:
        record = records[persona.source_user_id] = StageRecord()

        async def execute(stage: StageGroup[Any], state: PersonaState) -> BaseModel:
            output = await _cached(stage, state, run, client, record)
            if record.states.get(stage.name) == "Cached":
                figures.served_from_cache(stage.name)
            return output

        part = await run_persona(
            persona, client, run.settings, execute=execute, observer=figures, lockstep=lockstep
        )
        # Its own rank, not a shared counter read later: two personas finishing together
        # used to both print the count after the second one ("done (3/3)" twice).
        rank = figures.finished_rank(persona)
        logger.info("persona %s done (%d/%d)", persona.source_user_id, rank, len(run.personas))
        return part

    dataset = GeneratedDataset()
    try:
        for part in await asyncio.gather(*(tracked(p) for p in run.personas)):
            dataset.extend(part)
    finally:
        release_loaded_results()
    return dataset, records


@contextlib.asynccontextmanager
async def _progress_artifact(figures: RunFigures, every_seconds: float) -> AsyncIterator[None]:
    """Prefect's progress artifact, updated from ``figures`` every ``every_seconds`` and at the end:
    the same figures, and the same line, as the terminal's."""
    artifact = await acreate_progress_artifact(
        progress=0.0, key="memoryquest-progress", description="Personas finished"
    )

    async def update() -> None:
        snapshot = figures.snapshot()
        await aupdate_progress_artifact(
            artifact, 100.0 * snapshot.fraction, description=plain_line(snapshot)
        )

    async with periodically(every_seconds, update):
        yield


def _write_run_report(
    run: Run, records: dict[str, StageRecord], summary: RunSummary, usage: list[StageUsage]
) -> None:
    """Which stages ran and which came from Prefect's cache (a resumed run shows 'Cached'), how
    long each task took, what every attempt at the output spent per stage (the manifest's
    usage), and the run's summary (what the command line prints at the end)."""
    counts: dict[str, int] = {}
    for record in records.values():
        for name in record.states.values():
            counts[name] = counts.get(name, 0) + 1
    write_run_report(
        run,
        {
            "stage_states": {user: record.states for user, record in records.items()},
            "stage_seconds": {user: record.seconds for user, record in records.items()},
            "state_counts": counts,
            "persona_errors": run.skipped,
            "usage": [row.model_dump(mode="json") for row in usage],
            "summary": summary.model_dump(mode="json"),
        },
    )


async def generate_spread(spread: ShardSpread | DaskSpread, request: SpreadRun) -> str:
    """Run the generation where ``spread`` says; returns the output directory."""
    if isinstance(spread, ShardSpread):
        return await generate_sharded(spread, request)
    return await generate_with_dask(spread, request)


@flow(name=FLOW_NAME, log_prints=True)
async def generate_benchmark(
    output: str | None = None,
    persona_source: str | None = None,
    users: list[str] | str | None = None,
    count: int | None = None,
    range: str | None = None,  # the command line's --range, spelled the same
    config_file: str | None = None,
    overrides: dict[str, Any] | None = None,
    publish: bool = True,
    allow_failed_audit: bool = False,
    spread: Spread | None = None,
    settings: Settings | None = None,
    progress: str = ProgressMode.AUTO.value,
    progress_seconds: float = DEFAULT_EVERY_SECONDS,
    cost_estimate_usd: float | None = None,
) -> str:
    """Generate (and publish) a MemoryQuest dataset; returns the output directory.

    The personas are chosen as on the command line: ``users`` (a list of ids, or
    ``"user0,user3"``) or ``range`` (``"30:230"``, positions 30 to 229 in natural
    order), and ``count`` caps either (alone: the first N);
    :class:`~memoryquest.intake.PersonaSelection` reads them.

    A deployment gives ``output`` (default ``output/run``), ``persona_source``,
    ``config_file`` and ``overrides`` (nested settings), and the settings are
    built from them here. A caller in this process that has built its
    settings already (the command line, which checks them before Prefect
    starts) passes them as ``settings`` instead, so the config file and the
    environment are read once. Secrets come from the environment either way:
    a ``settings`` parameter is stored by Prefect with its API key masked.

    Publishing runs the validity audit and refuses a dataset that fails it
    (the working dataset is kept) unless ``allow_failed_audit``; a run that
    kept no query publishes nothing.

    ``spread`` runs the personas beyond this process (:mod:`memoryquest.orchestration.spread`):
    ``{"kind": "shards", "shards": 4}`` as child runs of a deployment on the
    work pool's workers, ``{"kind": "dask", "scheduler_address": ...}`` on a
    Dask cluster. Such a run builds its settings from the plain parameters,
    which its children and workers read the same, so it takes no ``settings``.
    It logs its children's combined progress every ``progress_seconds`` and writes one
    ``run_report.json`` for them all.

    Progress is shown on stdout (``progress``: ``auto``, ``live``, ``plain``
    or ``off``; plain lines every ``progress_seconds``) and in Prefect's
    progress artifact, against ``cost_estimate_usd`` when given; the run's
    summary goes to ``run_report.json`` and a markdown artifact.
    """
    selection = PersonaSelection.parse(users=users, count=count, range_text=range)
    if spread is not None:
        if settings is not None:
            raise ValueError(
                "a spread run takes output/persona_source/config_file/overrides, not settings"
            )
        request = SpreadRun(
            output=output or DEFAULT_OUTPUT,
            persona_source=persona_source,
            config_file=config_file,
            overrides=overrides or {},
            selection=selection,
            publish=publish,
            allow_failed_audit=allow_failed_audit,
            progress_seconds=progress_seconds,
        )
        return await generate_spread(spread, request)
    if settings is None:
        settings = settings_from_parameters(
            output or DEFAULT_OUTPUT, persona_source, config_file, overrides
        )
    elif any(v is not None for v in (output, persona_source, config_file, overrides)):
        raise ValueError(
            "give either settings or output/persona_source/config_file/overrides, not both"
        )
    with open_run(settings, selection, FLOW_NAME) as run:
        async with generating(run, progress_seconds, cost_estimate_usd) as (client, figures):
            async with (
                showing(
                    figures,
                    ProgressMode(progress),
                    title=f"generate {run.output_dir}",
                    every_seconds=progress_seconds,
                ),
                _progress_artifact(figures, progress_seconds),
            ):
                dataset, records = await _generate(run, client, figures)
            dataset.manifest = run_manifest(run, dataset, client)
        summary = RunSummary.from_snapshot(
            figures.snapshot(), run.skipped, time.perf_counter() - run.started
        )
        _write_run_report(run, records, summary, dataset.manifest.usage)
        await acreate_markdown_artifact(
            markdown=summary.markdown(), key="memoryquest-summary", description="Run summary"
        )
        await finish_run(run, dataset, publish=publish, allow_failed_audit=allow_failed_audit)
    return str(run.output_dir)


__all__ = ["STAGE_TASKS", "generate_benchmark", "inputs_digest", "stage_task"]
