"""Generation beyond one machine, on engines that already exist: Prefect work pools and Dask.

* **Shards across Prefect workers** (:func:`generate_sharded`): the persona
  selection is split into shards and the generation deployment is run once
  per shard with ``run_deployment``; whichever workers of the pool are free,
  on whatever machines, pick the runs up. Each child writes to
  ``<output>/shards/<i>`` and does not publish; the parent waits for all of
  them, merges their datasets (usage summed into one manifest), saves
  ``<output>/dataset`` and publishes ``<output>/published``.
* **Dask** (:func:`generate_with_dask`): one Prefect task per persona,
  submitted to a Dask scheduler through prefect-dask's ``DaskTaskRunner``.
  Each task builds its own client and runs the plain
  :func:`memoryquest.pipeline.generate_persona`.

Both need ``output`` on storage every machine sees at the same path: the
client's response cache (``<output>/.cache``, what makes a re-run free) and
the shard outputs live there. Endpoint secrets never travel as flow
parameters; workers read them from their own environment.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import time
import uuid
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from prefect import flow, get_run_logger, task
from prefect.artifacts import (
    acreate_markdown_artifact,
    acreate_table_artifact,
    create_table_artifact,
)
from prefect.cache_policies import NO_CACHE
from prefect.client.schemas.objects import FlowRun
from prefect.deployments import arun_deployment
from prefect.futures import wait

from memoryquest.contracts import Persona, RunManifest, StageUsage
from memoryquest.dataset import GeneratedDataset
from memoryquest.intake import PersonaSelection, is_http_source, load_personas
from memoryquest.llm.factory import build_client
from memoryquest.orchestration import _summary_rows
from memoryquest.pgr.runner import summarise, summary_markdown
from memoryquest.pipeline import build_manifest, generate_persona
from memoryquest.settings import Settings, load_settings

SHARDS_DIR = "shards"


class ShardFailedError(RuntimeError):
    """One or more child runs of a sharded generation did not complete."""


# --------------------------------------------------------------------------- merging


def sum_usage(rows: Iterable[StageUsage]) -> list[StageUsage]:
    """One row per stage (in order of first appearance), counts and costs summed.

    ``seconds`` is summed as well: across machines it is busy time, not wall time.
    """
    totals: dict[str, dict[str, Any]] = {}
    for row in rows:
        total = totals.setdefault(row.stage, {"stage": row.stage})
        for name, value in row.model_dump(exclude={"stage"}).items():
            if isinstance(value, bool):
                total[name] = total.get(name, False) or value
            else:
                total[name] = total.get(name, 0) + value
    for total in totals.values():
        for name in ("cost_usd", "seconds"):
            total[name] = round(total[name], 6)
    return [StageUsage.model_validate(total) for total in totals.values()]


_SAME_EVERYWHERE = ("package_version", "backend", "base_url", "chat_model", "embedder", "seed", "prompts")


def merge_parts(
    parts: Sequence[GeneratedDataset], labels: Sequence[str], settings: Settings, started: float
) -> GeneratedDataset:
    """Concatenate generated parts into one dataset with one manifest.

    Every part must come from the same code, prompts, models and seed: a
    worker running another package version would otherwise slip different
    rows into one dataset unnoticed.
    """
    if not parts:
        raise ValueError("nothing to merge: no generated part was given")
    if len(labels) != len(parts):
        raise ValueError(f"{len(parts)} parts but {len(labels)} labels")
    manifests: list[RunManifest] = []
    for label, part in zip(labels, parts, strict=True):
        if part.manifest is None:
            raise ValueError(f"{label}: the generated part has no run manifest")
        manifests.append(part.manifest)
    first = manifests[0]
    for label, manifest in zip(labels[1:], manifests[1:], strict=True):
        for name in _SAME_EVERYWHERE:
            if getattr(manifest, name) != getattr(first, name):
                raise ValueError(
                    f"{label} was generated with a different {name} than {labels[0]} "
                    f"({getattr(manifest, name)!r} vs {getattr(first, name)!r}); every worker must run the same code and settings"
                )
    dataset = GeneratedDataset()
    for part in parts:
        dataset.extend(part)
    persona_ids = [p.persona_id for p in dataset.personas]
    repeated = sorted({pid for pid in persona_ids if persona_ids.count(pid) > 1})
    if repeated:
        raise ValueError(f"personas generated more than once: {', '.join(repeated)}")
    usage = sum_usage(row for manifest in manifests for row in manifest.usage)
    dataset.manifest = RunManifest(
        run_id=uuid.uuid4().hex,
        created_at=dt.datetime.now(dt.UTC),
        package_version=first.package_version,
        simulated=all(m.simulated for m in manifests),
        backend=first.backend,
        base_url=first.base_url,
        chat_model=first.chat_model,
        embedder=first.embedder,
        seed=first.seed,
        settings=settings.masked(),
        prompts=first.prompts,
        usage=usage,
        total_cost_usd=round(sum(u.cost_usd for u in usage), 6),
        persona_ids=persona_ids,
        wall_seconds=round(time.perf_counter() - started, 3),
    )
    return dataset


# --------------------------------------------------------------------------- shards


@dataclass(frozen=True)
class Shard:
    index: int
    users: list[str]
    output: Path

    @property
    def label(self) -> str:
        return f"shard {self.index} (users {', '.join(self.users)})"


def plan_shards(users: Sequence[str], shards: int, root: Path) -> list[Shard]:
    """Contiguous, nearly equal groups in selection order, so the merged dataset keeps that order.

    Never more shards than users: an empty shard would only cost a worker start.
    """
    if shards < 1:
        raise ValueError(f"shards must be at least 1, got {shards}")
    if not users:
        raise ValueError("no users to shard")
    count = min(shards, len(users))
    base, extra = divmod(len(users), count)
    plan: list[Shard] = []
    start = 0
    for index in range(count):
        size = base + (1 if index < extra else 0)
        plan.append(Shard(index, list(users[start : start + size]), root / str(index)))
        start += size
    return plan


def check_shard_runs(plan: Sequence[Shard], runs: Sequence[FlowRun]) -> None:
    """Raise naming every shard whose child run did not complete."""
    problems = []
    for shard, run in zip(plan, runs, strict=True):
        state = run.state
        if state is not None and state.is_completed():
            continue
        state_name = state.name if state is not None else "unknown"
        message = f": {state.message}" if state is not None and state.message else ""
        problems.append(f"{shard.label}: flow run '{run.name}' ({run.id}) ended {state_name}{message}")
    if problems:
        raise ShardFailedError(f"{len(problems)} of {len(plan)} shards failed; " + "; ".join(problems))


def _run_settings(
    output: str, persona_source: str | None, config_file: str | None, overrides: dict[str, Any] | None
) -> Settings:
    """The same settings as :func:`memoryquest.orchestration.generate_benchmark` builds."""
    merged: dict[str, Any] = dict(overrides or {})
    merged["output_dir"] = output
    if persona_source:
        merged["persona_source"] = persona_source
    return load_settings(Path(config_file) if config_file else None, merged)


def _portable_source(persona_source: str | None) -> str | None:
    """A local source as an absolute path: a child run may start in another directory."""
    if persona_source is None or is_http_source(persona_source):
        return persona_source
    return str(Path(persona_source).resolve())


def _shard_rows(plan: Sequence[Shard], runs: Sequence[FlowRun]) -> list[dict[str, Any]]:
    return [
        {
            "shard": shard.index,
            "users": ", ".join(shard.users),
            "flow_run": run.name,
            "state": run.state.name if run.state is not None else "unknown",
            "output": str(shard.output),
        }
        for shard, run in zip(plan, runs, strict=True)
    ]


@flow(name="memoryquest-generate-sharded", log_prints=True)
async def generate_sharded(
    output: str = "output/sharded-run",
    persona_source: str | None = None,
    users: list[str] | None = None,
    count: int | None = None,
    shards: int = 2,
    deployment: str = "memoryquest-generate/offline",
    config_file: str | None = None,
    overrides: dict[str, Any] | None = None,
    publish: bool = True,
    allow_failed_audit: bool = False,
    poll_seconds: float = 5.0,
) -> str:
    """Split the personas into shards, run ``deployment`` once per shard, merge; returns the output directory.

    The children run concurrently on the deployment's work pool, each as a
    sub-flow of this run. They resume like any generation run (Prefect's
    result cache and the response cache under their own output), so
    re-running a failed parent only redoes what is missing.
    """
    from prefect.runtime import flow_run as current_run

    from memoryquest.publish import publish_dataset

    started = time.perf_counter()
    logger = get_run_logger()
    output_dir = Path(output).resolve()
    source = _portable_source(persona_source)
    settings = _run_settings(str(output_dir), source, config_file, overrides)
    intake = load_personas(settings.persona_source, PersonaSelection(user_ids=users, count=count))
    for error in intake.errors:
        logger.error("persona skipped: %s", error)
    if not intake.personas:
        raise ValueError(f"no persona could be loaded from {settings.persona_source}")
    plan = plan_shards([p.source_user_id for p in intake.personas], shards, output_dir / SHARDS_DIR)

    parent_name = current_run.get_name() or "sharded"
    parent_id = current_run.get_id()

    async def launch(shard: Shard) -> FlowRun:
        logger.info("launching %s on %s", shard.label, deployment)
        return await arun_deployment(
            name=deployment,
            parameters={
                "output": str(shard.output),
                "persona_source": source,
                "users": shard.users,
                "count": None,
                "config_file": config_file,
                "overrides": overrides or {},
                "publish": False,
            },
            flow_run_name=f"{parent_name}-shard-{shard.index}",
            # A retried parent finds its children instead of starting them twice.
            idempotency_key=f"{parent_id}-shard-{shard.index}" if parent_id else None,
            poll_interval=poll_seconds,
            timeout=None,
        )

    runs = list(await asyncio.gather(*(launch(shard) for shard in plan)))
    await acreate_table_artifact(table=_shard_rows(plan, runs), key="memoryquest-shards", description="Child runs")
    check_shard_runs(plan, runs)

    parts = [GeneratedDataset.load(shard.output / "dataset") for shard in plan]
    dataset = merge_parts(parts, [shard.label for shard in plan], settings, started)
    dataset_dir = dataset.save(output_dir / "dataset")
    await acreate_table_artifact(table=_summary_rows(dataset), key="memoryquest-personas", description="Per-persona output")
    if dataset.validation:
        await acreate_markdown_artifact(
            markdown=summary_markdown(summarise(dataset.validation)), key="memoryquest-pgr", description="PGR validation"
        )
    if publish:
        publish_dataset(dataset, output_dir / "published", settings, allow_failed_audit=allow_failed_audit)
    logger.info("merged %d shards (%d personas) into %s", len(plan), len(dataset.personas), dataset_dir)
    return str(output_dir)


# --------------------------------------------------------------------------- Dask


@task(name="persona-on-worker", retries=2, retry_delay_seconds=5, cache_policy=NO_CACHE)
def generate_persona_on_worker(persona: Persona, settings: Settings) -> GeneratedDataset:
    """Every stage for one persona, on whichever Dask worker runs it.

    The client is built here, in the worker: its limiter, SDK connections and
    usage ledger belong to this process. The response cache under
    ``settings.output_dir`` is shared, so a retried persona pays nothing twice.
    """
    started = time.perf_counter()

    async def run() -> GeneratedDataset:
        client = build_client(settings)
        try:
            part = await generate_persona(persona, client, settings)
        finally:
            await client.aclose()
        part.manifest = build_manifest(part, client, settings, started)
        return part

    return asyncio.run(run())


@flow(name="memoryquest-generate-dask-personas", log_prints=True)
def generate_personas_on_dask(
    output: str,
    persona_source: str | None = None,
    users: list[str] | None = None,
    count: int | None = None,
    config_file: str | None = None,
    overrides: dict[str, Any] | None = None,
    publish: bool = True,
    allow_failed_audit: bool = False,
) -> str:
    """The body of :func:`generate_with_dask`; runs with whatever task runner it is given."""
    from memoryquest.publish import publish_dataset

    started = time.perf_counter()
    logger = get_run_logger()
    settings = _run_settings(output, persona_source, config_file, overrides)
    output_dir = Path(settings.output_dir)
    output_dir.mkdir(parents=True, exist_ok=True)
    intake = load_personas(settings.persona_source, PersonaSelection(user_ids=users, count=count))
    for error in intake.errors:
        logger.error("persona skipped: %s", error)
    if not intake.personas:
        raise ValueError(f"no persona could be loaded from {settings.persona_source}")

    futures = [generate_persona_on_worker.submit(persona, settings) for persona in intake.personas]
    wait(futures)
    failed = []
    for persona, future in zip(intake.personas, futures, strict=True):
        state = future.state
        if not state.is_completed():
            failed.append(f"persona {persona.source_user_id}: {state.name}: {state.message or 'no message'}")
    if failed:
        raise RuntimeError(f"{len(failed)} of {len(futures)} personas failed on the Dask cluster; " + "; ".join(failed))
    parts: list[GeneratedDataset] = [future.result() for future in futures]
    labels = [f"persona {p.source_user_id}" for p in intake.personas]
    dataset = merge_parts(parts, labels, settings, started)
    dataset_dir = dataset.save(output_dir / "dataset")
    create_table_artifact(table=_summary_rows(dataset), key="memoryquest-personas", description="Per-persona output")
    if publish:
        publish_dataset(dataset, output_dir / "published", settings, allow_failed_audit=allow_failed_audit)
    logger.info("dataset of %d personas written to %s", len(dataset.personas), dataset_dir)
    return str(output_dir)


@flow(name="memoryquest-generate-dask", log_prints=True)
def generate_with_dask(
    output: str = "output/dask-run",
    scheduler_address: str | None = None,
    persona_source: str | None = None,
    users: list[str] | None = None,
    count: int | None = None,
    config_file: str | None = None,
    overrides: dict[str, Any] | None = None,
    publish: bool = True,
    allow_failed_audit: bool = False,
) -> str:
    """Generate with one task per persona on a Dask cluster; returns the output directory.

    ``scheduler_address`` (``tcp://host:8786``) names a running cluster;
    without it prefect-dask starts a temporary ``LocalCluster``. On a
    two-core machine this is slower than the in-process flow
    (:func:`memoryquest.orchestration.generate_benchmark`): every worker
    process loads its own embedding model, results cross process
    boundaries, and there are no more cores to spread over. The point is
    that the same code runs unchanged on a real cluster.
    """
    from prefect.task_runners import TaskRunner
    from prefect_dask import DaskTaskRunner

    runner: TaskRunner[Any] = DaskTaskRunner(address=scheduler_address) if scheduler_address else DaskTaskRunner()
    result: str = generate_personas_on_dask.with_options(task_runner=runner)(
        output=str(Path(output).resolve()),
        persona_source=_portable_source(persona_source),
        users=users,
        count=count,
        config_file=config_file,
        overrides=overrides,
        publish=publish,
        allow_failed_audit=allow_failed_audit,
    )
    return result
