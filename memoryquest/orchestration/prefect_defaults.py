"""Prefect, quiet and offline by default: the project's defaults and its temporary API server.

Defaults (:func:`apply_defaults`, run when ``memoryquest`` is imported, so
before Prefect reads its settings; each only when the variable is not set):

* ``DO_NOT_TRACK=1`` — Prefect's client-side SDK telemetry stays off;
* ``PREFECT_SERVER_ANALYTICS_ENABLED=false`` — the server's telemetry
  heartbeat stays off (it looked up a public host name on every run, and on a
  fresh Prefect home its first write raced the database migration and printed
  a "database is locked" traceback in a run that succeeded);
* ``PREFECT_CLOUD_ENABLE_ORCHESTRATION_TELEMETRY=false`` — no run spans;
* ``PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS=180`` — a busy laptop
  may need longer than Prefect's 20 s to bring a server up;
* ``OPENBLAS_NUM_THREADS=1`` — numpy's products here are small (a query's
  probes against a persona's facts), and OpenBLAS's threads, spinning while
  they wait for a busy core, made one 20 × 500 product cost 6 ms of CPU
  instead of 0.13 ms (it must be set before numpy is imported, as it is when
  ``memoryquest`` is imported first, e.g. by the command line).

For the run itself, :func:`local_prefect_api` also sets the garbage collector
for a long run (:func:`settle_heap`): what start-up loaded is frozen out of
every later collection, and the young generation is collected every 50,000
allocations instead of 700. With the defaults, a 30-persona run against a
loopback server spent 17 s of its 95 s of CPU collecting, 13 s of it in 28
full collections that held the event loop up to 0.9 s each (no request left
meanwhile); settled, 1.9 s, no full collection.

A command-line run without ``PREFECT_API_URL`` gets a temporary server from
:func:`local_prefect_api` instead of Prefect's own ephemeral one, because that
one outlives a killed CLI (it stays up, listening, at about 225 MB). Ours is
started in its own process group (a Ctrl-C at the terminal reaches only the
CLI, which stops it cleanly) and, on Linux, with a parent-death signal
(``prctl(PR_SET_PDEATHSIG, SIGTERM)``), so it goes away when the CLI dies,
even by ``kill -9``. Its output goes to a log file in the Prefect home, never
to the CLI's stderr.
"""

from __future__ import annotations

import contextlib
import gc
import inspect
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

PREFECT_DEFAULTS: dict[str, str] = {
    "DO_NOT_TRACK": "1",
    "PREFECT_SERVER_ANALYTICS_ENABLED": "false",
    "PREFECT_CLOUD_ENABLE_ORCHESTRATION_TELEMETRY": "false",
    "PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS": "180",
}
PROCESS_DEFAULTS: dict[str, str] = {"OPENBLAS_NUM_THREADS": "1"}

# Runs in the server's process before uvicorn: die with the parent, then become uvicorn (same pid).
_LAUNCHER = """
import os, signal, sys
parent = int(sys.argv[1])
if sys.platform.startswith("linux"):
    import ctypes
    try:
        ctypes.CDLL(None, use_errno=True).prctl(1, int(signal.SIGTERM), 0, 0, 0)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass
if os.getppid() != parent:  # the parent died before the signal was armed
    sys.exit(0)
os.execv(sys.executable, [sys.executable, "-m", "uvicorn", *sys.argv[2:]])
"""
PORT_IN_USE = 3  # uvicorn's exit code when it cannot bind


class PrefectServerError(RuntimeError):
    """The temporary Prefect server did not come up (the message names its log file)."""


