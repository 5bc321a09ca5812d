"""The record of one evaluation: enough, beside its results, to reproduce every figure.

A recall or a Win Rate means little without what produced it: which dataset (its
files' hash, the run that wrote it), which code, methods, judges and baselines,
which models answered and judged, which prompt versions they were sent, which
seeds drew the random baseline and the intervals, and what it cost.
``memoryquest pgr run`` writes one next to its results (``NAME.run.json``).

:func:`read_evaluation_run` reads a record back with the files it names (the
results and the judges' calibration), so the dataset card can show a run's
figures, computed from its rows, under the run's name.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
from collections.abc import Collection, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, Field, ValidationError

import memoryquest
from memoryquest.contracts import PromptVersion, RunManifest, StageUsage, ValidationResult
from memoryquest.manifest import prompt_versions
from memoryquest.pgr.calibration_contracts import CALIBRATION_SUFFIX, JudgeCalibrationReport
from memoryquest.settings import Settings

RUN_RECORD_SUFFIX = ".run.json"  # beside a results file: pgr.jsonl -> pgr.run.json
EVALUATION_PROMPTS = ("pgr_", "judge_")  # the templates an evaluation sends, by id prefix


class EvaluationRecord(BaseModel):
    record_version: Literal[1] = 1
    created_at: dt.datetime
    command: list[str] = Field(description="The command line, as given.")
    package_version: str
    dataset: str = Field(description="The dataset directory evaluated.")
    dataset_sha256: str = Field(
        description="sha256 over the dataset's files (name and bytes), in name order."
    )
    dataset_run_id: str | None = Field(description="The run that wrote the dataset (its manifest).")
    dataset_chat_model: str | None = Field(description="The model that wrote the dataset.")
    queries: int
    users: int
    methods: list[str]
    judges: list[str]
    budget_baselines: list[str]
    chat_model: str = Field(description="The model that answered PGR's and the answers' prompts.")
    judge_model: str = Field(description="The model that answered the judges' prompts.")
    embedder: str
    seed: int
    baseline_seed: int
    bootstrap_samples: int
    pgr_settings: dict[str, Any] = Field(description="Every PGR hyper-parameter in force.")
    prompts: list[PromptVersion] = Field(description="The templates the evaluation sends.")
    usage: list[StageUsage]
    total_cost_usd: float
    outputs: list[str] = Field(description="The files this evaluation wrote, beside this record.")
    memory_systems: dict[str, str] = Field(
        default_factory=dict, description="Memory systems evaluated (--memory), by name: version."
    )


def dataset_digest(directory: Path) -> str:
    """sha256 over every file directly in ``directory`` (not its sub-folders: logs, caches,
    explorer), each as its name and its bytes, in name order; reports this command writes into
    the folder (``pgr.*``) are left out, so evaluating twice gives the same digest."""
    digest = hashlib.sha256()
    for path in sorted(p for p in Path(directory).iterdir() if p.is_file()):
        if path.name.startswith("pgr."):
            continue
        digest.update(path.name.encode() + b"\0")
        with path.open("rb") as handle:
            for block in iter(lambda: handle.read(1 << 20), b""):
                digest.update(block)
        digest.update(b"\0")
    return digest.hexdigest()


def evaluation_record(
    *,
    command: Sequence[str],
    dataset: Path,
    manifest: RunManifest | None,
    settings: Settings,
    queries: int,
    users: int,
    chat_model: str,
    judge_model: str,
    embedder: str,
    usage: Sequence[StageUsage],
    outputs: Sequence[Path],
    memory_systems: dict[str, str] | None = None,
) -> EvaluationRecord:
    pgr = settings.pgr
    return EvaluationRecord(
        created_at=dt.datetime.now(dt.UTC),
        command=list(command),
        package_version=memoryquest.__version__,
        dataset=str(dataset),
        dataset_sha256=dataset_digest(dataset),
        dataset_run_id=manifest.run_id if manifest is not None else None,
        dataset_chat_model=manifest.chat_model if manifest is not None else None,
        queries=queries,
        users=users,
        methods=list(pgr.methods),
        judges=list(pgr.judges),
        budget_baselines=list(pgr.budget_baselines),
        chat_model=chat_model,
        judge_model=judge_model,
        embedder=embedder,
        seed=settings.seed,
        baseline_seed=pgr.baseline_seed,
        bootstrap_samples=pgr.bootstrap_samples,
        pgr_settings=pgr.model_dump(mode="json"),
        prompts=[p for p in prompt_versions() if p.template_id.startswith(EVALUATION_PROMPTS)],
        usage=list(usage),
        total_cost_usd=round(sum(u.cost_usd for u in usage), 6),
        outputs=[path.name for path in outputs],
        memory_systems=dict(memory_systems or {}),
    )


# --------------------------------------------------------------------------- reading a run back


class EvaluationRunError(ValueError):
    """A run record, or a file it names, cannot be read or belongs to another dataset."""


@dataclass(frozen=True)
class EvaluationRun:
    """One ``pgr run``: its record, its results and the judges' calibration (when it measured one),
    each with the file name the record gives it."""

    record_file: str
    record: EvaluationRecord
    results_file: str
    results: list[ValidationResult]
    calibration_file: str | None = None
    calibration: JudgeCalibrationReport | None = None


def _first_error(exc: ValidationError) -> str:
    error = exc.errors(include_url=False)[0]
    where = ".".join(str(part) for part in error.get("loc", ()))
    return f"{where}: {error['msg']}" if where else str(error["msg"])


def _read_text(path: Path, what: str) -> str:
    try:
        return path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        raise EvaluationRunError(f"cannot read {what} {path}: {reason}") from None


def _results(path: Path) -> list[ValidationResult]:
    """The rows of a results file; ``pgr run`` joins each to its query's text and date, which a
    validation row does not hold, so only a row's own fields are read."""
    fields = set(ValidationResult.model_fields)
    rows = []
    for number, line in enumerate(_read_text(path, "the results").splitlines(), start=1):
        if not line.strip():
            continue
        try:
            joined = json.loads(line)
            rows.append(
                ValidationResult.model_validate({k: v for k, v in joined.items() if k in fields})
            )
        except (ValueError, AttributeError) as exc:
            problem = _first_error(exc) if isinstance(exc, ValidationError) else str(exc)
            raise EvaluationRunError(
                f"{path}, line {number}, is not a result of `memoryquest pgr run`: {problem}"
            ) from None
    return rows


