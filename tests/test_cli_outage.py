"""Issue #28, item 2: an outage ends in one line.

``memoryquest generate`` and ``memoryquest pgr run`` run as a user runs them
(the console script, in a subprocess) against the loopback fake OpenAI server
answering every chat request 503 — until the client gives up, or until the
circuit breaker opens — or 401 (a key revoked mid-run: ``GET /models``
accepts it, so the run starts). Each run ends in exactly one line on stderr
(nothing else there: no progress, no Prefect log, no traceback) naming the
endpoint, the HTTP status, the attempts and the log file; the log file
(``OUTPUT/logs/run.log``, ``OUTPUT/logs/pgr.log``) holds what Prefect's
engine logged, tracebacks included, without the key. ``--verbose`` puts the
log back on stderr, above the same last line.
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from memoryquest.llm.client import ModelClient
from memoryquest.llm.factory import shared_local_embedder
from memoryquest.llm.simulated import SimulatedChatBackend
from memoryquest.pgr.sample import sample_dataset
from memoryquest.testing import FakeOpenAIServer, Fault

pytestmark = pytest.mark.slow

API_KEY = f"sk-outage-{uuid.uuid4().hex}"
CLI = str(Path(sys.executable).with_name("memoryquest"))
ENDPOINT = {
    "endpoint.backend": "openai",
    "endpoint.simulator_hints": "true",  # the fake server answers from the simulator
    "endpoint.embedder": "local",
    "endpoint.chat_model": "gpt-4o-mini",
    "limits.max_concurrency": "1",
    "limits.retry_base_seconds": "0.01",
    "limits.retry_max_seconds": "0.02",
    "cache.enabled": "false",
}
SMALL_RUN = {
    "generation.queries_per_user": "2",
    "generation.candidates_per_user": "8",
    "pgr.methods": "[query_only, pgr_tot]",
    "pgr.judges": "[provenance]",
}
PREFIX = "memoryquest: error: "


@pytest.fixture(scope="module")
def prefect_home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("prefect-home")  # shared: its database is migrated once


@pytest.fixture
def server() -> Iterator[FakeOpenAIServer]:
    with FakeOpenAIServer(api_key=API_KEY, echo_key=True) as server:
        yield server


def run_cli(args: list[str], prefect_home: Path, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("MEMORYQUEST_", "OPENAI_", "AZURE_OPENAI_", "PREFECT_"))
    }
    env.update(OPENAI_API_KEY=API_KEY, PREFECT_HOME=str(prefect_home))
    return subprocess.run(
        [CLI, *args], env=env, cwd=cwd, capture_output=True, text=True, timeout=600, check=False
    )


def settings_args(server: FakeOpenAIServer, **settings: str) -> list[str]:
    given = {**ENDPOINT, "endpoint.base_url": server.url, **settings}
    return [arg for name, value in given.items() for arg in ("--set", f"{name}={value}")]


def generate(
    server: FakeOpenAIServer, output: Path, prefect_home: Path, *extra: str, **settings: str
) -> subprocess.CompletedProcess[str]:
    args = ["generate", "--users", "user0", "--output", str(output), "--no-publish", *extra]
    return run_cli(
        args + settings_args(server, **SMALL_RUN, **settings), prefect_home, output.parent
    )


def the_one_line(result: subprocess.CompletedProcess[str], log: Path) -> str:
    """stderr is exactly one line, the error line naming the log file; no traceback anywhere on it."""
    lines = result.stderr.splitlines()
    assert len(lines) == 1, result.stderr[-5000:]
    (line,) = lines
    assert line.startswith(PREFIX), line
    assert line.endswith(f" (log: {log})"), line
    assert "Traceback" not in result.stderr
    return line


def chat_refusals(server: FakeOpenAIServer, status: int) -> int:
    return server.count("/chat/completions", status)


# --------------------------------------------------------------------------- generate: 503 on every chat


@pytest.mark.parametrize(
    ("limits", "gave_up", "exception"),
    [
        ({"endpoint.max_retries": "3"}, "gave up after 4 attempts", "LLMTransportError"),
        (
            {"endpoint.max_retries": "6", "limits.circuit_breaker_failures": "3"},
            "3 consecutive requests to {url} failed",
            "CircuitOpenError",
        ),
    ],
    ids=["retries-spent", "circuit-breaker"],
)
def test_an_outage_ends_generate_in_one_line_and_the_traceback_is_in_the_log(
    server: FakeOpenAIServer,
    prefect_home: Path,
    tmp_path: Path,
    limits: dict[str, str],
    gave_up: str,
    exception: str,
) -> None:
    server.script(*[Fault.server_error(503) for _ in range(100)])
    output = tmp_path / "run"
    result = generate(server, output, prefect_home, **limits)
    assert result.returncode == 1, result.stderr[-5000:]
    log = output / "logs" / "run.log"
    line = the_one_line(result, log)
    # The endpoint (once), the status and the attempts, as many as the server saw.
    assert line.count(server.url) == 1, line
    assert "HTTP 503" in line, line
    assert gave_up.format(url=server.url) in line, line
    attempts = 4 if exception == "LLMTransportError" else 3
    assert chat_refusals(server, 503) == attempts
    # Prefect's engine logged the failure, tracebacks included: into the log file.
    text = assert_engine_log(log, f"memoryquest.llm.errors.{exception}: ")
    assert "Encountered exception during execution" in text


def assert_engine_log(log: Path, error: str) -> str:
    """The log file holds the engine's traceback of ``error`` and its failed state, and no key."""
    text = log.read_text(encoding="utf-8")
    assert "Traceback (most recent call last)" in text
    assert error in text
    assert "Finished in state Failed" in text
    assert API_KEY not in text
    return text


