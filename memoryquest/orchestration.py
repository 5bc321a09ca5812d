"""The Prefect flow: per persona × stage-group tasks over the plain pipeline functions.

Why this shape:

* Prefect records a few dozen task runs per second on a small SQLite server,
  so a task is a persona × stage group, never an LLM call; the concurrency
  inside a task is asyncio plus the client's limiter.
* Tasks are async and share the flow's event loop, so one client (one
  limiter, one cache, one usage ledger) serves every persona of the run.
* Each task persists its result under ``<output>/.prefect`` with a cache key
  over its inputs, its source and the stage's fingerprint (the source of
  every module the stage can run, and the prompts: see
  :mod:`memoryquest.fingerprint`), so an
  interrupted run resumes where it stopped, across flow runs. (A bare
  ``INPUTS`` policy would let two tasks with equal inputs share a key;
  ``TASK_SOURCE`` keeps them apart.)
"""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path
from typing import Any

from prefect import flow, get_run_logger, task
from prefect.artifacts import (
    acreate_markdown_artifact,
    acreate_progress_artifact,
    acreate_table_artifact,
    aupdate_progress_artifact,
)
from prefect.cache_policies import INPUTS, TASK_SOURCE

from memoryquest.contracts import Persona, Query, Session
from memoryquest.dataset import GeneratedDataset
from memoryquest.fingerprint import stage_fingerprints
from memoryquest.intake import PersonaSelection, load_personas
from memoryquest.llm.accounting import USAGE_FILE
from memoryquest.llm.client import ModelClient
from memoryquest.llm.errors import retry_unless_permanent
from memoryquest.llm.factory import build_client
from memoryquest.memory.extraction import MemoryStageResult
from memoryquest.pgr.runner import summarise, summary_markdown, validate_queries
from memoryquest.pipeline import (
    ConversationsResult,
    assemble_persona,
    build_manifest,
    conversations_for,
    kept_queries,
    memory_for,
    queries_for,
)
from memoryquest.run_lock import RunLock
from memoryquest.settings import Settings, load_settings
from memoryquest.stages.queries import QueryStageResult

# The client is runtime state, not an input: it must not enter the cache key.
STAGE_CACHE = (INPUTS - "client") + TASK_SOURCE


@task(name="queries", retries=2, retry_delay_seconds=5, persist_result=True, cache_policy=STAGE_CACHE, retry_condition_fn=retry_unless_permanent)
async def queries_task(persona: Persona, settings: Settings, fingerprint: str, client: ModelClient) -> QueryStageResult:
    return await queries_for(persona, client, settings)


@task(name="conversations", retries=2, retry_delay_seconds=5, persist_result=True, cache_policy=STAGE_CACHE, retry_condition_fn=retry_unless_permanent)
async def conversations_task(
    persona: Persona, queries: list[Query], settings: Settings, fingerprint: str, client: ModelClient
) -> ConversationsResult:
    return await conversations_for(persona, queries, client, settings)


@task(name="memory", retries=2, retry_delay_seconds=5, persist_result=True, cache_policy=STAGE_CACHE, retry_condition_fn=retry_unless_permanent)
async def memory_task(
    persona: Persona,
    queries: list[Query],
    history: list[Session],
    settings: Settings,
    fingerprint: str,
    client: ModelClient,
) -> MemoryStageResult:
    return await memory_for(persona, queries, history, client, settings)


@task(name="pgr-validation", retries=2, retry_delay_seconds=5, persist_result=True, cache_policy=STAGE_CACHE, retry_condition_fn=retry_unless_permanent)
async def validation_task(
    queries: list[Query], facts: list[Any], settings: Settings, fingerprint: str, client: ModelClient
) -> list[Any]:
    return await validate_queries(queries, facts, client, settings.pgr)


def _configured(task_obj: Any, state_dir: Path) -> Any:
    """Point result and cache-key storage at the run's own output directory."""
    return task_obj.with_options(
        result_storage=state_dir / "results",
        cache_policy=STAGE_CACHE.configure(key_storage=state_dir / "keys"),
    )


async def _stage(task_obj: Any, state_dir: Path, *args: Any) -> tuple[Any, str]:
    """Run one stage task; also say whether Prefect computed it or served it from its cache."""
    state = await _configured(task_obj, state_dir)(*args, return_state=True)
    return await state.aresult(), str(state.name)


async def _persona_pipeline(
    persona: Persona, settings: Settings, client: ModelClient, fingerprints: dict[str, str], state_dir: Path
) -> tuple[GeneratedDataset, dict[str, str]]:
    """The same sequence as :func:`memoryquest.pipeline.generate_persona`, one cached task per stage group."""
    states: dict[str, str] = {}
    queries, states["queries"] = await _stage(
        queries_task, state_dir, persona, settings, fingerprints["queries"], client
    )
    conversations, states["conversations"] = await _stage(
        conversations_task, state_dir, persona, queries.queries, settings, fingerprints["conversations"], client
    )
    memory, states["memory"] = await _stage(
        memory_task, state_dir, persona, kept_queries(queries, conversations), conversations.sessions, settings,
        fingerprints["memory"], client,
    )
    validation: list[Any] = []
    if settings.pgr.methods:
        validation, states["pgr-validation"] = await _stage(
            validation_task, state_dir, kept_queries(queries, conversations, memory), memory.facts, settings,
            fingerprints["pgr-validation"], client,
        )
    return assemble_persona(persona, queries, conversations, memory, validation), states


