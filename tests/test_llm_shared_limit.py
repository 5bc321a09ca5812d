"""One requests/min and one tokens/min limit across processes, held by a real Prefect server.

Two client processes, each configured with the full ``requests_per_minute``
(or ``tokens_per_minute``), send to one fake server. With
``limits.shared_limit_name`` they share the limits through Prefect global
concurrency limits: together they never send more than 5% above a limit,
and no window holds more than the limit plus one burst. In-process tests
check the token limit's grants and give-backs on the server itself.
"""

from __future__ import annotations

import json
import random
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel

from memoryquest.llm.factory import build_limiter
from memoryquest.llm.shared_limit import SharedRequestLimit
from memoryquest.settings import Settings
from memoryquest.simulator import simulates
from memoryquest.testing import FakeOpenAIServer

TEMPLATE_ID = "test_llm_shared_limit_count"
TEMPLATE = f"""---
id: {TEMPLATE_ID}
version: 1
purpose: a tiny request for the cross-process rate limit test
max_output_tokens: 16
---
## system
You count.
## user
Worker $who, request $n.
"""
# Well below what the Prefect server grants (some 11 slot requests/s on SQLite here): at rates near
# that, the server is what paces the pair, and an unshared limit would pass for a shared one.
RPM = 240
PER_PROCESS = 80
LIMIT_NAME = "memoryquest-test-shared-requests"
TPM = 2_400  # about 30 tokens a request: some 80 requests/min together, each asking twice
TOKENS_PER_PROCESS = 40
TOKENS_LIMIT_NAME = "memoryquest-test-shared-tokens"

