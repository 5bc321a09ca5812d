"""``memoryquest progress DIR...``: the progress of one or more runs as one line, from their files.

Every run writes ``<output>/progress.json`` as it goes
(:mod:`memoryquest.progress.files`); a run spread over shards or Dask workers
writes its children's sum there. This command reads those files, so it works
from any machine that sees the output directories: one directory shows that
run (a spread run's combined progress), several are added up into one line
(the shards ``OUT/shards/0 OUT/shards/1`` of a run, say). With ``--watch`` it
prints a line every few seconds until every run has written its report.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

PROGRESS_FILE = "progress.json"  # memoryquest.progress.files.PROGRESS_FILE, without importing it
REPORT_FILE = "run_report.json"  # memoryquest.orchestration.lifecycle.RUN_REPORT


def configure(parser: argparse.ArgumentParser) -> None:
    parser.description = (
        "Print the progress of runs (personas, requests, tokens, dollars, ETA) as one line, read "
        "from each output directory's progress.json; several directories are added up."
    )
    parser.add_argument(
        "outputs",
        nargs="+",
        type=Path,
        metavar="DIR",
        help="a run's output directory (a sharded or Dask run's shows all its children)",
    )
    parser.add_argument(
        "--watch",
        type=float,
        metavar="S",
        help="print a line every S seconds until every run has finished",
    )
    parser.set_defaults(func=_progress)


def _ended(directory: Path) -> bool:
    """The run wrote its report after its last progress: it is over."""
    report, progress = directory / REPORT_FILE, directory / PROGRESS_FILE
    return report.is_file() and report.stat().st_mtime >= progress.stat().st_mtime


def _line(outputs: list[Path]) -> str:
    from memoryquest.progress import plain_line
    from memoryquest.progress.files import combine, read_snapshot

    snapshots = []
    for directory in outputs:
        snapshot = read_snapshot(directory)
        if snapshot is None:
            raise ValueError(
                f"{directory}: no {PROGRESS_FILE} (no run has written its progress there yet)"
            )
        snapshots.append(snapshot)
    if len(snapshots) == 1:
        return plain_line(snapshots[0])
    elapsed = max(s.elapsed_seconds for s in snapshots)
    return plain_line(combine(snapshots, elapsed_seconds=elapsed))


def _progress(args: argparse.Namespace) -> int:
    if args.watch is not None and args.watch <= 0:
        raise ValueError("--watch must be positive")
    for directory in args.outputs:
        if not directory.is_dir():
            raise ValueError(f"{directory} is not a directory")
    while True:
        print(_line(args.outputs), flush=True)
        if args.watch is None or all(_ended(d) for d in args.outputs):
            return 0
        time.sleep(args.watch)
