"""``memoryquest generate``: run the generation flow and say where the dataset went.

Everything that can be checked before work starts is checked first, each
problem one line (exit code 2): the settings (cross-field rules included),
the selection, the persona source, the output directory (not a file,
writable, not in use by another run: :mod:`memoryquest.run_lock`), and — for
a real endpoint — that it accepts the key (one free ``GET /models``). Only
then does a Prefect server start (:func:`memoryquest.prefect_runtime.local_prefect_api`).
"""

from __future__ import annotations

import argparse
import asyncio
import shlex
import sys
import tempfile
from pathlib import Path
from typing import Any

from memoryquest.cli.main import settings_from_args
from memoryquest.settings import Settings


def register(subparsers: Any, common: argparse.ArgumentParser) -> None:
    parser = subparsers.add_parser(
        "generate",
        parents=[common],
        help="generate a MemoryQuest dataset (Prefect flow; offline simulator by default)",
        description="Pull personas, generate queries, timelines, dialogues and memory, check every "
        "query with PGR and publish Parquet splits. Without an endpoint configured, runs the "
        "offline simulator with the local embedding model.",
    )
    parser.add_argument(
        "--source",
        help="persona source: PersonaLens data dir, http(s) base URL, or custom JSON file",
    )
    parser.add_argument("--users", help="comma-separated user ids, e.g. user0,user3")
    parser.add_argument("--count", type=int, help="the first N users")
    parser.add_argument(
        "--output", type=Path, help="output directory (default: settings.output_dir)"
    )
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
    parser.set_defaults(func=_generate)


def prepare_output_dir(output: Path) -> Path:
    """Create ``output`` if needed and prove it writable; a ValueError (one line) says what is wrong."""
    if output.exists() and not output.is_dir():
        raise ValueError(f"output {output} exists and is not a directory")
    try:
        output.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise ValueError(
            f"cannot create output directory {output}: {exc.strerror or exc}"
        ) from None
    try:  # os.access is not enough: it says yes to root on a read-only file system
        with tempfile.TemporaryFile(dir=output, prefix=".memoryquest-write-check-"):
            pass
    except OSError as exc:
        raise ValueError(
            f"output directory {output} is not writable: {exc.strerror or exc}"
        ) from None
    return output


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
    """A refused key fails here, in one line, before Prefect starts (the simulator has nothing to check)."""
    from memoryquest.llm.client import check_access
    from memoryquest.llm.factory import build_chat_backend

    backend = build_chat_backend(settings)
    if backend.simulated:
        return

    async def check() -> None:
        try:
            await check_access(backend)
        finally:
            close = getattr(backend, "aclose", None)
            if callable(close):
                await close()

    asyncio.run(check())


def _generate(args: argparse.Namespace) -> int:
    from memoryquest.intake import PersonaSelection
    from memoryquest.prefect_runtime import local_prefect_api
    from memoryquest.run_lock import RunLock

    settings = settings_from_args(
        args,
        persona_source=args.source,
        output_dir=str(args.output) if args.output else None,
        generation__queries_per_user=args.queries_per_user,
        cache__enabled=False if args.no_cache else None,
    )
    users = [u.strip() for u in args.users.split(",") if u.strip()] if args.users else None
    # A bad selection is a ValueError now, not inside the flow.
    PersonaSelection(user_ids=users, count=args.count)
    check_persona_source(settings.persona_source)
    output_dir = prepare_output_dir(Path(settings.output_dir))
    command = shlex.join(["memoryquest", *sys.argv[1:]])
    with RunLock.acquire(output_dir, command=command):
        check_endpoint(settings)
        from memoryquest.orchestration import run_generation

        with local_prefect_api():
            output = run_generation(
                settings,
                users=users,
                count=args.count,
                publish=not args.no_publish,
                config_file=args.config,
                allow_failed_audit=args.allow_failed_audit,
            )
    print(f"dataset: {Path(output) / 'dataset'}")
    if not args.no_publish:
        print(
            f"published: {Path(output) / 'published'} (dataset card: {Path(output) / 'published' / 'README.md'})"
        )
    return 0


__all__ = ["check_endpoint", "check_persona_source", "prepare_output_dir", "register"]