CLIENT = """
import asyncio, json, sys
from pathlib import Path
from pydantic import BaseModel
from memoryquest.llm.factory import build_client
from memoryquest.llm.request import LLMRequest
from memoryquest.settings import Settings

class Count(BaseModel):
    who: str
    n: int

async def main(base_url: str, prompts: str, output: str, who: str, count: int, rpm: int, tpm: int,
               name: str, template: str, start: str) -> None:
    settings = Settings(
        output_dir=Path(output),
        cache={"enabled": False},
        endpoint={"base_url": base_url, "simulator_hints": True, "chat_model": "gpt-4o-mini"},
        limits={"requests_per_minute": rpm, "tokens_per_minute": tpm,
                "max_concurrency": 8, "shared_limit_name": name},
    )
    client = build_client(settings, prompts_dir=Path(prompts))
    requests = [LLMRequest(template, {"who": who, "n": i}, Count, stage="queries") for i in range(count)]
    # Both workers send together: a process that starts late on a loaded machine would otherwise
    # find the other one finished, and two unshared limits taking turns look like one shared limit.
    (Path(start) / f"ready-{who}").touch()
    while not (Path(start) / "go").exists():
        await asyncio.sleep(0.01)
    answers = await client.complete_all(requests)
    assert [a.n for a in answers] == list(range(count))
    total = client.ledger.total()
    print(json.dumps({"requests": total.requests, "tokens": total.input_tokens + total.output_tokens}))
    await client.aclose()

asyncio.run(main(*sys.argv[1:5], int(sys.argv[5]), int(sys.argv[6]), int(sys.argv[7]), *sys.argv[8:11]))
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


def run_pair(
    prefect_api: dict[str, str],
    server: FakeOpenAIServer,
    tmp_path: Path,
    *,
    count: int,
    rpm: int,
    tpm: int,
    name: str,
) -> tuple[list[float], dict[str, list[float]], list[dict[str, int]]]:
    """Two client processes ("a" and "b") send ``count`` requests each, sharing limits named ``name``.

    Returns the sorted send times of every chat request the fake server saw, each process's send times,
    and each process's usage.
    """
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
                str(count),
                str(rpm),
                str(tpm),
                name,
                TEMPLATE_ID,
                str(tmp_path),
            ],
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
        )
        for who in ("a", "b")
    ]
    deadline = time.monotonic() + 120
    while not all((tmp_path / f"ready-{who}").exists() for who in ("a", "b")):
        for worker in workers:
            if worker.poll() is not None:
                output, _ = worker.communicate()
                pytest.fail(
                    f"a worker ended before it was ready: {output.decode(errors='replace')}"
                )
        assert time.monotonic() < deadline, "the workers were not ready within 120 s"
        time.sleep(0.05)
    (tmp_path / "go").touch()
    usage = []
    for worker in workers:
        output, _ = worker.communicate(timeout=120)
        assert worker.returncode == 0, output.decode(errors="replace")
        usage.append(json.loads(output.decode().strip().splitlines()[-1]))

    chats = [r for r in server.requests if r.path.endswith("/chat/completions")]
    assert len(chats) == 2 * count and server.count(status=429) == 0
    by_worker = {
        who: [r.at for r in chats if f"Worker {who}," in json.dumps(r.body)] for who in ("a", "b")
    }
    return sorted(r.at for r in chats), by_worker, usage


def while_both_send(by_worker: dict[str, list[float]]) -> list[float]:
    """The send times inside the stretch where both processes were sending.

    Only there does an unshared limit show: two processes that take turns each stay under their own
    limit. The shared limit need not be fair, so one process may finish well before the other; the
    stretch must still last a few bursts (of a second each) to tell the limit from twice it.
    """
    begin = max(min(times) for times in by_worker.values())
    end = min(max(times) for times in by_worker.values())
    inside = sorted(t for times in by_worker.values() for t in times if begin <= t <= end)
    total = sum(len(times) for times in by_worker.values())
    assert end - begin >= 3.0, (
        f"both sent together for {end - begin:.1f} s ({len(inside)} of {total} requests)"
    )
    return inside


def test_two_processes_share_one_rate_limit(
    prefect_api: dict[str, str], server: FakeOpenAIServer, tmp_path: Path
) -> None:
    times, by_worker, _ = run_pair(
        prefect_api, server, tmp_path, count=PER_PROCESS, rpm=RPM, tpm=10_000_000, name=LIMIT_NAME
    )
    burst = SharedRequestLimit(LIMIT_NAME, RPM).requests.burst
    span = times[-1] - times[0]
    # Past the first burst, the pair sends at the shared rate (each alone would send the full rate).
    per_minute = (len(times) - burst) / span * 60
    print(f"two processes, one shared limit of {RPM}/min: {per_minute:.1f} requests/min")
    # The safety property is tight: never above the limit by more than 5% (each process alone would send
    # the full rate: two unshared limits showed 407/min here, and 414/min while both sent). Below it the
    # bound is loose, because on a loaded 2-core machine the Prefect server answers slot requests late;
    # it still fails when sharing wrongly halves the rate.
    assert 0.6 * RPM <= per_minute <= 1.05 * RPM, f"{per_minute:.0f} requests/min"
    # While both were sending, together they stayed under the one limit (unshared shows as twice it).
    both = while_both_send(by_worker)
    together = (len(both) - 1 - burst) / (both[-1] - both[0]) * 60
    print(f"while both sent ({len(both)} requests): {together:.1f} requests/min")
    assert together <= 1.05 * RPM, f"{together:.0f} requests/min while both sent"
    # No window holds more than the limit plus one burst.
    window = 10.0
    for start, at in enumerate(times):
        inside = sum(1 for t in times[start:] if t < at + window)
        assert inside <= RPM / 60 * window + burst + 1, f"{inside} requests in {window:g} s"


def test_two_processes_share_one_token_limit(
    prefect_api: dict[str, str], server: FakeOpenAIServer, tmp_path: Path
) -> None:
    """Requests/min is ten times what the tokens allow: tokens/min is the limit that binds."""
    times, by_worker, usage = run_pair(
        prefect_api,
        server,
        tmp_path,
        count=TOKENS_PER_PROCESS,
        rpm=6_000,
        tpm=TPM,
        name=TOKENS_LIMIT_NAME,
    )
    assert [u["requests"] for u in usage] == [TOKENS_PER_PROCESS] * 2
    tokens = sum(u["tokens"] for u in usage)
    per_request = tokens / len(times)  # the requests differ by a digit or two of their number
    burst = SharedRequestLimit(TOKENS_LIMIT_NAME, 6_000, TPM).tokens
    assert burst is not None
    span = times[-1] - times[0]
    # Past the first burst, the pair uses the shared tokens/min (each alone would use the full rate),
    # counted as the endpoint reported them.
    per_minute = (tokens - burst.burst) / span * 60
    print(
        f"two processes, one shared limit of {TPM} tokens/min: {per_minute:.0f} tokens/min "
        f"({per_request:.1f} tokens a request, {len(times) / span * 60:.0f} requests/min)"
    )
    # As for requests/min: tight above, loose below. Here each process is slowed by its own round trips
    # to the Prefect server (three a request), so two unshared limits showed 1.4 times the limit, not 2:
    # 3256 tokens/min, and 3354 while both sent.
    assert 0.6 * TPM <= per_minute <= 1.05 * TPM, f"{per_minute:.0f} tokens/min"
    both = while_both_send(by_worker)
    together = ((len(both) - 1) * per_request - burst.burst) / (both[-1] - both[0]) * 60
    print(f"while both sent ({len(both)} requests): {together:.0f} tokens/min")
    assert together <= 1.05 * TPM, f"{together:.0f} tokens/min while both sent"
    window = 10.0
    for start, at in enumerate(times):
        inside = sum(1 for t in times[start:] if t < at + window) * per_request
        limit = TPM / 60 * window + burst.burst + per_request
        assert inside <= limit, f"{inside:.0f} tokens in {window:g} s"


# --------------------------------------------------------------------------- the token limit itself


async def active_slots(name: str) -> float:
    """The limit's slots in use now, as the server counts them (after decay)."""
    from prefect.client.orchestration import get_client

    async with get_client() as client:
        limit = await client.read_global_concurrency_limit_by_name(name)
    return float(limit.active_slots)


