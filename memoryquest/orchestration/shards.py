"""Shards across Prefect workers: a generation deployment run once per group of personas, the
children's datasets merged and published as one run (:mod:`memoryquest.orchestration.spread`)."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from prefect import get_run_logger
from prefect.artifacts import (
    acreate_table_artifact,
)
from prefect.client.schemas.objects import FlowRun
from prefect.deployments import arun_deployment

from memoryquest.dataset import GeneratedDataset
from memoryquest.orchestration.lifecycle import (
    DATASET_DIR,
    Run,
    finish_run,
    open_run,
)
from memoryquest.orchestration.spread import (
    ShardSpread,
    SpreadRun,
    merge_parts,
    watching,
    write_spread_report,
)

SHARDS_DIR = "shards"
SHARDED_RUN = "memoryquest-generate over shards"  # what the output's lock says holds it


class ShardFailedError(RuntimeError):
    """One or more child runs of a sharded generation did not complete."""


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
