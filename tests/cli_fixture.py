"""Running the ``memoryquest`` entry point in process and reading its one error line."""

from __future__ import annotations

import time

import pytest

from memoryquest.cli.main import main


def one_error_line(
    capsys: pytest.CaptureFixture[str], argv: list[str], seconds: float = 10.0
) -> str:
    """The single stderr line of a command that fails with exit code 2, printing nothing else."""
    started = time.perf_counter()
    code = main(argv)
    elapsed = time.perf_counter() - started
    captured = capsys.readouterr()
    assert code == 2, captured.err
    assert captured.out == ""
    lines = captured.err.splitlines()
    assert len(lines) == 1, captured.err
    assert lines[0].startswith("memoryquest: error: "), lines[0]
    assert "Traceback" not in captured.err
    assert elapsed < seconds, f"{elapsed:.1f} s"
    return lines[0]
