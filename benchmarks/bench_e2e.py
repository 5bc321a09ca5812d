"""End-to-end benchmarks of the whole generator, offline (simulator + local embedder).

1. scaling: wall time of a full run (Prefect flow, fresh output directory,
   empty caches) for each persona count in ``--personas``; prints time per
   persona and a least-squares line wall = intercept + slope x personas.
   The bundled sample has 30 users; larger counts read a temporary
   PersonaLens-layout copy that repeats the sample under new user ids
   (user0 .. userN-1; persona ids, and so every seeded choice, differ per copy).
2. orchestration overhead: the same small workload through the plain
   in-process pipeline (``generate_dataset``) and through the Prefect flow,
   both against a loopback OpenAI-compatible server with a fixed latency and
   the request cache off; prints in-process / flow wall (goal >= 0.9).
3. re-run from cache: the flow twice on one output directory against the
   loopback server; prints second / first wall (goal <= 5%) and the HTTP
   requests the second run sent (goal 0).
4. estimate: ``memoryquest.estimate`` for ``--estimate-personas`` personas
   from a small sample, at the default (paper) generation settings.

Every measured run starts cold: the local embedder's text memo and the
simulator's memos are cleared first, so a run never profits from the one
before it. A temporary Prefect API is started once (not timed) unless
``PREFECT_API_URL`` points at one.

    .venv/bin/python benchmarks/bench_e2e.py                         # 10 and 30 personas, 3 queries each
    .venv/bin/python benchmarks/bench_e2e.py --personas 10,30,100    # adds a repeated-sample run of 100
    .venv/bin/python benchmarks/bench_e2e.py --parts scaling --in-process --queries-per-user 15
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import numpy as np

PARTS = ("scaling", "overhead", "cache", "estimate")
SAMPLE_USERS = 30


# --------------------------------------------------------------------------- set-up


def isolate_prefect(work: Path) -> str:
    """A throw-away Prefect home and database, unless a Prefect API is configured already.

    Must run before the first ``import prefect``.
    """
    os.environ.setdefault("PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS", "180")
    os.environ.setdefault("PREFECT_LOGGING_LEVEL", "WARNING")
    if os.environ.get("PREFECT_API_URL"):
        return f"the Prefect API at {os.environ['PREFECT_API_URL']}"
    home = work / "prefect-home"
    home.mkdir(parents=True, exist_ok=True)
    os.environ["PREFECT_HOME"] = str(home)
    os.environ["PREFECT_API_DATABASE_CONNECTION_URL"] = f"sqlite+aiosqlite:///{home / 'prefect.db'}"
    os.environ["PREFECT_SERVER_ANALYTICS_ENABLED"] = "false"
    os.environ["PREFECT_UI_ENABLED"] = "false"
    return "a temporary local Prefect API (SQLite)"


async def start_prefect() -> float:
    """Start the (temporary) Prefect API with a trivial flow; returns the seconds it took."""
    from prefect import flow

    @flow(name="bench-e2e-warm-up")
    async def warm_up() -> int:
        return 1

    started = time.perf_counter()
    await warm_up()
    return time.perf_counter() - started


def cold_start() -> None:
    """Forget every in-process memo, so a measured run pays for all its own work."""
    from memoryquest.llm.factory import shared_local_embedder

    shared_local_embedder().clear_memo()
    for name, module in list(sys.modules.items()):
        if not name.startswith("memoryquest.simulator") or module is None:
            continue
        for value in vars(module).values():
            if getattr(value, "__module__", None) == name and callable(
                getattr(value, "cache_clear", None)
            ):
                value.cache_clear()


def sample_dir() -> Path:
    from memoryquest.estimate import default_sample_dir

    return default_sample_dir()


def repeated_source(count: int, target: Path) -> Path:
    """A PersonaLens-layout directory with users user0 .. user<count-1>, repeating the 30 sample users."""
    sample = sample_dir()
    users = sorted(
        (p.name for p in (sample / "profile").iterdir() if p.is_dir()), key=lambda u: int(u[4:])
    )
    for index in range(count):
        source = sample / "profile" / users[index % len(users)]
        user = f"user{index}"
        destination = target / "profile" / user
        destination.mkdir(parents=True, exist_ok=True)
        for file in source.iterdir():
            if file.name == "profile.json":
                profile = json.loads(file.read_text(encoding="utf-8"))
                profile["demographics"]["user_id"] = user  # must match the directory name
                (destination / file.name).write_text(
                    json.dumps(profile, ensure_ascii=False), encoding="utf-8"
                )
            else:
                shutil.copyfile(file, destination / file.name)
    shutil.copyfile(sample / "schema.json", target / "schema.json")
    return target


def users(count: int) -> list[str]:
    return [f"user{i}" for i in range(count)]


def small_settings(queries: int) -> dict[str, Any]:
    return {"generation": {"queries_per_user": queries}}


def fake_endpoint(url: str) -> dict[str, Any]:
    """Settings for the loopback server: latency-bound, not rate-limit-bound, request cache off."""
    return {
        "endpoint": {
            "backend": "openai",
            "base_url": url,
            "simulator_hints": True,  # the fake server answers from the simulator
            "api_key": "sk-bench",
            "embedder": "local",
            "chat_model": "gpt-4o-mini",
        },
        "limits": {
            "requests_per_minute": 1_000_000,
            "tokens_per_minute": 1_000_000_000,
            "max_concurrency": 64,
        },
    }


def merge(*parts: dict[str, Any]) -> dict[str, Any]:
    merged: dict[str, Any] = {}
    for part in parts:
        for key, value in part.items():
            if isinstance(value, dict) and isinstance(merged.get(key), dict):
                merged[key] = merge(merged[key], value)
            else:
                merged[key] = value
    return merged


# --------------------------------------------------------------------------- runs


async def timed(run: Callable[[], Awaitable[Any]]) -> tuple[float, Any]:
    cold_start()
    started = time.perf_counter()
    result = await run()
    return time.perf_counter() - started, result


async def flow_run(
    output: Path, source: Path, count: int, overrides: dict[str, Any], publish: bool
) -> Path:
    from memoryquest.orchestration.flow import generate_benchmark

    await generate_benchmark(
        output=str(output),
        persona_source=str(source),
        users=users(count),
        overrides=overrides,
        publish=publish,
    )
    return output / "dataset"


async def in_process_run(
    output: Path, source: Path, count: int, overrides: dict[str, Any], publish: bool
) -> Path:
    """What the flow does, without Prefect: load, generate, save (and publish)."""
    from memoryquest.intake import PersonaSelection, load_personas
    from memoryquest.llm.factory import build_client
    from memoryquest.pipeline import generate_dataset
    from memoryquest.settings import load_settings

    settings = load_settings(
        None, merge(overrides, {"output_dir": str(output), "persona_source": str(source)})
    )
    intake = load_personas(settings.persona_source, PersonaSelection(user_ids=users(count)))
    client = build_client(settings)
    try:
        dataset = await generate_dataset(intake.personas, client, settings)
    finally:
        await client.aclose()
    dataset_dir = dataset.save(output / "dataset")
    if publish:
        from memoryquest.publish import publish_dataset

        publish_dataset(dataset, output / "published", settings)
    return dataset_dir


def describe(dataset_dir: Path) -> dict[str, Any]:
    from memoryquest.dataset import GeneratedDataset

    dataset = GeneratedDataset.load(dataset_dir)
    usage = dataset.manifest.usage if dataset.manifest else []
    return {
        "personas": len(dataset.personas),
        "queries": len(dataset.queries),
        "sessions": len(dataset.sessions),
        "facts": len(dataset.facts),
        "results": len(dataset.validation),
        "llm_requests": sum(u.requests for u in usage),
        "embedding_tokens": sum(u.embedding_tokens for u in usage),
        "query_texts": [q.text for q in dataset.queries],
        "persona_of_query": [q.persona_id for q in dataset.queries],
        "source_user": {p.persona_id: p.source_user_id for p in dataset.personas},
    }


# --------------------------------------------------------------------------- parts


async def scaling(args: argparse.Namespace, work: Path) -> None:
    counts = sorted({int(c) for c in args.personas.split(",") if c.strip()})
    how = (
        "in-process pipeline (generate_dataset)"
        if args.in_process
        else "Prefect flow (generate_benchmark)"
    )
    print(
        f"\n[1] scaling: {how}, offline default (simulator + local embedder), request cache on in a fresh output dir"
    )
    print(
        f"    settings: generation.queries_per_user={args.queries_per_user}, other settings at their defaults; "
        f"publish={'on' if args.publish else 'off'}"
    )
    overrides = merge(small_settings(args.queries_per_user), {"endpoint": {"backend": "simulated"}})
    run = in_process_run if args.in_process else flow_run
    rows: list[tuple[int, float, dict[str, Any]]] = []
    for count in counts:
        if count <= SAMPLE_USERS:
            source, note = sample_dir(), "bundled sample"
        else:
            source = repeated_source(count, work / f"personas-{count}")
            note = f"temporary copy repeating the {SAMPLE_USERS} sample users as user0..user{count - 1}"
        output = work / f"scaling-{count}"
        wall, dataset_dir = await timed(lambda: run(output, source, count, overrides, args.publish))  # noqa: B023
        info = describe(dataset_dir)
        rows.append((count, wall, info))
        print(
            f"    {count:4d} personas ({note}): wall {wall:8.1f} s = {wall / count:6.2f} s/persona; "
            f"{info['queries']} queries, {info['sessions']} sessions, {info['facts']} facts, {info['results']} PGR results, "
            f"{info['llm_requests']} LLM requests",
            flush=True,
        )
        if count > SAMPLE_USERS:
            print(
                f"         copies repeat an original's query text in {repeated_share(info):.0%} of their queries"
            )
        if args.work_dir is None:
            shutil.rmtree(output, ignore_errors=True)
    if len(rows) >= 2:
        x = np.array([r[0] for r in rows], dtype=float)
        y = np.array([r[1] for r in rows], dtype=float)
        slope, intercept = np.polyfit(x, y, 1)
        fitted = slope * x + intercept
        r2 = 1.0 - float(((y - fitted) ** 2).sum()) / max(float(((y - y.mean()) ** 2).sum()), 1e-12)
        print(
            f"    least squares: wall = {intercept:.1f} s + {slope:.2f} s x personas (r^2 {r2:.3f}); "
            f"marginal cost {slope:.2f} s/persona"
        )
        first, last = rows[0], rows[-1]
        growth = (last[1] / first[1]) / (last[0] / first[0])
        print(
            f"    growth {first[0]} -> {last[0]} personas: wall x{last[1] / first[1]:.2f} for personas x{last[0] / first[0]:.2f} "
            f"(ratio {growth:.2f}; 1.00 = linear)"
        )


def repeated_share(info: dict[str, Any]) -> float:
    """Share of queries of copies (user30+) whose text also appears for their original user."""
    by_user: dict[str, set[str]] = {}
    for text, persona in zip(info["query_texts"], info["persona_of_query"], strict=True):
        by_user.setdefault(info["source_user"][persona], set()).add(text)
    copies = [(u, texts) for u, texts in by_user.items() if int(u[4:]) >= SAMPLE_USERS]
    total = sum(len(texts) for _, texts in copies)
    same = sum(
        len(texts & by_user.get(f"user{int(u[4:]) % SAMPLE_USERS}", set())) for u, texts in copies
    )
    return same / total if total else 0.0


async def overhead(args: argparse.Namespace, work: Path) -> None:
    from memoryquest.testing import FakeOpenAIServer

    count = args.overhead_personas
    print(
        f"\n[2] orchestration overhead: {count} personas, loopback server with {args.latency * 1000:.0f} ms latency, "
        f"request cache off, publish off"
    )
    print(
        f"    settings: generation.queries_per_user={args.overhead_queries}; limits rpm 1,000,000, tpm 1e9, "
        f"max_concurrency 64 (latency-bound, not rate-bound); {args.repeats} runs each, alternating"
    )
    with FakeOpenAIServer(latency=args.latency) as server:
        overrides = merge(
            small_settings(args.overhead_queries),
            fake_endpoint(server.url),
            {"cache": {"enabled": False}},
        )
        walls: dict[str, list[float]] = {"in-process": [], "flow": []}
        requests: dict[str, list[int]] = {"in-process": [], "flow": []}
        for repeat in range(args.repeats):
            for label, run in (("in-process", in_process_run), ("flow", flow_run)):
                output = work / f"overhead-{label}-{repeat}"
                server.clear_log()
                wall, _ = await timed(lambda: run(output, sample_dir(), count, overrides, False))  # noqa: B023
                walls[label].append(wall)
                requests[label].append(server.count())
                print(
                    f"    {label:<11} run {repeat + 1}: {wall:7.1f} s, {server.count()} HTTP requests",
                    flush=True,
                )
                if args.work_dir is None:
                    shutil.rmtree(output, ignore_errors=True)
    ideal, actual = statistics.median(walls["in-process"]), statistics.median(walls["flow"])
    print(
        f"    median wall: in-process {ideal:.1f} s, flow {actual:.1f} s; flow overhead {actual - ideal:+.1f} s "
        f"({(actual - ideal) / count:+.2f} s/persona)"
    )
    print(f"    ideal / actual (in-process / flow) = {ideal / actual:.3f}   (goal >= 0.9)")


async def rerun_from_cache(args: argparse.Namespace, work: Path) -> None:
    from memoryquest.testing import FakeOpenAIServer

    count = args.overhead_personas
    print(
        f"\n[3] re-run from cache: the flow twice on one output dir, {count} personas, loopback server "
        f"{args.latency * 1000:.0f} ms, request cache on (default), publish off"
    )
    output = work / "cache-run"
    with FakeOpenAIServer(latency=args.latency) as server:
        overrides = merge(small_settings(args.overhead_queries), fake_endpoint(server.url))
        first, _ = await timed(lambda: flow_run(output, sample_dir(), count, overrides, False))
        first_requests = server.count()
        server.clear_log()
        second, _ = await timed(lambda: flow_run(output, sample_dir(), count, overrides, False))
        second_requests = server.count()
    print(f"    first run  {first:7.1f} s, {first_requests} HTTP requests")
    print(f"    second run {second:7.1f} s, {second_requests} HTTP requests   (goal 0)")
    print(f"    second / first = {second / first:.1%}   (goal <= 5%)")
    report = output / "run_report.json"
    if report.is_file():
        states = json.loads(report.read_text(encoding="utf-8")).get("state_counts")
        print(f"    second run's task states: {states}")
    if args.work_dir is None:
        shutil.rmtree(output, ignore_errors=True)


async def estimate(args: argparse.Namespace, work: Path) -> None:
    from memoryquest.estimate import estimate_run
    from memoryquest.estimate.table import estimate_table
    from memoryquest.intake import PersonaSelection, load_personas
    from memoryquest.settings import load_settings

    settings = load_settings(None, {"output_dir": str(work / "estimate")})
    sample = load_personas(
        sample_dir(), PersonaSelection(user_ids=users(args.estimate_sample))
    ).personas
    print(
        f"\n[4] estimate for {args.estimate_personas:,} personas from a {len(sample)}-persona sample, "
        f"default (paper) settings: {settings.generation.queries_per_user} queries/user, "
        f"PGR methods {', '.join(settings.pgr.methods)}, judges {', '.join(settings.pgr.judges)}"
    )
    cold_start()
    result = await estimate_run(settings, sample, args.estimate_personas)
    print("    " + estimate_table(result).replace("\n", "\n    "))


async def main(args: argparse.Namespace, work: Path, prefect: str) -> None:
    parts = [p.strip() for p in args.parts.split(",") if p.strip()]
    unknown = sorted(set(parts) - set(PARTS))
    if unknown:
        raise SystemExit(f"unknown part(s) {', '.join(unknown)}; choose from {', '.join(PARTS)}")
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    print(
        f"bench_e2e: parts {', '.join(parts)}; {cores} cores, load average {os.getloadavg()[0]:.1f} at start; work dir {work}"
    )
    needs_flow = any(p in parts for p in ("overhead", "cache")) or (
        "scaling" in parts and not args.in_process
    )
    if needs_flow:
        print(f"Prefect: {prefect}; started in {await start_prefect():.1f} s (not timed below)")
    started = time.perf_counter()
    for part in parts:
        await {
            "scaling": scaling,
            "overhead": overhead,
            "cache": rerun_from_cache,
            "estimate": estimate,
        }[part](args, work)
    print(
        f"\nbench_e2e finished in {time.perf_counter() - started:.0f} s; load average {os.getloadavg()[0]:.1f} at the end"
    )


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--parts", default=",".join(PARTS), help=f"comma-separated subset of {', '.join(PARTS)}"
    )
    parser.add_argument(
        "--personas",
        default="10,30",
        help="persona counts for the scaling part (above 30: repeated sample)",
    )
    parser.add_argument(
        "--queries-per-user",
        type=int,
        default=3,
        help="generation.queries_per_user for scaling (paper: 15)",
    )
    parser.add_argument(
        "--in-process",
        action="store_true",
        help="scaling through generate_dataset instead of the flow",
    )
    parser.add_argument(
        "--publish",
        action="store_true",
        help="also publish (Parquet, card, plots) in the scaling runs",
    )
    parser.add_argument(
        "--overhead-personas", type=int, default=4, help="personas in the overhead and cache parts"
    )
    parser.add_argument(
        "--overhead-queries",
        type=int,
        default=2,
        help="queries_per_user in the overhead and cache parts",
    )
    parser.add_argument(
        "--latency", type=float, default=0.2, help="loopback server latency per request, seconds"
    )
    parser.add_argument("--repeats", type=int, default=2, help="runs per path in the overhead part")
    parser.add_argument("--estimate-personas", type=int, default=1500)
    parser.add_argument(
        "--estimate-sample", type=int, default=2, help="sample personas the estimate replays"
    )
    parser.add_argument(
        "--work-dir",
        type=Path,
        default=None,
        help="keep outputs here (default: a temporary directory)",
    )
    return parser.parse_args()


if __name__ == "__main__":
    arguments = parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-e2e-") as temp:
        work_dir = arguments.work_dir or Path(temp)
        work_dir.mkdir(parents=True, exist_ok=True)
        prefect_description = isolate_prefect(work_dir)
        asyncio.run(main(arguments, work_dir, prefect_description))
