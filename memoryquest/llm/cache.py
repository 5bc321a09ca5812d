"""The per-request response cache: content-addressed, one file per key.

Why files and not SQLite: runs scale out to several processes and, through
Prefect work pools or Dask, to several machines sharing a directory. One
immutable file per key, written to a temporary name and moved into place
with ``os.replace``, is atomic on POSIX and on network file systems, needs
no locks, survives a crash mid-write (a half-written temp file is never
visible under the key) and lets concurrent writers of the same key race
harmlessly (identical content). SQLite's WAL mode needs shared memory and
is unsafe on NFS. The cost is many small files; they are sharded into 256
sub-directories by the first key byte.

Layout: ``<dir>/chat/ab/<sha256>.json`` (answer text + what it cost) and
``<dir>/embeddings/ab/<sha256>.f32`` (one little-endian float32 vector).
An unreadable or corrupt entry counts as a miss and is rewritten.
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np

CACHE_FORMAT = 1  # part of every key: bump to invalidate all entries


@dataclass
class CacheStats:
    hits: int = 0
    misses: int = 0
    bytes_read: int = 0
    bytes_written: int = 0
    writes: int = 0
    corrupt: int = 0

    def as_dict(self) -> dict[str, int]:
        return asdict(self)


def _digest(material: Any) -> str:
    text = json.dumps(
        material, sort_keys=True, ensure_ascii=False, separators=(",", ":"), default=str
    )
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def chat_key(
    *,
    backend: str,
    base_url: str | None,
    model: str,
    template_id: str,
    template_version: int,
    messages: list[dict[str, str]],
    parameters: dict[str, Any],
    schema: dict[str, Any] | str,
) -> str:
    """``schema`` is the response JSON schema, or a fingerprint of it (cheaper to hash per call)."""
    return _digest(
        {
            "format": CACHE_FORMAT,
            "kind": "chat",
            "backend": backend,
            "base_url": base_url,
            "model": model,
            "template": [template_id, template_version],
            "messages": messages,
            "parameters": parameters,
            "schema": schema,
        }
    )


def embedding_key(*, backend: str, base_url: str | None, model: str, text: str) -> str:
    return _digest(
        {
            "format": CACHE_FORMAT,
            "kind": "embedding",
            "backend": backend,
            "base_url": base_url,
            "model": model,
            "text": text,
        }
    )


class ResponseCache:
    """Shared by chat answers and embeddings; safe across asyncio tasks, processes and hosts."""

    def __init__(self, directory: Path, enabled: bool = True) -> None:
        self.directory = Path(directory)
        self._root = str(self.directory)
        self.enabled = enabled
        self.stats = CacheStats()

    def _path(self, kind: str, key: str, suffix: str) -> str:
        # Plain strings: pathlib costs more than the read itself on the hot (cache-hit) path.
        return os.path.join(self._root, kind, key[:2], key + suffix)

    def _read(self, path: str) -> bytes | None:
        try:
            with open(path, "rb") as handle:
                data = handle.read()
        except (FileNotFoundError, NotADirectoryError):
            return None
        except OSError:
            self.stats.corrupt += 1
            return None
        return data

    def _write(self, path: str, data: bytes) -> None:
        folder = os.path.dirname(path)
        os.makedirs(folder, exist_ok=True)
        handle, temp = tempfile.mkstemp(
            dir=folder, prefix=".tmp-", suffix=os.path.splitext(path)[1]
        )
        try:
            with os.fdopen(handle, "wb") as out:
                out.write(data)
            os.replace(temp, path)
        except BaseException:
            Path(temp).unlink(missing_ok=True)
            raise
        self.stats.bytes_written += len(data)
        self.stats.writes += 1

    # --- chat -------------------------------------------------------------------------------

    def get_chat(self, key: str) -> dict[str, Any] | None:
        """The stored entry (``text`` plus accounting metadata), or None."""
        if not self.enabled:
            return None
        data = self._read(self._path("chat", key, ".json"))
        entry: Any = None
        if data is not None:
            try:
                entry = json.loads(data)
            except ValueError:
                self.stats.corrupt += 1
        if not isinstance(entry, dict) or not isinstance(entry.get("text"), str):
            self.stats.misses += 1
            return None
        self.stats.hits += 1
        self.stats.bytes_read += len(data or b"")
        return entry

    def put_chat(self, key: str, text: str, meta: dict[str, Any]) -> None:
        if self.enabled:
            body = json.dumps({"text": text, **meta}, ensure_ascii=False).encode("utf-8")
            self._write(self._path("chat", key, ".json"), body)

    # --- embeddings -------------------------------------------------------------------------

    def get_vector(self, key: str) -> np.ndarray | None:
        if not self.enabled:
            return None
        data = self._read(self._path("embeddings", key, ".f32"))
        if data is None or not data or len(data) % 4:
            if data is not None:
                self.stats.corrupt += 1
            self.stats.misses += 1
            return None
        self.stats.hits += 1
        self.stats.bytes_read += len(data)
        return np.frombuffer(data, dtype="<f4").astype(np.float32)

    def put_vector(self, key: str, vector: np.ndarray) -> None:
        if self.enabled:
            self._write(
                self._path("embeddings", key, ".f32"), np.asarray(vector, dtype="<f4").tobytes()
            )
