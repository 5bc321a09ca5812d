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


def make_id(kind: str, *parts: object) -> str:
    """Same parts, same id: re-running the same inputs reproduces every id."""
    prefix = PREFIXES[kind]
    digest = hashlib.sha256("\x1f".join(str(p) for p in parts).encode("utf-8")).hexdigest()
    return f"{prefix}_{digest[:16]}"
