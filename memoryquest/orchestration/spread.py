"""Generation beyond one machine, on engines that already exist: Prefect work pools and Dask.

The generation flow (:func:`memoryquest.orchestration.flow.generate_benchmark`)
runs here when its ``spread`` parameter says where the personas go:

* **Shards across Prefect workers** (:class:`ShardSpread`,
  :func:`memoryquest.orchestration.shards.generate_sharded`): the persona selection is split into shards and
  a generation deployment is run once per shard (with ``spread`` unset, so
  in its own process) through ``run_deployment``; whichever workers of the
  pool are free, on whatever machines, pick the runs up. Each child writes
  to ``<output>/shards/<i>`` and does not publish; the parent waits for all
  of them, merges their datasets (usage summed into one manifest), saves
  ``<output>/dataset`` and publishes ``<output>/published``.
* **Dask** (:class:`DaskSpread`,
  :func:`memoryquest.orchestration.dask_personas.generate_with_dask`): one Prefect
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
:mod:`memoryquest.orchestration.lifecycle`'s, as for the one-machine flow.
"""

from __future__ import annotations

import contextlib
import json
import time
from collections.abc import AsyncIterator, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, Literal, Protocol

from prefect import get_run_logger
from prefect.artifacts import (
    acreate_progress_artifact,
    aupdate_progress_artifact,
)
from pydantic import BaseModel, ConfigDict, Field

from memoryquest.contracts import RunManifest, StageUsage
from memoryquest.dataset import GeneratedDataset
from memoryquest.intake import PersonaSelection, is_http_source
from memoryquest.llm.accounting import USAGE_FILE, UsageJournal
from memoryquest.manifest import Origin, manifest_for
from memoryquest.orchestration.lifecycle import (
    RUN_REPORT,
    Run,
    settings_from_parameters,
    write_run_report,
)
from memoryquest.pipeline import enabled_groups
from memoryquest.progress import ProgressSnapshot, RunSummary, periodically, plain_line
from memoryquest.progress.display import DEFAULT_EVERY_SECONDS
from memoryquest.progress.files import combine, not_started, read_snapshot, write_snapshot
from memoryquest.settings import Settings

DEFAULT_SHARD_DEPLOYMENT = "memoryquest-generate/offline"


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
