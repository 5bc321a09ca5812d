"""A cached re-run against the first run (issue #14, item 6): ≤ 5% at 30 personas, ≤ 50 ms per cached task.

Runs the generation flow (the Prefect flow the command line runs, offline:
simulator + local embedder, default generation settings) into a fresh output
directory for ``--personas`` personas, then runs it again on the same
directory, where every stage task comes from Prefect's cache; then once more
for the first persona alone (its tasks are cached as well: same state, same
settings, same output directory). Prints:

* first run and re-run flow wall time, and their ratio;
* ms per cached task, as each task's own wall time in the re-run
  (``stage_seconds`` of ``run_report.json``, from the call to the task to its
  result in hand, the personas' tasks running concurrently): median, mean
  and max;
* the slope between the two re-runs, (re-run of N personas − re-run of 1) /
  (4 × (N − 1)): what each further persona costs per stage group, which also
  carries its share of saving the dataset, the audit and the summaries;
* the same figures extrapolated to 30 personas, each run linear in the
  personas: first(30) = first(N) × 30 / N, re-run(30) = re-run(1) + 29 × 4 ×
  per task (``--personas 30`` measures it instead; the first run then takes
  15-25 minutes on two cores).

A temporary Prefect API is started once (not timed).

    .venv/bin/python benchmarks/bench_cached_rerun.py                  # 4 personas
    .venv/bin/python benchmarks/bench_cached_rerun.py --personas 30
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

STAGE_GROUPS = 4
TARGET_PERSONAS = 30


async def flow_once(output: Path, users: list[str], overrides: dict[str, Any]) -> float:
    from memoryquest.orchestration.flow import generate_benchmark

    started = time.perf_counter()
    await generate_benchmark(output=str(output), users=users, overrides=overrides, publish=False)
    return time.perf_counter() - started


def run_report(output: Path) -> dict[str, Any]:
    import json

    report: dict[str, Any] = json.loads((output / "run_report.json").read_text(encoding="utf-8"))
    return report


def cached_task_seconds(report: dict[str, Any]) -> list[float]:
    """Wall seconds of every task the run served from Prefect's cache."""
    return [
        report["stage_seconds"][user][stage]
        for user, states in report["stage_states"].items()
        for stage, state in states.items()
        if state == "Cached"
    ]


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--personas", type=int, default=4)
    parser.add_argument(
        "--queries-per-user", type=int, default=None, help="default: the settings' own"
    )
    args = parser.parse_args()
    if args.personas < 2:
        parser.error("--personas must be at least 2 (the per-task figure is a slope)")
    overrides: dict[str, Any] = {}
    if args.queries_per_user is not None:
        overrides["generation"] = {"queries_per_user": args.queries_per_user}
    users = [f"user{i}" for i in range(args.personas)]

    with tempfile.TemporaryDirectory(prefix="bench-cached-rerun-") as temp:
        work = Path(temp)
        # Before Prefect is first imported: a throw-away Prefect home, quiet logs.
        os.environ.setdefault("PREFECT_HOME", str(work / "prefect-home"))
        os.environ.setdefault("PREFECT_LOGGING_LEVEL", "WARNING")
        from memoryquest.orchestration.prefect_defaults import local_prefect_api

        output = work / "run"
        with local_prefect_api():
            first = asyncio.run(flow_once(output, users, overrides))
            print(f"first run, {args.personas} personas: {first:.1f} s", flush=True)
            rerun = asyncio.run(flow_once(output, users, overrides))
            report = run_report(output)
            counts = dict(report["state_counts"])
            print(f"re-run, {args.personas} personas: {rerun:.2f} s  {counts}", flush=True)
            rerun_one = asyncio.run(flow_once(output, users[:1], overrides))
            counts_one = dict(run_report(output)["state_counts"])
            print(f"re-run, 1 persona: {rerun_one:.2f} s  {counts_one}", flush=True)

    tasks = STAGE_GROUPS * args.personas
    cached = counts.get("Cached", 0)
    if cached != tasks or counts_one.get("Cached", 0) != STAGE_GROUPS:
        print(f"warning: not every task came from the cache ({counts}, {counts_one})")
    per_task = (rerun - rerun_one) / (STAGE_GROUPS * (args.personas - 1))
    first_30 = first * TARGET_PERSONAS / args.personas
    rerun_30 = rerun_one + (TARGET_PERSONAS - 1) * STAGE_GROUPS * per_task
    print()
    print("| figure | value |")
    print("|---|---:|")
    print(f"| personas measured | {args.personas} |")
    print(f"| first run (flow wall) | {first:.1f} s |")
    print(f"| cached re-run (flow wall) | {rerun:.2f} s |")
    print(f"| re-run / first run | {100 * rerun / first:.1f}% |")
    print(f"| cached re-run, 1 persona | {rerun_one:.2f} s |")
    task_ms = sorted(1000 * seconds for seconds in cached_task_seconds(report))
    if task_ms:
        print(
            f"| ms per cached task (its own wall time, {len(task_ms)} tasks, every persona's at once on one event loop) | median "
            f"{statistics.median(task_ms):.0f} ms, mean {statistics.fmean(task_ms):.0f} ms, "
            f"max {task_ms[-1]:.0f} ms (goal ≤ 50) |"
        )
    print(f"| ms per stage group and further persona (slope) | {1000 * per_task:.0f} ms |")
    print(
        f"| ms per cached task (re-run / tasks, fixed costs included) | {1000 * rerun / tasks:.0f} ms |"
    )
    if args.personas != TARGET_PERSONAS:
        print(f"| first run at 30 personas (extrapolated) | {first_30:.0f} s |")
        print(f"| cached re-run at 30 personas (extrapolated) | {rerun_30:.1f} s |")
        print(
            f"| re-run / first run at 30 (extrapolated) | {100 * rerun_30 / first_30:.1f}% (goal ≤ 5%) |"
        )


if __name__ == "__main__":
    main()
