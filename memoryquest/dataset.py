"""A generated dataset in memory and on disk (one JSONL file per table + manifest.json).

This is the working format that ``generate`` writes and ``validate``, ``pgr run``
and ``publish`` read. The published Parquet layout is produced from it by
:mod:`memoryquest.publish`.

jsonlines frames the rows; pydantic's own JSON code writes and reads each one
(compact JSON, one row a line), and reading pauses the cyclic GC
(:mod:`memoryquest.heap`). On the 30 bundled users' dataset (31k rows) a save
took 0.54-0.98 s where a ``dict`` through the ``json`` module took 1.68 s, and
three loads in one process 1.8-2.4 s each, against 3.0-4.1 s with the
collector running.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from collections.abc import Sequence
from pathlib import Path

import jsonlines
import pydantic_core
from pydantic import BaseModel, Field

from memoryquest.contracts import (
    TABLES,
    Fact,
    Persona,
    Query,
    RejectedCandidate,
    ReviewTally,
    RunManifest,
    Session,
    Timeline,
    ValidationResult,
)
from memoryquest.heap import collector_paused

MANIFEST_FILE = "manifest.json"


def swap_into_place(staging: Path, destination: Path) -> None:
    """Replace ``destination`` by the finished ``staging`` directory, never leaving a half-written one."""
    if destination.exists():
        backup = destination.with_name(f".{destination.name}.old")
        shutil.rmtree(backup, ignore_errors=True)
        os.replace(destination, backup)
        os.replace(staging, destination)
        shutil.rmtree(backup, ignore_errors=True)
    else:
        os.replace(staging, destination)


def write_jsonl(rows: Sequence[BaseModel], path: Path) -> None:
    """One row per line as pydantic's compact JSON (the working dataset and the published JSONL)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with jsonlines.open(path, mode="w", dumps=pydantic_core.to_json) as writer:
        writer.write_all(rows)


def added_tally(left: ReviewTally | None, right: ReviewTally | None) -> ReviewTally | None:
    """Two parts' review tallies as one (None: the review did not run in either)."""
    if left is None or right is None:
        return left or right
    return left.plus(right)


class DatasetError(ValueError):
    pass


class GeneratedDataset(BaseModel):
    personas: list[Persona] = Field(default_factory=list)
    queries: list[Query] = Field(default_factory=list)
    timelines: list[Timeline] = Field(default_factory=list)
    sessions: list[Session] = Field(default_factory=list)
    facts: list[Fact] = Field(default_factory=list)
    validation: list[ValidationResult] = Field(default_factory=list)
    rejected: list[RejectedCandidate] = Field(default_factory=list)
    manifest: RunManifest | None = None
    # The blind reviewer's tally (generation.review): not a table, it is saved in the manifest.
    review: ReviewTally | None = None

    def extend(self, other: GeneratedDataset) -> None:
        for name in TABLES:
            getattr(self, name).extend(getattr(other, name))
        self.review = added_tally(self.review, other.review)

    def save(self, directory: Path) -> Path:
        """Write atomically: a crash leaves the previous version or nothing, never half a dataset."""
        directory = Path(directory)
        directory.parent.mkdir(parents=True, exist_ok=True)
        staging = Path(tempfile.mkdtemp(prefix=f".{directory.name}.", dir=directory.parent))
        try:
            for name in TABLES:
                write_jsonl(getattr(self, name), staging / f"{name}.jsonl")
            if self.manifest is not None:
                (staging / MANIFEST_FILE).write_text(
                    self.manifest.model_dump_json(indent=2), encoding="utf-8"
                )
            swap_into_place(staging, directory)
        except BaseException:
            shutil.rmtree(staging, ignore_errors=True)
            raise
        return directory

    @classmethod
    def load(cls, directory: Path) -> GeneratedDataset:
        directory = Path(directory)
        if not directory.is_dir():
            raise DatasetError(f"{directory} is not a dataset directory")
        dataset = cls()
        with collector_paused():
            for name, model in TABLES.items():
                path = directory / f"{name}.jsonl"
                if not path.exists():
                    continue
                with jsonlines.open(path, loads=model.model_validate_json) as reader:
                    try:
                        getattr(dataset, name).extend(reader)
                    except jsonlines.InvalidLineError as exc:
                        raise DatasetError(f"{path}:{exc.lineno}: {exc.__cause__ or exc}") from exc
        manifest_path = directory / MANIFEST_FILE
        if manifest_path.exists():
            dataset.manifest = RunManifest.model_validate(
                json.loads(manifest_path.read_text(encoding="utf-8"))
            )
            dataset.review = dataset.manifest.review
        return dataset
