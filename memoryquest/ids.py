"""Opaque, stable identifiers derived from content and position."""

from __future__ import annotations

import hashlib

PREFIXES = {
    "persona": "p",
    "query": "q",
    "reference": "r",
    "timeline": "t",
    "event": "e",
    "session": "s",
    "fact": "f",
    "rejected": "x",
    "result": "v",
}


def _digest(parts: tuple[object, ...]) -> str:
    return hashlib.sha256("\x1f".join(str(p) for p in parts).encode("utf-8")).hexdigest()


def make_id(kind: str, *parts: object) -> str:
    """Same parts, same id: re-running the same inputs reproduces every id."""
    return f"{PREFIXES[kind]}_{_digest(parts)[:16]}"


def draw(*parts: object) -> int:
    """A number fixed by ``parts`` (ids), the same on every run and machine: a choice made
    from ids rather than from a random generator whose state depends on what ran before."""
    return int(_digest(parts), 16)