def apply_defaults() -> None:
    """Set the project's Prefect and process defaults in the environment, keeping anything already set."""
    for name, value in {**PREFECT_DEFAULTS, **PROCESS_DEFAULTS}.items():
        os.environ.setdefault(name, value)


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class TemporaryPrefectServer:
    """A Prefect API on 127.0.0.1 that lives exactly as long as this process (see the module docstring)."""

    def __init__(self, home: Path, startup_seconds: float) -> None:
        self.home = home
        self.startup_seconds = startup_seconds
        self.log_path = home / f"memoryquest-server-{os.getpid()}.log"
        self.process: subprocess.Popen[bytes] | None = None
        self.port = 0
        self._deadline = 0.0

    @property
    def api_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/api"

    def _environment(self) -> dict[str, str]:
        from prefect.settings import get_current_settings

        env = {**os.environ, **get_current_settings().to_environment_variables(exclude_unset=True)}
        for name, value in PREFECT_DEFAULTS.items():
            env.setdefault(name, value)
        env.pop("PREFECT_API_URL", None)
        env.update(
            {
                "PREFECT_UI_ENABLED": "0",
                "PREFECT__SERVER_EPHEMERAL": "1",
                "PREFECT__SERVER_FINAL": "1",
            }
        )
        return env

    def _spawn(self) -> subprocess.Popen[bytes]:
        import prefect

        self.port = _free_port()
        arguments = [
            "--app-dir",
            str(Path(prefect.__file__).parent.parent),
            "--factory",
            "prefect.server.api.server:create_app",
            "--host",
            "127.0.0.1",
            "--port",
            str(self.port),
            "--log-level",
            "error",
            "--lifespan",
            "on",
        ]
        with open(self.log_path, "ab") as log:
            return subprocess.Popen(
                [sys.executable, "-c", _LAUNCHER, str(os.getpid()), *arguments],
                env=self._environment(),
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )

    def spawn(self) -> None:
        """Start the server process without waiting for it (see :meth:`wait_until_ready`)."""
        self.home.mkdir(parents=True, exist_ok=True)
        self._deadline = time.monotonic() + self.startup_seconds
        self.process = self._spawn()

    def wait_until_ready(self) -> TemporaryPrefectServer:
        """Block until the spawned server answers its health check; respawn on a taken port."""
        import httpx

        if self.process is None:
            raise RuntimeError("the temporary Prefect server was not spawned")
        attempts = 1
        with httpx.Client(timeout=2.0) as http:
            while True:
                code = self.process.poll()
                if code == PORT_IN_USE and attempts < 5:
                    attempts += 1
                    self.process = self._spawn()
                    continue
                if code is not None:
                    raise PrefectServerError(
                        f"the temporary Prefect server exited with code {code} while starting; see {self.log_path}"
                    )
                try:
                    if http.get(f"{self.api_url}/health").status_code == 200:
                        return self
                except httpx.HTTPError:
                    pass
                if time.monotonic() > self._deadline:
                    self.stop()
                    raise PrefectServerError(
                        f"the temporary Prefect server did not answer within {self.startup_seconds:g} s "
                        f"(PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS); see {self.log_path}"
                    )
                time.sleep(0.1)

    def stop(self) -> None:
        process, self.process = self.process, None
        if process is None:
            return
        crashed = process.poll() is not None
        if not crashed:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGTERM)
            try:
                process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(process.pid, signal.SIGKILL)
                process.wait()
        if not crashed:
            self.log_path.unlink(missing_ok=True)  # kept only when the server died on its own


GC_THRESHOLDS = (50_000, 20, 20)


def settle_heap() -> None:
    """Freeze what is loaded so far (modules, classes, settings: alive for the whole run) out of
    the collector's work, and collect the young generation every ``GC_THRESHOLDS[0]`` allocations.

    The pipeline allocates millions of short-lived objects (answers, models, vectors); with the
    default thresholds they reached the older generations, and each full collection then walked
    the whole heap while no request could leave.
    """
    gc.collect()
    gc.freeze()
    gc.set_threshold(*GC_THRESHOLDS)


def drain_prefect_workers() -> None:
    """Send the logs and events this process still holds to the API before it goes away."""
    from prefect.events.worker import EventsWorker
    from prefect.logging.handlers import APILogWorker
    from prefect.utilities.asyncutils import run_coro_as_sync

    async def drain() -> None:
        try:
            drained: object = APILogWorker.instance().drain()
            if inspect.isawaitable(drained):
                await drained
        except RuntimeError:  # the worker never started
            pass
        events: object = EventsWorker.drain_all()
        if inspect.isawaitable(events):
            await events

    with contextlib.suppress(Exception):
        run_coro_as_sync(drain())


@contextlib.contextmanager
def local_prefect_api(meanwhile: Callable[[], object] | None = None) -> Iterator[str]:
    """The configured Prefect API, or a temporary server for the duration of the block; yields its URL.

    ``meanwhile`` runs while a temporary server boots (a few seconds of
    imports and database setup in its own process), so the caller's own
    start-up work (imports, loading a model) overlaps it instead of following it.
    The heap is then settled for the run (:func:`settle_heap`).
    """
    from prefect.settings import (
        PREFECT_API_URL,
        PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS,
        get_current_settings,
        temporary_settings,
    )

    settings = get_current_settings()
    if settings.api.url:
        if meanwhile is not None:
            meanwhile()
        settle_heap()
        yield str(settings.api.url)
        return
    server = TemporaryPrefectServer(
        Path(settings.home), float(PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS.value())
    )
    server.spawn()
    try:
        if meanwhile is not None:
            meanwhile()
        server.wait_until_ready()
        settle_heap()
        with temporary_settings(updates={PREFECT_API_URL: server.api_url}):
            try:
                yield server.api_url
            finally:
                drain_prefect_workers()
    finally:
        server.stop()
