"""A generated dataset in memory and on disk (one JSONL file per table + manifest.json).

This is the working format that ``generate`` writes and ``validate``, ``pgr run``
and ``publish`` read. The published Parquet layout is produced from it by
:mod:`memoryquest.publish`.

In memory, :class:`GeneratedDataset` holds the joined view the pipeline works on
(:data:`DATASET_TABLES`: a :class:`~memoryquest.contracts.Session` knows its query
and reference). Every file written is the split projection (:func:`split_tables`,
:data:`~memoryquest.contracts.TABLES`): what a memory system under test may read
(``history``, ``queries``, ``facts``) apart from the labels that score it
(``session_labels``, ``query_labels``, ``fact_labels``), and :func:`join_tables`
puts them back together on load. :class:`ReadableDataset` reads the readable tables
only. The readable tables are written in an order that says nothing about labels
(a user's history by date, ties by session id); the labels tables keep the
in-memory order, which the joined view gets back.

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
from collections.abc import Callable, Hashable, Mapping, Sequence
from pathlib import Path
from typing import TypeVar

import jsonlines
import pydantic_core
from pydantic import BaseModel, Field

from memoryquest.contracts import (
    READABLE_TABLES,
    TABLES,
    Fact,
    FactLabels,
    FactRevision,
    HistorySession,
    MemoryFact,
    MemoryFactRevision,
    Persona,
    Query,
    QueryLabels,
    QueryRequest,
    RejectedCandidate,
    ReviewTally,
    RevisionCredit,
    Row,
    RunManifest,
    Session,
    SessionLabels,
    Timeline,
    ValidationResult,
)
from memoryquest.heap import collector_paused

MANIFEST_FILE = "manifest.json"

DATASET_TABLES: tuple[str, ...] = (
    "personas",
    "queries",
    "timelines",
    "sessions",
    "facts",
    "validation",
    "rejected",
)
"""The joined view's tables: the lists of :class:`GeneratedDataset`."""

LEGACY_TABLES: dict[str, type[BaseModel]] = {
    "personas": Persona,
    "queries": Query,
    "timelines": Timeline,
    "sessions": Session,
    "facts": Fact,
    "validation": ValidationResult,
    "rejected": RejectedCandidate,
}
"""The files of a working dataset written before the history was split from its labels."""

RowT = TypeVar("RowT", bound=BaseModel)


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


def _project(row: BaseModel, model: type[RowT]) -> RowT:
    """The fields of ``row`` that ``model`` has (``row`` is already valid, so no re-validation)."""
    return model.model_construct(**{name: getattr(row, name) for name in model.model_fields})


def history_order(row: HistorySession) -> tuple[str, object, str]:
    """A user's history by date, ties by the (opaque) session id: no order by query."""
    return (row.persona_id, row.date, row.session_id)


def memory_fact(fact: Fact) -> MemoryFact:
    """A fact as a retrieval method under test reads it: no credited reference."""
    row = _project(fact, MemoryFact)
    row.revisions = [_project(revision, MemoryFactRevision) for revision in fact.revisions]
    return row


def fact_labels(fact: Fact) -> FactLabels:
    return FactLabels.model_construct(
        fid=fact.fid,
        persona_id=fact.persona_id,
        source_reference_ids=fact.source_reference_ids,
        revisions=[
            RevisionCredit.model_construct(
                valid_from=revision.valid_from,
                source_reference_ids=revision.source_reference_ids,
            )
            for revision in fact.revisions
        ],
    )


def split_tables(dataset: GeneratedDataset) -> dict[str, list[Row]]:
    """The joined view as the written tables (:data:`~memoryquest.contracts.TABLES`)."""
    requests = [_project(query, QueryRequest) for query in dataset.queries]
    history = [_project(session, HistorySession) for session in dataset.sessions]
    memory = [memory_fact(fact) for fact in dataset.facts]
    requests.sort(key=lambda row: (row.persona_id, row.query_date, row.query_id))
    history.sort(key=history_order)
    memory.sort(key=lambda row: (row.persona_id, row.created_on, row.fid))
    return {
        "personas": list(dataset.personas),
        "queries": list(requests),
        "query_labels": [_project(query, QueryLabels) for query in dataset.queries],
        "timelines": list(dataset.timelines),
        "history": list(history),
        "session_labels": [_project(session, SessionLabels) for session in dataset.sessions],
        "facts": list(memory),
        "fact_labels": [fact_labels(fact) for fact in dataset.facts],
        "validation": list(dataset.validation),
        "rejected": list(dataset.rejected),
    }


def _by_key(
    table: str, rows: Sequence[RowT], key: Callable[[RowT], Hashable]
) -> dict[Hashable, RowT]:
    indexed: dict[Hashable, RowT] = {}
    for row in rows:
        if key(row) in indexed:
            raise DatasetError(f"table {table!r} has two rows for {key(row)!r}")
        indexed[key(row)] = row
    return indexed


def _pairs(
    readable_name: str,
    readable: Sequence[RowT],
    labels_name: str,
    labels: Sequence[BaseModel],
    key: str,
) -> list[tuple[RowT, BaseModel]]:
    """Each labels row with its readable row, in the labels' order; any row without its pair is an error."""
    indexed = _by_key(readable_name, readable, lambda row: getattr(row, key))
    _by_key(labels_name, labels, lambda row: getattr(row, key))
    missing = [getattr(row, key) for row in labels if getattr(row, key) not in indexed]
    if missing:
        raise DatasetError(
            f"{labels_name} has {len(missing)} row(s) with no {readable_name} row, e.g. {key} = {missing[0]!r}"
        )
    if len(indexed) != len(labels):
        labelled = {getattr(row, key) for row in labels}
        stray = next(k for k in indexed if k not in labelled)
        raise DatasetError(
            f"{readable_name} has {len(indexed) - len(labels)} row(s) with no {labels_name} row, e.g. {key} = {stray!r}"
        )
    pairs = [(indexed[getattr(row, key)], row) for row in labels]
    for readable_row, labels_row in pairs:
        if getattr(readable_row, "persona_id", None) != getattr(labels_row, "persona_id", None):
            raise DatasetError(
                f"{labels_name} row {getattr(labels_row, key)!r} names another persona than its {readable_name} row"
            )
    return pairs


