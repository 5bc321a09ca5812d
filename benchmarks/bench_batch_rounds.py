"""Batch rounds against the number of personas (issue #14, item 5): they must not grow with it.

Runs the generation flow (the Prefect flow the command line runs, or with
``--in-process`` the plain pipeline) in Batch API mode against the bundled
fake server (``memoryquest.testing.FakeOpenAIServer``; with
``endpoint.simulator_hints`` it answers every line from the offline
simulator), once per persona count, with an empty cache each time, and
counts what reached the server:

* batches: ``POST /v1/batches`` (one batch = one round here: no set comes
  near the per-batch limits, so none is split);
* lines: the requests that travelled in batches;
* online: chat requests sent online (those of stages left out of
  ``endpoint.batch_stages``; by default none).

Goal: the batch count for 10 personas equals the count for 1, ±1. The
collector's idle window is ``--collect-seconds`` (the default setting is
2 s; a real batch round takes minutes to hours).

    .venv/bin/python benchmarks/bench_batch_rounds.py                 # 1 and 10 personas, the flow
    .venv/bin/python benchmarks/bench_batch_rounds.py --personas 1,3 --in-process
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

REPO_ROOT = Path(__file__).resolve().parent.parent
SMALL = {
    "generation": {"queries_per_user": 2, "candidates_per_user": 8},
    "pgr": {"methods": ["query_only", "pgr_tot"], "judges": ["provenance"]},
}


@dataclass
class Row:
    personas: int
    batches: int
    lines: int
    online: int
    seconds: float


def overrides(url: str, collect_seconds: float) -> dict[str, Any]:
    return {
        **SMALL,
        "cache": {"enabled": False},
        "endpoint": {
            "base_url": url,
            "api_key": "bench",
            "simulator_hints": True,  # the fake server answers from the simulator
            "embedder": "local",
            "chat_model": "gpt-4o-mini",
            "batch": True,
            "batch_poll_seconds": 0.01,
            "batch_max_poll_seconds": 0.05,
            "batch_collect_seconds": collect_seconds,
        },
        "limits": {"requests_per_minute": 60_000, "tokens_per_minute": 50_000_000},
    }


async def run_once(
    users: list[str], output: Path, settings_overrides: dict[str, Any], in_process: bool
) -> None:
    if in_process:
        from memoryquest.intake import PersonaSelection, load_personas
        from memoryquest.llm.factory import build_client
        from memoryquest.pipeline import generate_dataset
        from memoryquest.settings import load_settings

        settings = load_settings(overrides={**settings_overrides, "output_dir": str(output)})
        personas = load_personas(
            REPO_ROOT / "personas" / "personalens", PersonaSelection(user_ids=users)
        ).personas
        client = build_client(settings)
        try:
            await generate_dataset(personas, client, settings)
        finally:
            await client.aclose()
        return
    from memoryquest.orchestration.flow import generate_benchmark

    await generate_benchmark(
        output=str(output),
        users=users,
        overrides=settings_overrides,
        publish=False,
    )


def measure(count: int, server: Any, work: Path, args: argparse.Namespace) -> Row:
    server.reset()
    output = work / f"run-{count}"
    shutil.rmtree(output, ignore_errors=True)
    started = time.perf_counter()
    asyncio.run(
        run_once(
            [f"user{i}" for i in range(count)],
            output,
            overrides(server.url, args.collect_seconds),
            args.in_process,
        )
    )
    seconds = time.perf_counter() - started
    created = [r for r in server.requests if r.method == "POST" and r.path == "/v1/batches"]
    lines = sum(len(server.file_lines(r.body["input_file_id"])) for r in created)
    online = [r for r in server.requests if r.path == "/v1/chat/completions"]
    return Row(count, len(created), lines, len(online), seconds)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--personas", default="1,10", help="comma-separated persona counts")
    parser.add_argument("--collect-seconds", type=float, default=0.5)
    parser.add_argument(
        "--in-process", action="store_true", help="the plain pipeline instead of the Prefect flow"
    )
    args = parser.parse_args()
    counts = [int(c) for c in args.personas.split(",")]

    rows: list[Row] = []
    with tempfile.TemporaryDirectory(prefix="bench-batch-rounds-") as temp:
        work = Path(temp)
        # Before Prefect is first imported: a throw-away Prefect home, quiet logs.
        os.environ.setdefault("PREFECT_HOME", str(work / "prefect-home"))
        os.environ.setdefault("PREFECT_LOGGING_LEVEL", "WARNING")
        from memoryquest.orchestration.prefect_defaults import local_prefect_api
        from memoryquest.testing import FakeOpenAIServer

        with FakeOpenAIServer() as server, local_prefect_api():
            for count in counts:
                rows.append(measure(count, server, work, args))
                row = rows[-1]
                print(
                    f"{row.personas:>3} personas: {row.batches:>3} batches, {row.lines:>5} batch lines, "
                    f"{row.online:>5} online chat requests, {row.seconds:6.1f} s",
                    flush=True,
                )
    runner = "in-process pipeline" if args.in_process else "Prefect flow"
    print(f"\n{runner}, collector idle window {args.collect_seconds:g} s")
    print("| personas | batches (rounds) | batch lines | online chat requests | wall s |")
    print("|---:|---:|---:|---:|---:|")
    for row in rows:
        print(
            f"| {row.personas} | {row.batches} | {row.lines} | {row.online} | {row.seconds:.1f} |"
        )
    spread = max(r.batches for r in rows) - min(r.batches for r in rows)
    print(f"\nrounds spread across persona counts: {spread} (goal: at most 1)")


if __name__ == "__main__":
    main()
