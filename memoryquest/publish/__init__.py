"""Publish a generated dataset as Hugging Face–style Parquet splits, and read it back.

Layout of a published dataset::

    README.md                                  dataset card (YAML configs, statistics, licence)
    LICENSE.md                                 CC BY-NC 4.0 text (PersonaLens' licence)
    manifest.json                              run manifest + publish info (splits, row counts, sha256)
    data/<config>/<split>-00000-of-00001.parquet   one config per table of memoryquest.contracts.TABLES
    jsonl/<config>/<split>.jsonl               the same rows as JSON Lines
    plots/*.png                                figures embedded in the card
    explorer/                                  static viewer (ground truth included: not for a system under test)
    pgr.winrate.json                           answer-level Win Rate report, when one was given
    evaluation/NAME.run.json                   the record of the `pgr run` the card shows, when one was given
    evaluation/NAME.calibration.json           and its judges' calibration

A memory system under test reads only ``history``, ``queries`` and ``facts``
(:data:`~memoryquest.contracts.READABLE_TABLES`; :func:`load_readable` reads nothing
else); ``session_labels``, ``query_labels`` and ``fact_labels`` are their answer key,
joined back by :func:`load_published` for scoring.

The whole directory is built next to the destination and renamed into place,
so readers see the previous dataset or the new one, never a mix.

The Win Rate report of ``memoryquest pgr run --win-rate`` is not part of the
generated tables: it lives beside them as ``pgr.winrate.json``
(:data:`WIN_RATE_FILE`, where ``pgr run`` writes it without ``--output``), or
wherever ``--output`` put it. :func:`read_win_rate_report` reads and checks it;
``publish_dataset(..., win_rates=...)`` shows it in the card and the explorer
and keeps a copy at the root, where ``memoryquest explore`` finds it again.

A whole ``memoryquest pgr run`` (:func:`~memoryquest.pgr.run_record.read_evaluation_run`
of its record, ``NAME.run.json``) given as ``publish_dataset(..., evaluation=...)``
puts every baseline at PGR's budget and each judge's measured error in the card,
under the run's name; its record and calibration are kept in ``evaluation/``.
"""

from __future__ import annotations

import json
import shutil
import tempfile
import time
from collections.abc import Collection, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import ValidationError

import memoryquest
from memoryquest.audit import AuditReport, audit_dataset, audit_markdown
from memoryquest.contracts import READABLE_TABLES, TABLES, PersonaSource, Row, RunManifest
from memoryquest.dataset import (
    DATASET_TABLES,
    DatasetError,
    GeneratedDataset,
    ReadableDataset,
    history_order,
    join_tables,
    split_tables,
    swap_into_place,
    write_jsonl,
)
from memoryquest.pgr.run_record import EvaluationRun, EvaluationRunError, check_run_of
from memoryquest.pgr.winrate_contracts import WIN_RATE_FILE, WinRateReport
from memoryquest.publish import plots
from memoryquest.publish.arrow import arrow_schema
from memoryquest.publish.card import CardInputs, render_card
from memoryquest.publish.explorer import EXPLORER_DIR, Plot, write_explorer
from memoryquest.publish.parquet import (
    parquet_name,
    read_parquet,
    sha256_file,
    write_parquet,
)
from memoryquest.publish.redact import redact
from memoryquest.publish.splits import SPLITS, assign_splits
from memoryquest.publish.staging import clean_staging, staging_prefix
from memoryquest.publish.stats import compute_statistics
from memoryquest.settings import Settings

__all__ = [
    "PRIMARY_KEYS",
    "PublishError",
    "PublishReport",
    "PublishedFile",
    "WIN_RATE_FILE",
    "load_published",
    "load_readable",
    "publish_dataset",
    "read_win_rate_report",
]

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


class PublishError(ValueError):
    pass


class AuditFailedError(PublishError):
    """The dataset failed its validity audit; nothing was published."""

    def __init__(self, report: AuditReport) -> None:
        self.report = report
        super().__init__(
            "refusing to publish: the validity audit failed — "
            + "; ".join(report.failures)
            + " (run `memoryquest audit DIR` for the details; --allow-failed-audit publishes anyway and says so on the card)"
        )


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


# --------------------------------------------------------------------------- the Win Rate report


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


# --------------------------------------------------------------------------- publishing


def _sorted_rows(name: str, rows: Sequence[Row]) -> list[Row]:
    key = PRIMARY_KEYS[name]
    by_key = sorted(rows, key=lambda row: getattr(row, key))
    for previous, current in zip(by_key, by_key[1:], strict=False):
        if getattr(previous, key) == getattr(current, key):
            raise PublishError(
                f"table {name!r} has two rows with {key} = {getattr(current, key)!r}"
            )
    if name == ORDERED_BY_DATE:
        return sorted(by_key, key=history_order)  # type: ignore[arg-type]
    return by_key


