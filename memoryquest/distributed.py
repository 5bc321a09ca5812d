"""Generation beyond one machine, on engines that already exist: Prefect work pools and Dask.

The generation flow (:func:`memoryquest.orchestration.generate_benchmark`)
runs here when its ``spread`` parameter says where the personas go:

* **Shards across Prefect workers** (:class:`ShardSpread`,
  :func:`generate_sharded`): the persona selection is split into shards and
  a generation deployment is run once per shard (with ``spread`` unset, so
  in its own process) through ``run_deployment``; whichever workers of the
  pool are free, on whatever machines, pick the runs up. Each child writes
  to ``<output>/shards/<i>`` and does not publish; the parent waits for all
  of them, merges their datasets (usage summed into one manifest), saves
  ``<output>/dataset`` and publishes ``<output>/published``.
* **Dask** (:class:`DaskSpread`, :func:`generate_with_dask`): one Prefect
  task per persona, submitted to a Dask scheduler through prefect-dask's
  ``DaskTaskRunner``. Each task builds its own client and runs the stage
  groups of :mod:`memoryquest.pipeline` in its worker process, journalling
  its usage and progress under ``<output>/parts/<user>``.

Either way the spread run is reported as one run. Every child (a shard, a
persona on Dask) writes its ``usage.jsonl`` (every attempt's spending) and
``progress.json`` in its own directory; while they run, the parent adds their
progress up into one line (log, Prefect's progress artifact and
``<output>/progress.json``, which ``memoryquest progress`` reads), and at the
end it writes ``<output>/run_report.json`` like an in-process run's, whose
``usage`` is the merged manifest's (the card's usage table): the sum of the
children's usage, listed per child beside it (:func:`write_spread_report`).

Both need ``output`` on storage every machine sees at the same path: the
client's response cache (``<output>/.cache``, what makes a re-run free) and
the shard outputs live there. Endpoint secrets never travel as flow
parameters; workers read them from their own environment. Setup and
teardown (settings, output lock, personas, save, publish) are
:mod:`memoryquest.run`'s, as for the one-machine flow.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from collections.abc import AsyncIterator, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, Literal, Protocol

from prefect import flow, get_run_logger, task
from prefect.artifacts import (
    acreate_progress_artifact,
    acreate_table_artifact,
    aupdate_progress_artifact,
)
from prefect.cache_policies import NO_CACHE
from prefect.client.schemas.objects import FlowRun
from prefect.deployments import arun_deployment
from prefect.futures import wait
from pydantic import BaseModel, ConfigDict, Field

from memoryquest.contracts import Persona, RunManifest, StageUsage
from memoryquest.dataset import GeneratedDataset
from memoryquest.intake import PersonaSelection, is_http_source
from memoryquest.llm.accounting import USAGE_FILE, UsageJournal
from memoryquest.manifest import Origin, manifest_for
from memoryquest.pipeline import enabled_groups, run_persona
from memoryquest.progress import ProgressSnapshot, RunSummary, periodically, plain_line
from memoryquest.progress.display import DEFAULT_EVERY_SECONDS
from memoryquest.progress.files import combine, not_started, read_snapshot, write_snapshot
from memoryquest.run import (
    DATASET_DIR,
    RUN_REPORT,
    Run,
    finish_run,
    open_run,
    progress_file,
    run_client,
    run_figures,
    run_manifest,
    settings_from_parameters,
    write_run_report,
)
from memoryquest.settings import Settings
from memoryquest.task_retries import retry_on_infrastructure_failure

SHARDS_DIR = "shards"
PARTS_DIR = "parts"  # a Dask run's personas, one directory each: their usage and progress
DEFAULT_SHARD_DEPLOYMENT = "memoryquest-generate/offline"
SHARDED_RUN = "memoryquest-generate over shards"  # what the output's lock says holds it
DASK_FLOW = "memoryquest-generate-dask-personas"


class ShardSpread(BaseModel):
    """Run the personas in ``shards`` child runs of ``deployment`` on its work pool's workers."""

    model_config = ConfigDict(extra="forbid")

    kind: Literal["shards"] = "shards"
    shards: int = Field(default=2, ge=1)
    deployment: str = DEFAULT_SHARD_DEPLOYMENT
    poll_seconds: float = Field(default=5.0, gt=0)


class DaskSpread(BaseModel):
    """Run one task per persona on the Dask cluster at ``scheduler_address`` (``tcp://host:8786``),
    or on a temporary local one when it is unset."""

    model_config = ConfigDict(extra="forbid")

    kind: Literal["dask"] = "dask"
    scheduler_address: str | None = None


Spread = Annotated[ShardSpread | DaskSpread, Field(discriminator="kind")]
"""Where a generation run's personas go; the flow parameter's JSON names it by ``kind``."""


