"""Runs of the careless model: one offline generation per fault, scored, the table it
prints, and the command line ``python -m memoryquest.testing.careless``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import tempfile
from collections.abc import Sequence
from dataclasses import asdict
from pathlib import Path

from memoryquest.dataset import GeneratedDataset
from memoryquest.llm.simulated import SimulatedChatBackend
from memoryquest.testing.careless.backend import CarelessChatBackend
from memoryquest.testing.careless.faults import Corpus, Fault
from memoryquest.testing.careless.scoring import CATCH_TARGET, Catch, score


async def generate_offline(
    backend: SimulatedChatBackend, users: Sequence[str], output: Path, seed: int = 0
) -> GeneratedDataset:
    """The whole pipeline for ``users``, offline, with ``backend`` as the model."""
    from memoryquest.intake import PersonaSelection, load_personas
    from memoryquest.llm.client import ModelClient
    from memoryquest.llm.factory import shared_local_embedder
    from memoryquest.pipeline import generate_dataset
    from memoryquest.settings import load_settings

    settings = load_settings(
        overrides={
            "output_dir": str(output),
            "seed": seed,
            "endpoint": {"backend": "simulated"},
            "pgr": {"methods": []},
        }
    )
    personas = load_personas(settings.persona_source, PersonaSelection(user_ids=list(users)))
    client = ModelClient(backend, shared_local_embedder())
    try:
        return await generate_dataset(personas.personas, client, settings)
    finally:
        await client.aclose()


async def catch(
    fault: Fault,
    users: Sequence[str],
    output: Path,
    seed: int = 0,
    corpus: Corpus | None = None,
    rate: float = 1.0,
) -> Catch:
    """Generate ``users`` with ``fault`` planted in ``rate`` of the answers it applies to
    (every one by default), and score."""
    backend = CarelessChatBackend(fault, corpus=corpus, seed=seed, rate=rate)
    dataset = await generate_offline(backend, users, output, seed)
    score(backend.injections, dataset)
    return Catch(fault, tuple(backend.injections), dataset)


def table(catches: Sequence[Catch]) -> str:
    """The markdown table: fault, caught n of n, and the gates that caught them."""
    lines = ["| fault | caught | by |", "|---|---|---|"]
    for c in catches:
        by = ", ".join(f"{gate} {n}" for gate, n in sorted(c.by_gate().items())) or "none"
        lines.append(f"| {c.fault.value} | {c.caught} of {c.injected} ({c.share:.0%}) | {by} |")
    return "\n".join(lines)


def _record(catches: Sequence[Catch], path: Path) -> None:
    with path.open("w", encoding="utf-8") as out:
        for c in catches:
            for injection in c.injections:
                out.write(json.dumps(asdict(injection), ensure_ascii=False) + "\n")


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m memoryquest.testing.careless",
        description="Plant each fault in the simulator's answers and count what the gates keep out.",
    )
    parser.add_argument("--users", default="user0", help="comma-separated PersonaLens user ids")
    parser.add_argument(
        "--faults", default=",".join(Fault), help="comma-separated faults (default: all)"
    )
    parser.add_argument(
        "--record", type=Path, help="write every planted item and its fate here (JSON lines)"
    )
    parser.add_argument(
        "--rate",
        type=float,
        default=1.0,
        help="part of the answers each fault applies to that get it (default 1: every one); "
        "below 1 some queries survive, and --keep lets `memoryquest audit` read what they left",
    )
    parser.add_argument(
        "--keep",
        type=Path,
        help="save each fault's dataset as DIR/<fault> (for `memoryquest audit`)",
    )
    args = parser.parse_args(argv)
    if not 0 < args.rate <= 1:
        parser.error(f"--rate must be in (0, 1], got {args.rate}")
    users = [u for u in args.users.split(",") if u]
    try:
        faults = [Fault(f) for f in args.faults.split(",") if f]
    except ValueError as exc:
        parser.error(f"{exc}; known: {', '.join(Fault)}")
    catches = []
    with tempfile.TemporaryDirectory() as scratch:
        for fault in faults:
            found = asyncio.run(catch(fault, users, Path(scratch) / fault.value, rate=args.rate))
            if args.keep:
                found.dataset.save(args.keep / fault.value)
            catches.append(found)
    print(table(catches))
    for c in catches:
        missed = c.missed_wordings()
        if missed:
            worst = ", ".join(f"{w} ({n})" for w, n in missed.most_common())
            print(f"\n{c.fault.value}: wordings that got through: {worst}")
    if args.record:
        _record(catches, args.record)
    return 0 if all(c.injected and c.share >= CATCH_TARGET for c in catches) else 1
