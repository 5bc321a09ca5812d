"""``memoryquest estimate``: calls, tokens and cost of a planned run, computed offline."""

from __future__ import annotations

import argparse
import asyncio

from memoryquest.cli.main import add_common_options, settings_from_args


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
        "--batch", action="store_true", help="price LLM calls at the Batch API discount"
    )
    parser.add_argument("--json", action="store_true", help="print the estimate as JSON")
    parser.set_defaults(func=_estimate)


def _estimate(args: argparse.Namespace) -> int:
    from memoryquest.estimate import default_sample_dir, estimate_run, estimate_table
    from memoryquest.intake import PersonaSelection, load_personas

    settings = settings_from_args(
        args, endpoint__chat_model=args.model, endpoint__batch=True if args.batch else None
    )
    if args.sample < 1:
        raise ValueError("--sample must be at least 1")
    intake = load_personas(default_sample_dir(), PersonaSelection(count=args.sample))
    if intake.errors:
        raise ValueError(f"sample personas failed to load: {intake.errors[0]}")
    estimate = asyncio.run(estimate_run(settings, intake.personas, args.personas))
    print(estimate.model_dump_json(indent=2) if args.json else estimate_table(estimate))
    return 0
