"""The batch state files: what lets a restarted run find the batches it had sent.

Before a batch is created, a state file
``<cache>/batches/<sha256 of the set's cache keys>.json`` records its input
file id and custom_ids, then its batch id; it is removed when the set is
done. Since what the collector gathers depends on timing, a restarted run
matches recorded batches by REQUEST, not by set (:func:`recorded_sets`).
Without a cache (``cache.enabled = false``) nothing is recorded and nothing
can resume. Each file is written atomically, like the cache entries next to it.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import tempfile
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

log = logging.getLogger(__name__)

STATE_FORMAT = 1


def state_path(directory: Path | None, keys: Iterable[str]) -> Path | None:
    """The state file of the set of ``keys`` in ``directory`` (None: nothing is recorded)."""
    if directory is None:
        return None
    digest = hashlib.sha256("\n".join(sorted(keys)).encode("ascii")).hexdigest()
    return directory / f"{digest}.json"


def recorded_sets(directory: Path | None, skip: set[Path]) -> Iterator[tuple[Path, dict[str, Any]]]:
    """The recorded sets in ``directory`` (but those of ``skip``), in name order, with their state."""
    if directory is None or not directory.is_dir():
        return
    for path in sorted(directory.glob("*.json")):
        if path.name.startswith(".") or path in skip:
            continue
        yield path, read_state(path)


def read_state(path: Path | None) -> dict[str, Any]:
    """The recorded state of a request set; a fresh one when none (or an unreadable one) exists."""
    digest = path.stem if path is not None else "uncached"
    fresh: dict[str, Any] = {"format": STATE_FORMAT, "set": digest, "rounds": 0, "batches": []}
    if path is None:
        return fresh
    try:
        state = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return fresh
    except (OSError, ValueError) as exc:
        log.warning("ignoring unreadable batch state %s: %s", path, exc)
        return fresh
    if (
        not isinstance(state, dict)
        or state.get("format") != STATE_FORMAT
        or not isinstance(state.get("rounds"), int)
    ):
        return fresh
    batches = state.get("batches")
    if not isinstance(batches, list) or not all(
        isinstance(b, dict) and b.get("input_file_id") and isinstance(b.get("custom_ids"), list)
        for b in batches
    ):
        log.warning("ignoring malformed batch state %s", path)
        return fresh
    return state


def write_state(path: Path | None, state: dict[str, Any]) -> None:
    """Atomically, like the cache entries next to it."""
    if path is None:
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    handle, temp = tempfile.mkstemp(dir=path.parent, prefix=".tmp-", suffix=".json")
    try:
        with os.fdopen(handle, "w", encoding="utf-8") as out:
            json.dump(state, out, indent=1)
        os.replace(temp, path)
    except BaseException:
        Path(temp).unlink(missing_ok=True)
        raise
