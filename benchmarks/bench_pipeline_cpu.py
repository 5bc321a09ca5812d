"""The whole pipeline's CPU per request, and whether it keeps a top-tier quota busy.

Runs ``memoryquest generate`` (the command line: its temporary Prefect
server, the flow, every stage, on the real OpenAI path with remote
embeddings and the request cache off) as a child process against a loopback
OpenAI-compatible server in this process whose answers cost it a dictionary
look-up: they are replayed from a recording
(``memoryquest.testing.ReplayOpenAIServer``), keyed by each request's bytes.

1. Recording (once per code version): the same command against the bundled
   fake server with simulator hints on, which answers from the simulator and
   records every answer. The recording is kept in ``--recordings`` under a
   fingerprint of the package, the prompts, the persona sample and the
   settings, and re-made when any of them changes. It is made for the largest
   persona count; a smaller run's requests are a subset of it.
2. Measured runs, one per count in ``--personas``: no hints, the replay server
   answering after ``--latency`` seconds and enforcing ``--rpm`` requests/min,
   the client set to the same limit (``limits.requests_per_minute``), with
   ``--concurrency`` as ``limits.max_concurrency`` and a token limit that does not bind.

For each run it prints:

* CPU ms per request, steady state: the CPU of the pipeline process and of
  its children (the temporary Prefect server) between the arrival of the 10%
  and the 90% request, sampled from /proc, divided by the requests in between;
* CPU ms per request, all-in: the command's whole CPU (start-up, imports,
  Prefect's server, saving the dataset; its children included), divided by every request;
* requests/min achieved between the 10% and 90% request, and its ratio to ``--rpm``
  (goal at 30 personas: >= 0.9);
* requests in flight at the server, time-weighted percentiles in that window,
  and a text histogram over the whole run (each row a tenth of it);
* the replay server's own CPU per request (it must be well under 1 ms).

It also profiles with ``--py-spy DIR`` (``py-spy record`` of the command and its
children, raw collapsed stacks; top entries printed): profiling slows the run,
so its figures are printed but are not the measurement.

    .venv/bin/python benchmarks/bench_pipeline_cpu.py                    # 1 and 30 personas
    .venv/bin/python benchmarks/bench_pipeline_cpu.py --personas 1 --py-spy /tmp/spy
    .venv/bin/python benchmarks/bench_pipeline_cpu.py --json results.json

The machine's other work shows in wall time, not in CPU time; the load
average at the start and the end is printed.
"""

from __future__ import annotations

import argparse
import bisect
import collections
import hashlib
import json
import os
import pickle
import re
import resource
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
CLOCK_TICKS = os.sysconf("SC_CLK_TCK")
RECORDING_VERSION = 1


# --------------------------------------------------------------------------- the command


def users(count: int) -> list[str]:
    return [f"user{i}" for i in range(count)]


def settings_assignments(base_url: str, args: argparse.Namespace, *, hints: bool) -> list[str]:
    """``--set`` arguments of the command: the OpenAI path, remote embeddings, the benchmark's limits."""
    values = {
        "endpoint.backend": "openai",
        "endpoint.server": "openai",
        "endpoint.base_url": base_url,
        "endpoint.chat_model": args.model,
        "endpoint.simulator_hints": "true" if hints else "false",
        "limits.requests_per_minute": str(args.rpm),
        "limits.tokens_per_minute": str(args.tpm),
        "limits.max_concurrency": str(args.concurrency),
    }
    return [part for name, value in values.items() for part in ("--set", f"{name}={value}")]


def command(
    count: int, output: Path, base_url: str, args: argparse.Namespace, *, hints: bool
) -> list[str]:
    return [
        sys.executable,
        "-m",
        "memoryquest.cli.main",
        "generate",
        "--users",
        ",".join(users(count)),
        "--output",
        str(output),
        "--no-cache",
        "--no-publish",
        "--progress",
        "off",
        *settings_assignments(base_url, args, hints=hints),
    ]


