"""The record of one evaluation: enough, beside its results, to reproduce every figure.

A recall or a Win Rate means little without what produced it: which dataset (its
files' hash, the run that wrote it), which code, methods, judges and baselines,
which models answered and judged, which prompt versions they were sent, which
seeds drew the random baseline and the intervals, and what it cost.
``memoryquest pgr run`` writes one next to its results (``NAME.run.json``).
"""

from __future__ import annotations

import datetime as dt
import hashlib
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, Field

import memoryquest
from memoryquest.contracts import PromptVersion, RunManifest, StageUsage
from memoryquest.manifest import prompt_versions
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
