"""Client throughput under quotas and fault mixes, and the overhead of a cached call.

Runs the real openai SDK path. Without ``--base-url`` it starts the bundled
loopback server (``memoryquest.testing.FakeOpenAIServer``, ``--latency``
seconds per answer) and runs one workload per scenario:

* at the quota: the server enforces ``--rpm`` requests/min, the client is set to the same;
* the client set to 5/3 of the server's quota (2,000 against 1,200);
* 20% random 429s (Retry-After ``--retry-after`` s, no quota headers) + 5% 500s;
* 5% random 429s; 5% 500s (the fault mixes run without a server quota).

For each it prints the answered requests/min and the attempts/min (every
request sent, refused ones included, as providers count them) against the
configured limit (goal at 20% 429s + 5% 500s: attempts <= 1.0 of the limit,
answered >= 0.70, where at most 0.75 is possible), the share of attempts
answered 429, the limiter's quota cuts, and the retries sent before their
Retry-After had elapsed (goal: 0). Then the cached-call overhead: the same requests again
from the on-disk cache, in microseconds per call (no HTTP involved).

With ``--base-url URL`` the same workload runs once against any
OpenAI-compatible server (``--model``, ``--api-key``), counted on the client side.

    .venv/bin/python benchmarks/bench_client.py                  # ~3 min
    .venv/bin/python benchmarks/bench_client.py --only 429 --requests 1200
    .venv/bin/python benchmarks/bench_client.py --base-url http://localhost:8000/v1 --model my-model
"""

from __future__ import annotations

import argparse
import asyncio
import os
import random
import statistics
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from memoryquest.llm.backends import ChatBackend, ChatCall, ChatResult
from memoryquest.llm.client import ModelClient
from memoryquest.llm.errors import TransientBackendError
from memoryquest.llm.factory import build_client
from memoryquest.llm.limiter import RetryPolicy
from memoryquest.llm.request import LLMRequest
from memoryquest.settings import Settings
from memoryquest.simulator import simulates
from memoryquest.testing import FakeOpenAIServer, Fault, FaultKind

TEMPLATE_ID = "bench_client_errand"
TEMPLATE = f"""---
id: {TEMPLATE_ID}
version: 1
purpose: a small structured answer for client benchmarks
---
## system
You plan short errands for a person and answer in JSON.
## user
Plan errand number $number for someone who likes $likes.
"""


class Errand(BaseModel):
    number: int
    steps: list[str]
    minutes: int


@simulates(TEMPLATE_ID)
def _errand(variables: dict[str, Any], rng: random.Random) -> Errand:
    likes = variables["likes"]
    return Errand(
        number=variables["number"],
        steps=[f"find a {likes} shop", f"compare {likes} prices", "pay and go home"],
        minutes=rng.randint(10, 90),
    )


def requests(count: int, offset: int = 0) -> list[LLMRequest[Errand]]:
    likes = ["jazz records", "sourdough", "board games", "running shoes", "tea"]
    return [
        LLMRequest(
            TEMPLATE_ID,
            {"number": i, "likes": likes[i % len(likes)]},
            Errand,
            stage="queries",
            max_output_tokens=256,
        )
        for i in range(offset, offset + count)
    ]


class Recording:
    """The chat backend, watched from the client side: attempts, 429s, and retries sent early.

    A retry is early when it leaves before the Retry-After of the 429 (or
    5xx) that preceded it has elapsed, measured from when that answer arrived.
    """

    def __init__(self, inner: ChatBackend) -> None:
        self.inner = inner
        self.name = inner.name
        self.model = inner.model
        self.base_url = inner.base_url
        self.simulated = inner.simulated
        self.seed = inner.seed
        self.attempts = 0
        self.rate_limited = 0
        self.server_errors = 0
        self.early_retries = 0
        self._not_before: dict[int, float] = {}

    def __getattr__(self, name: str) -> Any:  # request_body, aclose, endpoint_url, ...
        return getattr(self.inner, name)

    async def chat(self, call: ChatCall) -> ChatResult:
        key = id(call.request)  # the same request object travels with every retry
        not_before = self._not_before.pop(key, None)
        if not_before is not None and time.monotonic() < not_before:
            self.early_retries += 1
        self.attempts += 1
        try:
            return await self.inner.chat(call)
        except TransientBackendError as exc:
            if exc.rate_limited:
                self.rate_limited += 1
            elif exc.kind == "server":
                self.server_errors += 1
            if exc.retry_after:
                self._not_before[key] = time.monotonic() + exc.retry_after
            raise


@dataclass(frozen=True)
class Scenario:
    name: str
    client_rpm: int
    server_rpm: int | None = None  # the bundled server's enforced quota (None: none)
    rate_429: float = 0.0  # random 429s with Retry-After, without quota headers
    rate_500: float = 0.0


