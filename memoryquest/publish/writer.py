"""Write a generated dataset in the published layout: the audit first, then each table's
rows by their persona's split as Parquet and JSON Lines, the card, the explorer and the
manifest with every file's sha256, all in a staging directory next to the destination that
is renamed into place once complete."""

from __future__ import annotations

import json
import shutil
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import memoryquest
from memoryquest.audit import AuditReport, audit_dataset, audit_markdown
from memoryquest.contracts import TABLES, PersonaSource, Row, RunManifest
from memoryquest.dataset import (
    DATASET_TABLES,
    GeneratedDataset,
    history_order,
    split_tables,
    swap_into_place,
    write_jsonl,
)
from memoryquest.pgr.run_record import EvaluationRun, EvaluationRunError, check_run_of
from memoryquest.pgr.winrate_contracts import WIN_RATE_FILE, WinRateReport
from memoryquest.publish import plots
from memoryquest.publish.arrow import arrow_schema
from memoryquest.publish.card import render_card
from memoryquest.publish.card.inputs import CardInputs
from memoryquest.publish.errors import AuditFailedError, PublishError
from memoryquest.publish.explorer import EXPLORER_DIR, Plot, write_explorer
from memoryquest.publish.layout import (
    CARD_FILE,
    EVALUATION_DIR,
    LICENCE_FILE,
    MANIFEST_FILE,
    ORDERED_BY_DATE,
    PERSONA_KEY,
    PRIMARY_KEYS,
    PublishedFile,
    PublishReport,
)
from memoryquest.publish.parquet import parquet_name, sha256_file, write_parquet
from memoryquest.publish.redact import redact
from memoryquest.publish.splits import SPLITS, assign_splits
from memoryquest.publish.staging import clean_staging, staging_prefix
from memoryquest.publish.stats import compute_statistics
from memoryquest.settings import Settings


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