async def test_a_request_takes_its_tokens_and_gives_back_what_it_did_not_use(
    prefect_in_process: dict[str, str],
) -> None:
    # 6 requests and 6 tokens a minute (0.1/s), bursts of 100: what the server holds barely moves.
    gate = SharedRequestLimit("memoryquest-test-give-back", 6, 6, burst_seconds=1_000)
    await gate.acquire(40)
    taken = await active_slots("memoryquest-test-give-back-tokens")
    assert 38 <= taken <= 40
    await gate.give_back(30)
    left = await active_slots("memoryquest-test-give-back-tokens")
    assert left == pytest.approx(taken - 30, abs=2)
    # The request itself went to the requests/min limit (100 slots, 10 of which decay a second).
    assert 50 <= await active_slots("memoryquest-test-give-back") <= 100


async def test_a_request_above_the_burst_takes_its_tokens_in_several_grants(
    prefect_in_process: dict[str, str],
) -> None:
    # 600 tokens/min: 10 a second, and a burst of 10. Asking the server for 25 at once is refused
    # outright (more than the limit's size); in grants of 10, 10 and 5 it takes at least 1.5 s.
    gate = SharedRequestLimit("memoryquest-test-chunks", 60_000, 600)
    assert gate.tokens is not None and gate.tokens.burst == 10
    started = time.monotonic()
    await gate.acquire(25)
    assert time.monotonic() - started >= 1.4
    assert await active_slots("memoryquest-test-chunks-tokens") <= 10


async def test_without_a_token_rate_only_requests_are_shared(
    prefect_in_process: dict[str, str],
) -> None:
    from prefect.client.orchestration import get_client
    from prefect.exceptions import ObjectNotFound

    gate = SharedRequestLimit("memoryquest-test-requests-only", 60_000)
    await gate.acquire(10_000)
    assert gate.tokens is None
    async with get_client() as client:
        with pytest.raises(ObjectNotFound):
            await client.read_global_concurrency_limit_by_name(
                "memoryquest-test-requests-only-tokens"
            )


def test_the_shared_limits_follow_the_settings(clean_settings_env: pytest.MonkeyPatch) -> None:
    assert build_limiter(Settings()).gate is None  # unset: each process keeps only its own limits
    gate = build_limiter(
        Settings(
            limits={
                "requests_per_minute": 1200,
                "tokens_per_minute": 90_000,
                "shared_limit_name": "run-7",
            }
        )
    ).gate
    assert isinstance(gate, SharedRequestLimit)
    assert gate.tokens is not None
    assert (gate.requests.name, gate.requests.per_second) == ("run-7", 20.0)
    assert (gate.tokens.name, gate.tokens.per_second) == ("run-7-tokens", 1500.0)
