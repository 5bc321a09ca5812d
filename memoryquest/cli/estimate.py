"""``memoryquest estimate``: calls, tokens and cost of a planned run, computed offline.

The dry run takes tens of seconds per sample persona, so it shows its
progress like a real run (:mod:`memoryquest.progress`), on stderr: stdout
is the estimate alone, which ``--json`` callers parse.
"""

from __future__ import annotations

import argparse
import asyncio
from typing import TYPE_CHECKING

from memoryquest.cli.generate import add_progress_options, check_progress_options
from memoryquest.cli.main import add_common_options, settings_from_args

if TYPE_CHECKING:
    from memoryquest.estimate import RunEstimate


def configure(parser: argparse.ArgumentParser) -> None:
    parser.description = (
        "Replays the pipeline offline on a few bundled sample personas (real templates, "
        "the target model's tokenizer, no request sent) and scales to the planned number of personas."
    )
    add_common_options(parser)
    parser.add_argument(
        "--personas", type=int, required=True, help="number of personas the run will cover"
    )
    parser.add_argument(
        "--sample", type=int, default=2, help="sample personas to dry-run (default 2)"
    )
    parser.add_argument("--model", help="chat model to price (default: endpoint.chat_model)")
    parser.add_argument(
        "--batch",
        action="store_true",
        help="price the stages of endpoint.batch_stages (by default every stage) at the Batch API "
        "discount, the others online",
    )
    parser.add_argument("--json", action="store_true", help="print the estimate as JSON")
    add_progress_options(parser)
    parser.set_defaults(func=_estimate)


def _estimate(args: argparse.Namespace) -> int:
    import sys

    from memoryquest.estimate import default_sample_dir, estimate_run
    from memoryquest.estimate.table import estimate_table
    from memoryquest.intake import PersonaSelection, load_personas
    from memoryquest.pipeline import enabled_groups
    from memoryquest.progress import ProgressMode, RunFigures, showing

    settings = settings_from_args(
        args, endpoint__chat_model=args.model, endpoint__batch=True if args.batch else None
    )
    if args.sample < 1:
        raise ValueError("--sample must be at least 1")
    check_progress_options(args)
    intake = load_personas(default_sample_dir(), PersonaSelection(count=args.sample))
    if intake.errors:
        raise ValueError(f"sample personas failed to load: {intake.errors[0]}")
    figures = RunFigures([s.name for s in enabled_groups(settings)], len(intake.personas))

    async def dry_run() -> RunEstimate:
        async with showing(
            figures,
            ProgressMode(args.progress),
            title=f"estimate: dry run of {len(intake.personas)} sample persona(s)",
            every_seconds=args.progress_seconds,
            stream=sys.stderr,
        ):
            return await estimate_run(settings, intake.personas, args.personas, figures)

    estimate = asyncio.run(dry_run())
    print(estimate.model_dump_json(indent=2) if args.json else estimate_table(estimate))
    if not args.json:
        print(
            f"follow a run's spending against it: memoryquest generate "
            f"--cost-estimate {estimate.total_cost_usd:.2f} ..."
        )
    return 0
