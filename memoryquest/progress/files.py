"""Progress on disk, so a run spread over shards or Dask workers can be watched as one run.

Every run writes its latest :class:`~memoryquest.progress.figures.ProgressSnapshot`
to ``<output>/progress.json`` as it goes (:func:`write_snapshot`, every few
seconds and once at the end). A run spread over children (the shards of a work
pool, the personas of a Dask cluster: :mod:`memoryquest.orchestration.spread`) reads its
children's files, adds them up (:func:`combine`) and writes the sum to its own
``progress.json``; ``memoryquest progress DIR...`` reads the same files from any
machine that sees the output directory.
"""

from __future__ import annotations

import contextlib
import os
from collections import Counter
from collections.abc import Sequence
from pathlib import Path

from pydantic import ValidationError

from memoryquest.progress.figures import ProgressSnapshot, StageProgress

PROGRESS_FILE = "progress.json"


def write_snapshot(directory: Path, snapshot: ProgressSnapshot) -> Path:
    """``snapshot`` as ``directory/progress.json``, replaced whole so a reader never sees half of it."""
    path = directory / PROGRESS_FILE
    scratch = path.with_name(f".{PROGRESS_FILE}.{os.getpid()}")
    scratch.write_text(snapshot.model_dump_json(indent=2) + "\n", encoding="utf-8")
    os.replace(scratch, path)
    return path


def read_snapshot(directory: Path) -> ProgressSnapshot | None:
    """The snapshot in ``directory/progress.json``, or None while there is none (not started yet)
    or it cannot be read now (a shared disk's hiccup): progress is never worth failing a run for."""
    with contextlib.suppress(OSError, ValidationError, ValueError):
        return ProgressSnapshot.model_validate_json(
            (directory / PROGRESS_FILE).read_text(encoding="utf-8")
        )
    return None


def not_started(stages: Sequence[str], personas: int) -> ProgressSnapshot:
    """What a child that has written nothing yet counts for: its whole share of the work, none done."""
    return ProgressSnapshot(
        personas_total=personas,
        stages=[StageProgress(stage=stage, total=personas) for stage in stages],
    )


_SUMMED = (
    "personas_total",
    "personas_done",
    "personas_skipped",
    "queries_kept",
    "queries_target",
    "sessions",
    "facts",
    "results",
    "requests",
    "embedding_requests",
    "cache_hits",
    "input_tokens",
    "output_tokens",
    "cached_tokens",
    "cost_usd",
    "requests_per_minute",
    "rate_limited",
    "retries",
)


def combine(
    snapshots: Sequence[ProgressSnapshot],
    *,
    elapsed_seconds: float,
    requests_per_minute_limit: int | None = None,
    cost_estimate_usd: float | None = None,
) -> ProgressSnapshot:
    """The children's snapshots as one run's: counts, tokens, dollars and request rates added up,
    stage bars added stage by stage, and the ETA from the combined share of work done in
    ``elapsed_seconds`` (the parent's time since it started, not any one child's).

    ``requests_per_minute_limit`` is what the combined rate is shown against; left None it is
    the sum of the limits the children reported (each child limits itself unless they share
    one), and none when no child is limited (the simulator).
    """
    combined = ProgressSnapshot(
        elapsed_seconds=elapsed_seconds, cost_estimate_usd=cost_estimate_usd
    )
    stages: dict[str, StageProgress] = {}
    rejected: Counter[str] = Counter()
    limits = [s.requests_per_minute_limit for s in snapshots if s.requests_per_minute_limit]
    for snapshot in snapshots:
        for name in _SUMMED:
            setattr(combined, name, getattr(combined, name) + getattr(snapshot, name))
        for stage in snapshot.stages:
            bar = stages.setdefault(stage.stage, StageProgress(stage=stage.stage))
            bar.done += stage.done
            bar.total += stage.total
            bar.cached += stage.cached
        rejected.update(snapshot.rejected)
    combined.cost_usd = round(combined.cost_usd, 8)
    combined.stages = list(stages.values())
    combined.rejected = dict(rejected.most_common())
    combined.spending = any(s.spending for s in snapshots)
    if requests_per_minute_limit is not None:
        combined.requests_per_minute_limit = requests_per_minute_limit
    elif limits:
        combined.requests_per_minute_limit = sum(limits)
    done, total = combined.steps_done, combined.steps_total
    if 0 < done < total:
        combined.eta_seconds = elapsed_seconds * (total - done) / done
    elif total and done >= total:
        combined.eta_seconds = 0.0
    return combined