def environment(work: Path, name: str) -> dict[str, str]:
    """A fresh Prefect home per run (the command starts its own temporary server in it)."""
    home = work / f"prefect-{name}"
    shutil.rmtree(home, ignore_errors=True)
    home.mkdir(parents=True)
    env = {k: v for k, v in os.environ.items() if not k.startswith("PREFECT_API_")}
    env.pop("PREFECT_API_URL", None)
    env.update(
        {
            "PREFECT_HOME": str(home),
            "PREFECT_API_DATABASE_CONNECTION_URL": f"sqlite+aiosqlite:///{home / 'prefect.db'}",
            "PREFECT_LOGGING_LEVEL": "WARNING",
            "OPENAI_API_KEY": "sk-bench",
        }
    )
    env.pop("OPENAI_BASE_URL", None)
    return env


# --------------------------------------------------------------------------- CPU from /proc


def _proc_cpu(pid: int) -> float:
    """User + system seconds of one live process (0 when it is gone)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as handle:
            fields = handle.read().rsplit(b")", 1)[1].split()
    except (FileNotFoundError, ProcessLookupError, IndexError):
        return 0.0
    return (int(fields[11]) + int(fields[12])) / CLOCK_TICKS


def _peak_rss_mb(pid: int) -> float:
    """The largest resident set one live process has had (VmHWM), in MB (0 when it is gone)."""
    try:
        with open(f"/proc/{pid}/status") as handle:
            for line in handle:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) / 1024.0
    except (FileNotFoundError, ProcessLookupError):
        pass
    return 0.0


def _children(pid: int) -> list[int]:
    found: list[int] = []
    try:
        tasks = os.listdir(f"/proc/{pid}/task")
    except FileNotFoundError:
        return found
    for tid in tasks:
        try:
            with open(f"/proc/{pid}/task/{tid}/children") as handle:
                found.extend(int(p) for p in handle.read().split())
        except (FileNotFoundError, ProcessLookupError):
            continue
    return found


def _descendants(pid: int) -> list[int]:
    seen: list[int] = []
    todo = _children(pid)
    while todo:
        child = todo.pop()
        seen.append(child)
        todo.extend(_children(child))
    return seen


@dataclass
class CpuSamples:
    """(monotonic time, the process's CPU s, its live descendants' CPU s), every ``every`` seconds."""

    times: list[float] = field(default_factory=list)
    main: list[float] = field(default_factory=list)
    children: list[float] = field(default_factory=list)
    sampler_cpu: float = 0.0  # this sampler's own CPU seconds (not the server's)
    peak_rss_mb: float = 0.0  # the largest resident set of the process or a child

    def at(self, when: float) -> tuple[float, float]:
        """CPU seconds of the process and of its children at ``when``, interpolated."""
        if not self.times:
            return 0.0, 0.0
        index = bisect.bisect_left(self.times, when)
        if index <= 0:
            return self.main[0], self.children[0]
        if index >= len(self.times):
            return self.main[-1], self.children[-1]
        t0, t1 = self.times[index - 1], self.times[index]
        share = (when - t0) / (t1 - t0) if t1 > t0 else 0.0
        return (
            self.main[index - 1] + share * (self.main[index] - self.main[index - 1]),
            self.children[index - 1] + share * (self.children[index] - self.children[index - 1]),
        )


def sample_cpu(pid: int, samples: CpuSamples, stop: threading.Event, every: float) -> None:
    # A child's CPU is counted while it lives; the Prefect server lives as long as the run.
    last_children: dict[int, float] = {}
    while not stop.is_set():
        own = time.thread_time()
        now = time.monotonic()
        main = _proc_cpu(pid)
        samples.peak_rss_mb = max(samples.peak_rss_mb, _peak_rss_mb(pid))
        for child in _descendants(pid):
            last_children[child] = max(last_children.get(child, 0.0), _proc_cpu(child))
            samples.peak_rss_mb = max(samples.peak_rss_mb, _peak_rss_mb(child))
        samples.times.append(now)
        samples.main.append(main)
        samples.children.append(sum(last_children.values()))
        samples.sampler_cpu += time.thread_time() - own
        stop.wait(every)


# --------------------------------------------------------------------------- recording


# Code that sends requests without deciding what they say: a change here keeps the recording.
TRANSPORT = (
    "memoryquest/llm/",
    "memoryquest/progress/",
    "memoryquest/testing/",
    "memoryquest/cli/",
)
# Rendering, schemas and the request body's bytes do.
SAYS = {
    "memoryquest/llm/prompts.py",
    "memoryquest/llm/schema.py",
    "memoryquest/llm/openai_backend.py",
}


def fingerprint(args: argparse.Namespace, count: int) -> str:
    """What the recorded requests depend on: the stages' code, the prompts, the persona sample, the
    settings (a request the recording lacks is counted and reported; ``--re-record`` re-makes it)."""
    digest = hashlib.blake2b(digest_size=12)
    for folder in ("memoryquest", "prompts", "schemas", "personas/personalens"):
        for path in sorted((REPO / folder).rglob("*")):
            name = str(path.relative_to(REPO))
            transport = name.startswith(TRANSPORT) and name not in SAYS
            estimate = name.startswith("memoryquest/estimate/")
            if transport or estimate or name.endswith("prefect_defaults.py"):
                continue
            if path.is_file() and path.suffix in (".py", ".md", ".json", ".toml", ".jsonl"):
                digest.update(str(path.relative_to(REPO)).encode())
                digest.update(path.read_bytes())
    import openai

    digest.update(json.dumps([RECORDING_VERSION, count, args.model, openai.__version__]).encode())
    for name in ("config.toml", "memoryquest.toml"):
        if (REPO / name).is_file():
            digest.update((REPO / name).read_bytes())
    return digest.hexdigest()


def record(args: argparse.Namespace, work: Path, count: int) -> tuple[dict[str, bytes], str]:
    """The answers to every request of a run of ``count`` personas, recorded or loaded."""
    from memoryquest.testing import FakeOpenAIServer

    key = fingerprint(args, count)
    path = args.recordings / f"pipeline-{count}-{key}.pickle"
    if path.is_file() and not args.re_record:
        with open(path, "rb") as handle:
            recording: dict[str, bytes] = pickle.load(handle)
        return recording, f"loaded from {path}"
    args.recordings.mkdir(parents=True, exist_ok=True)
    started = time.perf_counter()
    with FakeOpenAIServer(record=True) as server:
        output = work / f"record-{count}"
        shutil.rmtree(output, ignore_errors=True)
        run = subprocess.run(
            command(count, output, server.url, args, hints=True),
            env=environment(work, f"record-{count}"),
            cwd=work,
            capture_output=True,
            text=True,
        )
        if run.returncode != 0:
            raise SystemExit(
                f"the recording run failed ({run.returncode}):\n{run.stdout[-2000:]}\n{run.stderr[-4000:]}"
            )
        recording = dict(server.recording or {})
    for stale in args.recordings.glob(f"pipeline-{count}-*.pickle"):
        stale.unlink()
    with open(path, "wb") as handle:
        pickle.dump(recording, handle, protocol=pickle.HIGHEST_PROTOCOL)
    took = time.perf_counter() - started
    return recording, f"recorded in {took:.0f} s into {path}"


# --------------------------------------------------------------------------- a measured run


@dataclass
class Result:
    personas: int
    requests: int
    chat: int
    embeddings: int
    rejected_429: int
    misses: int
    wall_s: float
    all_in_cpu_s: float
    window_requests: int
    window_s: float
    window_cpu_main_s: float
    window_cpu_children_s: float
    server_cpu_s: float
    in_flight_percentiles: dict[str, float]
    max_in_flight: int
    histogram: list[tuple[float, float, float]]  # per tenth: in flight, requests/min, CPU s/s
    rpm_limit: int
    summary: str
    max_rss_mb: float = 0.0  # the largest resident set of the command or a child
    profiled: bool = False  # run under py-spy: slower, and all-in misses what py-spy's child used
    profile: list[str] = field(default_factory=list)

    @property
    def steady_ms(self) -> float:
        return (
            1000.0
            * (self.window_cpu_main_s + self.window_cpu_children_s)
            / max(self.window_requests, 1)
        )

    @property
    def steady_main_ms(self) -> float:
        return 1000.0 * self.window_cpu_main_s / max(self.window_requests, 1)

    @property
    def all_in_ms(self) -> float:
        return 1000.0 * self.all_in_cpu_s / max(self.requests, 1)

    @property
    def rpm(self) -> float:
        return 60.0 * self.window_requests / self.window_s if self.window_s > 0 else 0.0


def in_flight_curve(log: list[Any]) -> tuple[list[float], list[int]]:
    """Step function of requests in flight at the server: change times and the count after each."""
    events: list[tuple[float, int]] = []
    for entry in log:
        events.append((entry.arrived, 1))
        events.append((entry.answered or entry.arrived, -1))
    events.sort()
    times, counts, level = [], [], 0
    for when, step in events:
        level += step
        times.append(when)
        counts.append(level)
    return times, counts


def weighted_percentiles(
    times: list[float], counts: list[int], start: float, end: float, points: tuple[int, ...]
) -> dict[str, float]:
    """Time-weighted percentiles of the in-flight count between ``start`` and ``end``."""
    weights: dict[int, float] = collections.defaultdict(float)
    level = 0
    previous = start
    for when, count in zip(times, counts, strict=True):
        if when > start:
            weights[level] += min(when, end) - max(previous, start)
            previous = when
        level = count
        if when >= end:
            break
    if previous < end:
        weights[level] += end - previous
    total = sum(weights.values())
    result: dict[str, float] = {}
    for point in points:
        goal, running = total * point / 100.0, 0.0
        for value in sorted(weights):
            running += weights[value]
            if running >= goal:
                result[f"p{point}"] = float(value)
                break
    result["mean"] = sum(v * w for v, w in weights.items()) / total if total else 0.0
    return result


def histogram(
    log: list[Any], times: list[float], counts: list[int], samples: CpuSamples
) -> list[tuple[float, float, float]]:
    """Per tenth of the run: mean requests in flight, requests/min, and the pipeline process's
    CPU seconds per second (1.0: one core busy)."""
    first = min(e.arrived for e in log)
    last = max(e.answered or e.arrived for e in log)
    span = (last - first) / 10.0
    arrivals = sorted(e.arrived for e in log)
    rows = []
    for tenth in range(10):
        start, end = first + tenth * span, first + (tenth + 1) * span
        mean = weighted_percentiles(times, counts, start, end, ())["mean"]
        arrived = bisect.bisect_left(arrivals, end) - bisect.bisect_left(arrivals, start)
        busy = (samples.at(end)[0] - samples.at(start)[0]) / span if span > 0 else 0.0
        rows.append((mean, 60.0 * arrived / span if span > 0 else 0.0, busy))
    return rows


def measure(
    args: argparse.Namespace, work: Path, count: int, recording: dict[str, bytes]
) -> Result:
    from memoryquest.testing import ReplayOpenAIServer

    output = work / f"run-{count}"
    shutil.rmtree(output, ignore_errors=True)
    samples = CpuSamples()
    stop = threading.Event()
    with ReplayOpenAIServer(
        recording, latency=args.latency, requests_per_minute=args.rpm
    ) as server:
        argv = command(count, output, server.url, args, hints=False)
        spy_out = None
        if args.py_spy is not None:
            args.py_spy.mkdir(parents=True, exist_ok=True)
            spy_out = args.py_spy / f"personas-{count}.txt"
            argv = [
                shutil.which("py-spy") or str(Path(sys.executable).parent / "py-spy"),
                "record",
                "--subprocesses",
                "--nonblocking",
                "--rate",
                "200",
                "--format",
                "raw",
                "--output",
                str(spy_out),
                "--",
                *argv,
            ]
        before_children = resource.getrusage(resource.RUSAGE_CHILDREN)
        server_before = time.process_time()
        started = time.monotonic()
        process = subprocess.Popen(
            argv,
            env=environment(work, f"run-{count}"),
            cwd=work,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        watched = process.pid
        if spy_out is not None:  # the command is py-spy's child
            for _ in range(200):
                children = _children(process.pid)
                if children:
                    watched = children[0]
                    break
                time.sleep(0.05)
        sampler = threading.Thread(
            target=sample_cpu, args=(watched, samples, stop, 0.2), daemon=True
        )
        sampler.start()
        out, err = process.communicate()
        stop.set()
        sampler.join()
        wall = time.monotonic() - started
        server_cpu = time.process_time() - server_before - samples.sampler_cpu
        after_children = resource.getrusage(resource.RUSAGE_CHILDREN)
        log = list(server.log)
        misses = server.misses
        peak = server.max_in_flight
    if process.returncode != 0:
        raise SystemExit(
            f"the run of {count} personas failed ({process.returncode}):\n{out}\n{err}"
        )
    all_in = (after_children.ru_utime - before_children.ru_utime) + (
        after_children.ru_stime - before_children.ru_stime
    )
    answered = [e for e in log if e.status != 429]
    arrivals = sorted(e.arrived for e in answered)
    low, high = int(len(arrivals) * 0.1), int(len(arrivals) * 0.9)
    t10, t90 = arrivals[low], arrivals[high]
    main10, children10 = samples.at(t10)
    main90, children90 = samples.at(t90)
    times, counts = in_flight_curve(log)
    summary = "\n".join(
        line for line in out.splitlines() if line.startswith(("  requests", "  queries", "  wall"))
    )
    result = Result(
        personas=count,
        requests=len(answered),
        chat=sum(1 for e in answered if e.path.endswith("/chat/completions")),
        embeddings=sum(1 for e in answered if e.path.endswith("/embeddings")),
        rejected_429=len(log) - len(answered),
        misses=misses,
        wall_s=wall,
        all_in_cpu_s=all_in,
        window_requests=high - low,
        window_s=t90 - t10,
        window_cpu_main_s=main90 - main10,
        window_cpu_children_s=children90 - children10,
        server_cpu_s=server_cpu,
        in_flight_percentiles=weighted_percentiles(times, counts, t10, t90, (10, 50, 90)),
        max_in_flight=peak,
        histogram=histogram(log, times, counts, samples),
        rpm_limit=args.rpm,
        summary=summary,
        max_rss_mb=samples.peak_rss_mb,
    )
    if spy_out is not None:
        result.profiled = True
        if spy_out.is_file():
            result.profile = top_frames(spy_out, args.top)
    return result


# --------------------------------------------------------------------------- profiles


def top_frames(path: Path, top: int) -> list[str]:
    """Samples per process, then the pipeline process's functions with the most samples, by self
    and by inclusive count (py-spy's raw format: ``frame;frame;... count`` per stack; with
    ``--subprocesses`` the first frames name the processes, whose command lines may span lines)."""
    text = path.read_text(encoding="utf-8", errors="replace")
    own: collections.Counter[str] = collections.Counter()
    inclusive: collections.Counter[str] = collections.Counter()
    processes: collections.Counter[str] = collections.Counter()
    for found in re.finditer(r"(.*?) (\d+)\n", text, re.S):
        stack, samples = found.group(1), int(found.group(2))
        parts = stack.split(";")
        owners = [p for p in parts if p.startswith("process ")]
        frames = [p for p in parts if not p.startswith("process ") and "\n" not in p]
        owner = "Prefect server" if len(owners) > 1 else "pipeline"
        processes[owner] += samples
        if owner != "pipeline":
            continue
        names = [_short(frame) for frame in frames]
        if names:
            own[names[-1]] += samples
        for name in set(names):
            inclusive[name] += samples
    total = sum(processes.values())
    mine = processes["pipeline"]
    lines = [
        f"{total} samples: "
        + ", ".join(f"{name} {100.0 * n / total:.1f}%" for name, n in processes.most_common())
    ]
    lines.append("pipeline process, self (share of its samples):")
    lines += [f"  {100.0 * n / mine:5.1f}%  {frame}" for frame, n in own.most_common(top)]
    lines.append("pipeline process, inclusive:")
    skip = ("_run_module_as_main", "_run_code", "run_forever", "_run_once", "run_until_complete")
    lines += [
        f"  {100.0 * n / mine:5.1f}%  {frame}"
        for frame, n in inclusive.most_common(top * 4)
        if not frame.startswith(skip) and "asyncio/" not in frame and "runpy" not in frame
    ][: top * 2]
    return lines


def _short(frame: str) -> str:
    """``function (path/to/module.py:line)`` as ``function (module.py)``."""
    name, _, where = frame.partition(" (")
    file = where.rsplit(":", 1)[0]
    parts = file.split("/")
    short = "/".join(parts[-2:]) if len(parts) > 1 else file
    return f"{name} ({short})"


# --------------------------------------------------------------------------- printing


def bar(value: float, scale: float, width: int = 30) -> str:
    filled = int(round(width * value / scale)) if scale > 0 else 0
    return "#" * min(filled, width)


def report(result: Result, args: argparse.Namespace) -> None:
    r = result
    print(
        f"\n{r.personas} persona{'s' if r.personas != 1 else ''}: {r.requests:,} requests "
        f"({r.chat:,} chat, {r.embeddings:,} embeddings), {r.rejected_429} answered 429, "
        f"{r.misses} not in the recording; wall {r.wall_s:.1f} s, largest process "
        f"{r.max_rss_mb:,.0f} MB"
    )
    for line in r.summary.splitlines():
        print(f"  command's summary:{line[1:]}")
    print(
        f"  CPU per request, steady    {r.steady_ms:6.2f} ms  (pipeline process {r.steady_main_ms:.2f} "
        f"+ Prefect server {r.steady_ms - r.steady_main_ms:.2f}; {r.window_requests:,} requests "
        f"between the 10% and 90% request)   goal <= {args.goal_ms:g} ms: ratio {r.steady_ms / args.goal_ms:.2f}"
    )
    print(
        f"  CPU per request, all-in    {r.all_in_ms:6.2f} ms  ({r.all_in_cpu_s:.1f} s CPU for the whole "
        f"command and its children / {r.requests:,} requests)"
    )
    print(
        f"  requests/min, 10%-90%      {r.rpm:8,.0f}  = {r.rpm / r.rpm_limit:.3f} x the {r.rpm_limit:,}/min "
        f"limit   (goal at 30 personas >= 0.9)"
    )
    p = r.in_flight_percentiles
    needed = r.rpm_limit / 60.0 * args.latency
    print(
        f"  in flight, 10%-90%         p10 {p['p10']:.0f}, p50 {p['p50']:.0f}, p90 {p['p90']:.0f}, mean "
        f"{p['mean']:.1f}, max {r.max_in_flight} (the limit at {args.latency * 1000:.0f} ms needs "
        f"{needed:.1f})"
    )
    print(
        f"  replay server's CPU        {1000.0 * r.server_cpu_s / max(r.requests, 1):6.3f} ms per request"
    )
    print("  over the run (tenths): mean in flight, requests/min, pipeline process CPU (cores)")
    scale = max(max(m for m, _, _ in r.histogram), needed)
    for tenth, (mean, rpm, busy) in enumerate(r.histogram):
        print(
            f"    {tenth * 10:3d}-{tenth * 10 + 10:3d}%  {bar(mean, scale):<30} {mean:5.1f}  "
            f"{rpm:8,.0f}/min  {busy:4.2f}"
        )
    if r.profiled:
        print("  (under py-spy: the figures above are not the measurement; run without --py-spy)")
    if r.misses:
        print(
            "  WARNING: requests missing from the recording: the figures are not valid (--re-record)"
        )
    for line in r.profile:
        print(f"  profile: {line}")


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--personas", default="1,30", help="persona counts, comma-separated")
    parser.add_argument("--latency", type=float, default=0.2, help="server latency per answer, s")
    parser.add_argument("--rpm", type=int, default=10_000, help="requests/min: server and client")
    parser.add_argument(
        "--tpm", type=int, default=1_000_000_000, help="client tokens/min (set not to bind)"
    )
    parser.add_argument("--concurrency", type=int, default=64, help="limits.max_concurrency")
    parser.add_argument("--model", default="gpt-4o", help="endpoint.chat_model")
    parser.add_argument("--goal-ms", type=float, default=5.0, help="steady CPU goal per request")
    parser.add_argument(
        "--recordings",
        type=Path,
        default=Path(tempfile.gettempdir()) / "memoryquest-bench-pipeline-cpu",
        help="where recordings are kept between runs",
    )
    parser.add_argument("--re-record", action="store_true", help="make the recording again")
    parser.add_argument("--work-dir", type=Path, help="keep outputs here (default: temporary)")
    parser.add_argument("--py-spy", type=Path, help="profile each run with py-spy into this dir")
    parser.add_argument("--top", type=int, default=15, help="profile entries printed")
    parser.add_argument("--json", type=Path, help="write the figures here too")
    args = parser.parse_args()
    counts = sorted({int(c) for c in args.personas.split(",") if c.strip()})
    with tempfile.TemporaryDirectory(prefix="bench-pipeline-cpu-") as temp:
        work = args.work_dir or Path(temp)
        work.mkdir(parents=True, exist_ok=True)
        cores = len(os.sched_getaffinity(0))
        print(
            f"bench_pipeline_cpu: {cores} cores, load average {os.getloadavg()[0]:.2f} at the start "
            f"(other work on the machine shows in wall time, not in CPU time)"
        )
        print(
            f"settings: endpoint.backend=openai, server=openai, chat_model={args.model}, remote "
            f"embeddings, request cache off, publish off; limits rpm {args.rpm:,}, max_concurrency "
            f"{args.concurrency}; server latency {args.latency * 1000:.0f} ms, {args.rpm:,}/min enforced"
        )
        recording, how = record(args, work, max(counts))
        print(f"recording: {len(recording):,} answers for {max(counts)} personas, {how}")
        results = []
        for count in counts:
            result = measure(args, work, count, recording)
            report(result, args)
            results.append(result)
        if len(results) >= 2:
            first, last = results[0], results[-1]
            print(
                f"\n{last.personas} vs {first.personas} personas: steady CPU per request x"
                f"{last.steady_ms / first.steady_ms:.2f}, all-in x{last.all_in_ms / first.all_in_ms:.2f}, "
                f"requests/min x{last.rpm / first.rpm:.2f}"
            )
        print(f"load average {os.getloadavg()[0]:.2f} at the end")
        if args.json:
            args.json.write_text(
                json.dumps(
                    [
                        {
                            **asdict(r),
                            "steady_ms": r.steady_ms,
                            "all_in_ms": r.all_in_ms,
                            "rpm": r.rpm,
                        }
                        for r in results
                    ],
                    indent=2,
                ),
                encoding="utf-8",
            )


if __name__ == "__main__":
    main()
