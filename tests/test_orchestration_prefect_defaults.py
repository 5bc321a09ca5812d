"""The temporary Prefect server boots while the caller does its own start-up work."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest
from prefect.settings import PREFECT_API_URL, PREFECT_HOME, temporary_settings

from memoryquest.orchestration.prefect_defaults import local_prefect_api


def _children() -> set[int]:
    """Live child processes of this one (from /proc; zombies excluded)."""
    found = set()
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        fields = stat.rsplit(")", 1)[1].split()
        if fields[0] != "Z" and int(fields[1]) == os.getpid():
            found.add(int(entry.name))
    return found


@pytest.mark.skipif(not Path("/proc").is_dir(), reason="reads child processes from /proc")
def test_the_warm_up_runs_while_the_server_boots_and_a_failure_stops_it(tmp_path: Path) -> None:
    before = _children()
    during: set[int] = set()

    def warm_up() -> None:
        during.update(_children() - before)
        raise RuntimeError("the model did not load")

    with (
        temporary_settings(updates={PREFECT_API_URL: None, PREFECT_HOME: tmp_path}),
        pytest.raises(RuntimeError, match="did not load"),
        local_prefect_api(meanwhile=warm_up),
    ):
        pytest.fail("the block must not run when the warm-up fails")
    assert during, "the server process was not started before the warm-up"
    deadline = time.monotonic() + 10
    while during & _children() and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not during & _children(), "the server outlived a failed warm-up"


def test_with_a_configured_api_the_warm_up_runs_once_and_no_server_starts(tmp_path: Path) -> None:
    calls: list[int] = []
    before = _children() if Path("/proc").is_dir() else set()
    url = "http://127.0.0.1:9/api"
    with (
        temporary_settings(updates={PREFECT_API_URL: url, PREFECT_HOME: tmp_path}),
        local_prefect_api(meanwhile=lambda: calls.append(1)) as api,
    ):
        assert api == url
        if Path("/proc").is_dir():
            assert _children() - before == set()
    assert calls == [1]


def test_the_run_starts_with_a_settled_heap(tmp_path: Path) -> None:
    import gc

    from memoryquest.orchestration.prefect_defaults import GC_THRESHOLDS

    thresholds = gc.get_threshold()
    try:
        with (
            temporary_settings(
                updates={PREFECT_API_URL: "http://127.0.0.1:9/api", PREFECT_HOME: tmp_path}
            ),
            local_prefect_api(),
        ):
            # What start-up loaded is out of the collector's way; the young generation is larger.
            assert gc.get_freeze_count() > 0
            assert gc.get_threshold() == GC_THRESHOLDS
    finally:
        gc.unfreeze()
        gc.set_threshold(*thresholds)
