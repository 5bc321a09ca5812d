"""Progress of a run: one set of figures for the terminal, the plain lines and the summary.

The command-line runs go through a subprocess whose stdout is a pipe, as in
CI or a log file, so they show plain lines; the live display is checked on a
forced terminal and a real pseudo-terminal.
"""

from __future__ import annotations

import asyncio
import io
import json
import logging
import os
import re
import subprocess
from collections import Counter
from pathlib import Path

import pytest
from rich.console import Console

from memoryquest.dataset import GeneratedDataset
from memoryquest.pipeline import enabled_groups, generate_dataset
from memoryquest.progress import (
    ProgressMode,
    RunFigures,
    periodically,
    plain_line,
    render,
    showing,
)
from memoryquest.settings import load_settings
from tests.generation_fixture import load_users, simulated_client
from tests.progress_fixture import generate

DONE = re.compile(r"persona (\S+) done \((\d+)/(\d+)\)")


@pytest.fixture(scope="module")
def runs(
    tmp_path_factory: pytest.TempPathFactory,
) -> tuple[Path, subprocess.CompletedProcess[str], subprocess.CompletedProcess[str], list[str]]:
    """Three personas generated, then the same command again (every stage from Prefect's cache);
    also what each run added to the run's log file."""
    home = tmp_path_factory.mktemp("prefect-home")
    output = tmp_path_factory.mktemp("progress") / "run"
    log = output / "logs" / "run.log"
    options = ("--count", "3", "--progress-seconds", "1")
    first = generate(home, output, *options)
    assert first.returncode == 0, first.stderr[-3000:]
    first_log = log.read_text(encoding="utf-8")
    again = generate(home, output, *options)
    assert again.returncode == 0, again.stderr[-3000:]
    return output, first, again, [first_log, log.read_text(encoding="utf-8")[len(first_log) :]]


def test_each_persona_is_done_once_with_its_own_count(runs) -> None:
    """Personas that finish together each get their own count: a cached re-run finishes all three
    within milliseconds, which used to print "done (3/3)" three times. The flow's log is in the
    run's log file; stderr stays empty (``--verbose`` shows it there)."""
    _, first, again, logs = runs
    for run, log in zip((first, again), logs, strict=True):
        assert run.stderr == ""
        done = DONE.findall(log)
        assert sorted(int(k) for _, k, _ in done) == [1, 2, 3], done
        assert len({user for user, _, _ in done}) == 3
        assert {total for _, _, total in done} == {"3"}


def test_plain_lines_when_stdout_is_not_a_terminal(runs) -> None:
    _, first, _, _ = runs
    lines = [line for line in first.stdout.splitlines() if line.startswith("generate ")]
    assert len(lines) >= 2, (
        first.stdout
    )  # one a second for a run of several seconds, one at the end
    assert "\x1b[" not in first.stdout
    assert "progress 100% (12/12 steps)" in lines[-1]
    for figure in ("personas 3/3", "kept", "rejected", "requests", "tokens", "429s", "ETA"):
        assert figure in lines[-1], lines[-1]
    fractions = [int(re.search(r"progress +(\d+)%", line).group(1)) for line in lines]  # type: ignore[union-attr]
    assert fractions == sorted(fractions)


def test_summary_agrees_with_the_dataset(runs) -> None:
    output, first, again, _ = runs
    dataset = GeneratedDataset.load(output / "dataset")
    summary = json.loads((output / "run_report.json").read_text())["summary"]
    assert summary["personas_done"] == 3 and summary["personas_skipped"] == 0
    assert summary["queries_kept"] == len(dataset.queries) > 0
    assert summary["sessions"] == len(dataset.sessions)
    assert summary["facts"] == len(dataset.facts)
    assert summary["rejected"] == dict(Counter(str(r.reason) for r in dataset.rejected))
    assert f"queries    {len(dataset.queries)} kept" in first.stdout
    assert "personas   3 done, 0 skipped" in first.stdout
    assert "12 computed, 0 from Prefect's cache" in first.stdout
    # The re-run computed nothing and asked for nothing.
    assert "0 computed, 12 from Prefect's cache" in again.stdout
    assert "requests   0 chat, 0 embedding" in again.stdout
    assert f"queries    {len(dataset.queries)} kept" in again.stdout


