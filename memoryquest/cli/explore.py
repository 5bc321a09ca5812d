"""``memoryquest explore DIR``: the static dataset explorer for a generated or published dataset.

It shows the audit `memoryquest audit --write` left beside a generated dataset
(``audit.json``), and the Win Rate report of ``memoryquest pgr run --win-rate``
found beside the dataset (``pgr.winrate.json``: where ``pgr run`` writes it
without ``--output``, and where ``publish`` keeps a copy) or named by
``--win-rate-report``. A report that cannot be used is a one-line error before
anything is written; no report, no Win Rate table.
"""

from __future__ import annotations

import argparse
import json
import shutil
import tempfile
import time
import webbrowser
from pathlib import Path
from typing import TYPE_CHECKING

from memoryquest.cli.inputs import add_dataset_argument, add_output_option, check_output_target
from memoryquest.cli.main import add_common_options, settings_from_args
from memoryquest.cli.publish import add_win_rate_report_option, win_rate_report_path
from memoryquest.dataset import swap_into_place

if TYPE_CHECKING:
    from memoryquest.pgr.winrate_contracts import WinRateReport

AUDIT_FILE = "audit.json"  # written next to a generated dataset by `memoryquest audit DIR --write`


def configure(parser: argparse.ArgumentParser) -> None:
    parser.description = (
        "Show a dataset in the browser: personas and their queries (gamma, cosines, difficulty, recall "
        "per method), one query's references and timeline, each session's dialogue with the reference "
        "sentence highlighted and the facts extracted from it, what each retrieval method found, and "
        "the audit beside the card's plots, and the Win Rate of `pgr run --win-rate` when its report "
        "is found. A published dataset already holds one in explorer/; for a "
        "generated dataset (or to rebuild) the explorer is written to --output. It is a folder of "
        "static files: open index.html from disk, no server needed."
    )
    add_common_options(parser)
    add_dataset_argument(parser, "a generated dataset (queries.jsonl, ...) or a published one")
    add_output_option(
        parser,
        "where to write the explorer (default: DATASET_DIR/explorer); replaced if it holds an earlier explorer",
    )
    parser.add_argument(
        "--open", action="store_true", help="open the explorer in the default web browser"
    )
    add_win_rate_report_option(parser)
    parser.set_defaults(func=_explore)


class ExploreError(ValueError):
    pass


def _is_explorer(path: Path) -> bool:
    from memoryquest.publish.explorer import DATA_DIR, ENTRY_FILE, INDEX_FILE

    return (path / ENTRY_FILE).is_file() and (path / DATA_DIR / INDEX_FILE).is_file()


def _check_output(output: Path) -> None:
    check_output_target(output, directory=True)
    if output.is_dir() and any(output.iterdir()) and not _is_explorer(output):
        raise ExploreError(
            f"--output {output} exists, is not empty and holds no explorer; refusing to replace it"
        )


def _audit(kind: str, dataset_dir: Path) -> dict[str, object] | None:
    """The audit report `memoryquest audit --write` left next to a generated dataset, if any."""
    path = dataset_dir / AUDIT_FILE
    if kind != "generated" or not path.is_file():
        return None
    try:
        document = json.loads(path.read_text(encoding="utf-8"))
    except ValueError as exc:
        raise ExploreError(f"{path} is not valid JSON: {exc}") from exc
    return document if isinstance(document, dict) else None


def _build(
    args: argparse.Namespace, kind: str, output: Path, report: Path | None
) -> tuple[int, int, float]:
    from memoryquest.cli.open_dataset import load_dataset
    from memoryquest.publish import read_win_rate_report
    from memoryquest.publish.explorer import PLOT_CAPTIONS, Plot, write_explorer

    started = time.perf_counter()
    dataset_dir: Path = args.dataset_dir
    dataset = load_dataset(dataset_dir)
    audit = (
        None
        if dataset.manifest is not None and dataset.manifest.audit is not None
        else _audit(kind, dataset_dir)
    )
    win_rates: WinRateReport | None = (
        None
        if report is None
        else read_win_rate_report(report, [q.query_id for q in dataset.queries])
    )
    plots = []
    if kind == "published":
        plots = [
            Plot(p, PLOT_CAPTIONS.get(p.name, p.stem.replace("_", " ")))
            for p in sorted((dataset_dir / "plots").glob("*.png"))
        ]
    output = output.absolute()
    output.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{output.name}.explore-", dir=output.parent))
    try:
        staging.chmod(0o755)
        files = write_explorer(dataset, staging, audit=audit, plots=plots, win_rates=win_rates)
        swap_into_place(staging, output)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    size = sum(path.stat().st_size for path in output.rglob("*") if path.is_file())
    return len(files), size, time.perf_counter() - started


def _explore(args: argparse.Namespace) -> int:
    from memoryquest.cli.open_dataset import dataset_kind
    from memoryquest.publish.explorer import ENTRY_FILE, EXPLORER_DIR

    settings_from_args(args)  # reject a bad --config / --set like every other subcommand
    dataset_dir: Path = args.dataset_dir
    kind = dataset_kind(dataset_dir)
    output: Path = args.output if args.output is not None else dataset_dir / EXPLORER_DIR
    report = win_rate_report_path(args, dataset_dir)
    if args.output is None and kind == "published" and _is_explorer(output):
        if args.win_rate_report is not None:
            raise ExploreError(
                f"{dataset_dir} is published with its explorer, which is not rebuilt in place: "
                "give --output DIR to build one with --win-rate-report"
            )
        print(f"explorer: {(output / ENTRY_FILE).absolute()}")
    else:
        _check_output(output)
        files, size, seconds = _build(args, kind, output, report)
        print(f"explorer: {(output / ENTRY_FILE).absolute()}")
        print(
            f"  {files} files, {size:,} bytes, built in {seconds:.2f} s from the {kind} dataset {dataset_dir}"
        )
    entry = (output / ENTRY_FILE).absolute()
    if args.open and not webbrowser.open(entry.as_uri()):
        print(f"could not start a web browser; open {entry.as_uri()}")
    return 0
