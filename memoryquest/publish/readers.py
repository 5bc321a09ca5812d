"""Read back what was published: every config joined with its labels, only what a system
under test may read, or the Win Rate report kept beside the tables."""

from __future__ import annotations

import json
from collections.abc import Collection
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from memoryquest.contracts import READABLE_TABLES, TABLES, Row, RunManifest
from memoryquest.dataset import (
    DatasetError,
    GeneratedDataset,
    ReadableDataset,
    history_order,
    join_tables,
)
from memoryquest.pgr.winrate_contracts import WinRateReport
from memoryquest.publish.errors import PublishError
from memoryquest.publish.layout import MANIFEST_FILE, PRIMARY_KEYS
from memoryquest.publish.parquet import read_parquet, sha256_file


def read_win_rate_report(path: Path, query_ids: Collection[str] | None = None) -> WinRateReport:
    """The report ``memoryquest pgr run --win-rate`` wrote at ``path``.

    ``query_ids``: the dataset's queries; a report that judged a query not
    among them belongs to another dataset. Anything wrong is a one-line
    :class:`PublishError` naming ``path``.
    """
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        raise PublishError(f"cannot read the Win Rate report {path}: {reason}") from None
    try:
        report = WinRateReport.model_validate_json(text)
    except ValidationError as exc:
        error = exc.errors(include_url=False)[0]
        where = ".".join(str(part) for part in error.get("loc", ()))
        problem = f"{where}: {error['msg']}" if where else str(error["msg"])
        more = f" (and {exc.error_count() - 1} more)" if exc.error_count() > 1 else ""
        raise PublishError(
            f"{path} is not a Win Rate report of `memoryquest pgr run --win-rate`: {problem}{more}"
        ) from None
    if query_ids is not None:
        known = set(query_ids)
        strangers = sorted({pair.query_id for pair in report.pairs} - known)
        if strangers:
            more = f" (and {len(strangers) - 1} more)" if len(strangers) > 1 else ""
            raise PublishError(
                f"{path} is the Win Rate report of another dataset: it judged query "
                f"{strangers[0]}{more}, which this dataset does not have"
            )
    return report


def _read_manifest(root: Path) -> dict[str, Any]:
    path = root / MANIFEST_FILE
    if not path.is_file():
        raise PublishError(f"{root} is not a published dataset: {MANIFEST_FILE} is missing")
    try:
        document = json.loads(path.read_text(encoding="utf-8"))
    except ValueError as exc:
        raise PublishError(f"{path} is not valid JSON: {exc}") from exc
    if not isinstance(document, dict) or not isinstance(document.get("publish"), dict):
        raise PublishError(f"{path} has no 'publish' section; is {root} a published dataset?")
    return document


def _published_tables(
    root: Path, names: Collection[str]
) -> tuple[dict[str, Any], dict[str, list[Row]]]:
    """The manifest document and every split of the configs ``names``, checked against the recorded sha256 sums."""
    document = _read_manifest(root)
    publish_info = document.pop("publish")
    tables: dict[str, list[Row]] = {name: [] for name in names}
    for entry in publish_info.get("files", []):
        relative = str(entry["path"])
        parts = relative.split("/")
        if len(parts) != 3 or parts[0] != "data" or not parts[2].endswith(".parquet"):
            continue
        config = parts[1]
        if config not in TABLES:
            raise PublishError(f"{root}: {relative} belongs to unknown config {config!r}")
        if config not in names:
            continue
        file_path = root / relative
        if not file_path.is_file():
            raise PublishError(f"{root}: {relative} is listed in {MANIFEST_FILE} but missing")
        if sha256_file(file_path) != entry["sha256"]:
            raise PublishError(
                f"{root}: {relative} does not match its sha256 in {MANIFEST_FILE} (changed or truncated)"
            )
        tables[config].extend(read_parquet(file_path, TABLES[config]))
    return document, tables


def load_published(path: Path) -> GeneratedDataset:
    """Every split of every config plus the run manifest, checked against the recorded sha256 sums,
    the history and facts joined with their labels (the view ``pgr run``, ``validate`` and ``audit`` use)."""
    root = Path(path)
    document, tables = _published_tables(root, TABLES)
    dataset = GeneratedDataset(manifest=RunManifest.model_validate(document))
    for name, rows in tables.items():
        key = PRIMARY_KEYS[name]
        rows.sort(key=lambda row: getattr(row, key))
    try:
        join_tables(tables, dataset)
    except DatasetError as exc:
        raise PublishError(f"{root}: {exc}") from exc
    return dataset


def load_readable(path: Path) -> ReadableDataset:
    """What a memory system under test may read of a published or working dataset: ``history``
    (each user's sessions by date), ``queries`` (id, user, date, text) and ``facts``.

    The labels configs are never opened, so nothing here can carry the answer key.
    """
    root = Path(path)
    if (root / "history.jsonl").is_file():
        return ReadableDataset.load(root)
    _, tables = _published_tables(root, READABLE_TABLES)
    tables["history"].sort(key=history_order)  # type: ignore[arg-type]
    return ReadableDataset.model_validate(tables)
