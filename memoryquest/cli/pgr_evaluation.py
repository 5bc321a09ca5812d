"""``pgr run``'s evaluation: every query validated concurrently over one shared snapshot cache,
then the judges' calibration and, with ``--win-rate``, the answer-level comparison, all under
the progress display (:mod:`memoryquest.progress`)."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import TYPE_CHECKING

from memoryquest.cli.pgr_inputs import PGRInputs
from memoryquest.contracts import JudgeKind, Query, Stage, StageUsage, ValidationResult
from memoryquest.pgr.runner import validate_queries
from memoryquest.progress import ProgressMode, RunFigures, showing
from memoryquest.progress.display import DEFAULT_EVERY_SECONDS
from memoryquest.progress.figures import request_limit
from memoryquest.settings import Settings

if TYPE_CHECKING:
    from memoryquest.pgr.calibration_contracts import JudgeCalibrationReport
    from memoryquest.pgr.winrate_contracts import WinRateReport


@dataclass(frozen=True)
class Display:
    mode: ProgressMode = ProgressMode.AUTO
    every_seconds: float = DEFAULT_EVERY_SECONDS


PGR_STAGE = Stage.PGR  # the bar of `pgr run`: queries validated
WIN_RATE_STAGE = "win rate"  # with --win-rate: queries whose answers were judged


@dataclass(frozen=True)
class Evaluation:
    """What one ``pgr run`` produced, and with what."""

    results: list[ValidationResult]
    win_rates: WinRateReport | None
    calibration: JudgeCalibrationReport | None
    usage: list[StageUsage]
    chat_model: str
    judge_model: str
    embedder: str


async def evaluate_queries(
    queries: list[Query],
    inputs: PGRInputs,
    settings: Settings,
    display: Display = Display(),
    *,
    win_rate: bool = False,
    judge_sees_references: bool = False,
) -> Evaluation:
    from memoryquest.llm.factory import build_client
    from memoryquest.pgr.calibration import calibrate_queries, calibration_report
    from memoryquest.pgr.judges import build_judges
    from memoryquest.pgr.retrieval import IndexCache
    from memoryquest.pgr.winrate import answer_level

    client = build_client(settings)
    figures = RunFigures(
        [PGR_STAGE, WIN_RATE_STAGE] if win_rate else [PGR_STAGE],
        len(queries),
        unit="queries",
        client=client,
        requests_per_minute_limit=request_limit(client, settings.limits.requests_per_minute),
    )
    snapshots = IndexCache()

    async def one(query: Query) -> list[ValidationResult]:
        results = await validate_queries(
            [query], inputs.facts, client, settings.pgr, index_cache=snapshots
        )
        figures.unit_done(PGR_STAGE)
        return results

    try:
        async with showing(
            figures,
            display.mode,
            title=f"pgr run: {len(queries)} queries",
            every_seconds=display.every_seconds,
        ):
            groups = await asyncio.gather(*(one(q) for q in queries))
            results = [result for group in groups for result in group]
            calibration = None
            judges = [j for j in settings.pgr.judges if j != JudgeKind.PROVENANCE.value]
            if judges and settings.pgr.calibration_facts:
                indexes = {
                    q.query_id: await snapshots.get(
                        q.persona_id, q.query_date, inputs.facts, client
                    )
                    for q in queries
                }
                items, unjudged = await calibrate_queries(
                    queries,
                    indexes,
                    build_judges(judges, settings.pgr),
                    client,
                    inputs.session_domains,
                    settings.pgr.calibration_facts,
                )
                calibration = calibration_report(
                    items, results, settings.pgr.calibration_facts, unjudged
                )
            win_rates = None
            if win_rate:
                judged = await answer_level(
                    queries,
                    inputs.personas,
                    inputs.facts,
                    results,
                    client,
                    samples=settings.pgr.bootstrap_samples,
                    query_done=lambda: figures.unit_done(WIN_RATE_STAGE),
                    judge_sees_references=judge_sees_references,
                    generator_model=inputs.generator_model,
                )
                results, win_rates = judged.results, judged.report
        return Evaluation(
            results,
            win_rates,
            calibration,
            client.usage(),
            client.chat_backend.model,
            client.judge_model_name,
            client.embedder_name,
        )
    finally:
        await client.aclose()