# --------------------------------------------------------------------------- generate: a key refused mid-run


def test_a_key_refused_mid_run_ends_generate_in_one_line(
    server: FakeOpenAIServer, prefect_home: Path, tmp_path: Path
) -> None:
    server.script(*[Fault.unauthorized() for _ in range(20)])  # the 401 body repeats the key
    output = tmp_path / "run"
    result = generate(server, output, prefect_home)
    assert result.returncode == 2, result.stderr[-5000:]
    log = output / "logs" / "run.log"
    line = the_one_line(result, log)
    assert line.startswith(f"{PREFIX}authentication failed for {server.url} (HTTP 401: "), line
    assert API_KEY not in line
    assert chat_refusals(server, 401) == 1  # not retried
    assert_engine_log(
        log, "memoryquest.llm.errors.LLMAuthenticationError: authentication failed for"
    )


def test_verbose_shows_the_engine_log_above_the_same_line(
    server: FakeOpenAIServer, prefect_home: Path, tmp_path: Path
) -> None:
    server.script(*[Fault.unauthorized() for _ in range(20)])
    output = tmp_path / "run"
    result = generate(server, output, prefect_home, "--verbose")
    assert result.returncode == 2, result.stderr[-5000:]
    lines = result.stderr.splitlines()
    assert lines[-1].startswith(f"{PREFIX}authentication failed for {server.url} (HTTP 401: ")
    assert lines[-1].endswith(f" (log: {output / 'logs' / 'run.log'})")
    assert "Traceback (most recent call last)" in result.stderr
    assert "Finished in state Failed" in result.stderr
    assert API_KEY not in result.stderr
    assert "Traceback (most recent call last)" in (output / "logs" / "run.log").read_text(
        encoding="utf-8"
    )


# --------------------------------------------------------------------------- pgr run: 503 on every chat


@pytest.fixture(scope="module")
def dataset_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    client = ModelClient(SimulatedChatBackend(), shared_local_embedder())
    dataset = asyncio.run(sample_dataset(client, background=40))
    return dataset.save(tmp_path_factory.mktemp("pgr-outage") / "run" / "dataset")


@pytest.mark.parametrize("verbose", [False, True], ids=["quiet", "verbose"])
def test_an_outage_ends_pgr_run_in_one_line(
    server: FakeOpenAIServer,
    prefect_home: Path,
    dataset_dir: Path,
    tmp_path: Path,
    verbose: bool,
) -> None:
    server.script(*[Fault.server_error(503) for _ in range(100)])
    log = dataset_dir.parent / "logs" / "pgr.log"
    log.unlink(missing_ok=True)
    args = ["pgr", "run", str(dataset_dir), "--method", "pgr_tot", "--judge", "provenance"]
    args += ["--verbose"] if verbose else []
    result = run_cli(
        args + settings_args(server, **{"endpoint.max_retries": "2"}), prefect_home, tmp_path
    )
    assert result.returncode == 1, result.stderr[-5000:]
    if verbose:
        line = result.stderr.splitlines()[-1]
        assert "Traceback (most recent call last)" in result.stderr
    else:
        line = the_one_line(result, log)
    assert line.startswith(PREFIX) and line.endswith(f" (log: {log})"), line
    assert line.count(server.url) == 1 and "HTTP 503" in line, line
    assert "gave up after 3 attempts" in line, line
    text = log.read_text(encoding="utf-8")
    assert "Traceback (most recent call last)" in text
    assert "memoryquest.llm.errors.LLMTransportError: " in text
    assert API_KEY not in text
