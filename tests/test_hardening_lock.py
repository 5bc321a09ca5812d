"""Issue #13, one writer per output directory (``memoryquest.orchestration.output_lock``).

Processes race for one lock for real (subprocesses), a killed owner's lock is
taken over, and both entry points (the command line and the Prefect flow)
refuse a directory another run holds before doing any work. Two full
``generate`` runs into one directory are in ``test_hardening_runs.py``.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from memoryquest.cli.main import main
from memoryquest.orchestration import output_lock as run_lock
from memoryquest.orchestration.output_lock import LOCK_FILE, RunLock, RunLockedError

HOLDER = """
import sys, time
from memoryquest.orchestration.output_lock import RunLock, RunLockedError
try:
    lock = RunLock.acquire(sys.argv[1], command="holder")
except RunLockedError as exc:
    print("LOCKED", exc, flush=True)
    sys.exit(3)
print("HELD", flush=True)
time.sleep(float(sys.argv[2]))
lock.release()
"""


def hold(output: Path, seconds: float = 60) -> subprocess.Popen[str]:
    """A subprocess holding the lock on ``output`` (returns once it holds it)."""
    proc = subprocess.Popen(
        [sys.executable, "-c", HOLDER, str(output), str(seconds)], stdout=subprocess.PIPE, text=True
    )
    assert proc.stdout is not None
    assert proc.stdout.readline().strip() == "HELD"
    return proc


def stop(proc: subprocess.Popen[str]) -> None:
    if proc.poll() is None:
        proc.kill()
    proc.wait()


def test_the_lock_file_names_its_owner_and_goes_away(tmp_path: Path) -> None:
    with RunLock.acquire(tmp_path, command="memoryquest generate") as lock:
        owner = json.loads((tmp_path / LOCK_FILE).read_text(encoding="utf-8"))
        assert owner["pid"] == os.getpid() and owner["host"] == socket.gethostname()
        assert owner["command"] == "memoryquest generate" and owner["started"]
        assert lock.taken_over is None
    assert not (tmp_path / LOCK_FILE).exists()


def test_the_lock_is_reentrant_within_a_process(tmp_path: Path) -> None:
    """The command line takes it before starting Prefect; the flow it runs takes it again."""
    outer = RunLock.acquire(tmp_path)
    inner = RunLock.acquire(tmp_path)
    inner.release()
    assert (tmp_path / LOCK_FILE).exists()
    outer.release()
    assert not (tmp_path / LOCK_FILE).exists()


def test_a_second_process_fails_at_once_naming_the_owner(tmp_path: Path) -> None:
    with RunLock.acquire(tmp_path, command="first run"):
        # This process holds the lock until the second one has ended: had the second waited for
        # it, it would never have ended (subprocess.run's timeout would fail the test).
        result = subprocess.run(
            [sys.executable, "-c", HOLDER, str(tmp_path), "0"],
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert result.returncode == 3, result.stderr
        assert (
            f"in use by another memoryquest run (pid {os.getpid()} on {socket.gethostname()}"
            in result.stdout
        )
        assert "first run" in result.stdout


def test_a_killed_owners_lock_is_taken_over(tmp_path: Path) -> None:
    proc = hold(tmp_path)
    dead_pid = proc.pid
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    left_behind = json.loads((tmp_path / LOCK_FILE).read_text(encoding="utf-8"))
    assert left_behind["pid"] == dead_pid
    with RunLock.acquire(tmp_path) as lock:
        assert lock.taken_over is not None and lock.taken_over["pid"] == dead_pid
        assert json.loads((tmp_path / LOCK_FILE).read_text(encoding="utf-8"))["pid"] == os.getpid()


@pytest.mark.parametrize("leftover", [False, True], ids=["fresh", "over-a-dead-owners-lock"])
def test_of_many_racing_processes_exactly_one_wins(tmp_path: Path, leftover: bool) -> None:
    if leftover:
        (tmp_path / LOCK_FILE).write_text(
            json.dumps({"pid": 999_999_999, "host": socket.gethostname()})
        )
    racers = [
        subprocess.Popen(
            [sys.executable, "-c", HOLDER, str(tmp_path), "3"], stdout=subprocess.PIPE, text=True
        )
        for _ in range(6)
    ]
    outputs = [proc.communicate(timeout=120)[0] for proc in racers]
    assert sorted(proc.returncode for proc in racers) == [0, 3, 3, 3, 3, 3], outputs
    assert sum(out.startswith("HELD") for out in outputs) == 1
    assert not (tmp_path / LOCK_FILE).exists()


def test_without_flock_a_live_owner_keeps_and_a_dead_one_loses(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(run_lock, "fcntl", None)
    path = tmp_path / LOCK_FILE
    live = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        path.write_text(json.dumps({"pid": live.pid, "host": socket.gethostname()}))
        with pytest.raises(RunLockedError, match=f"pid {live.pid} on {socket.gethostname()}"):
            RunLock.acquire(tmp_path)
        path.write_text(json.dumps({"pid": live.pid, "host": "another-host"}))
        with pytest.raises(RunLockedError, match="on another-host"):
            RunLock.acquire(tmp_path)  # cannot tell whether a pid on another host lives: keep out
    finally:
        live.kill()
        live.wait()
    path.write_text(json.dumps({"pid": live.pid, "host": socket.gethostname()}))  # now dead
    with RunLock.acquire(tmp_path) as lock:
        assert lock.taken_over is not None and lock.taken_over["pid"] == live.pid
        assert json.loads(path.read_text())["pid"] == os.getpid()
    assert not path.exists()


def test_generate_refuses_a_busy_output_before_any_work(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], clean_settings_env: pytest.MonkeyPatch
) -> None:
    output = tmp_path / "run"
    output.mkdir()
    holder = hold(output)
    try:
        code = main(["generate", "--count", "1", "--output", str(output)])
        holding = holder.poll() is None  # refused while the holder still held the lock
    finally:
        stop(holder)
    err = capsys.readouterr().err
    assert code == 2
    (line,) = err.splitlines()
    assert line.startswith(
        f"memoryquest: error: output directory {output} is in use by another memoryquest run "
        f"(pid {holder.pid} on {socket.gethostname()}, since "
    ), line
    assert line.endswith(
        f": holder); wait for it to finish or choose another --output (lock file: {output / LOCK_FILE})"
    )
    assert holding
    assert sorted(p.name for p in output.iterdir()) == [LOCK_FILE]  # nothing else was written


def test_the_flow_refuses_a_busy_output_too(tmp_path: Path) -> None:
    """A deployment run (no command line in front) gets the same refusal from the flow itself."""
    from memoryquest.orchestration.flow import generate_benchmark

    holder = hold(tmp_path)
    try:
        with pytest.raises(RunLockedError, match=f"pid {holder.pid}"):
            asyncio.run(generate_benchmark.fn(output=str(tmp_path), users=["user0"]))
    finally:
        stop(holder)
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        LOCK_FILE
    ]  # the holder's; nothing was written
