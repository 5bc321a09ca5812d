"""Reading PersonaLens files, from a directory or over HTTP, never beyond ``max_file_bytes``.

A source is laid out like upstream PersonaLens ``data/``::

    <source>/profile/<user>/profile.json    demographics, interests, affinities, interactions
    <source>/profile/<user>/tasks.json      single-domain tasks {"Task N": {...}}
    <source>/profile/<user>/tasks_md.json   multi-domain tasks, same shape

``<source>`` is a local directory or an http(s) base URL such as
``https://raw.githubusercontent.com/amazon-science/PersonaLens/main/data``.
Every file is read whole but never beyond ``max_file_bytes``; nothing is written.
A file that cannot be read becomes a :class:`Fetched` with its error, never an exception.
"""

from __future__ import annotations

import urllib.parse
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import httpx

from memoryquest.contracts import TaskKind
from memoryquest.intake.errors import IntakeError, IntakeSourceError
from memoryquest.intake.normalise import natural_key, unsafe_user_id

PROFILE_FILE = "profile.json"
TASK_FILES: dict[str, TaskKind] = {
    "tasks.json": TaskKind.SINGLE_DOMAIN,
    "tasks_md.json": TaskKind.MULTI_DOMAIN,
}


@dataclass(frozen=True)
class Fetched:
    """One file as read: its label (path or URL) and either bytes or an error message."""

    label: str
    raw: bytes | None = None
    error: str | None = None
    unknown_user: bool = False  # the user itself does not exist in the source
    unreachable: bool = False  # timeout, connection failure or server error: do not ask again


class LocalReader:
    """Reads ``<root>/profile/<user>/<file>`` with a size cap, never following a symlink out of ``profile/``."""

    def __init__(self, root: Path, max_file_bytes: int) -> None:
        self.root = root
        self.profiles = root / "profile"
        self.max_file_bytes = max_file_bytes
        if not root.is_dir():
            raise IntakeSourceError(f"persona source {root} is not a directory")
        if not self.profiles.is_dir():
            raise IntakeSourceError(
                f"persona source {root} has no profile/ directory (expected the PersonaLens data/ layout)"
            )
        self.boundary = self.profiles.resolve()

    def escapes(self, path: Path) -> str | None:
        """Why ``path`` must not be read (a symlink leading outside the source), or None."""
        try:
            target = path.resolve()
        except (OSError, RuntimeError) as exc:  # a symlink loop
            return f"refused: cannot resolve the path ({exc})"
        if target != self.boundary and not target.is_relative_to(self.boundary):
            return f"refused: a symlink leads outside the persona source (to {target})"
        return None

    def list_users(self) -> tuple[list[str], list[IntakeError]]:
        users: list[str] = []
        errors: list[IntakeError] = []
        try:
            entries = list(self.profiles.iterdir())
        except OSError as exc:
            raise IntakeSourceError(f"cannot list {self.profiles}: {exc.strerror or exc}") from None
        for entry in entries:
            if entry.name.startswith(".") or not entry.is_dir():
                continue
            problem = unsafe_user_id(entry.name) or self.escapes(entry)
            if problem:
                shown = str(entry) if str(entry).isprintable() else repr(str(entry))[1:-1]
                errors.append(IntakeError(shown, None, f"skipped: {problem}"))
            else:
                users.append(entry.name)
        return sorted(users, key=natural_key), errors

    def fetch(self, user_id: str, name: str) -> Fetched:
        user_dir = self.profiles / user_id
        path = user_dir / name
        label = str(path)
        if not user_dir.is_dir():
            return Fetched(
                str(user_dir),
                error=f"unknown user id {user_id!r}: no such directory",
                unknown_user=True,
            )
        problem = self.escapes(user_dir)
        if problem:
            return Fetched(str(user_dir), error=problem, unknown_user=True)
        problem = self.escapes(path)
        if problem:
            return Fetched(label, error=problem)
        try:
            size = path.stat().st_size
            if not path.is_file():
                return Fetched(label, error="not a regular file")
            if size > self.max_file_bytes:
                return Fetched(label, error=_too_big(size, self.max_file_bytes))
            with path.open("rb") as handle:
                raw = handle.read(self.max_file_bytes + 1)
        except FileNotFoundError:
            return Fetched(label, error="file is missing")
        except OSError as exc:
            return Fetched(label, error=f"cannot read file: {exc.strerror or exc}")
        if len(raw) > self.max_file_bytes:
            return Fetched(label, error=_too_big(len(raw), self.max_file_bytes))
        return Fetched(label, raw=raw)


class HttpReader:
    """GETs ``<base>/profile/<user>/<file>`` with a timeout and a size cap (no listing exists)."""

    def __init__(self, base_url: str, max_file_bytes: int, timeout_seconds: float) -> None:
        parsed = urllib.parse.urlsplit(base_url)
        if parsed.scheme not in ("http", "https") or not parsed.netloc:
            raise IntakeSourceError(f"persona source {base_url!r} is not an http(s) URL")
        self.base_url = base_url.rstrip("/")
        self.max_file_bytes = max_file_bytes
        self.timeout_seconds = timeout_seconds
        self.client = httpx.Client(timeout=httpx.Timeout(timeout_seconds), follow_redirects=True)

    def close(self) -> None:
        self.client.close()

    def url(self, user_id: str, name: str) -> str:
        return f"{self.base_url}/profile/{urllib.parse.quote(user_id, safe='')}/{name}"

    def fetch(self, user_id: str, name: str) -> Fetched:
        url = self.url(user_id, name)
        try:
            with self.client.stream("GET", url) as response:
                if response.status_code != 200:
                    return self._status_error(url, user_id, name, response)
                declared = response.headers.get("content-length", "")
                plain = not response.headers.get("content-encoding")
                if plain and declared.isdigit() and int(declared) > self.max_file_bytes:
                    return Fetched(url, error=_too_big(int(declared), self.max_file_bytes))
                chunks: list[bytes] = []
                total = 0
                for chunk in response.iter_bytes():
                    total += len(chunk)
                    if total > self.max_file_bytes:
                        return Fetched(
                            url, error=f"file is larger than the {self.max_file_bytes}-byte limit"
                        )
                    chunks.append(chunk)
        except httpx.TimeoutException:
            return Fetched(
                url, error=f"timed out after {self.timeout_seconds:g} s", unreachable=True
            )
        except httpx.HTTPError as exc:
            return Fetched(
                url, error=f"request failed: {type(exc).__name__}: {exc}", unreachable=True
            )
        return Fetched(url, raw=b"".join(chunks))

    @staticmethod
    def _status_error(url: str, user_id: str, name: str, response: httpx.Response) -> Fetched:
        status = f"HTTP {response.status_code} {response.reason_phrase}".strip()
        if response.status_code == 404 and name == PROFILE_FILE:
            return Fetched(url, error=f"unknown user id {user_id!r}: {status}", unknown_user=True)
        if response.status_code == 404:
            return Fetched(url, error=f"file is missing: {status}")
        if response.status_code >= 500:
            return Fetched(url, error=f"server error: {status}", unreachable=True)
        return Fetched(url, error=f"unexpected response: {status}")


def _too_big(size: int, limit: int) -> str:
    return f"file is {size} bytes, above the {limit}-byte limit"


Fetcher = Callable[[str, str], Fetched]
