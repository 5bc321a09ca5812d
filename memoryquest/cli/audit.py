"""``memoryquest audit DATASET_DIR``: the validity audit (exit 0 passed, 1 failed, 2 unusable input).

With ``--filter --output DIR`` it also withdraws the queries whose reference items stand out
(:mod:`memoryquest.audit.filtering`) and writes the filtered dataset to DIR; the input is only read.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from memoryquest.cli.inputs import add_dataset_argument
from memoryquest.cli.main import add_common_options, settings_from_args

AUDIT_FILE = "audit.json"


def configure(parser: argparse.ArgumentParser) -> None:
    parser.description = (
        "Measure what a model could exploit instead of remembering the user: word n-grams found only "
        "around reference turns, a cross-user classifier's AUC on reference vs other turns and facts, "
        "BM25 and dense recall on the bare query, lexical diversity, and references that memory does "
        "not cover or that expired before their query. Prints a markdown table (or JSON with --json); "
        "exit 1 when a gate fails. Thresholds: --set audit.classifier_auc_max=0.7 ..."
    )
    add_common_options(parser)
    add_dataset_argument(
        parser, "a generated dataset (queries.jsonl, ...) or a published one (manifest.json, data/)"
    )
    parser.add_argument(
        "--json", action="store_true", help="print the full report as JSON instead of the table"
    )
    parser.add_argument(
        "--write", action="store_true", help=f"also write the report to DATASET_DIR/{AUDIT_FILE}"
    )
    parser.add_argument(
        "--filter",
        action="store_true",
        help="withdraw (reason 'tell') the queries whose reference items stand out to the audit's "
        "out-of-fold classifiers, round by round (audit.filter_*), and write the filtered dataset "
        "to --output; the report is the filtered dataset's, with the AUCs before and after",
    )
    parser.add_argument(
        "--output",
        type=Path,
        help="with --filter: a new (or empty) directory for the filtered dataset (generated layout)",
    )
    parser.set_defaults(func=_audit)


def _filter_output(args: argparse.Namespace) -> Path | None:
    """The directory the filtered dataset goes to; a ValueError (exit 2) when the options do not fit."""
    if not args.filter:
        if args.output is not None:
            raise ValueError("--output is for --filter: give both, or neither")
        return None
    if args.output is None:
        raise ValueError("--filter needs --output DIR: the input dataset is never changed")
    output = Path(args.output)
    if output.exists() and (not output.is_dir() or any(output.iterdir())):
        raise ValueError(f"{output} already exists and is not an empty directory")
    if output.resolve().is_relative_to(Path(args.dataset_dir).resolve()):
        raise ValueError(
            "--output must lie outside DATASET_DIR: the input dataset is never changed"
        )
    return output


def _audit(args: argparse.Namespace) -> int:
    from memoryquest.audit import audit_dataset, audit_markdown
    from memoryquest.cli.open_dataset import load_dataset

    settings = settings_from_args(args)
    output = _filter_output(args)
    dataset = load_dataset(args.dataset_dir)
    if output is None:
        report = audit_dataset(dataset, settings)
    else:
        from memoryquest.audit.filtering import filter_tells

        result = filter_tells(dataset, settings)
        report = result.report
        result.dataset.save(output)
        (output / AUDIT_FILE).write_text(
            json.dumps(report.model_dump(mode="json"), indent=2, ensure_ascii=False) + "\n",
            encoding="utf-8",
        )
    document = report.model_dump(mode="json")
    if args.json:
        print(json.dumps(document, indent=2, ensure_ascii=False))
    else:
        print(audit_markdown(report), end="")
        for failure in report.failures:
            print(f"FAIL {failure}")
        for missed in report.targets_missed:
            print(f"MISSED target {missed}")
    if output is not None and not args.json:
        summary = report.filtering
        assert summary is not None  # filter_tells attaches it
        print(
            f"wrote {output}: {summary.queries_removed} of {summary.queries_before} queries withdrawn "
            f"(reason 'tell') in {len(summary.rounds)} round(s)"
        )
    if args.write:
        target = Path(args.dataset_dir) / AUDIT_FILE
        target.write_text(
            json.dumps(document, indent=2, ensure_ascii=False) + "\n", encoding="utf-8"
        )
        if not args.json:
            print(f"wrote {target}")
    return 0 if report.passed else 1