def _write_run_report(output_dir: Path, stage_states: dict[str, dict[str, str]], errors: list[str]) -> None:
    """Which stages ran and which came from Prefect's cache (a resumed run shows 'Cached')."""
    counts: dict[str, int] = {}
    for states in stage_states.values():
        for name in states.values():
            counts[name] = counts.get(name, 0) + 1
    report = {"stage_states": stage_states, "state_counts": counts, "persona_errors": errors}
    (output_dir / "run_report.json").write_text(json.dumps(report, indent=2, sort_keys=True) + "\n", encoding="utf-8")


def _summary_rows(dataset: GeneratedDataset) -> list[dict[str, Any]]:
    rows = []
    for persona in dataset.personas:
        pid = persona.persona_id
        rows.append(
            {
                "user": persona.source_user_id,
                "persona_id": pid,
                "queries": sum(q.persona_id == pid for q in dataset.queries),
                "sessions": sum(s.persona_id == pid for s in dataset.sessions),
                "facts": sum(f.persona_id == pid for f in dataset.facts),
                "rejected": sum(r.persona_id == pid for r in dataset.rejected),
            }
        )
    return rows


@flow(name="memoryquest-generate", log_prints=True)
async def generate_benchmark(
    output: str = "output/run",
    persona_source: str | None = None,
    users: list[str] | None = None,
    count: int | None = None,
    config_file: str | None = None,
    overrides: dict[str, Any] | None = None,
    publish: bool = True,
    allow_failed_audit: bool = False,
) -> str:
    """Generate (and publish) a MemoryQuest dataset; returns the output directory.

    Publishing runs the validity audit and refuses a dataset that fails it
    (the working dataset is kept) unless ``allow_failed_audit``.
    """
    started = time.perf_counter()
    merged: dict[str, Any] = dict(overrides or {})
    merged["output_dir"] = output
    if persona_source:
        merged["persona_source"] = persona_source
    settings = load_settings(Path(config_file) if config_file else None, merged)
    output_dir = Path(settings.output_dir)
    output_dir.mkdir(parents=True, exist_ok=True)
    with RunLock.acquire(output_dir, command=f"flow memoryquest-generate into {output_dir}"):  # one writer
        return await _generate_locked(settings, output_dir, users, count, publish, allow_failed_audit, started)


async def _generate_locked(
    settings: Settings,
    output_dir: Path,
    users: list[str] | None,
    count: int | None,
    publish: bool,
    allow_failed_audit: bool,
    started: float,
) -> str:
    """The flow's work, done while it holds the output directory's lock (memoryquest.run_lock)."""
    from memoryquest.publish import publish_dataset

    logger = get_run_logger()
    intake = load_personas(settings.persona_source, PersonaSelection(user_ids=users, count=count))
    for error in intake.errors:
        logger.error("persona skipped: %s", error)
    if not intake.personas:
        raise ValueError(f"no persona could be loaded from {settings.persona_source}")

    client = build_client(settings)
    client.ledger.persist(output_dir / USAGE_FILE)  # what every attempt spent, summed in the manifest
    fingerprints = stage_fingerprints()
    state_dir = (output_dir / ".prefect").resolve()
    progress_id = await acreate_progress_artifact(
        progress=0.0, key="memoryquest-progress", description="Personas finished"
    )
    finished = 0

    stage_states: dict[str, dict[str, str]] = {}

    async def tracked(persona: Persona) -> GeneratedDataset:
        nonlocal finished
        part, stage_states[persona.source_user_id] = await _persona_pipeline(
            persona, settings, client, fingerprints, state_dir
        )
        finished += 1
        await aupdate_progress_artifact(progress_id, 100.0 * finished / len(intake.personas))
        logger.info("persona %s done (%d/%d)", persona.source_user_id, finished, len(intake.personas))
        return part

    dataset = GeneratedDataset()
    for part in await asyncio.gather(*(tracked(p) for p in intake.personas)):
        dataset.extend(part)
    dataset.manifest = client.ledger.annotate(build_manifest(dataset, client, settings, started))
    await client.aclose()  # the SDK's connections belong to this event loop, which ends with the flow
    client.ledger.close()
    dataset_dir = dataset.save(output_dir / "dataset")
    _write_run_report(output_dir, stage_states, [str(e) for e in intake.errors])

    await acreate_table_artifact(table=_summary_rows(dataset), key="memoryquest-personas", description="Per-persona output")
    if dataset.validation:
        await acreate_markdown_artifact(
            markdown=summary_markdown(summarise(dataset.validation)), key="memoryquest-pgr", description="PGR validation"
        )
    if publish:
        publish_dataset(dataset, output_dir / "published", settings, allow_failed_audit=allow_failed_audit)
    logger.info("dataset written to %s", dataset_dir)
    return str(output_dir)


def run_generation(
    settings: Settings,
    users: list[str] | None = None,
    count: int | None = None,
    publish: bool = True,
    config_file: Path | None = None,
    allow_failed_audit: bool = False,
) -> str:
    """Run the flow from the command line (a temporary local Prefect API starts if none is set)."""
    overrides = settings.model_dump(mode="json", exclude={"output_dir", "persona_source"}, exclude_unset=True)
    overrides.get("endpoint", {}).pop("api_key", None)  # secrets come from the environment, never parameters
    result: str = asyncio.run(
        generate_benchmark(
            output=str(settings.output_dir),
            persona_source=settings.persona_source,
            users=users,
            count=count,
            config_file=str(config_file) if config_file else None,
            overrides=overrides,
            publish=publish,
            allow_failed_audit=allow_failed_audit,
        )
    )
    return result