def scenarios(rpm: int) -> list[Scenario]:
    over = round(rpm * 5 / 3)  # 2,000 against 1,200
    return [
        Scenario("at the quota", rpm, server_rpm=rpm),
        Scenario(f"client limit {over} > quota {rpm}", over, server_rpm=rpm),
        Scenario("20% random 429 + 5% 500", rpm, rate_429=0.20, rate_500=0.05),
        Scenario("5% random 429", rpm, rate_429=0.05),
        Scenario("5% 500", rpm, rate_500=0.05),
    ]


@dataclass
class Row:
    scenario: str
    limit: int
    quota: int | None
    done: int
    elapsed: float
    attempts: int
    rate_limited: int
    quota_cuts: int
    early_client: int
    early_server: int | None = None

    @property
    def achieved(self) -> float:
        return self.done / self.elapsed * 60.0

    @property
    def attempted(self) -> float:
        return self.attempts / self.elapsed * 60.0


def client_for(
    base_url: str,
    output: Path,
    prompts: Path,
    rpm: int,
    concurrency: int,
    cache: bool,
    *,
    hints: bool = True,
    model: str = "gpt-4o-mini",
    api_key: str | None = None,
) -> ModelClient:
    settings = Settings(
        output_dir=output,
        cache={"enabled": cache},
        endpoint={
            "base_url": base_url,
            "api_key": api_key,
            "simulator_hints": hints,  # the bundled server answers from the simulator
            "chat_model": model,
            "timeout_seconds": 30,
            "max_retries": 8,
        },
        limits={
            "requests_per_minute": rpm,
            "tokens_per_minute": 10_000_000,
            "max_concurrency": concurrency,
            "circuit_breaker_failures": 50,
        },
    )
    return build_client(
        settings,
        prompts_dir=prompts,
        retry=RetryPolicy(max_retries=8, base_delay=0.1, max_delay=2.0),
    )


async def run_workload(
    client: ModelClient, count: int, name: str, limit: int, quota: int | None
) -> Row:
    """``count`` fresh requests through ``client``, timed after one untimed warm-up request."""
    recording = Recording(client.chat_backend)
    client.chat_backend = recording
    await client.complete(requests(1, offset=10**6)[0])  # connection set-up and imports
    await asyncio.sleep(60.0 / min(limit, quota or limit) * 2)
    before = (recording.attempts, recording.rate_limited, recording.early_retries)
    started = time.perf_counter()
    answers = await client.complete_all(requests(count))
    elapsed = time.perf_counter() - started
    await client.aclose()
    assert len(answers) == count and all(isinstance(a, Errand) for a in answers)
    limiter = client.limiter
    return Row(
        scenario=name,
        limit=limit,
        quota=quota,
        done=count,
        elapsed=elapsed,
        attempts=recording.attempts - before[0],
        rate_limited=recording.rate_limited - before[1],
        quota_cuts=limiter.stats.slowdowns if limiter is not None else 0,
        early_client=recording.early_retries - before[2],
    )


async def bundled(scenario: Scenario, args: argparse.Namespace, work: Path, prompts: Path) -> Row:
    with FakeOpenAIServer(latency=args.latency, requests_per_minute=scenario.server_rpm) as server:
        rates = {FaultKind.RATE_LIMIT: scenario.rate_429, FaultKind.SERVER_ERROR: scenario.rate_500}
        server.set_fault_rates(
            {kind: rate for kind, rate in rates.items() if rate},
            seed=args.seed,
            faults={FaultKind.RATE_LIMIT: Fault.rate_limit(args.retry_after)},
        )
        client = client_for(
            server.url,
            work / scenario.name.replace(" ", "_"),
            prompts,
            scenario.client_rpm,
            args.concurrency,
            cache=False,
        )
        row = await run_workload(
            client, args.requests, scenario.name, scenario.client_rpm, scenario.server_rpm
        )
        row.early_server = server.early_retries
    return row


