"""``memoryquest generate``: run the generation flow and say where the dataset went."""

from __future__ import annotations

import argparse
import os
from pathlib import Path
from typing import Any

from memoryquest.cli.main import settings_from_args


def register(subparsers: Any, common: argparse.ArgumentParser) -> None:
    parser = subparsers.add_parser(
        "generate",
        parents=[common],
        help="generate a MemoryQuest dataset (Prefect flow; offline simulator by default)",
        description="Pull personas, generate queries, timelines, dialogues and memory, check every "
        "query with PGR and publish Parquet splits. Without an endpoint configured, runs the "
        "offline simulator with the local embedding model.",
    )
    parser.add_argument("--source", help="persona source: PersonaLens data dir, http(s) base URL, or custom JSON file")
    parser.add_argument("--users", help="comma-separated user ids, e.g. user0,user3")
    parser.add_argument("--count", type=int, help="the first N users")
    parser.add_argument("--output", type=Path, help="output directory (default: settings.output_dir)")
    parser.add_argument("--queries-per-user", type=int, help="n_q (default 15)")
    parser.add_argument("--no-cache", action="store_true", help="do not read or write the request cache")
    parser.add_argument("--no-publish", action="store_true", help="stop after writing the working dataset")
    parser.set_defaults(func=_generate)


def _generate(args: argparse.Namespace) -> int:
    # Without PREFECT_API_URL, Prefect starts a temporary local API; on a busy laptop it can
    # take longer than Prefect's 20 s default to come up.
    os.environ.setdefault("PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS", "180")
    from memoryquest.orchestration import run_generation

    settings = settings_from_args(
        args,
        persona_source=args.source,
        output_dir=str(args.output) if args.output else None,
        generation__queries_per_user=args.queries_per_user,
        cache__enabled=False if args.no_cache else None,
    )
    users = [u.strip() for u in args.users.split(",") if u.strip()] if args.users else None
    output = run_generation(settings, users=users, count=args.count, publish=not args.no_publish, config_file=args.config)
    print(f"dataset: {Path(output) / 'dataset'}")
    if not args.no_publish:
        print(f"published: {Path(output) / 'published'} (dataset card: {Path(output) / 'published' / 'README.md'})")
    return 0
