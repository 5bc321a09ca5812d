"""``memoryquest generate``: run the generation flow and say where the dataset went.

Everything that can be checked before work starts is checked first, each
problem one line (exit code 2): the settings (cross-field rules included),
the selection, the persona source (and that the selection is in it: a range
past its last persona, say), for a real endpoint that it accepts the
key (one free ``GET /models``), and the output directory (not a file,
writable, not in use by another run: :mod:`memoryquest.orchestration.output_lock`), which is
created only once everything before it passed. Only then does a Prefect
server start (:func:`memoryquest.orchestration.prefect_defaults.local_prefect_api`).

While it runs, progress is live on a terminal and a plain line every few
seconds otherwise (:mod:`memoryquest.progress`); the log (Prefect's flow and
task run logs, tracebacks included) goes to ``OUTPUT/logs/run.log``, and to
stderr only with ``--verbose`` (:mod:`memoryquest.cli.run_log`). At the end it
prints the run's summary; a run that kept no query exits 1 after it, in one
line. A run that fails (an endpoint that kept failing, a key refused
mid-run) ends in one line on stderr naming the log file.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import shlex
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING

from memoryquest.cli.inputs import (
    add_output_option,
    add_selection_options,
    prepare_output_dir,
    selection_from_args,
)
from memoryquest.cli.main import FAILURE, add_common_options, settings_from_args
from memoryquest.cli.run_log import LOG_DIR, RUN_LOG, add_verbose_option, command_log

if TYPE_CHECKING:
    from memoryquest.settings import Settings

PROGRESS_SECONDS = (
    10.0  # memoryquest.progress.display.DEFAULT_EVERY_SECONDS, without importing rich
)


def configure(parser: argparse.ArgumentParser) -> None:
    parser.description = (
        "Pull personas, generate queries, timelines, dialogues and memory, check every "
        "query with PGR and publish Parquet splits. Without an endpoint configured, runs the "
        "offline simulator with the local embedding model."
    )
    add_common_options(parser)
    parser.add_argument(
        "--source",
        help="persona source: PersonaLens data dir, http(s) base URL, or custom JSON file",
    )
    add_selection_options(parser)
    parser.add_argument(
        "--model",
        help="chat model (sets endpoint.chat_model; the same flag as `memoryquest estimate`)",
    )
    add_output_option(parser, "output directory (default: settings.output_dir)")
    parser.add_argument("--queries-per-user", type=int, help="n_q (default 15)")
    parser.add_argument(
        "--no-cache", action="store_true", help="do not read or write the request cache"
    )
    parser.add_argument(
        "--no-publish", action="store_true", help="stop after writing the working dataset"
    )
    parser.add_argument(
        "--allow-failed-audit",
        action="store_true",
        help="publish even when the validity audit fails (the dataset card says so)",
    )
    add_progress_options(parser)
    parser.add_argument(
        "--cost-estimate",
        type=float,
        metavar="USD",
        help="show spending against this estimate (what `memoryquest estimate` printed)",
    )
    add_verbose_option(parser)
    parser.set_defaults(func=_generate)


def add_progress_options(parser: argparse.ArgumentParser) -> None:
    """``--progress`` and ``--progress-seconds``, for every command that shows progress."""
    parser.add_argument(
        "--progress",
        choices=["auto", "live", "plain", "off"],
        default="auto",
        help="progress display: live bars on a terminal, plain lines otherwise (default auto)",
    )
    parser.add_argument(
        "--progress-seconds",
        type=float,
        default=PROGRESS_SECONDS,
        metavar="S",
        help=f"one plain progress line every S seconds (default {PROGRESS_SECONDS:g})",
    )


def check_progress_options(args: argparse.Namespace) -> None:
    if args.progress_seconds <= 0:
        raise ValueError("--progress-seconds must be positive")


def check_persona_source(source: str) -> None:
    from memoryquest.intake import is_http_source

    if is_http_source(source):
        return
    path = Path(source)
    if not path.exists():
        raise ValueError(f"persona source {source} does not exist")
    if source.lower().endswith(".json"):
        if not path.is_file():
            raise ValueError(f"persona source {source} is not a regular file")
    elif not path.is_dir():
        raise ValueError(
            f"persona source {source} is neither a directory nor a custom persona .json file"
        )


def check_endpoint(settings: Settings) -> None:
    """A refused key fails here, in one line, before Prefect starts (the simulator has nothing to check).

    The run's first line says where requests go and where embeddings come from.
    """
    from memoryquest.llm.client import check_access
    from memoryquest.llm.factory import build_chat_backend, describe_endpoint

    backend = build_chat_backend(settings)
    if backend.simulated:
        return
    print(describe_endpoint(settings), flush=True)

    async def check() -> None:
        try:
            await check_access(backend)
        finally:
            close = getattr(backend, "aclose", None)
            if callable(close):
                await close()

    asyncio.run(check())


def _warm_up(settings: Settings, publish: bool) -> None:
    """The flow's imports, the stages' code fingerprints and the embedding model, loaded while a
    temporary Prefect server boots.

    A publishing run also loads what it needs at the very end (matplotlib, pyarrow and
    the audit's scikit-learn, about 2 s): the server's boot leaves a core idle now, and
    the end of the run is single-threaded.
    """
    import memoryquest.orchestration.flow  # noqa: F401  (the flow, its stages and Prefect's client)
    from memoryquest.fingerprint import runs_simulator, stage_fingerprints
    from memoryquest.llm.factory import build_embedding_backend

    stage_fingerprints(runs_simulator(settings))
    build_embedding_backend(settings)
    if publish:
        import memoryquest.publish  # noqa: F401
        from memoryquest.audit.detectability import load_classifier

        load_classifier()


def _generate(args: argparse.Namespace) -> int:
    from memoryquest.intake import check_selection
    from memoryquest.orchestration.output_lock import RunLock
    from memoryquest.orchestration.prefect_defaults import local_prefect_api
    from memoryquest.progress import RunSummary

    settings = settings_from_args(
        args,
        persona_source=args.source,
        output_dir=str(args.output) if args.output else None,
        endpoint__chat_model=args.model,
        generation__queries_per_user=args.queries_per_user,
        cache__enabled=False if args.no_cache else None,
    )
    # A bad selection is a ValueError now, not inside the flow.
    selection = selection_from_args(args)
    check_progress_options(args)
    if args.cost_estimate is not None and args.cost_estimate < 0:
        raise ValueError("--cost-estimate must not be negative")
    started = time.perf_counter()
    check_persona_source(settings.persona_source)
    check_selection(settings.persona_source, selection)  # a range past the source's end, say
    check_endpoint(
        settings
    )  # before the output directory exists: a refused key leaves nothing behind
    output_dir = prepare_output_dir(Path(settings.output_dir))
    command = shlex.join(["memoryquest", *sys.argv[1:]])
    # The run lock is re-entrant: the flow takes it again.
    with (
        RunLock.acquire(output_dir, command=command),
        command_log(args, output_dir / LOG_DIR / RUN_LOG, prefect_flows=True),
        local_prefect_api(meanwhile=lambda: _warm_up(settings, publish=not args.no_publish)),
    ):
        from memoryquest.orchestration.flow import generate_benchmark
        from memoryquest.orchestration.lifecycle import DATASET_DIR, PUBLISHED_DIR, RUN_REPORT

        output = asyncio.run(
            generate_benchmark(
                settings=settings,
                users=list(selection.user_ids) if selection.user_ids is not None else None,
                count=selection.count,
                range=selection.range_text if selection.is_range else None,
                publish=not args.no_publish,
                allow_failed_audit=args.allow_failed_audit,
                progress=args.progress,
                progress_seconds=args.progress_seconds,
                cost_estimate_usd=args.cost_estimate,
            )
        )
    report = json.loads((Path(output) / RUN_REPORT).read_text(encoding="utf-8"))
    summary = RunSummary.model_validate(report["summary"])
    summary.wall_seconds = time.perf_counter() - started  # the command's, Prefect's start included
    print(summary.text())
    print(f"dataset: {Path(output) / DATASET_DIR}")
    if not summary.queries_kept:
        print(
            "memoryquest: error: no query was kept (rejections above); nothing was published",
            file=sys.stderr,
        )
        return FAILURE
    if not args.no_publish:
        published = Path(output) / PUBLISHED_DIR
        print(f"published: {published} (dataset card: {published / 'README.md'})")
    return 0


__all__ = ["check_endpoint", "check_persona_source", "configure"]
