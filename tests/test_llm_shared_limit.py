"""One requests/min limit across processes, held by a real Prefect server (issue #12, item 4).

Two client processes, each configured with the full ``requests_per_minute``,
send to one fake server. With ``limits.shared_limit_name`` they share the
limit through a Prefect global concurrency limit: together they never send
more than 5% above it, and no window holds more than the limit plus one burst.
"""

from __future__ import annotations

import json
import random
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel

from memoryquest.llm.shared_limit import SharedRequestLimit
from memoryquest.simulator import simulates
from memoryquest.testing import FakeOpenAIServer

TEMPLATE_ID = "test_llm_shared_limit_count"
TEMPLATE = f"""---
id: {TEMPLATE_ID}
version: 1
purpose: a tiny request for the cross-process rate limit test
---
## system
You count.
## user
Worker $who, request $n.
"""
RPM = 600
PER_PROCESS = 150
LIMIT_NAME = "memoryquest-test-shared-requests"

CLIENT = """
import asyncio, sys
from pathlib import Path
from pydantic import BaseModel
from memoryquest.llm.factory import build_client
from memoryquest.llm.request import LLMRequest
from memoryquest.settings import Settings

class Count(BaseModel):
    who: str
    n: int

async def main(base_url: str, prompts: str, output: str, who: str, count: int, rpm: int, name: str) -> None:
    settings = Settings(
        output_dir=Path(output),
        cache={"enabled": False},
        endpoint={"base_url": base_url, "simulator_hints": True, "chat_model": "gpt-4o-mini"},
        limits={"requests_per_minute": rpm, "tokens_per_minute": 10_000_000,
                "max_concurrency": 8, "shared_limit_name": name},
    )
    client = build_client(settings, prompts_dir=Path(prompts))
    requests = [LLMRequest(sys.argv[8], {"who": who, "n": i}, Count, stage="count") for i in range(count)]
    answers = await client.complete_all(requests)
    assert [a.n for a in answers] == list(range(count))
    await client.aclose()

asyncio.run(main(sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4], int(sys.argv[5]), int(sys.argv[6]), sys.argv[7]))
"""


class Count(BaseModel):
    who: str
    n: int


@simulates(TEMPLATE_ID)
def _count(variables: dict[str, Any], rng: random.Random) -> Count:
    return Count(who=variables["who"], n=variables["n"])


@pytest.fixture
def server() -> Iterator[FakeOpenAIServer]:
    with FakeOpenAIServer(latency=0.02) as running:
        yield running


def test_two_processes_share_one_rate_limit(
    prefect_api: dict[str, str], server: FakeOpenAIServer, tmp_path: Path
) -> None:
    prompts = tmp_path / "prompts"
    prompts.mkdir()
    (prompts / f"{TEMPLATE_ID}.md").write_text(TEMPLATE, encoding="utf-8")
    script = tmp_path / "client.py"
    script.write_text(CLIENT, encoding="utf-8")
    env = {k: v for k, v in prefect_api.items() if not k.startswith(("MEMORYQUEST_", "OPENAI_"))}
    workers = [
        subprocess.Popen(
            [
                sys.executable,
                str(script),
                server.url,
                str(prompts),
                str(tmp_path / f"out-{who}"),
                who,
                str(PER_PROCESS),
                str(RPM),
                LIMIT_NAME,
                TEMPLATE_ID,
            ],
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
        )
        for who in ("a", "b")
    ]
    for worker in workers:
        output, _ = worker.communicate(timeout=120)
        assert worker.returncode == 0, output.decode(errors="replace")

    chats = [r for r in server.requests if r.path.endswith("/chat/completions")]
    assert len(chats) == 2 * PER_PROCESS and server.count(status=429) == 0
    times = sorted(r.at for r in chats)
    by_worker = {
        who: [r.at for r in chats if f"Worker {who}," in json.dumps(r.body)] for who in ("a", "b")
    }
    overlap = min(max(t) for t in by_worker.values()) - max(min(t) for t in by_worker.values())
    # Both were sending together for a good part of the run. Not "most of it": on a loaded machine
    # one worker process can start seconds after the other (0.44 of the span seen under load).
    assert overlap > 0.3 * (times[-1] - times[0])

    burst = SharedRequestLimit(LIMIT_NAME, RPM).slots
    span = times[-1] - times[0]
    # Past the first burst, the pair sends at the shared rate (each alone would send the full rate).
    per_minute = (len(times) - burst) / span * 60
    print(f"two processes, one shared limit of {RPM}/min: {per_minute:.1f} requests/min")
    # The safety property is tight: never above the limit by more than 5% (each process alone would send
    # the full rate, so an unshared limit shows as about twice it). Below it the bound is loose, because
    # on a loaded 2-core machine the Prefect server answers slot requests late (599.8/min quiet, 561 and
    # 532/min under load); it still fails when sharing wrongly halves the rate.
    assert 0.6 * RPM <= per_minute <= 1.05 * RPM, f"{per_minute:.0f} requests/min"
    # No window holds more than the limit plus one burst.
    window = 10.0
    for start, at in enumerate(times):
        inside = sum(1 for t in times[start:] if t < at + window)
        assert inside <= RPM / 60 * window + burst + 1, f"{inside} requests in {window:g} s"
