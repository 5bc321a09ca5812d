"""Client throughput under an enforced rate limit, and the overhead of a cached call.

Runs the real openai SDK path against the loopback server
(``memoryquest.testing.FakeOpenAIServer``):

1. throughput: the server answers after ``--latency`` seconds and enforces
   ``--rpm`` requests/min (429 beyond it); the client is configured with the
   same limit. Prints achieved/limit (goal >= 0.95) and the share of requests
   answered 429 (goal < 1%).
2. cached calls: the same requests again from the on-disk cache; prints the
   client's own time per call in microseconds (no HTTP involved).

    .venv/bin/python benchmarks/bench_client.py            # ~45 s
    .venv/bin/python benchmarks/bench_client.py --requests 2400 --cached-calls 5000
"""

from __future__ import annotations

import argparse
import asyncio
import random
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from memoryquest.llm.client import ModelClient
from memoryquest.llm.factory import build_client
from memoryquest.llm.limiter import RetryPolicy
from memoryquest.llm.request import LLMRequest
from memoryquest.settings import Settings
from memoryquest.simulator import simulates
from memoryquest.testing import FakeOpenAIServer

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
            stage="bench",
            max_output_tokens=256,
        )
        for i in range(offset, offset + count)
    ]


def client_for(
    server: FakeOpenAIServer, output: Path, prompts: Path, rpm: int, concurrency: int, cache: bool
) -> ModelClient:
    settings = Settings(
        output_dir=output,
        cache={"enabled": cache},
        endpoint={
            "base_url": server.url,
            "simulator_hints": True,  # the fake server answers from the simulator
            "chat_model": "gpt-4o-mini",
            "timeout_seconds": 10,
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


async def throughput(args: argparse.Namespace, work: Path, prompts: Path) -> None:
    with FakeOpenAIServer(latency=args.latency, requests_per_minute=args.rpm) as server:
        client = client_for(
            server, work / "throughput", prompts, args.rpm, args.concurrency, cache=False
        )
        await client.complete(
            requests(1, offset=10**6)[0]
        )  # connection set-up and imports, not timed
        await asyncio.sleep(60.0 / args.rpm * 2)
        server.clear_log()
        started = time.perf_counter()
        answers = await client.complete_all(requests(args.requests))
        elapsed = time.perf_counter() - started
        await client.aclose()
    assert len(answers) == args.requests and all(isinstance(a, Errand) for a in answers)
    sent = len(server.requests)
    rejected = server.count(status=429)
    achieved = args.requests / elapsed * 60.0
    limiter = client.limiter
    print(
        f"throughput: {args.requests} requests, server latency {args.latency * 1000:.0f} ms, limit {args.rpm} requests/min"
    )
    print(f"  elapsed                {elapsed:8.2f} s")
    print(f"  achieved               {achieved:8.1f} requests/min")
    print(f"  achieved / limit       {achieved / args.rpm:8.3f}   (goal >= 0.95)")
    print(
        f"  answered 429           {rejected:8d} of {sent} HTTP requests = {100.0 * rejected / max(sent, 1):.2f}%   (goal < 1%)"
    )
    if limiter is not None:
        print(
            f"  peak in flight         {limiter.peak_in_flight:8d}   (max_concurrency {args.concurrency})"
        )
        print(f"  limiter slow-downs     {limiter.stats.slowdowns:8d}")


async def cached_overhead(args: argparse.Namespace, work: Path, prompts: Path) -> None:
    with FakeOpenAIServer() as server:
        warm = client_for(server, work / "cached", prompts, 600_000, 16, cache=True)
        batch = requests(args.cached_calls)
        await warm.complete_all(batch)
        await warm.aclose()
        filled = server.count()
        server.clear_log()
        client = client_for(server, work / "cached", prompts, 600_000, 16, cache=True)
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
        "--requests",
        type=int,
        default=600,
        help="requests in the throughput run (600 = 30 s at 1,200/min)",
    )
    parser.add_argument(
        "--rpm", type=int, default=1200, help="enforced requests/min (server and client)"
    )
    parser.add_argument(
        "--latency", type=float, default=0.1, help="server latency per request, seconds"
    )
    parser.add_argument("--concurrency", type=int, default=16, help="client max_concurrency")
    parser.add_argument(
        "--cached-calls", type=int, default=2000, help="distinct requests in the cached-call run"
    )
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-client-") as temp:
        work = Path(temp)
        prompts = work / "prompts"
        prompts.mkdir()
        (prompts / f"{TEMPLATE_ID}.md").write_text(TEMPLATE, encoding="utf-8")
        asyncio.run(throughput(args, work, prompts))
        asyncio.run(cached_overhead(args, work, prompts))


if __name__ == "__main__":
    main()
