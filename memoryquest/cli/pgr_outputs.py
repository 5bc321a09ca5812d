"""What ``pgr run`` writes: the results joined to their queries, the Win Rate report beside them,
and the run record; each file written whole or not at all."""

from __future__ import annotations

import argparse
import os
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from memoryquest.cli.inputs import dataset_dir
from memoryquest.cli.pgr_inputs import PGRInputs
from memoryquest.contracts import Persona, Query, StageUsage, ValidationResult
from memoryquest.pgr.metrics import query_difficulty
from memoryquest.pgr.run_record import RUN_RECORD_SUFFIX, evaluation_record
from memoryquest.pgr.winrate_contracts import WIN_RATE_FILE, WIN_RATE_SUFFIX
from memoryquest.settings import Settings


def win_rate_path(output: Path) -> Path:
    """Where the Win Rate report goes: beside the results file (pgr.jsonl -> pgr.winrate.json)."""
    return output.with_name(output.stem + WIN_RATE_SUFFIX)


def write_atomically(path: Path, lines: Sequence[str]) -> None:
    """Write ``lines`` to ``path`` whole: a failure leaves the earlier file (or none), never half."""
    handle, staging = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.absolute().parent)
    try:
        with os.fdopen(handle, "w", encoding="utf-8") as stream:
            stream.writelines(lines)
        os.replace(staging, path)
    except BaseException:
        Path(staging).unlink(missing_ok=True)
        raise


def joined_rows(
    results: list[ValidationResult], queries: list[Query], personas: list[Persona]
) -> list[dict[str, Any]]:
    """Each result with its query's text, date, domain, γ, difficulty and user, ready for JSONL.

    ``difficulty`` is recomputed from these results (query-only recall under
    the provenance judge) when they hold it, else the dataset's own value.
    """
    by_id = {q.query_id: q for q in queries}
    users = {p.persona_id: p.source_user_id for p in personas}
    difficulty = query_difficulty(results)
    rows = []
    for result in results:
        query = by_id[result.query_id]
        rows.append(
            {
                **result.model_dump(mode="json"),
                "user": users.get(result.persona_id),
                "query_text": query.text,
                "query_date": query.query_date.isoformat(),
                "query_domain": query.domain.value,
                "gamma": query.gamma,
                "difficulty": difficulty.get(query.query_id, query.difficulty),
                "embedder": query.embedder,
            }
        )
    return rows


def write_run_record(
    args: argparse.Namespace,
    inputs: PGRInputs,
    settings: Settings,
    queries: Sequence[Query],
    written: Sequence[Path],
    *,
    models: tuple[str, str, str],
    usage: Sequence[StageUsage],
    memory_systems: dict[str, str] | None = None,
) -> None:
    """The run record beside the first file written (``NAME.run.json``)."""
    chat_model, judge_model, embedder = models
    record = evaluation_record(
        command=["memoryquest", *args.argv],
        dataset=dataset_dir(args),
        manifest=inputs.manifest,
        settings=settings,
        queries=len(queries),
        users=len({q.persona_id for q in queries}),
        chat_model=chat_model,
        judge_model=judge_model,
        embedder=embedder,
        usage=usage,
        outputs=written,
        memory_systems=memory_systems,
    )
    path = written[0].with_name(written[0].name.split(".")[0] + RUN_RECORD_SUFFIX)
    write_atomically(path, [record.model_dump_json(indent=2) + "\n"])
    print(f"wrote the run record (dataset hash, models, prompt versions, seeds, cost) to {path}")


def where_read(report: Path, dataset: Path) -> str:
    """How publish and explore find ``report``: by themselves beside the dataset, else by name."""
    if report.absolute() == (dataset / WIN_RATE_FILE).absolute():
        return " (`memoryquest publish` and `memoryquest explore` show it)"
    return f" (give it to `memoryquest publish` and `memoryquest explore` as --win-rate-report {report})"
