"""Shared fixtures. Each group is named after what it provides; add new ones below."""

from __future__ import annotations

import gc
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from memoryquest.dataset import GeneratedDataset

REPO_ROOT = Path(__file__).resolve().parent.parent


# --------------------------------------------------------------------------- time limits


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addini(
        "slow_timeout",
        "seconds a test marked slow may take (the others: pytest-timeout's `timeout`)",
        default="1800",
    )


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Tests marked slow get ``slow_timeout`` instead of the default limit, unless they set their
    own or ``--timeout`` was given on the command line (which then applies to every test)."""
    if config.getoption("timeout", None) is not None:
        return
    limit = pytest.mark.timeout(float(config.getini("slow_timeout")))
    for item in items:
        if item.get_closest_marker("slow") and not item.get_closest_marker("timeout"):
            item.add_marker(limit)


# --------------------------------------------------------------------------- isolation


@pytest.fixture(autouse=True)
def collector_as_found() -> Iterator[None]:
    """A command run in process settles the heap for its run (thresholds raised, objects frozen):
    the next test finds the collector as Python starts it."""
    thresholds = gc.get_threshold()
    yield
    gc.set_threshold(*thresholds)


# --------------------------------------------------------------------------- personas


@pytest.fixture(scope="session")
def personalens_sample_dir() -> Path:
    """The bundled PersonaLens sample (30 users, upstream data/ layout)."""
    return REPO_ROOT / "personas" / "personalens"


@pytest.fixture(scope="session")
def custom_personas_example() -> Path:
    """The documented custom persona example file."""
    return REPO_ROOT / "personas" / "custom" / "example.json"


# --------------------------------------------------------------------------- settings


SETTINGS_ENV_PREFIXES = ("MEMORYQUEST_", "OPENAI_", "AZURE_OPENAI_")


@pytest.fixture
def clean_settings_env(monkeypatch: pytest.MonkeyPatch) -> pytest.MonkeyPatch:
    """No MEMORYQUEST_* / OPENAI_* / AZURE_OPENAI_* variables from the caller's shell leak in."""
    for name in list(os.environ):
        if name.startswith(SETTINGS_ENV_PREFIXES):
            monkeypatch.delenv(name)
    return monkeypatch


# --------------------------------------------------------------------------- file system


@pytest.fixture
def unwritable_dir(tmp_path: Path) -> Path:
    """An existing directory this process cannot write into (skips where there is none)."""
    if os.geteuid() != 0:
        locked = tmp_path / "locked"
        locked.mkdir()
        locked.chmod(0o555)
        return locked
    # root writes anywhere it may: use a directory of a file system that refuses everyone.
    if not os.path.isdir("/sys/fs"):
        pytest.skip("no directory that root cannot write to")
    return Path("/sys/fs")


# --------------------------------------------------------------------------- prefect server


def modules_loaded_by(statements: str) -> set[str]:
    """The ``memoryquest`` modules a fresh interpreter has loaded after running ``statements``."""
    code = f"import sys\n{statements}\nprint(' '.join(m for m in sys.modules if m.startswith('memoryquest')))\n"
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    return set(run.stdout.split())


def free_local_port() -> int:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def stop_process_group(proc: subprocess.Popen[bytes], timeout: float = 30) -> None:
    """SIGTERM the process group (started with ``start_new_session=True``), SIGKILL if it lingers."""
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()