def _persona_ids(dataset: GeneratedDataset) -> set[str]:
    """Users with at least one row anywhere (a persona that produced nothing takes no split slot)."""
    ids: set[str] = set()
    for name in DATASET_TABLES:
        ids.update(row.persona_id for row in getattr(dataset, name))
    return ids


def _secrets(settings: Settings) -> list[str]:
    key = settings.endpoint.api_key
    return [key.get_secret_value()] if key is not None and key.get_secret_value() else []


def _licence_source() -> Path | None:
    from memoryquest.resources import data_dir

    try:
        candidate = data_dir("personas") / "personalens" / LICENCE_FILE
    except FileNotFoundError:
        return None
    return candidate if candidate.is_file() else None


def _gamma_threshold(manifest: RunManifest, settings: Settings) -> float:
    generation = manifest.settings.get("generation")
    if isinstance(generation, dict) and isinstance(generation.get("gamma_max"), int | float):
        return float(generation["gamma_max"])
    return settings.generation.gamma_max


def _check_destination(destination: Path) -> None:
    """Only an empty directory or an earlier published dataset may be replaced."""
    if not destination.exists():
        return
    if not destination.is_dir():
        raise PublishError(f"destination {destination} exists and is not a directory")
    if not any(destination.iterdir()):
        return
    manifest = destination / MANIFEST_FILE
    try:
        published = "publish" in json.loads(manifest.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        published = False
    if not published:
        raise PublishError(
            f"destination {destination} exists and is not a published dataset "
            f"(no {MANIFEST_FILE} with a 'publish' section); refusing to replace it"
        )


def _scan_for_secrets(root: Path, secrets: Sequence[str]) -> None:
    if not secrets:
        return
    encoded = [s.encode("utf-8") for s in secrets]
    for path in sorted(root.rglob("*")):
        if path.is_file() and path.suffix in {".md", ".json", ".jsonl", ".js", ".html"}:
            content = path.read_bytes()
            if any(secret in content for secret in encoded):
                raise PublishError(
                    f"a configured secret appears in {path.relative_to(root)}; not publishing"
                )


def _build(
    dataset: GeneratedDataset,
    manifest: RunManifest,
    root: Path,
    settings: Settings,
    audit: AuditReport,
    win_rates: WinRateReport | None = None,
    evaluation: EvaluationRun | None = None,
) -> PublishReport:
    secrets = _secrets(settings)
    assignment = assign_splits(_persona_ids(dataset), settings.publish)
    schemas = {name: arrow_schema(model, name) for name, model in TABLES.items()}
    row_counts: dict[str, dict[str, int]] = {}
    for name, table in split_tables(dataset).items():
        rows = _sorted_rows(name, table)
        by_split: dict[str, list[Row]] = {split: [] for split in SPLITS}
        for row in rows:
            by_split[assignment[getattr(row, PERSONA_KEY)]].append(row)
        row_counts[name] = {split: len(by_split[split]) for split in SPLITS}
        for split, split_rows in by_split.items():
            if split_rows:
                write_parquet(split_rows, schemas[name], root / "data" / name / parquet_name(split))
                write_jsonl(split_rows, root / "jsonl" / name / f"{split}.jsonl")

    public_manifest = RunManifest.model_validate(redact(manifest.model_dump(mode="json"), secrets))
    statistics = compute_statistics(dataset)
    threshold = _gamma_threshold(manifest, settings)
    figures: list[tuple[str, str]] = []
    if statistics.gamma_values:
        plots.gamma_histogram(
            statistics.gamma_values, threshold, root / "plots" / plots.GAMMA_HISTOGRAM
        )
        figures.append((f"plots/{plots.GAMMA_HISTOGRAM}", "Histogram of γ with the threshold"))
    if statistics.validation:
        plots.recall_by_method(statistics.validation, root / "plots" / plots.RECALL_BY_METHOD)
        figures.append(
            (f"plots/{plots.RECALL_BY_METHOD}", "Recall and RecallExact by method and judge")
        )

    licence = _licence_source()
    if licence is not None:
        shutil.copyfile(licence, root / LICENCE_FILE)
    users: dict[str, list[str]] = {split: [] for split in SPLITS}
    for persona_id, split in sorted(assignment.items()):
        users[split].append(persona_id)
    card = render_card(
        CardInputs(
            manifest=public_manifest,
            statistics=statistics,
            publish=settings.publish,
            gamma_threshold=threshold,
            row_counts=row_counts,
            users_per_split={split: len(ids) for split, ids in users.items()},
            schemas=schemas,
            plots=figures,
            has_personalens=any(p.source is PersonaSource.PERSONALENS for p in dataset.personas),
            licence_file=LICENCE_FILE if licence is not None else None,
            audit_markdown=audit_markdown(audit),
            audit_failures=audit.failures,
            audit_targets_missed=audit.targets_missed,
            win_rates=win_rates,
            evaluation=evaluation,
        )
    )
    (root / CARD_FILE).write_text(card, encoding="utf-8")
    if evaluation is not None:
        kept = {evaluation.record_file: evaluation.record.model_dump_json(indent=2)}
        if evaluation.calibration is not None and evaluation.calibration_file is not None:
            kept[evaluation.calibration_file] = evaluation.calibration.model_dump_json(indent=2)
        (root / EVALUATION_DIR).mkdir()
        for name, text in kept.items():
            (root / EVALUATION_DIR / name).write_text(text + "\n", encoding="utf-8")
    if win_rates is not None:
        (root / WIN_RATE_FILE).write_text(
            win_rates.model_dump_json(indent=2) + "\n", encoding="utf-8"
        )
    write_explorer(
        dataset,
        root / EXPLORER_DIR,
        manifest=public_manifest,
        plots=[Plot(root / path, caption) for path, caption in figures],
        win_rates=win_rates,
    )

    files = tuple(
        PublishedFile(
            path=path.relative_to(root).as_posix(),
            bytes=path.stat().st_size,
            sha256=sha256_file(path),
        )
        for path in sorted(root.rglob("*"), key=lambda p: p.relative_to(root).as_posix())
        if path.is_file()
    )
    publish_info: dict[str, Any] = {
        "memoryquest_version": memoryquest.__version__,
        "schema_version": public_manifest.schema_version,
        "split_seed": settings.publish.split_seed,
        "ratios": {
            "train": settings.publish.train,
            "validation": settings.publish.validation,
            "test": settings.publish.test,
        },
        "split_method": "users ordered by sha256('<split_seed>:<persona_id>'), sizes by largest remainder, "
        "each split with a positive ratio gets at least one user while the largest split keeps one",
        "users": users,
        "row_counts": row_counts,
        "files": [{"path": f.path, "bytes": f.bytes, "sha256": f.sha256} for f in files],
    }
    manifest_document = public_manifest.model_dump(mode="json") | {"publish": publish_info}
    (root / MANIFEST_FILE).write_text(
        json.dumps(manifest_document, indent=2, ensure_ascii=False) + "\n", encoding="utf-8"
    )
    _scan_for_secrets(root, secrets)
    return PublishReport(
        destination=root,
        card=root / CARD_FILE,
        manifest=root / MANIFEST_FILE,
        row_counts=row_counts,
        users=users,
        files=files,
        seconds=0.0,
    )


def publish_dataset(
    dataset: GeneratedDataset,
    destination: Path,
    settings: Settings,
    *,
    allow_failed_audit: bool = False,
    win_rates: WinRateReport | None = None,
    evaluation: EvaluationRun | None = None,
) -> PublishReport:
    """Write ``dataset`` to ``destination`` in the published layout, atomically.

    ``destination`` may not exist yet, be empty, or hold an earlier published
    dataset (which is replaced only once the new one is complete). The
    validity audit runs first; a dataset that fails it is refused, unless
    ``allow_failed_audit``, in which case the card's first line says so.
    ``win_rates`` (:func:`read_win_rate_report`) adds the Win Rate table to
    the card and the explorer and is kept as ``WIN_RATE_FILE``. ``evaluation`` (a ``pgr run`` of
    this dataset) adds its baselines at PGR's budget and its judges' error rates to the card.
    """
    started = time.perf_counter()
    if dataset.manifest is None:
        raise PublishError(
            "the dataset has no run manifest (manifest.json); publishing needs it for provenance "
            "(models, prompt versions, thresholds, seeds, usage) — publish the output of `memoryquest generate`"
        )
    destination = Path(destination).absolute()
    _check_destination(destination)
    if evaluation is not None:
        try:
            check_run_of(evaluation, dataset.manifest.run_id, [q.query_id for q in dataset.queries])
        except EvaluationRunError as exc:
            raise PublishError(str(exc)) from None
    audit = audit_dataset(dataset, settings)
    if audit.failures and not allow_failed_audit:
        raise AuditFailedError(audit)
    audit = audit.model_copy(update={"seconds": None})  # a published dataset is byte-reproducible
    manifest = dataset.manifest.model_copy(update={"audit": audit.model_dump(mode="json")})
    destination.parent.mkdir(parents=True, exist_ok=True)
    clean_staging(destination)  # leftovers of killed publishes (memoryquest.publish.staging)
    staging = Path(tempfile.mkdtemp(prefix=staging_prefix(destination), dir=destination.parent))
    try:
        staging.chmod(0o755)
        report = _build(dataset, manifest, staging, settings, audit, win_rates, evaluation)
        swap_into_place(staging, destination)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    return PublishReport(
        destination=destination,
        card=destination / CARD_FILE,
        manifest=destination / MANIFEST_FILE,
        row_counts=report.row_counts,
        users=report.users,
        files=report.files,
        seconds=time.perf_counter() - started,
    )


# --------------------------------------------------------------------------- loading


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
