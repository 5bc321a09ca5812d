"""The published dataset's file names, the key and row order of each table, and the record
of what one publish wrote (the layout itself is drawn in :mod:`memoryquest.publish`)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

MANIFEST_FILE = "manifest.json"
EVALUATION_DIR = "evaluation"  # the record and calibration of the `pgr run` the card shows
CARD_FILE = "README.md"
LICENCE_FILE = "LICENSE.md"

PRIMARY_KEYS: dict[str, str] = {
    "personas": "persona_id",
    "queries": "query_id",
    "query_labels": "query_id",
    "timelines": "timeline_id",
    "history": "session_id",
    "session_labels": "session_id",
    "facts": "fid",
    "fact_labels": "fid",
    "validation": "result_id",
    "rejected": "rejected_id",
}
"""The id column of each published table: unique, and the order of its rows, except ``history``
(:data:`ORDERED_BY_DATE`)."""
ORDERED_BY_DATE = "history"  # a user's sessions by date, ties by session id (dataset.history_order)
PERSONA_KEY = "persona_id"  # every table has it; rows follow their persona's split


@dataclass(frozen=True)
class PublishedFile:
    path: str  # relative to the dataset root, '/'-separated
    bytes: int
    sha256: str


@dataclass(frozen=True)
class PublishReport:
    destination: Path
    card: Path
    manifest: Path
    row_counts: dict[str, dict[str, int]]  # config -> split -> rows (all splits, zeros included)
    users: dict[str, list[str]]  # split -> persona ids
    files: tuple[PublishedFile, ...]
    seconds: float