def _joined(model: type[RowT], *parts: BaseModel, **values: object) -> RowT:
    """One row of the joined view from its parts, each already validated against its own
    contract (the joined contracts add no rule across parts, so nothing is validated twice)."""
    fields: dict[str, object] = {}
    for part in parts:
        fields.update({name: getattr(part, name) for name in type(part).model_fields})
    return model.model_construct(None, **(fields | values))


def _joined_fact(memory: MemoryFact, labels: FactLabels) -> Fact:
    if [r.valid_from for r in memory.revisions] != [c.valid_from for c in labels.revisions]:
        raise DatasetError(
            f"fact_labels row {labels.fid!r} does not match the fact's revisions "
            f"({len(labels.revisions)} credits for {len(memory.revisions)} revisions)"
        )
    revisions = [
        _joined(FactRevision, revision, credit)
        for revision, credit in zip(memory.revisions, labels.revisions, strict=True)
    ]
    return _joined(Fact, memory, labels, revisions=revisions)


def join_tables(tables: Mapping[str, Sequence[BaseModel]], dataset: GeneratedDataset) -> None:
    """Append the written tables (:func:`split_tables`' output, e.g. read back) to ``dataset``, joined."""

    def rows(name: str) -> list[BaseModel]:
        return list(tables.get(name, ()))

    dataset.personas.extend(rows("personas"))  # type: ignore[arg-type]
    dataset.timelines.extend(rows("timelines"))  # type: ignore[arg-type]
    dataset.validation.extend(rows("validation"))  # type: ignore[arg-type]
    dataset.rejected.extend(rows("rejected"))  # type: ignore[arg-type]
    dataset.queries.extend(
        _joined(Query, request, labels)
        for request, labels in _pairs(
            "queries", rows("queries"), "query_labels", rows("query_labels"), "query_id"
        )
    )
    dataset.sessions.extend(
        _joined(Session, history, labels)
        for history, labels in _pairs(
            "history", rows("history"), "session_labels", rows("session_labels"), "session_id"
        )
    )
    dataset.facts.extend(
        _joined_fact(memory, labels)  # type: ignore[arg-type]
        for memory, labels in _pairs(
            "facts", rows("facts"), "fact_labels", rows("fact_labels"), "fid"
        )
    )


def read_jsonl(path: Path, model: type[RowT]) -> list[RowT]:
    with jsonlines.open(path, loads=model.model_validate_json) as reader:
        try:
            return list(reader)
        except jsonlines.InvalidLineError as exc:
            raise DatasetError(f"{path}:{exc.lineno}: {exc.__cause__ or exc}") from exc


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
        for name in DATASET_TABLES:
            getattr(self, name).extend(getattr(other, name))
        self.review = added_tally(self.review, other.review)

    def save(self, directory: Path) -> Path:
        """Write atomically: a crash leaves the previous version or nothing, never half a dataset."""
        directory = Path(directory)
        directory.parent.mkdir(parents=True, exist_ok=True)
        staging = Path(tempfile.mkdtemp(prefix=f".{directory.name}.", dir=directory.parent))
        try:
            for name, rows in split_tables(self).items():
                write_jsonl(rows, staging / f"{name}.jsonl")
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
        legacy = (
            not (directory / "history.jsonl").exists() and (directory / "sessions.jsonl").exists()
        )
        with collector_paused():
            if legacy:
                for name, model in LEGACY_TABLES.items():
                    path = directory / f"{name}.jsonl"
                    if path.exists():
                        getattr(dataset, name).extend(read_jsonl(path, model))
            else:
                join_tables(
                    {
                        name: read_jsonl(directory / f"{name}.jsonl", model)
                        for name, model in TABLES.items()
                        if (directory / f"{name}.jsonl").exists()
                    },
                    dataset,
                )
        manifest_path = directory / MANIFEST_FILE
        if manifest_path.exists():
            dataset.manifest = RunManifest.model_validate(
                json.loads(manifest_path.read_text(encoding="utf-8"))
            )
            dataset.review = dataset.manifest.review
        return dataset


class ReadableDataset(BaseModel):
    """What a memory system under test may read (:data:`~memoryquest.contracts.READABLE_TABLES`):
    the history, the queries' text and the memory facts; no label, no answer key."""

    history: list[HistorySession] = Field(default_factory=list)
    queries: list[QueryRequest] = Field(default_factory=list)
    facts: list[MemoryFact] = Field(default_factory=list)

    @classmethod
    def of(cls, dataset: GeneratedDataset) -> ReadableDataset:
        tables = split_tables(dataset)
        return cls.model_validate({name: tables[name] for name in READABLE_TABLES})

    @classmethod
    def load(cls, directory: Path) -> ReadableDataset:
        """The readable tables of a working dataset; the labels files are never opened."""
        directory = Path(directory)
        if not (directory / "history.jsonl").is_file():
            raise DatasetError(f"{directory} has no history.jsonl: not a working dataset")
        readable = cls()
        with collector_paused():
            for name in READABLE_TABLES:
                path = directory / f"{name}.jsonl"
                if path.exists():
                    getattr(readable, name).extend(read_jsonl(path, TABLES[name]))
        return readable