def print_table(rows: list[Row], args: argparse.Namespace, where: str) -> None:
    bundled_server = where == "the bundled server"
    print(
        f"throughput: {args.requests} requests per scenario against {where}, "
        f"max_concurrency {args.concurrency}"
        + (
            f", latency {args.latency * 1000:.0f} ms, random 429s with Retry-After {args.retry_after:g} s"
            if bundled_server
            else ""
        )
    )
    columns = [
        ("scenario", 32),
        ("limit", 5),
        ("quota", 5),
        ("achieved rpm", 12),
        ("/ limit", 7),
        ("/ quota", 7),
        ("attempts / limit", 16),
        ("HTTP", 5),
        ("429 share", 9),
        ("quota cuts", 10),
        ("early retries", 13),
    ]
    print("| " + " | ".join(f"{title:<{width}}" for title, width in columns) + " |")
    print("|" + "|".join("-" * (width + 2) for _, width in columns) + "|")
    for row in rows:
        early = f"{row.early_client}" + (
            f" (server {row.early_server})" if row.early_server is not None else ""
        )
        cells = [
            row.scenario,
            str(row.quota or "-"),
            f"{row.achieved:.1f}",
            f"{row.achieved / row.limit:.3f}",
            f"{row.achieved / row.quota:.3f}" if row.quota else "-",
            f"{row.attempted / row.limit:.3f}",
            str(row.attempts),
            f"{100.0 * row.rate_limited / max(row.attempts, 1):.2f}%",
            str(row.quota_cuts),
            early,
        ]
        cells.insert(1, str(row.limit))
        print(
            "| " + " | ".join(f"{c:<{w}}" for c, (_, w) in zip(cells, columns, strict=True)) + " |"
        )
    print(
        "achieved rpm: answered requests per minute; attempts: requests sent per minute, refused "
        "ones included; HTTP: attempts sent; early retries: retries sent "
        "before their Retry-After had elapsed (client-side count; the bundled server's in brackets)"
    )


async def cached_overhead(args: argparse.Namespace, work: Path, prompts: Path) -> None:
    with FakeOpenAIServer() as server:
        warm = client_for(server.url, work / "cached", prompts, 600_000, 16, cache=True)
        batch = requests(args.cached_calls)
        await warm.complete_all(batch)
        await warm.aclose()
        filled = server.count()
        server.clear_log()
        client = client_for(server.url, work / "cached", prompts, 600_000, 16, cache=True)
        await client.complete(batch[0])  # first-touch costs (schema, template), not timed
        rounds = []
        for _ in range(3):
            started = time.perf_counter()
            for request in batch:
                await client.complete(request)
            rounds.append((time.perf_counter() - started) / len(batch))
        started = time.perf_counter()
        await client.complete_all(batch)
        concurrent = (time.perf_counter() - started) / len(batch)
        assert server.count() == 0, "cached calls must not reach the server"
    print(
        f"cached calls: {args.cached_calls} distinct requests (cache filled with {filled} HTTP requests)"
    )
    print(
        f"  sequential             {statistics.median(rounds) * 1e6:8.0f} us per call (median of 3 rounds)"
    )
    print(f"  complete_all           {concurrent * 1e6:8.0f} us per call")
    print(f"  HTTP requests          {server.count():8d}")
    stats = client.cache_stats
    print(
        f"  cache                  {stats.hits} hits, {stats.misses} misses, {stats.bytes_read / 1024:.0f} KiB read"
    )


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--requests", type=int, default=600, help="requests per scenario (600 = 30 s at 1,200/min)"
    )
    parser.add_argument("--rpm", type=int, default=1200, help="configured requests/min and quota")
    parser.add_argument("--latency", type=float, default=0.1, help="bundled server latency, s")
    parser.add_argument("--concurrency", type=int, default=16, help="client max_concurrency")
    parser.add_argument(
        "--retry-after", type=float, default=1.0, help="Retry-After of the random 429s, s"
    )
    parser.add_argument("--seed", type=int, default=0, help="seed of the random faults")
    parser.add_argument(
        "--only", action="append", default=[], help="run only scenarios whose name contains this"
    )
    parser.add_argument("--base-url", help="run the workload against this server instead")
    parser.add_argument("--model", default="gpt-4o-mini", help="with --base-url: the chat model")
    parser.add_argument(
        "--api-key",
        default=os.environ.get("OPENAI_API_KEY"),
        help="with --base-url (default: OPENAI_API_KEY)",
    )
    parser.add_argument(
        "--simulator-hints",
        action="store_true",
        help="with --base-url: send simulator hints (a bundled fake server started elsewhere)",
    )
    parser.add_argument(
        "--cached-calls", type=int, default=2000, help="requests in the cached-call run (0: skip)"
    )
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-client-") as temp:
        work = Path(temp)
        prompts = work / "prompts"
        prompts.mkdir()
        (prompts / f"{TEMPLATE_ID}.md").write_text(TEMPLATE, encoding="utf-8")
        if args.base_url:
            client = client_for(
                args.base_url,
                work / "remote",
                prompts,
                args.rpm,
                args.concurrency,
                cache=False,
                hints=args.simulator_hints,
                model=args.model,
                api_key=args.api_key,
            )
            row = asyncio.run(run_workload(client, args.requests, "workload", args.rpm, None))
            print_table([row], args, args.base_url)
            return
        rows = []
        for scenario in scenarios(args.rpm):
            if args.only and not any(part in scenario.name for part in args.only):
                continue
            rows.append(asyncio.run(bundled(scenario, args, work, prompts)))
        print_table(rows, args, "the bundled server")
        if args.cached_calls:
            asyncio.run(cached_overhead(args, work, prompts))


if __name__ == "__main__":
    main()
