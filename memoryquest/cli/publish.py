"""``memoryquest publish <dataset_dir> --to <dest>``: Parquet splits, JSONL mirror, card, manifest."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from memoryquest.cli.main import settings_from_args
from memoryquest.dataset import GeneratedDataset
from memoryquest.publish import AuditFailedError, publish_dataset
from memoryquest.publish.splits import SPLITS


def register(subparsers: Any, common: argparse.ArgumentParser) -> None:
    parser = subparsers.add_parser(
        "publish",
        parents=[common],
        help="publish a generated dataset as Hugging Face-style Parquet splits with a dataset card",
        description=(
            "Write user-disjoint train/validation/test Parquet splits, a JSONL mirror, plots, a dataset "
            "card (README.md) and manifest.json. The destination is replaced atomically; it must be "
            "absent, empty, or hold an earlier published dataset. Split ratios and seed: "
            "--set publish.train=0.8 --set publish.split_seed=13 ..."
        ),
    )
    parser.add_argument("dataset_dir", type=Path, help="output directory of `memoryquest generate`")
    parser.add_argument("--to", dest="destination", type=Path, required=True, help="where to write the published dataset")
    parser.add_argument(
        "--allow-failed-audit",
        action="store_true",
        help="publish even when the validity audit fails; the card's first line then says it failed",
    )
    parser.set_defaults(func=_publish)


def _publish(args: argparse.Namespace) -> int:
    settings = settings_from_args(args)
    dataset = GeneratedDataset.load(args.dataset_dir)
    try:
        report = publish_dataset(dataset, args.destination, settings, allow_failed_audit=args.allow_failed_audit)
    except AuditFailedError as exc:
        print(f"error: {exc}")
        return 1
    print(f"published to {report.destination}")
    width = max(len(name) for name in report.row_counts)
    print(f"  {'config':<{width}}  " + "  ".join(f"{split:>10}" for split in SPLITS))
    for config, counts in report.row_counts.items():
        print(f"  {config:<{width}}  " + "  ".join(f"{counts[split]:>10}" for split in SPLITS))
    users = "  ".join(f"{split} {len(report.users[split])}" for split in SPLITS)
    print(f"  users: {users}")
    print(f"dataset card: {report.card}")
    print(f"{len(report.files)} files, {sum(f.bytes for f in report.files):,} bytes, {report.seconds:.2f} s")
    return 0
