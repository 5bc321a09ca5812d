"""``memoryquest progress DIR...``: one line from the runs' progress files, added up across runs."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from memoryquest.cli.main import main
from memoryquest.progress import ProgressSnapshot, StageProgress
from memoryquest.progress.files import write_snapshot

try:
    from tests.cli_fixture import one_error_line
except ModuleNotFoundError:  # tests/ is not a package: pytest puts it on sys.path
    from cli_fixture import one_error_line

STAGES = ("queries", "conversations", "memory")


def shard(directory: Path, *, done: int, requests: int, elapsed: float) -> Path:
    """A shard's output directory holding the progress of one persona, ``done`` stages through."""
    directory.mkdir(parents=True)
    write_snapshot(
        directory,
        ProgressSnapshot(
            elapsed_seconds=elapsed,
            personas_total=1,
            personas_done=1 if done == len(STAGES) else 0,
            stages=[
                StageProgress(stage=s, done=int(i < done), total=1) for i, s in enumerate(STAGES)
            ],
            requests=requests,
            input_tokens=1_000 * requests,
            cost_usd=0.01 * requests,
        ),
    )
    return directory


def test_several_runs_are_added_up_into_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    first = shard(tmp_path / "0", done=3, requests=30, elapsed=50.0)
    second = shard(tmp_path / "1", done=1, requests=12, elapsed=60.0)
    assert main(["progress", str(first), str(second)]) == 0
    line = capsys.readouterr().out.strip()
    assert line.startswith("progress  67% (4/6 steps) · personas 1/2 ")
    assert "requests 42 " in line and "tokens 42.0k in" in line and "$0.42" in line
    # The ETA is the later elapsed time scaled by the work left: 60 s × 2/4.
    assert "elapsed 1m00s" in line and "ETA 30.0s" in line

    assert main(["progress", str(second)]) == 0
    alone = capsys.readouterr().out
    assert "personas 0/1" in alone and "requests 12 " in alone


def test_watch_stops_once_every_run_has_written_its_report(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run = shard(tmp_path / "run", done=3, requests=5, elapsed=10.0)
    report = run / "run_report.json"
    report.write_text("{}\n")
    progress = run / "progress.json"
    os.utime(report, (progress.stat().st_mtime + 1, progress.stat().st_mtime + 1))
    assert main(["progress", str(run), "--watch", "0.01"]) == 0
    assert len(capsys.readouterr().out.splitlines()) == 1


def test_a_directory_without_progress_is_one_error_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    line = one_error_line(capsys, ["progress", str(tmp_path)])
    assert line == (
        f"memoryquest: error: {tmp_path}: no progress.json (no run has written its progress there yet)"
    )
    line = one_error_line(capsys, ["progress", str(tmp_path / "missing")])
    assert line == f"memoryquest: error: {tmp_path / 'missing'} is not a directory"