def read_evaluation_run(path: Path) -> EvaluationRun:
    """The run whose record is ``path`` (``NAME.run.json``), with the results and calibration it
    names beside it. A run of memory systems (``--memory``), or one that kept no results (no
    ``--output``), has no PGR results to show: a one-line :class:`EvaluationRunError`."""
    path = Path(path)
    try:
        record = EvaluationRecord.model_validate_json(_read_text(path, "the run record"))
    except ValidationError as exc:
        raise EvaluationRunError(
            f"{path} is not a run record of `memoryquest pgr run`: {_first_error(exc)}"
        ) from None
    if record.memory_systems:
        raise EvaluationRunError(
            f"{path} records a run of memory systems (--memory), not of PGR and its baselines"
        )
    results = [name for name in record.outputs if name.endswith(".jsonl")]
    if not results:
        raise EvaluationRunError(
            f"{path} names no results file: run `memoryquest pgr run DIR --output NAME.jsonl`"
        )
    calibration_file = next((n for n in record.outputs if n.endswith(CALIBRATION_SUFFIX)), None)
    calibration = None
    if calibration_file is not None:
        where = path.with_name(calibration_file)
        try:
            calibration = JudgeCalibrationReport.model_validate_json(
                _read_text(where, "the judges' calibration")
            )
        except ValidationError as exc:
            raise EvaluationRunError(
                f"{where} is not a judges' calibration of `memoryquest pgr run`: {_first_error(exc)}"
            ) from None
    return EvaluationRun(
        record_file=path.name,
        record=record,
        results_file=results[0],
        results=_results(path.with_name(results[0])),
        calibration_file=calibration_file,
        calibration=calibration,
    )


def check_run_of(run: EvaluationRun, run_id: str | None, query_ids: Collection[str]) -> None:
    """``run`` evaluated the dataset that run ``run_id`` wrote, and only its queries."""
    if run.record.dataset_run_id != run_id:
        raise EvaluationRunError(
            f"{run.record_file} evaluated the dataset of run {run.record.dataset_run_id}, "
            f"not this one (run {run_id})"
        )
    strangers = sorted({r.query_id for r in run.results} - set(query_ids))
    if strangers:
        raise EvaluationRunError(
            f"{run.results_file} scored query {strangers[0]}, which this dataset does not have"
        )
    if not run.results:
        raise EvaluationRunError(f"{run.results_file} holds no results")
