"""What the dataset card is written from: the statistics of the tables, the redacted run
manifest, the publish settings, and the audit, Win Rate report and PGR run when there are any."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import pyarrow as pa

from memoryquest.contracts import RunManifest
from memoryquest.pgr.run_record import EvaluationRun
from memoryquest.pgr.winrate_contracts import WinRateReport
from memoryquest.publish.stats import DatasetStatistics
from memoryquest.settings import PublishSettings


@dataclass(frozen=True)
class CardInputs:
    manifest: RunManifest  # already redacted
    statistics: DatasetStatistics
    publish: PublishSettings
    gamma_threshold: float
    row_counts: Mapping[str, Mapping[str, int]]  # config -> split -> rows
    users_per_split: Mapping[str, int]
    schemas: Mapping[str, pa.Schema]
    plots: Sequence[tuple[str, str]]  # (relative path, alt text)
    has_personalens: bool
    licence_file: str | None
    audit_markdown: str | None = None  # the validity audit's table (memoryquest audit)
    audit_failures: Sequence[
        str
    ] = ()  # failed gates, when publishing anyway (--allow-failed-audit)
    audit_targets_missed: Sequence[str] = ()  # benchmark targets the audit found missed
    win_rates: WinRateReport | None = None  # answer-level Win Rate (memoryquest pgr run --win-rate)
    evaluation: EvaluationRun | None = None  # a `memoryquest pgr run` with its results (--pgr-run)
