"""One writer per output directory.

``generate`` takes ``<output>/.memoryquest.lock`` before any work and keeps it
until the run ends. The file holds the owner's pid, host and start time, so a
second run into the same directory fails at once with a message naming the
owner, instead of doing all the work and overwriting the first run's results.

The lock itself is an exclusive ``flock`` on that file: the kernel releases
it when the owner dies, however it dies, so a lock left by a killed run is
taken over by the next one without anyone judging whether a pid is still
alive (and a reused pid cannot keep a directory locked forever). Where
``flock`` is unavailable (not Linux/macOS, or a file system without locks),
the file is created with ``O_EXCL`` instead and a leftover is taken over only
when it names this host and a pid that is no longer running.

Within one process the lock is re-entrant: the command line takes it before
starting Prefect, and the flow it runs takes it again.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import json
import os
import socket
import threading
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import Any

try:
    import fcntl
except ImportError:  # pragma: no cover - Windows
    fcntl = None  # type: ignore[assignment]

LOCK_FILE = ".memoryquest.lock"

_held: dict[Path, _Held] = {}
_held_lock = threading.Lock()


class RunLockedError(RuntimeError):
    """Another live run owns the output directory."""

    def __init__(self, message: str, owner: dict[str, Any]) -> None:
        super().__init__(message)
        self.owner = owner


@dataclass
class _Held:
    fd: int
    path: Path
    count: int


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # exists, owned by someone else
    return True


def _describe(owner: dict[str, Any]) -> str:
    pid = owner.get("pid", "?")
    host = owner.get("host", "?")
    since = owner.get("started")
    command = owner.get("command")
    text = f"pid {pid} on {host}"
    if since:
        text += f", since {since}"
    if command:
        text += f": {command}"
    return text


def _read_owner(fd: int) -> dict[str, Any]:
    try:
        os.lseek(fd, 0, os.SEEK_SET)
        raw = os.read(fd, 65536)
        owner = json.loads(raw.decode("utf-8")) if raw.strip() else {}
    except (OSError, ValueError):
        return {}
    return owner if isinstance(owner, dict) else {}


def _owner_record(command: str | None) -> bytes:
    record = {
        "pid": os.getpid(),
        "host": socket.gethostname(),
        "started": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        "command": command,
    }
    return (json.dumps(record) + "\n").encode("utf-8")


def _write_owner(fd: int, command: str | None) -> None:
    os.ftruncate(fd, 0)
    os.lseek(fd, 0, os.SEEK_SET)
    os.write(fd, _owner_record(command))


class RunLock:
    """``with RunLock.acquire(output_dir):`` — raises :class:`RunLockedError` when another run holds it."""

    def __init__(self, path: Path, taken_over: dict[str, Any] | None) -> None:
        self.path = path
        self.taken_over = taken_over  # the dead owner whose leftover lock was replaced, if any
        self._released = False

    @classmethod
    def acquire(cls, output_dir: str | Path, command: str | None = None) -> RunLock:
        """Lock ``output_dir`` (which must exist) for this process, or raise at once."""
        path = (Path(output_dir) / LOCK_FILE).absolute()
        with _held_lock:
            held = _held.get(path)
            if held is not None:
                held.count += 1
                return cls(path, None)
            if fcntl is not None:
                fd, taken_over = _acquire_flock(path, command)
            else:  # pragma: no cover - exercised only where fcntl is missing
                fd, taken_over = _acquire_exclusive(path, command)
            _held[path] = _Held(fd=fd, path=path, count=1)
        return cls(path, taken_over)

    def release(self) -> None:
        if self._released:
            return
        self._released = True
        with _held_lock:
            held = _held.get(self.path)
            if held is None:
                return
            held.count -= 1
            if held.count > 0:
                return
            del _held[self.path]
            try:
                # Unlink while still holding the lock: a waiter that opened the old file sees
                # that its inode is no longer the path's and starts over (see _acquire_flock).
                self.path.unlink(missing_ok=True)
            finally:
                os.close(held.fd)

    def __enter__(self) -> RunLock:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.release()


def _locked_error(path: Path, owner: dict[str, Any]) -> RunLockedError:
    return RunLockedError(
        f"output directory {path.parent} is in use by another memoryquest run ({_describe(owner)}); "
        f"wait for it to finish or choose another --output (lock file: {path})",
        owner,
    )


def _acquire_flock(path: Path, command: str | None) -> tuple[int, dict[str, Any] | None]:
    assert fcntl is not None
    while True:
        fd = os.open(path, os.O_RDWR | os.O_CREAT | getattr(os, "O_CLOEXEC", 0), 0o644)
        try:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                raise _locked_error(path, _read_owner(fd)) from None
            except OSError:  # no locks on this file system: fall back to O_EXCL semantics
                os.close(fd)
                return _acquire_exclusive(path, command)
            # The previous owner may have unlinked the file between our open and our lock.
            try:
                same = os.stat(path).st_ino == os.fstat(fd).st_ino
            except FileNotFoundError:
                same = False
            if not same:
                os.close(fd)
                continue
            previous = _read_owner(fd)
            _write_owner(fd, command)
            return fd, previous or None
        except BaseException:
            with contextlib.suppress(OSError):
                os.close(fd)
            raise


def _acquire_exclusive(path: Path, command: str | None) -> tuple[int, dict[str, Any] | None]:
    """Without ``flock``: create the file with O_EXCL; take over a leftover only from a dead local pid."""
    taken_over: dict[str, Any] | None = None
    for _ in range(2):
        try:
            fd = os.open(
                path, os.O_RDWR | os.O_CREAT | os.O_EXCL | getattr(os, "O_CLOEXEC", 0), 0o644
            )
        except FileExistsError:
            try:
                owner = json.loads(path.read_text(encoding="utf-8") or "{}")
            except (OSError, ValueError):
                owner = {}
            owner = owner if isinstance(owner, dict) else {}
            pid = owner.get("pid")
            local = owner.get("host") == socket.gethostname()
            if not (local and isinstance(pid, int) and not _pid_alive(pid)):
                raise _locked_error(path, owner) from None
            # A dead local owner: move its file aside atomically (only one taker wins the rename).
            stale = path.with_name(f"{path.name}.stale-{os.getpid()}")
            try:
                os.rename(path, stale)
            except FileNotFoundError:
                continue
            stale.unlink(missing_ok=True)
            taken_over = owner
            continue
        os.write(fd, _owner_record(command))
        return fd, taken_over
    raise _locked_error(path, {})
