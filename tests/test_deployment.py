"""prefect.yaml end to end: a real Prefect server (SQLite, 127.0.0.1), a process work pool,
`prefect deploy`, a worker, and `prefect deployment run ... --watch`."""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from memoryquest.publish import load_published

REPO = Path(__file__).resolve().parents[1]
PREFECT = str(Path(sys.executable).with_name("prefect"))


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _stop(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()


@pytest.fixture
def prefect_server(tmp_path: Path) -> Iterator[dict[str, str]]:
    port = _free_port()
    home = tmp_path / "prefect-home"
    env = {
        **os.environ,
        "PREFECT_HOME": str(home),
        "PREFECT_API_DATABASE_CONNECTION_URL": f"sqlite+aiosqlite:///{home / 'prefect.db'}",
        "PREFECT_SERVER_ANALYTICS_ENABLED": "false",
        "PREFECT_UI_ENABLED": "false",
        "PREFECT_LOGGING_LEVEL": "WARNING",
    }
    env.pop("PREFECT_API_URL", None)
    log = open(tmp_path / "server.log", "wb")  # noqa: SIM115 - closed below
    server = subprocess.Popen(
        [PREFECT, "server", "start", "--host", "127.0.0.1", "--port", str(port)],
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    api = f"http://127.0.0.1:{port}/api"
    deadline = time.monotonic() + 120
    try:
        while time.monotonic() < deadline:
            try:
                if httpx.get(f"{api}/health", timeout=2).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            assert server.poll() is None, (tmp_path / "server.log").read_text()
            time.sleep(0.5)
        else:
            pytest.fail("Prefect server did not become healthy within 120 s")
        yield {**env, "PREFECT_API_URL": api}
    finally:
        _stop(server)
        log.close()


def _run(args: list[str], env: dict[str, str], timeout: float = 120) -> str:
    done = subprocess.run(args, env=env, cwd=REPO, capture_output=True, text=True, timeout=timeout)
    assert done.returncode == 0, f"{' '.join(args)} failed:\n{done.stdout}\n{done.stderr}"
    return done.stdout


@pytest.mark.slow
def test_deployment_run_publishes_a_dataset(prefect_server: dict[str, str], tmp_path: Path) -> None:
    env = prefect_server
    _run([PREFECT, "work-pool", "create", "memoryquest", "--type", "process"], env)
    _run([PREFECT, "--no-prompt", "deploy", "--name", "offline"], env)
    worker_log = open(tmp_path / "worker.log", "wb")  # noqa: SIM115 - closed below
    worker = subprocess.Popen(
        [PREFECT, "worker", "start", "--pool", "memoryquest", "--limit", "1"],
        env=env,
        cwd=REPO,
        stdout=worker_log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    output = tmp_path / "deployed-run"
    params = {
        "output": str(output),
        "users": ["user3"],
        "count": None,
        "allow_failed_audit": True,  # about the deployment, not the dataset's validity
        "overrides": {
            "generation": {"queries_per_user": 2, "candidates_per_user": 8},
            "pgr": {"methods": ["query_only", "pgr_tot"], "judges": ["provenance"]},
        },
    }
    try:
        out = _run(
            [
                PREFECT,
                "deployment",
                "run",
                "memoryquest-generate/offline",
                "--params",
                json.dumps(params),
                "--watch",
            ],
            env,
            timeout=600,
        )
    finally:
        _stop(worker)
        worker_log.close()
    assert "Completed" in out, out + (tmp_path / "worker.log").read_text()
    published = load_published(output / "published")
    assert [p.source_user_id for p in published.personas] == ["user3"]
    assert published.queries and published.sessions and published.facts and published.validation
    assert (output / "published" / "README.md").is_file()
    shutil.rmtree(output, ignore_errors=True)