@dataclass(frozen=True)
class SpreadRun:
    """What the generation flow asks of a run spread over machines: plain parameters, since
    every child run and worker builds its settings from the same ones."""

    output: str
    persona_source: str | None
    config_file: str | None
    overrides: dict[str, Any]
    selection: PersonaSelection
    publish: bool
    allow_failed_audit: bool
    progress_seconds: float = DEFAULT_EVERY_SECONDS

    @property
    def portable_source(self) -> str | None:
        """A local source as an absolute path: a child run may start in another directory."""
        if self.persona_source is None or is_http_source(self.persona_source):
            return self.persona_source
        return str(Path(self.persona_source).resolve())

    def settings(self) -> Settings:
        """The run's settings, its output and a local persona source as absolute paths, which
        every worker reads the same."""
        return settings_from_parameters(
            str(Path(self.output).resolve()),
            self.portable_source,
            self.config_file,
            self.overrides,
        )


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


_SAME_EVERYWHERE = tuple(name for name in Origin.model_fields if name != "simulated")


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
    origins = [Origin.of_manifest(manifest) for manifest in manifests]
    first = origins[0]
    for label, origin in zip(labels[1:], origins[1:], strict=True):
        for name in _SAME_EVERYWHERE:
            if getattr(origin, name) != getattr(first, name):
                raise ValueError(
                    f"{label} was generated with a different {name} than {labels[0]} "
                    f"({getattr(origin, name)!r} vs {getattr(first, name)!r}); every worker must run the same code and settings"
                )
    dataset = GeneratedDataset()
    for part in parts:
        dataset.extend(part)
    persona_ids = [p.persona_id for p in dataset.personas]
    repeated = sorted({pid for pid in persona_ids if persona_ids.count(pid) > 1})
    if repeated:
        raise ValueError(f"personas generated more than once: {', '.join(repeated)}")
    dataset.manifest = manifest_for(
        dataset,
        settings,
        started,
        origin=first.model_copy(update={"simulated": all(o.simulated for o in origins)}),
        usage=sum_usage(row for manifest in manifests for row in manifest.usage),
    )
    return dataset


# --------------------------------------------------------------------------- one run over many children


class Child(Protocol):
    """A part of a spread run that writes its own usage and progress: a shard, a persona on Dask."""

    @property
    def label(self) -> str: ...

    @property
    def users(self) -> list[str]: ...

    @property
    def output(self) -> Path: ...


def spread_progress(run: Run, children: Sequence[Child]) -> ProgressSnapshot:
    """The children's progress files added up as one run's; a child that has written none yet
    counts as its personas with nothing done, so the ETA covers the whole run."""
    stages = [group.name for group in enabled_groups(run.settings)]
    snapshots = [
        read_snapshot(child.output) or not_started(stages, len(child.users)) for child in children
    ]
    limited = any(s.requests_per_minute_limit for s in snapshots)
    shared = run.settings.limits.shared_limit_name is not None
    return combine(
        snapshots,
        elapsed_seconds=time.perf_counter() - run.started,
        # Children that share one limit send at most that limit together.
        requests_per_minute_limit=run.settings.limits.requests_per_minute
        if shared and limited
        else None,
    )


@contextlib.asynccontextmanager
async def watching(
    run: Run, children: Sequence[Child], every_seconds: float
) -> AsyncIterator[None]:
    """While the children run: every ``every_seconds`` (and at the end) their combined progress as
    one line in the parent's log, in Prefect's progress artifact and in ``<output>/progress.json``."""
    logger = get_run_logger()
    artifact = await acreate_progress_artifact(
        progress=0.0, key="memoryquest-progress", description="Personas finished"
    )

    async def update() -> None:
        snapshot = spread_progress(run, children)
        try:
            write_snapshot(run.output_dir, snapshot)
        except OSError as exc:  # progress is never worth failing a run for
            logger.warning("progress not written: %s", exc)
        line = plain_line(snapshot)
        logger.info("%d children: %s", len(children), line)
        await aupdate_progress_artifact(artifact, 100.0 * snapshot.fraction, description=line)

    async with periodically(every_seconds, update):
        yield


def _child_report(child: Child) -> dict[str, Any]:
    path = child.output / RUN_REPORT
    try:
        report: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
    except (FileNotFoundError, ValueError):
        return {}
    return report


