"""Leftovers of killed publishes, cleaned by the next one.

A publish builds ``.<name>.publish-<pid>-<random>`` next to the destination and
renames it into place; replacing an earlier dataset moves that one to
``.<name>.old`` for the moment of the swap. A publish killed half-way leaves
one of them behind. The next publish to the same destination removes every
staging directory whose publisher is gone (its pid is not running on this
host, or the name carries no pid: an older layout) and settles ``.<name>.old``:
if the destination is missing, the kill came between the two renames and the
old dataset is put back; otherwise the backup is removed. A staging directory
of a publish that is still running is left alone, and so is ``.old`` then.
"""

from __future__ import annotations

import os
import re
import shutil
from pathlib import Path


def staging_prefix(destination: Path) -> str:
    """``tempfile.mkdtemp`` prefix for a staging directory of ``destination`` (names this process)."""
    return f".{destination.name}.publish-{os.getpid()}-"


def _alive(pid: int) -> bool:
    if pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def clean_staging(destination: Path) -> list[Path]:
    """Remove what killed publishes to ``destination`` left behind; returns what was removed or restored."""
    parent = destination.parent
    if not parent.is_dir():
        return []
    pattern = re.compile(re.escape(f".{destination.name}.publish-") + r"(?:(\d+)-)?.*")
    cleaned: list[Path] = []
    live = False
    for entry in parent.iterdir():
        match = pattern.fullmatch(entry.name)
        if match is None or not entry.is_dir() or entry.is_symlink():
            continue
        pid = match.group(1)
        if pid is not None and _alive(int(pid)):
            live = True
            continue
        shutil.rmtree(entry, ignore_errors=True)
        cleaned.append(entry)
    backup = parent / f".{destination.name}.old"
    if backup.is_dir() and not backup.is_symlink() and not live:
        if destination.exists():
            shutil.rmtree(backup, ignore_errors=True)
        else:
            # Killed between the two renames: the old dataset comes back.
            os.replace(backup, destination)
        cleaned.append(backup)
    return cleaned
