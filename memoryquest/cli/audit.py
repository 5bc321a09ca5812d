"""``memoryquest audit DATASET_DIR``: the validity audit (exit 0 passed, 1 failed, 2 unusable input)."""

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
    parser.set_defaults(func=_audit)


def _audit(args: argparse.Namespace) -> int:
    from memoryquest.audit import audit_dataset, audit_markdown, load_dataset

    settings = settings_from_args(args)
    dataset = load_dataset(args.dataset_dir)
    report = audit_dataset(dataset, settings)
    document = report.model_dump(mode="json")
    if args.json:
        print(json.dumps(document, indent=2, ensure_ascii=False))
    else:
        print(audit_markdown(report), end="")
        for failure in report.failures:
            print(f"FAIL {failure}")
        for missed in report.targets_missed:
            print(f"MISSED target {missed}")
    if args.write:
        target = Path(args.dataset_dir) / AUDIT_FILE
        target.write_text(
            json.dumps(document, indent=2, ensure_ascii=False) + "\n", encoding="utf-8"
        )
        if not args.json:
            print(f"wrote {target}")
    return 0 if report.passed else 1
