"""Setup and teardown of a generation run, shared by every way of running one.

The Prefect flow (:mod:`memoryquest.orchestration.flow`, started by the command line
or a deployment) runs in its own process, over shards or on a Dask cluster
(:mod:`memoryquest.orchestration.spread`); the three differ only in where the stage
groups of :mod:`memoryquest.pipeline` execute. Around that they all:

1. build the settings once per process: a flow started with plain parameters
   (a deployment) reads the TOML file and the environment in
   :func:`settings_from_parameters`; the command line has built its settings
   already, to check them before Prefect starts, and hands them over;
2. take the output directory's lock (:class:`~memoryquest.orchestration.output_lock.RunLock`,
   re-entrant within a process, so the command line may hold it already) and
   load the personas (:func:`open_run`);
3. give the run one client whose spending is journalled under the output
   directory, so a resumed run's manifest counts every attempt
   (:func:`run_client`, :func:`run_manifest`), and count what the run does in
   one :class:`~memoryquest.progress.RunFigures` (:func:`run_figures`), which
   the terminal, Prefect's artifacts, ``progress.json`` and the end-of-run
   summary all read (both in :func:`generating`);
5. filter out the queries whose references stand out, save the dataset, show it in
   Prefect's UI and publish it (:func:`finish_run`).
"""

from __future__ import annotations

import contextlib
import json
import time
from collections.abc import AsyncIterator, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from prefect import get_run_logger
from prefect.artifacts import acreate_markdown_artifact, acreate_table_artifact

from memoryquest.contracts import Persona, RunManifest
from memoryquest.dataset import GeneratedDataset
from memoryquest.intake import PersonaSelection, load_personas
from memoryquest.llm.accounting import USAGE_FILE
from memoryquest.llm.client import ModelClient
from memoryquest.llm.factory import build_client
from memoryquest.manifest import build_manifest
from memoryquest.orchestration.output_lock import RunLock
from memoryquest.pgr.metrics import summarise, summary_markdown
from memoryquest.pipeline import enabled_groups
from memoryquest.progress import RunFigures, periodically
from memoryquest.progress.figures import request_limit
from memoryquest.progress.files import write_snapshot
from memoryquest.settings import Settings, load_settings

DATASET_DIR = "dataset"
PUBLISHED_DIR = "published"
RUN_REPORT = "run_report.json"


def settings_from_parameters(
    output: str,
    persona_source: str | None = None,
    config_file: str | None = None,
    overrides: Mapping[str, Any] | None = None,
) -> Settings:
    """The settings of a flow started with plain parameters: the TOML file, the environment, then
    ``overrides`` (nested sections), ``output`` and ``persona_source``."""
    merged: dict[str, Any] = dict(overrides or {})
    merged["output_dir"] = output
    if persona_source:
        merged["persona_source"] = persona_source
    return load_settings(Path(config_file) if config_file else None, merged)


@dataclass
class Run:
    """A run in progress: what it runs with, where it writes, whom it generates, since when."""

    settings: Settings
    output_dir: Path
    personas: list[Persona]
    skipped: list[str] = field(
        default_factory=list
    )  # personas that could not be loaded, one line each
    started: float = field(default_factory=time.perf_counter)


@contextlib.contextmanager
def open_run(settings: Settings, selection: PersonaSelection, flow_name: str) -> Iterator[Run]:
    """Lock the output directory for the run and load its personas; the lock is held until the block ends.

    Personas that fail to load are logged and skipped; a run with none left is a ValueError.
    """
    started = time.perf_counter()
    output_dir = Path(settings.output_dir)
    output_dir.mkdir(parents=True, exist_ok=True)
    with RunLock.acquire(output_dir, command=f"flow {flow_name} into {output_dir}"):
        logger = get_run_logger()
        intake = load_personas(settings.persona_source, selection)
        for error in intake.errors:
            logger.error("persona skipped: %s", error)
        if not intake.personas:
            raise ValueError(f"no persona could be loaded from {settings.persona_source}")
        yield Run(settings, output_dir, intake.personas, [str(e) for e in intake.errors], started)


@contextlib.asynccontextmanager
async def run_client(run: Run) -> AsyncIterator[ModelClient]:
    """The run's one client (one limiter, cache and usage ledger for every persona).

    What it spends is appended to ``<output>/usage.jsonl`` as it accrues, so a
    killed attempt's spending is counted by the next one (:mod:`memoryquest.llm.accounting`).
    """
    client = build_client(run.settings)
    client.ledger.persist(run.output_dir / USAGE_FILE)
    try:
        yield client
    finally:
        await (
            client.aclose()
        )  # the SDK's connections belong to this event loop, which ends with the flow
        client.ledger.close()