def write_spread_report(run: Run, children: Sequence[Child], dataset: GeneratedDataset) -> Path:
    """``<output>/run_report.json`` of a spread run, read the same as an in-process run's.

    ``usage`` is the merged manifest's (what the card's usage table shows): every attempt of every
    child, summed per stage. ``children`` lists each child's own usage as its ``usage.jsonl``
    records it, so the sum can be checked. The summary adds up the children's final progress;
    the stage states and seconds are the shards' own reports' (a Dask persona has none).
    """
    if dataset.manifest is None:
        raise ValueError("the merged dataset has no run manifest")
    snapshot = spread_progress(run, children)
    reports = [_child_report(child) for child in children]
    skipped = [*run.skipped, *(error for r in reports for error in r.get("persona_errors", []))]
    counts: dict[str, int] = {}
    for report in reports:
        for name, number in report.get("state_counts", {}).items():
            counts[name] = counts.get(name, 0) + number
    summary = RunSummary.from_snapshot(snapshot, skipped, time.perf_counter() - run.started)
    entries = []
    for child in children:
        journal = UsageJournal.read(child.output / USAGE_FILE)
        entries.append(
            {
                "label": child.label,
                "users": child.users,
                "output": str(child.output),
                "attempts": journal.attempts,
                "usage": [row.model_dump(mode="json") for row in journal.rows],
            }
        )
    return write_run_report(
        run,
        {
            "children": entries,
            "stage_states": {u: s for r in reports for u, s in r.get("stage_states", {}).items()},
            "stage_seconds": {u: s for r in reports for u, s in r.get("stage_seconds", {}).items()},
            "state_counts": counts,
            "persona_errors": skipped,
            "usage": [row.model_dump(mode="json") for row in dataset.manifest.usage],
            "summary": summary.model_dump(mode="json"),
        },
    )


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
        problems.append(
            f"{shard.label}: flow run '{run.name}' ({run.id}) ended {state_name}{message}"
        )
    if problems:
        raise ShardFailedError(
            f"{len(problems)} of {len(plan)} shards failed; " + "; ".join(problems)
        )


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


async def generate_sharded(spread: ShardSpread, request: SpreadRun) -> str:
    """Split the personas into shards, run ``spread.deployment`` once per shard, merge; returns the
    output directory.

    The children run concurrently on the deployment's work pool, each as a
    sub-flow of this run. They resume like any generation run (Prefect's
    result cache and the response cache under their own output), so
    re-running a failed parent only redoes what is missing. The parent holds
    the lock of ``output`` throughout; each child locks its own shard directory.
    """
    from prefect.runtime import flow_run as current_run

    logger = get_run_logger()
    with open_run(request.settings(), request.selection, SHARDED_RUN) as run:
        plan = plan_shards(
            [p.source_user_id for p in run.personas], spread.shards, run.output_dir / SHARDS_DIR
        )
        parent_name = current_run.get_name() or "sharded"
        parent_id = current_run.get_id()

        async def launch(shard: Shard) -> FlowRun:
            logger.info("launching %s on %s", shard.label, spread.deployment)
            return await arun_deployment(
                name=spread.deployment,
                parameters={
                    "output": str(shard.output),
                    "persona_source": request.portable_source,
                    "users": shard.users,
                    "count": None,
                    "config_file": request.config_file,
                    "overrides": request.overrides,
                    "publish": False,
                    "spread": None,  # in the child's own process, whatever its deployment's default
                    "progress_seconds": request.progress_seconds,
                },
                flow_run_name=f"{parent_name}-shard-{shard.index}",
                # A retried parent finds its children instead of starting them twice.
                idempotency_key=f"{parent_id}-shard-{shard.index}" if parent_id else None,
                poll_interval=spread.poll_seconds,
                timeout=None,
            )

        async with watching(run, plan, request.progress_seconds):
            runs = list(await asyncio.gather(*(launch(shard) for shard in plan)))
        await acreate_table_artifact(
            table=_shard_rows(plan, runs), key="memoryquest-shards", description="Child runs"
        )
        check_shard_runs(plan, runs)
        dataset = await merge_shards(run, plan, request)
    logger.info(
        "merged %d shards (%d personas) into %s", len(plan), len(dataset.personas), run.output_dir
    )
    return str(run.output_dir)


async def merge_shards(run: Run, plan: Sequence[Shard], request: SpreadRun) -> GeneratedDataset:
    """The finished shards' datasets as one: merged, reported as one run
    (:func:`write_spread_report`), saved and published."""
    parts = [GeneratedDataset.load(shard.output / DATASET_DIR) for shard in plan]
    dataset = merge_parts(parts, [shard.label for shard in plan], run.settings, run.started)
    write_spread_report(run, plan, dataset)
    await finish_run(
        run, dataset, publish=request.publish, allow_failed_audit=request.allow_failed_audit
    )
    return dataset


# --------------------------------------------------------------------------- Dask


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
        async with run_client(run) as client:
            figures = run_figures(run, client)
            async with progress_file(run, figures, progress_seconds):
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


async def generate_spread(spread: ShardSpread | DaskSpread, request: SpreadRun) -> str:
    """Run the generation where ``spread`` says; returns the output directory."""
    if isinstance(spread, ShardSpread):
        return await generate_sharded(spread, request)
    return await generate_with_dask(spread, request)
