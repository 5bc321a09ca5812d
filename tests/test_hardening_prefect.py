"""Issue #13, Prefect rows at unit level: quiet offline defaults, staging leftovers of killed publishes.

The end-to-end checks (no DNS lookup, no traceback, the temporary server gone
after ``kill -9``, leftovers cleaned by the next ``generate``) are in
``test_hardening_runs.py``.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from memoryquest.orchestration.prefect_defaults import PREFECT_DEFAULTS, apply_defaults
from memoryquest.publish.staging import clean_staging, staging_prefix


def test_importing_memoryquest_turns_telemetry_off_but_respects_the_user() -> None:
    env = {k: v for k, v in os.environ.items() if k not in PREFECT_DEFAULTS}
    env["PREFECT_SERVER_ANALYTICS_ENABLED"] = "true"  # the user's explicit choice wins
    script = (
        "import json, os, memoryquest\n"
        "from prefect.settings import get_current_settings\n"
        "s = get_current_settings()\n"
        "print(json.dumps({'dnt': os.environ.get('DO_NOT_TRACK'), 'server': s.server.analytics_enabled,"
        " 'spans': s.cloud.enable_orchestration_telemetry,"
        " 'startup': s.server.ephemeral.startup_timeout_seconds}))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", script], env=env, capture_output=True, text=True, check=True
    ).stdout
    assert json.loads(out) == {"dnt": "1", "server": True, "spans": False, "startup": 180}
    env.pop("PREFECT_SERVER_ANALYTICS_ENABLED")
    out = subprocess.run(
        [sys.executable, "-c", script], env=env, capture_output=True, text=True, check=True
    ).stdout
    assert json.loads(out)["server"] is False


def test_apply_defaults_only_fills_gaps(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in PREFECT_DEFAULTS:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("DO_NOT_TRACK", "0")
    apply_defaults()
    assert os.environ["DO_NOT_TRACK"] == "0"
    assert os.environ["PREFECT_SERVER_ANALYTICS_ENABLED"] == "false"


# --------------------------------------------------------------------------- staging leftovers


def make_dir(path: Path) -> Path:
    (path / "data").mkdir(parents=True)
    return path


def dead_pid() -> int:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


def test_leftovers_of_dead_publishers_are_removed_and_live_ones_kept(tmp_path: Path) -> None:
    destination = tmp_path / "published"
    make_dir(destination)
    # Before staging names carried a pid:
    legacy = make_dir(tmp_path / ".published.publish-k3j4h5g6")
    dead = make_dir(tmp_path / f".published.publish-{dead_pid()}-abcd")
    live = make_dir(tmp_path / f".published.publish-{os.getppid()}-efgh")  # a running process
    other = make_dir(tmp_path / ".other.publish-1-x")  # another destination's
    cleaned = clean_staging(destination)
    assert sorted(cleaned) == sorted([legacy, dead])
    assert live.exists() and other.exists() and destination.exists()


def test_a_kill_between_the_two_renames_brings_the_old_dataset_back(tmp_path: Path) -> None:
    destination = tmp_path / "published"
    backup = make_dir(tmp_path / ".published.old")
    (backup / "manifest.json").write_text("{}", encoding="utf-8")
    assert clean_staging(destination) == [backup]
    assert (destination / "manifest.json").exists() and not backup.exists()


def test_a_leftover_backup_beside_a_complete_dataset_is_removed(tmp_path: Path) -> None:
    destination = make_dir(tmp_path / "published")
    backup = make_dir(tmp_path / ".published.old")
    assert clean_staging(destination) == [backup]
    assert destination.exists() and not backup.exists()


def test_the_backup_is_left_alone_while_another_publish_runs(tmp_path: Path) -> None:
    destination = tmp_path / "published"
    make_dir(tmp_path / f".published.publish-{os.getppid()}-live")
    backup = make_dir(tmp_path / ".published.old")
    assert clean_staging(destination) == []
    assert backup.exists() and not destination.exists()


def test_staging_names_carry_the_publishers_pid(tmp_path: Path) -> None:
    assert staging_prefix(tmp_path / "published") == f".published.publish-{os.getpid()}-"