def run_figures(
    run: Run, client: ModelClient, cost_estimate_usd: float | None = None
) -> RunFigures:
    """The run's figures: its personas through the enabled stage groups, spending read from ``client``.

    The request rate is shown against ``limits.requests_per_minute`` (not for
    the simulator, which is not limited).
    """
    settings = run.settings
    return RunFigures(
        [stage.name for stage in enabled_groups(settings)],
        len(run.personas),
        client=client,
        requests_per_minute_limit=request_limit(client, settings.limits.requests_per_minute),
        cost_estimate_usd=cost_estimate_usd,
        queries_target=len(run.personas) * settings.generation.queries_per_user,
        personas_skipped=len(run.skipped),
    )


@contextlib.asynccontextmanager
async def progress_file(run: Run, figures: RunFigures, every_seconds: float) -> AsyncIterator[None]:
    """``<output>/progress.json`` from ``figures`` every ``every_seconds`` and at the end, for
    ``memoryquest progress`` and for the parent of a run spread over shards or Dask workers."""

    async def update() -> None:
        try:
            write_snapshot(run.output_dir, figures.snapshot())
        except OSError as exc:  # progress is never worth failing a run for
            get_run_logger().warning("progress not written: %s", exc)

    async with periodically(every_seconds, update):
        yield


@contextlib.asynccontextmanager
async def generating(
    run: Run, every_seconds: float, cost_estimate_usd: float | None = None
) -> AsyncIterator[tuple[ModelClient, RunFigures]]:
    """The run's client and figures, with ``<output>/progress.json`` kept from them while the block
    walks the personas: what the in-process flow and a persona on a Dask worker both run inside."""
    async with run_client(run) as client:
        figures = run_figures(run, client, cost_estimate_usd)
        async with progress_file(run, figures, every_seconds):
            yield client, figures


def write_run_report(run: Run, report: Mapping[str, Any]) -> Path:
    """``<output>/run_report.json``: what the run did, what it spent, and its summary
    (what the command line prints at the end, in whatever process the flow ran)."""
    path = run.output_dir / RUN_REPORT
    path.write_text(json.dumps(report, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    return path


def run_manifest(run: Run, dataset: GeneratedDataset, client: ModelClient) -> RunManifest:
    """The manifest of a run made with ``client``, its usage summed over every attempt into the output directory."""
    return client.ledger.annotate(build_manifest(dataset, client, run.settings, run.started))


def summary_rows(dataset: GeneratedDataset) -> list[dict[str, Any]]:
    """One row per persona: how many rows of each table it has."""
    tables = ("queries", "sessions", "facts", "rejected")
    counts = {p.persona_id: dict.fromkeys(tables, 0) for p in dataset.personas}
    for table in tables:
        for row in getattr(dataset, table):
            if row.persona_id in counts:
                counts[row.persona_id][table] += 1
    return [
        {"user": p.source_user_id, "persona_id": p.persona_id, **counts[p.persona_id]}
        for p in dataset.personas
    ]


def _filtered(dataset: GeneratedDataset, settings: Settings) -> GeneratedDataset:
    """``dataset`` without the queries whose reference items stand out (the manifest records it)."""
    from memoryquest.audit.filtering import filter_tells

    result = filter_tells(dataset, settings)
    summary = result.summary
    get_run_logger().info(
        "tell filter: %d of %d queries withdrawn in %d round(s); %s",
        summary.queries_removed,
        summary.queries_before,
        len(summary.rounds),
        summary.stopped,
    )
    return result.dataset


async def finish_run(
    run: Run, dataset: GeneratedDataset, *, publish: bool, allow_failed_audit: bool = False
) -> Path:
    """Save ``<output>/dataset``, add the per-persona table and the PGR summary to Prefect's UI, and
    publish ``<output>/published``; returns the dataset directory.

    A run that publishes first withdraws the queries whose reference items stand out to the
    audit's classifiers (``audit.filter_tells``, :mod:`memoryquest.audit.filtering`), so the
    saved dataset is the filtered one. Publishing runs the validity audit and refuses a dataset that fails it
    (the saved dataset stays) unless ``allow_failed_audit``. A dataset without
    a single query is saved but not published: there is nothing to audit.
    """
    if publish and dataset.queries and run.settings.audit.filter_tells:
        dataset = _filtered(dataset, run.settings)
    dataset_dir = dataset.save(run.output_dir / DATASET_DIR)
    await acreate_table_artifact(
        table=summary_rows(dataset), key="memoryquest-personas", description="Per-persona output"
    )
    if dataset.validation:
        summary = summarise(dataset.validation, samples=run.settings.pgr.bootstrap_samples)
        await acreate_markdown_artifact(
            markdown=summary_markdown(summary), key="memoryquest-pgr", description="PGR validation"
        )
    if publish and not dataset.queries:
        get_run_logger().error("no query was kept: nothing to publish")
    elif publish:
        from memoryquest.publish import publish_dataset  # matplotlib: only when a run publishes

        publish_dataset(
            dataset,
            run.output_dir / PUBLISHED_DIR,
            run.settings,
            allow_failed_audit=allow_failed_audit,
        )
    get_run_logger().info(
        "dataset of %d personas written to %s", len(dataset.personas), dataset_dir
    )
    return dataset_dir
