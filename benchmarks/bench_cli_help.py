"""Wall time of ``memoryquest --help`` (goal: at most 0.5 s), and what it imports.

The command line imports a subcommand's module only when that subcommand
runs (``memoryquest.cli.main.COMMANDS``), so ``--help`` should cost little
more than the interpreter's own start. Runs the installed console script
``--runs`` times and prints the fastest and the median wall time, beside a
bare ``python -c pass`` for scale, then the slowest imports of one run
(``python -X importtime``).

    .venv/bin/python benchmarks/bench_cli_help.py
    .venv/bin/python benchmarks/bench_cli_help.py --runs 20 --command "memoryquest pgr run --help"
"""

from __future__ import annotations

import argparse
import shlex
import statistics
import subprocess
import sys
import time
from pathlib import Path

GOAL_SECONDS = 0.5


def wall_times(argv: list[str], runs: int) -> list[float]:
    times = []
    for _ in range(runs):
        started = time.perf_counter()
        subprocess.run(argv, check=True, stdout=subprocess.DEVNULL)
        times.append(time.perf_counter() - started)
    return times


def slowest_imports(module: str, argv: list[str], top: int) -> list[tuple[int, str]]:
    """(cumulative microseconds, module) of the slowest imports when running ``module`` with ``argv``."""
    done = subprocess.run(
        [sys.executable, "-X", "importtime", "-m", module, *argv],
        capture_output=True,
        text=True,
        check=True,
    )
    rows = []
    for line in done.stderr.splitlines():
        if not line.startswith("import time:") or "cumulative" in line:
            continue
        _, cumulative, name = (
            part.strip() for part in line.removeprefix("import time:").split("|")
        )
        rows.append((int(cumulative), name))
    return sorted(rows, reverse=True)[:top]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=10, help="timed runs (default 10)")
    parser.add_argument("--command", default="memoryquest --help", help="the command to time")
    parser.add_argument("--top", type=int, default=8, help="slowest imports to list (default 8)")
    args = parser.parse_args()
    argv = shlex.split(args.command)
    argv[0] = str(Path(sys.executable).with_name(argv[0]))  # the venv's console script
    wall_times(argv, 1)  # warm the file cache
    bare = wall_times([sys.executable, "-c", "pass"], args.runs)
    measured = wall_times(argv, args.runs)
    fastest, median = min(measured), statistics.median(measured)
    print(
        f"{args.command}: fastest {fastest:.3f} s, median {median:.3f} s over {args.runs} runs "
        f"(python -c pass: median {statistics.median(bare):.3f} s); goal <= {GOAL_SECONDS} s: "
        f"{'met' if median <= GOAL_SECONDS else 'MISSED'}"
    )
    print("slowest imports (cumulative):")
    for micros, name in slowest_imports("memoryquest.cli.main", argv[1:], args.top):
        print(f"  {micros / 1000:8.1f} ms  {name}")


if __name__ == "__main__":
    main()