@contextmanager
def running_prefect_server(home: Path, startup_seconds: float = 180) -> Iterator[dict[str, str]]:
    """``prefect server start`` on 127.0.0.1 with its own SQLite database under ``home``.

    Yields the environment for subprocesses (``PREFECT_API_URL`` points at the
    server); in-process callers use ``prefect.settings.temporary_settings``.
    The server log is ``home/server.log``.
    """
    import httpx

    home.mkdir(parents=True, exist_ok=True)
    port = free_local_port()
    env = {
        **os.environ,
        "PREFECT_HOME": str(home),
        "PREFECT_API_DATABASE_CONNECTION_URL": f"sqlite+aiosqlite:///{home / 'prefect.db'}",
        "PREFECT_SERVER_ANALYTICS_ENABLED": "false",
        "PREFECT_UI_ENABLED": "false",
        "PREFECT_LOGGING_LEVEL": "WARNING",
    }
    env.pop("PREFECT_API_URL", None)
    log_path = home / "server.log"
    log = open(log_path, "wb")  # noqa: SIM115 - closed below
    server = subprocess.Popen(
        [
            str(Path(sys.executable).with_name("prefect")),
            "server",
            "start",
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
        ],
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    api = f"http://127.0.0.1:{port}/api"
    deadline = time.monotonic() + startup_seconds
    try:
        while True:
            try:
                if httpx.get(f"{api}/health", timeout=2).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            if server.poll() is not None:
                raise RuntimeError(
                    f"the Prefect server exited:\n{log_path.read_text(errors='replace')}"
                )
            if time.monotonic() > deadline:
                raise RuntimeError(
                    f"the Prefect server did not become healthy within {startup_seconds:g} s"
                )
            time.sleep(0.5)
        yield {**env, "PREFECT_API_URL": api}
    finally:
        stop_process_group(server)
        log.close()


@pytest.fixture(scope="session")
def working_tree_repository(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """A git repository of this checkout's files as they are now, committed or not, on branch main.

    Its ``MEMORYQUEST_REPOSITORY`` and ``MEMORYQUEST_BRANCH``, in the environment of
    ``prefect deploy``, make the deployments' pull step clone the code under test.
    """
    import shutil

    source = tmp_path_factory.mktemp("source") / "memoryquest"
    listed = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        cwd=REPO_ROOT,
        capture_output=True,
        check=True,
    ).stdout
    for name in filter(None, listed.split(b"\0")):
        path = REPO_ROOT / os.fsdecode(name)
        if path.is_file():  # a file deleted but still in the index is left out
            target = source / os.fsdecode(name)
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(path, target)
    git = ["git", "-c", "user.name=memoryquest tests", "-c", "user.email=tests@localhost"]
    for args in (["init", "-q", "-b", "main"], ["add", "-A"], ["commit", "-q", "-m", "as tested"]):
        subprocess.run([*git, *args], cwd=source, check=True)
    return {"MEMORYQUEST_REPOSITORY": str(source), "MEMORYQUEST_BRANCH": "main"}


@pytest.fixture(scope="module")
def prefect_api(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, str]]:
    """A real Prefect server shared by one test module (see :func:`running_prefect_server`)."""
    with running_prefect_server(tmp_path_factory.mktemp("prefect-server") / "home") as env:
        yield env


def drain_prefect_workers() -> None:
    """Send the logs and events this process still holds for the Prefect API (as prefect_test_harness does).

    Without it, records queued when a server stops are retried against the dead
    server while the interpreter exits, which can take many minutes.
    """
    import inspect

    from prefect.events.worker import EventsWorker
    from prefect.logging.handlers import APILogWorker
    from prefect.utilities.asyncutils import run_coro_as_sync

    async def drain() -> None:
        try:
            result = APILogWorker.instance().drain()
            if inspect.isawaitable(result):
                await result
        except RuntimeError:  # the worker never started
            pass
        result = EventsWorker.drain_all()
        if inspect.isawaitable(result):
            await result

    run_coro_as_sync(drain())


@pytest.fixture(scope="module")
def prefect_in_process(prefect_api: dict[str, str]) -> Iterator[dict[str, str]]:
    """This process's flows and clients use the module's Prefect server; queued logs are sent before it stops."""
    from prefect.settings import PREFECT_API_URL, temporary_settings

    with temporary_settings(updates={PREFECT_API_URL: prefect_api["PREFECT_API_URL"]}):
        try:
            yield prefect_api
        finally:
            drain_prefect_workers()


# --------------------------------------------------------------------------- garbage collector


@pytest.fixture
def collections() -> Iterator[list[int]]:
    """Generations of the cyclic collections that start while the test runs."""
    import gc

    started: list[int] = []

    def note(phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            started.append(info["generation"])

    gc.callbacks.append(note)
    yield started
    gc.callbacks.remove(note)


# --------------------------------------------------------------------------- generated dataset


@pytest.fixture(scope="session")
def generated_dataset() -> GeneratedDataset:
    """The real pipeline's output for three bundled users (tests/generated_dataset_fixture.py).

    Shared by the whole session: a test that changes it works on ``model_copy(deep=True)``.
    """
    try:
        from tests.generated_dataset_fixture import build_generated_dataset
    except ModuleNotFoundError:  # tests/ is not a package: pytest puts it on sys.path
        from generated_dataset_fixture import build_generated_dataset

    return build_generated_dataset()


@pytest.fixture(scope="session")
def published_generated(
    generated_dataset: GeneratedDataset, tmp_path_factory: pytest.TempPathFactory
) -> Path:
    """:func:`generated_dataset` published once per session (read it, never write into it).

    Published with ``allow_failed_audit``: three simulated users are too few for every gate of the
    validity audit, and the card then says it failed.
    """
    from memoryquest.publish import publish_dataset
    from memoryquest.settings import Settings

    destination = tmp_path_factory.mktemp("generated") / "memoryquest"
    publish_dataset(generated_dataset, destination, Settings(), allow_failed_audit=True)
    return destination
