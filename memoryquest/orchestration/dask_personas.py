"""Dask: one Prefect task per persona on a Dask cluster, each building its own client in its
worker and journalling under ``<output>/parts/<user>`` (:mod:`memoryquest.orchestration.spread`)."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from prefect import flow, task
from prefect.cache_policies import NO_CACHE
from prefect.futures import wait

from memoryquest.contracts import Persona
from memoryquest.dataset import GeneratedDataset
from memoryquest.orchestration.lifecycle import (
    Run,
    finish_run,
    generating,
    open_run,
    run_manifest,
)
from memoryquest.orchestration.spread import (
    DaskSpread,
    SpreadRun,
    merge_parts,
    watching,
    write_spread_report,
)
from memoryquest.orchestration.task_retries import retry_on_infrastructure_failure
from memoryquest.pipeline import run_persona
from memoryquest.progress.display import DEFAULT_EVERY_SECONDS
from memoryquest.settings import Settings

PARTS_DIR = "parts"  # a Dask run's personas, one directory each: their usage and progress
DASK_FLOW = "memoryquest-generate-dask-personas"


@dataclass(frozen=True)
class PersonaPart:
    """One persona of a Dask run, journalling its usage and progress in ``output``."""

    persona: Persona
    output: Path

    @property
    def users(self) -> list[str]:
        return [self.persona.source_user_id]

    @property
    def label(self) -> str:
        return f"persona {self.persona.source_user_id}"


@task(
    name="persona-on-worker",
    retries=2,
    retry_delay_seconds=5,
    retry_condition_fn=retry_on_infrastructure_failure,  # LLM calls are the client's to retry
    cache_policy=NO_CACHE,
)
def generate_persona_on_worker(
    part: PersonaPart, settings: Settings, progress_seconds: float = DEFAULT_EVERY_SECONDS
) -> GeneratedDataset:
    """Every stage group for one persona, on whichever Dask worker runs it.

    The client is built here, in the worker: its limiter, SDK connections and
    usage ledger belong to this process. The response cache under
    ``settings.output_dir`` is shared, so a retried persona pays nothing twice;
    its usage is journalled in ``part.output/usage.jsonl``, so what a failed
    attempt paid is still counted, and its progress goes to ``part.output/progress.json``.
    """
    run = Run(settings, part.output, [part.persona])

    async def generate() -> GeneratedDataset:
        run.output_dir.mkdir(parents=True, exist_ok=True)
        async with generating(run, progress_seconds) as (client, figures):
            dataset = await run_persona(part.persona, client, settings, observer=figures)
            dataset.manifest = run_manifest(run, dataset, client)
        return dataset

    return asyncio.run(generate())


@flow(name=DASK_FLOW, log_prints=True)
async def generate_personas_on_dask(request: SpreadRun) -> str:
    """The body of :func:`generate_with_dask`; runs with whatever task runner it is given."""
    with open_run(request.settings(), request.selection, DASK_FLOW) as run:
        parts = [
            PersonaPart(persona, run.output_dir / PARTS_DIR / persona.source_user_id)
            for persona in run.personas
        ]
        futures = [
            generate_persona_on_worker.submit(part, run.settings, request.progress_seconds)
            for part in parts
        ]
        async with watching(run, parts, request.progress_seconds):
            await asyncio.to_thread(wait, futures)  # the workers run; this event loop stays free
        failed = []
        for persona, future in zip(run.personas, futures, strict=True):
            state = future.state
            if not state.is_completed():
                failed.append(
                    f"persona {persona.source_user_id}: {state.name}: {state.message or 'no message'}"
                )
        if failed:
            raise RuntimeError(
                f"{len(failed)} of {len(futures)} personas failed on the Dask cluster; "
                + "; ".join(failed)
            )
        datasets: list[GeneratedDataset] = [future.result() for future in futures]
        dataset = merge_parts(datasets, [p.label for p in parts], run.settings, run.started)
        write_spread_report(run, parts, dataset)
        await finish_run(
            run, dataset, publish=request.publish, allow_failed_audit=request.allow_failed_audit
        )
    return str(run.output_dir)


async def generate_with_dask(spread: DaskSpread, request: SpreadRun) -> str:
    """Generate with one task per persona on a Dask cluster; returns the output directory.

    Without ``spread.scheduler_address`` prefect-dask starts a temporary
    ``LocalCluster``. On a two-core machine this is slower than the
    in-process flow: every worker process loads its own embedding model,
    results cross process boundaries, and there are no more cores to spread
    over. The point is that the same code runs unchanged on a real cluster.
    """
    from prefect.task_runners import TaskRunner
    from prefect_dask import DaskTaskRunner

    runner: TaskRunner[Any] = (
        DaskTaskRunner(address=spread.scheduler_address)
        if spread.scheduler_address
        else DaskTaskRunner()
    )
    result: str = await generate_personas_on_dask.with_options(task_runner=runner)(request=request)
    return result
