"""``memoryquest publish DATASET_DIR --output DEST``: Parquet splits, JSONL mirror, card, manifest.

Its log goes to the ``logs`` directory of the run that wrote the dataset
(``publish.log``), and to stderr only with ``--verbose``
(:mod:`memoryquest.cli.run_log`); a refusal (a failed audit) is one line on
stderr, exit code 1.

The Win Rate report of ``memoryquest pgr run --win-rate`` is published with
the dataset when it lies beside it (``DATASET_DIR/pgr.winrate.json``, where
``pgr run`` writes it without ``--output``) or is named by
``--win-rate-report``: the card and the explorer then show its table. A
report that cannot be read, is not one, or judged queries the dataset does
not have is a one-line error, and nothing is published.

``--pgr-run NAME.run.json`` names a ``memoryquest pgr run`` of the dataset
(run with ``--output NAME.jsonl``): the card then shows every baseline at PGR's
budget and each judge's measured error, computed from that run's files.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from memoryquest.cli.inputs import (
    add_dataset_argument,
    add_output_option,
    check_output_target,
    dataset_dir,
    load_generated,
)
from memoryquest.cli.main import FAILURE, add_common_options, one_line, settings_from_args
from memoryquest.cli.run_log import add_verbose_option, command_log, log_dir_of_dataset

if TYPE_CHECKING:
    from memoryquest.publish import PublishReport
    from memoryquest.publish.hub import HubAccess, HubTarget

PUBLISH_LOG = "publish.log"  # in the logs directory of the run that wrote the dataset


def configure(parser: argparse.ArgumentParser) -> None:
    parser.description = (
        "Write user-disjoint train/validation/test Parquet splits, a JSONL mirror, plots, a dataset "
        "card (README.md) and manifest.json. The destination is replaced atomically; it must be "
        "absent, empty, or hold an earlier published dataset. Split ratios and seed: "
        "--set publish.train=0.8 --set publish.split_seed=13 ..."
    )
    add_common_options(parser)
    add_dataset_argument(
        parser, "the dataset directory `memoryquest generate` wrote (OUTPUT/dataset)"
    )
    add_output_option(parser, "where to write the published dataset (required)", old=["--to"])
    parser.add_argument(
        "--allow-failed-audit",
        action="store_true",
        help="publish even when the validity audit fails; the card's first line then says it failed",
    )
    add_win_rate_report_option(parser)
    parser.add_argument(
        "--pgr-run",
        type=Path,
        metavar="NAME.run.json",
        help="the record of a `memoryquest pgr run DATASET_DIR --output NAME.jsonl`: the card shows "
        "every baseline at PGR's budget and each judge's false-accept and false-reject rate from "
        "that run's results and calibration, under the run's name",
    )
    add_hub_options(parser)
    add_verbose_option(parser)
    parser.set_defaults(func=_publish)


def add_hub_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--push-to-hub",
        metavar="ORG/NAME",
        help="then push the published folder to this Hugging Face Hub dataset repo (created if "
        "missing), with the token in HF_TOKEN (and the Hub at HF_ENDPOINT, if set)",
    )
    parser.add_argument(
        "--revision",
        metavar="BRANCH",
        help="the branch to push to (created from main if missing; default main)",
    )
    parser.add_argument(
        "--private",
        action="store_true",
        help="create the repo private (an existing repo keeps its visibility)",
    )


def hub_target(args: argparse.Namespace) -> HubTarget | None:
    """The push the flags ask for, checked; None without ``--push-to-hub``."""
    from memoryquest.publish.hub import DEFAULT_REVISION, HubTarget

    if args.push_to_hub is None:
        if args.revision is not None or args.private:
            raise ValueError("--revision and --private go with --push-to-hub ORG/NAME")
        return None
    return HubTarget(args.push_to_hub, args.revision or DEFAULT_REVISION, args.private)


def add_win_rate_report_option(parser: argparse.ArgumentParser) -> None:
    """``--win-rate-report PATH`` (shared with ``memoryquest explore``)."""
    parser.add_argument(
        "--win-rate-report",
        type=Path,
        metavar="PATH",
        help="the Win Rate report of `memoryquest pgr run --win-rate` to show in the card and the "
        "explorer (default: DATASET_DIR/pgr.winrate.json if it exists, where `pgr run --win-rate` "
        "writes it without --output)",
    )


def win_rate_report_path(args: argparse.Namespace, dataset_dir: Path) -> Path | None:
    """The report named by ``--win-rate-report`` (which must exist), else the one beside the
    dataset, else None: no report, no Win Rate table."""
    from memoryquest.publish import WIN_RATE_FILE

    given: Path | None = args.win_rate_report
    if given is not None:
        if not given.exists():
            raise ValueError(f"--win-rate-report {given} does not exist")
        return given
    beside = dataset_dir / WIN_RATE_FILE
    return beside if beside.exists() else None


def _publish(args: argparse.Namespace) -> int:
    from memoryquest.pgr.run_record import read_evaluation_run
    from memoryquest.publish import AuditFailedError, publish_dataset, read_win_rate_report

    settings = settings_from_args(args)
    if args.output is None:
        raise ValueError("publish needs --output DEST: where to write the published dataset")
    check_output_target(args.output, directory=True)
    target = hub_target(args)
    access = None if target is None else _hub_access()
    source = dataset_dir(args)
    dataset = load_generated(source)
    report_path = win_rate_report_path(args, source)
    win_rates = (
        None
        if report_path is None
        else read_win_rate_report(report_path, [q.query_id for q in dataset.queries])
    )
    evaluation = None if args.pgr_run is None else read_evaluation_run(args.pgr_run)
    log = log_dir_of_dataset(source) / PUBLISH_LOG
    try:
        with command_log(args, log):
            report = publish_dataset(
                dataset,
                args.output,
                settings,
                allow_failed_audit=args.allow_failed_audit,
                win_rates=win_rates,
                evaluation=evaluation,
            )
    except AuditFailedError as exc:
        print(f"memoryquest: error: {one_line(str(exc))}", file=sys.stderr)
        return FAILURE
    _print_report(report, report_path)
    if target is not None and access is not None:
        # Imported before the log takes over the terminal: huggingface_hub adds its own
        # stderr handler on import, which command_log then silences like the others.
        from huggingface_hub.utils import disable_progress_bars

        disable_progress_bars()  # a failed push ends in one line; _push says what it did
        with command_log(args, log):
            _push(report.destination, target, access)
    return 0


def _hub_access() -> HubAccess:
    from memoryquest.publish.hub import hub_access
    from memoryquest.redaction import register_secret

    access = hub_access()
    register_secret(access.token)  # never in a log line or an error line
    return access


def _push(folder: Path, target: HubTarget, access: HubAccess) -> None:
    """Push, saying where to first; a failure propagates as one line (main prints it)."""
    from memoryquest.publish.hub import push_to_hub

    print(
        f"pushing to {access.endpoint}/datasets/{target.repo_id} (revision {target.revision})",
        flush=True,
    )
    push = push_to_hub(folder, target, access)
    print(
        f"pushed {push.files} files to {push.url}, revision {push.revision}: "
        f"data commit {push.data_commit}, manifest and card recording it in {push.record_commit}"
    )
    if push.deleted:
        print(f"  removed {len(push.deleted)} files the revision had and this dataset does not")


def _print_report(report: PublishReport, report_path: Path | None) -> None:
    from memoryquest.publish.splits import SPLITS

    print(f"published to {report.destination}")
    width = max(len(name) for name in report.row_counts)
    print(f"  {'config':<{width}}  " + "  ".join(f"{split:>10}" for split in SPLITS))
    for config, counts in report.row_counts.items():
        print(f"  {config:<{width}}  " + "  ".join(f"{counts[split]:>10}" for split in SPLITS))
    users = "  ".join(f"{split} {len(report.users[split])}" for split in SPLITS)
    print(f"  users: {users}")
    print(f"dataset card: {report.card}")
    if report_path is not None:
        print(f"  with the Win Rate table of {report_path}")
    print(
        f"{len(report.files)} files, {sum(f.bytes for f in report.files):,} bytes, {report.seconds:.2f} s"
    )