# --------------------------------------------------------------------------- in process


SMALL = {
    "generation": {"queries_per_user": 2, "candidates_per_user": 8},
    "pgr": {"methods": ["query_only", "pgr_tot"], "judges": ["provenance"]},
}


@pytest.fixture(scope="module")
def watched() -> tuple[RunFigures, GeneratedDataset]:
    """One persona through the pipeline in process, watched by the figures."""
    settings = load_settings(overrides=SMALL)
    client = simulated_client()
    personas = load_users("user0")
    figures = RunFigures([s.name for s in enabled_groups(settings)], len(personas), client=client)
    dataset = asyncio.run(generate_dataset(personas, client, settings, figures))
    return figures, dataset


def test_figures_count_what_the_pipeline_produced(watched) -> None:
    figures, dataset = watched
    snapshot = figures.snapshot()
    assert [(s.stage, s.done, s.total) for s in snapshot.stages] == [
        ("queries", 1, 1),
        ("conversations", 1, 1),
        ("memory", 1, 1),
        ("pgr-validation", 1, 1),
    ]
    assert snapshot.fraction == 1.0 and snapshot.eta_seconds == 0.0
    assert snapshot.personas_done == 1
    assert snapshot.queries_kept == len(dataset.queries) > 0
    assert snapshot.sessions == len(dataset.sessions)
    assert snapshot.facts == len(dataset.facts)
    assert snapshot.results == len(dataset.validation)
    assert snapshot.rejected_total == len(dataset.rejected)
    usage = figures.client.total_usage()  # type: ignore[union-attr]
    assert (snapshot.requests, snapshot.input_tokens) == (usage.requests, usage.input_tokens)
    assert snapshot.requests > 0 and snapshot.output_tokens > 0
    assert figures.finished_rank(dataset.personas[0]) == 1


def test_live_display_shows_every_bar(watched) -> None:
    figures, _ = watched
    console = Console(file=io.StringIO(), width=140, force_terminal=True, record=True)
    console.print(render(figures.snapshot(), "generate out"))
    text = console.export_text()
    for row in ("overall", "personas", "queries", "conversations", "memory", "pgr-validation"):
        assert row in text
    for figure in ("kept", "sessions", "facts", "requests", "tokens", "spent", "429s", "ETA"):
        assert figure in text, text
    assert "100%" in plain_line(figures.snapshot())


def test_live_display_keeps_run_logs_off_the_terminal(watched) -> None:
    """While the bars are up, INFO lines of task and flow runs are left out of the terminal and
    warnings are printed above the bars, never written over them."""
    figures, _ = watched
    leader, follower = os.openpty()
    terminal = os.fdopen(follower, "w", buffering=1)
    handler = logging.StreamHandler(terminal)
    logger = logging.getLogger("prefect.task_runs.progress-test")
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    logger.propagate = False  # only this terminal: no run context for Prefect's API handler
    shown = io.StringIO()

    async def run() -> None:
        async with showing(figures, ProgressMode.LIVE, title="test", stream=shown):
            logger.info("Finished in state Completed()")
            logger.warning("the endpoint is slow")

    try:
        asyncio.run(run())
        logger.info("after the display")
        os.set_blocking(leader, False)
        written = os.read(leader, 65536).decode()
    finally:
        logger.removeHandler(handler)
        logger.propagate = True
        terminal.close()
        os.close(leader)
    assert "Completed" not in written and "slow" not in written
    assert "after the display" in written  # the handler is left as it was
    assert "the endpoint is slow" in shown.getvalue()
    assert "Completed" not in shown.getvalue()
    assert "overall" in shown.getvalue()


def test_periodically_acts_on_its_beat_and_once_more_at_the_end() -> None:
    ticks: list[str] = []

    async def tick() -> None:
        ticks.append("tick")

    async def run(seconds: float) -> None:
        async with periodically(0.02, tick):
            await asyncio.sleep(seconds)

    asyncio.run(run(0.0))
    assert ticks == ["tick"]  # a block shorter than a beat still shows its final figures
    ticks.clear()
    asyncio.run(run(0.15))
    assert len(ticks) >= 3
