"""`make demo`'s generation timed as a user runs it, with each stage's share (goal: 60 s).

Runs ``memoryquest generate --count 3 --no-cache`` (3 personas, offline:
simulator + local embedder, every gate, the audit and publishing) as a child
process, ``--runs`` times, each into a fresh output directory with a fresh
``PREFECT_HOME``, so no run profits from the one before it. Prints each run's
wall time, the median against the goal, and each stage's share of the
personas' summed task seconds (``stage_seconds`` of ``run_report.json``; the
personas' tasks overlap, so the shares say where the work goes, not a
timeline). What is not in a per-persona stage (process start, the embedder's
load, the audit and publishing) is the wall time less the longest persona's
summed task seconds, printed as ``outside the stages``.

    .venv/bin/python benchmarks/bench_demo.py             # 2 runs
    .venv/bin/python benchmarks/bench_demo.py --runs 3 --personas 3
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

GOAL_SECONDS = 60.0


def one_run(personas: int, root: Path) -> tuple[float, dict[str, dict[str, float]]]:
    """Wall seconds of one cold generation, and its per-persona stage seconds."""
    output = root / "out"
    env = {**os.environ, "PREFECT_HOME": str(root / "prefect")}
    command = [sys.executable, "-m", "memoryquest.cli.main", "generate"]
    command += ["--count", str(personas), "--no-cache", "--progress", "off"]
    command += ["--output", str(output)]
    started = time.perf_counter()
    done = subprocess.run(command, env=env, capture_output=True, text=True, check=False)
    wall = time.perf_counter() - started
    if done.returncode != 0:
        sys.exit(f"generate failed ({done.returncode}):\n{done.stderr[-3000:]}")
    report = json.loads((output / "run_report.json").read_text())
    return wall, report["stage_seconds"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--personas", type=int, default=3)
    parser.add_argument("--runs", type=int, default=2)
    args = parser.parse_args()
    walls: list[float] = []
    stage_totals: Counter[str] = Counter()
    outside: list[float] = []
    for run in range(args.runs):
        with tempfile.TemporaryDirectory(prefix="bench-demo-") as tmp:
            wall, stage_seconds = one_run(args.personas, Path(tmp))
        walls.append(wall)
        longest = max((sum(s.values()) for s in stage_seconds.values()), default=0.0)
        outside.append(wall - longest)
        for per_persona in stage_seconds.values():
            stage_totals.update(per_persona)
        print(f"run {run + 1}: {wall:.1f} s wall, {wall - longest:.1f} s outside the stages")
    median = statistics.median(walls)
    print(
        f"median wall {median:.1f} s for {args.personas} personas "
        f"(goal {GOAL_SECONDS:.0f} s: {median / GOAL_SECONDS:.2f} of it)"
    )
    total = sum(stage_totals.values()) or 1.0
    print("stage shares of the personas' summed task seconds, over all runs:")
    for stage, seconds in stage_totals.most_common():
        print(f"  {stage:<16} {seconds / args.runs:7.1f} s per run  {seconds / total:6.1%}")
    print(f"  outside the stages, median: {statistics.median(outside):.1f} s")


if __name__ == "__main__":
    main()
