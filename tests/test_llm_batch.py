"""Batch API mode through the real openai SDK against the loopback server's /v1/files and /v1/batches."""

from __future__ import annotations

import asyncio
import dataclasses
import json
import random
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import openai
import pytest
from pydantic import BaseModel

from memoryquest.llm.backends import ChatCall
from memoryquest.llm.batch_api import TERMINAL_STATUSES, RemoteBatch
from memoryquest.llm.batch_openai import HINTS_FIELD, OpenAIBatchAPI, openai_batch_api
from memoryquest.llm.client import ModelClient
from memoryquest.llm.errors import LLMConfigurationError, LLMRefusalError, PermanentBackendError
from memoryquest.llm.factory import build_client
from memoryquest.llm.hints import TEMPLATE_HEADER
from memoryquest.llm.limiter import RetryPolicy
from memoryquest.llm.request import LLMRequest
from memoryquest.llm.simulated import SimulatedChatBackend
from memoryquest.settings import Settings
from memoryquest.simulator import simulates
from memoryquest.testing import FakeOpenAIServer, Fault, LoggedRequest
from memoryquest.testing.fake_openai.chat import billed_prompt_tokens

TEMPLATE_ID = "test_llm_batch_describe"
TEMPLATE = f"""---
id: {TEMPLATE_ID}
version: 1
purpose: describe a word (test-only template)
---
## system
You describe single words precisely.
## user
Describe the word $word and list a few tags for it.
"""
MODEL = "gpt-4o-mini"
WORDS = [f"word{i:02d}" for i in range(10)]


class WordAnswer(BaseModel):
    word: str
    length: int
    tags: list[str]


@simulates(TEMPLATE_ID)
def _describe(variables: dict[str, Any], rng: random.Random) -> dict[str, Any]:
    word = variables["word"]
    return {
        "word": word,
        "length": len(word),
        "tags": sorted(rng.sample(["short", "noun", "verb", "rare", "common"], 2)),
    }


@pytest.fixture(scope="module")
def prompts_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    directory = tmp_path_factory.mktemp("prompts")
    (directory / f"{TEMPLATE_ID}.md").write_text(TEMPLATE, encoding="utf-8")
    return directory


@pytest.fixture(scope="module")
def module_server() -> Iterator[FakeOpenAIServer]:
    with FakeOpenAIServer() as server:
        yield server


@pytest.fixture
def server(module_server: FakeOpenAIServer) -> FakeOpenAIServer:
    module_server.reset()
    return module_server


@pytest.fixture
async def make_client(
    server: FakeOpenAIServer,
    prompts_dir: Path,
    tmp_path: Path,
    clean_settings_env: pytest.MonkeyPatch,
) -> AsyncIterator[Any]:
    made: list[ModelClient] = []

    def make(output: Path | None = None, batch: bool = True, **endpoint: Any) -> ModelClient:
        settings = Settings(
            output_dir=output or tmp_path / "out",
            endpoint={
                "base_url": server.url,
                "simulator_hints": True,  # the fake server answers from the simulator
                "chat_model": MODEL,
                "timeout_seconds": 2.0,
                "batch": batch,
                "batch_poll_seconds": 0.005,
                "batch_max_poll_seconds": 0.02,
                "batch_collect_seconds": 0.05,
                "batch_stages": ["queries"],
                **endpoint,
            },
            limits={"requests_per_minute": 60_000, "tokens_per_minute": 50_000_000},
        )
        retry = RetryPolicy(max_retries=3, base_delay=0.005, max_delay=0.02)
        made.append(build_client(settings, retry=retry, prompts_dir=prompts_dir))
        return made[-1]

    yield make
    for client in made:
        await client.aclose()


def requests_for(words: list[str], **options: Any) -> list[LLMRequest[Any]]:
    return [
        LLMRequest(TEMPLATE_ID, {"word": w}, WordAnswer, stage="queries", **options) for w in words
    ]


def assert_complete(answers: list[Any], words: list[str] = WORDS) -> None:
    assert len(answers) == len(words)
    for word, answer in zip(words, answers, strict=True):
        assert isinstance(answer, WordAnswer)
        assert answer.word == word and answer.length == len(word) and len(answer.tags) == 2


def calls(server: FakeOpenAIServer, method: str, path: str) -> list[LoggedRequest]:
    return [r for r in server.requests if r.method == method and r.path == path]


def batch_inputs(server: FakeOpenAIServer) -> list[list[dict[str, Any]]]:
    """The uploaded JSONL of every batch created, in creation order."""
    return [
        server.file_lines(r.body["input_file_id"]) for r in calls(server, "POST", "/v1/batches")
    ]


def state_files(output: Path) -> list[Path]:
    return sorted((output / ".cache" / "batches").glob("*.json"))


async def crash_once_recorded(run: asyncio.Future[Any], output: Path) -> dict[str, Any]:
    """Wait until the batch of ``run`` is recorded, then kill ``run``; the recorded state."""
    for _ in range(500):
        states = state_files(output)
        batches = json.loads(states[0].read_text())["batches"] if states else []
        if batches and batches[0]["batch_id"]:
            break
        await asyncio.sleep(0.01)
    else:
        pytest.fail("the batch was never recorded")
    run.cancel()  # the process dies while the batch is in flight
    with pytest.raises(asyncio.CancelledError):
        await run
    state: dict[str, Any] = json.loads(state_files(output)[0].read_text())
    return state


async def test_a_batch_of_structured_requests_completes_as_one_batch(
    server: FakeOpenAIServer, make_client: Any, tmp_path: Path
) -> None:
    client = make_client()
    answers = await client.complete_all(requests_for(WORDS))
    assert_complete(answers)
    assert len(calls(server, "POST", "/v1/files")) == 1
    assert len(calls(server, "POST", "/v1/batches")) == 1
    assert calls(server, "POST", "/v1/chat/completions") == []  # nothing went online
    assert len(server.batch_lines) == len(WORDS)
    (created,) = calls(server, "POST", "/v1/batches")
    assert (
        created.body["endpoint"] == "/v1/chat/completions"
        and created.body["completion_window"] == "24h"
    )
    (upload,) = calls(server, "POST", "/v1/files")
    assert upload.body["purpose"] == "batch" and upload.body["file"]["filename"].endswith(".jsonl")

    (lines,) = batch_inputs(server)
    cached = {p.stem for p in (tmp_path / "out" / ".cache" / "chat").rglob("*.json")}
    assert {line["custom_id"] for line in lines} == cached  # custom_id is the cache key
    for line in lines:
        assert line["method"] == "POST" and line["url"] == "/v1/chat/completions"
        response_format = line["body"]["response_format"]
        assert (
            response_format["type"] == "json_schema"
            and response_format["json_schema"]["strict"] is True
        )
        schema = response_format["json_schema"]["schema"]
        assert schema["additionalProperties"] is False and schema["required"] == [
            "word",
            "length",
            "tags",
        ]
        assert line["body"]["model"] == MODEL and [m["role"] for m in line["body"]["messages"]] == [
            "system",
            "user",
        ]
    assert state_files(tmp_path / "out") == []  # done: nothing left to resume
    (row,) = client.usage()
    assert row.stage == "queries" and row.requests == len(WORDS) and row.cost_usd > 0


async def test_a_second_run_makes_zero_requests(
    server: FakeOpenAIServer, make_client: Any, tmp_path: Path
) -> None:
    answers = await make_client(tmp_path / "run").complete_all(requests_for(WORDS))
    server.clear_log()
    again = make_client(tmp_path / "run")
    assert await again.complete_all(requests_for(WORDS)) == answers
    assert server.count() == 0
    (row,) = again.usage()
    assert row.cache_hits == len(WORDS) and row.requests == 0 and row.cost_usd == 0


@pytest.mark.parametrize("first_batched", [False, True], ids=["online-first", "batch-first"])
async def test_both_processors_find_each_others_answers_in_the_cache(
    server: FakeOpenAIServer, make_client: Any, tmp_path: Path, first_batched: bool
) -> None:
    """One cache lookup (ChatExchange.lookup): an answer cached one way is found the other way."""
    first = make_client(tmp_path / "run", batch=first_batched)
    answers = await first.complete_all(requests_for(WORDS))
    assert bool(calls(server, "POST", "/v1/batches")) is first_batched
    server.clear_log()
    again = make_client(tmp_path / "run", batch=not first_batched)
    assert await again.complete_all(requests_for(WORDS)) == answers
    assert server.count() == 0
    (row,) = again.usage()
    assert row.cache_hits == len(WORDS) and row.requests == 0 and row.cost_usd == 0


async def test_a_restart_polls_the_batch_in_flight_instead_of_sending_it_again(
    server: FakeOpenAIServer, make_client: Any, tmp_path: Path
) -> None:
    server.batch_polls = 10**6  # the batch stays in progress until we let it finish
    output = tmp_path / "run"
    state = await crash_once_recorded(
        asyncio.ensure_future(make_client(output).complete_all(requests_for(WORDS))), output
    )
    (created,) = calls(server, "POST", "/v1/batches")
    (recorded,) = state["batches"]
    batch_id = recorded["batch_id"]
    assert (
        len(recorded["custom_ids"]) == len(WORDS)
        and recorded["input_file_id"] == created.body["input_file_id"]
    )
    assert server.batches[batch_id]["input_file_id"] == created.body["input_file_id"]

    server.clear_log()
    server.batch_polls = 0
    restarted = make_client(output)
    assert_complete(await restarted.complete_all(requests_for(WORDS)))
    assert calls(server, "POST", "/v1/files") == [] and calls(server, "POST", "/v1/batches") == []
    assert {r.path for r in calls(server, "GET", f"/v1/batches/{batch_id}")} == {
        f"/v1/batches/{batch_id}"
    }
    assert len(server.batch_lines) == len(WORDS)  # each request ran once, in the first batch
    assert state_files(output) == []


async def test_a_crash_between_creating_and_recording_the_batch_finds_it(
    server: FakeOpenAIServer, make_client: Any, tmp_path: Path
) -> None:
    server.batch_polls = 10**6
    output = tmp_path / "run"
    run = asyncio.ensure_future(make_client(output).complete_all(requests_for(WORDS[:3])))
    state = await crash_once_recorded(run, output)
    batch_id = state["batches"][0]["batch_id"]
    (path,) = state_files(output)
    state["batches"][0]["batch_id"] = None  # as if the process died before writing the id down
    path.write_text(json.dumps(state))

    server.clear_log()
    server.batch_polls = 0
    assert_complete(await make_client(output).complete_all(requests_for(WORDS[:3])), WORDS[:3])
    assert calls(server, "POST", "/v1/batches") == [] and calls(server, "POST", "/v1/files") == []
    assert calls(server, "GET", "/v1/batches") and calls(server, "GET", f"/v1/batches/{batch_id}")


async def test_only_the_failed_rows_go_out_again_in_a_smaller_batch(
    server: FakeOpenAIServer, make_client: Any
) -> None:
    client = make_client()
    server.script(
        Fault.schema_invalid(), Fault.truncated(), Fault.server_error(500)
    )  # lines 1, 2 and 3
    answers = await client.complete_all(requests_for(WORDS, max_output_tokens=300))
    assert_complete(answers)
    first, second = batch_inputs(server)
    assert len(first) == len(WORDS) and len(second) == 3
    invalid, truncated, errored = (line for line in first[:3])
    assert [line["custom_id"] for line in second] == [
        invalid["custom_id"],
        truncated["custom_id"],
        errored["custom_id"],
    ]
    repair, longer, again = second
    assert [m["role"] for m in repair["body"]["messages"]] == [
        "system",
        "user",
        "assistant",
        "user",
    ]
    assert repair["body"]["messages"][2]["content"] == json.dumps({"unexpected": True})
    assert "could not be used" in repair["body"]["messages"][3]["content"]
    assert truncated["body"]["max_tokens"] == 300 and longer["body"]["max_tokens"] == 600
    assert again["body"] == errored["body"]

    first_batch = next(iter(server.batches.values()))
    errors = server.file_lines(first_batch["error_file_id"])
    assert [(e["custom_id"], e["response"]["status_code"]) for e in errors] == [
        (errored["custom_id"], 500)
    ]
    assert len(server.file_lines(first_batch["output_file_id"])) == len(WORDS) - 1
    assert calls(server, "POST", "/v1/chat/completions") == []
    (row,) = client.usage()
    assert (
        row.requests == len(WORDS) + 2
    )  # the schema-invalid and truncated answers were billed too


async def test_batch_answers_cost_half_the_online_price_for_the_same_tokens(
    server: FakeOpenAIServer, make_client: Any, tmp_path: Path
) -> None:
    server.cached_tokens = 8
    online = make_client(tmp_path / "online", batch=False)
    await online.complete_all(requests_for(WORDS))
    assert len(calls(server, "POST", "/v1/chat/completions")) == len(WORDS)
    batched = make_client(tmp_path / "batched")
    await batched.complete_all(requests_for(WORDS))
    (online_row,) = online.usage()
    (batch_row,) = batched.usage()
    tokens = ("requests", "input_tokens", "output_tokens", "cached_tokens")
    assert [getattr(batch_row, t) for t in tokens] == [getattr(online_row, t) for t in tokens]
    assert online_row.cost_usd > 0
    assert batch_row.cost_usd == pytest.approx(online_row.cost_usd / 2, rel=1e-9)
    entry = json.loads(next((tmp_path / "batched" / ".cache" / "chat").rglob("*.json")).read_text())
    assert entry["calls"] == 1 and entry["cost_usd"] == pytest.approx(
        batch_row.cost_usd / len(WORDS), rel=0.2
    )


async def test_rows_failing_every_round_are_finished_online_at_full_price(
    server: FakeOpenAIServer, make_client: Any
) -> None:
    client = make_client(batch_rounds=2)
    server.script(
        Fault.server_error(500).matching("word00"), Fault.server_error(503).matching("word00")
    )
    answers = await client.complete_all(requests_for(WORDS[:4]))
    assert_complete(answers, WORDS[:4])
    first, second = batch_inputs(server)
    assert len(first) == 4 and [line["custom_id"] for line in second] == [first[0]["custom_id"]]
    (online,) = calls(server, "POST", "/v1/chat/completions")
    assert online.body["messages"] == first[0]["body"]["messages"]
    assert client.usage()[0].requests == 4


async def test_a_persistent_refusal_fails_that_request_only(
    server: FakeOpenAIServer, make_client: Any, tmp_path: Path
) -> None:
    refusals = [
        Fault.refusal("I cannot describe that word.").matching("word00")
    ] * 3  # once per batch
    server.script(*refusals)
    answers = await make_client(tmp_path / "a").complete_all(
        requests_for(WORDS[:4]), return_exceptions=True
    )
    assert isinstance(answers[0], LLMRefusalError) and "refused 3 times" in str(answers[0])
    assert_complete(answers[1:], WORDS[1:4])
    assert [len(lines) for lines in batch_inputs(server)] == [4, 1, 1]
    assert calls(server, "POST", "/v1/chat/completions") == []

    server.reset()
    server.script(*refusals)
    with pytest.raises(LLMRefusalError, match="reason: I cannot describe that word"):
        await make_client(tmp_path / "b").complete_all(requests_for(WORDS[:4]))
    server.reset()
    assert_complete(
        await make_client(tmp_path / "b").complete_all(requests_for(WORDS[:4])), WORDS[:4]
    )
    assert [len(lines) for lines in batch_inputs(server)] == [
        1
    ]  # the others were cached before the error


async def test_expired_rows_are_sent_again(server: FakeOpenAIServer, make_client: Any) -> None:
    server.batch_expire_after = 6
    client = make_client()
    answers = await client.complete_all(requests_for(WORDS))
    assert_complete(answers)
    first, second = batch_inputs(server)
    assert [line["custom_id"] for line in second] == [line["custom_id"] for line in first[6:]]
    statuses = [b["status"] for b in server.batches.values()]
    assert statuses == ["expired", "expired"] or statuses == ["expired", "completed"]


async def test_a_server_without_strict_schema_gets_json_mode_in_the_next_batch(
    server: FakeOpenAIServer, make_client: Any
) -> None:
    server.supports_json_schema = False
    client = make_client()
    assert_complete(await client.complete_all(requests_for(WORDS[:3])), WORDS[:3])
    first, second = batch_inputs(server)
    assert {line["body"]["response_format"]["type"] for line in first} == {"json_schema"}
    assert {line["body"]["response_format"]["type"] for line in second} == {"json_object"}
    assert "JSON schema" in second[0]["body"]["messages"][0]["content"]


async def test_a_set_above_the_per_batch_limit_is_split(
    server: FakeOpenAIServer, make_client: Any
) -> None:
    client = make_client()
    assert client.batch is not None
    client.batch.options = dataclasses.replace(client.batch.options, max_lines=4)
    assert_complete(await client.complete_all(requests_for(WORDS)))
    parts = batch_inputs(server)
    # Parts upload concurrently: their creation order is not part of the contract.
    assert sorted(len(lines) for lines in parts) == [2, 4, 4]
    custom_ids = [line["custom_id"] for lines in parts for line in lines]
    assert len(custom_ids) == len(set(custom_ids)) == len(WORDS)


async def test_a_batch_cancelled_elsewhere_fails_its_open_rows_without_resending(
    server: FakeOpenAIServer, make_client: Any, tmp_path: Path
) -> None:
    server.batch_polls = 10**6
    run = asyncio.ensure_future(
        make_client(tmp_path / "run").complete_all(requests_for(WORDS[:3]), return_exceptions=True)
    )
    while not server.batches:
        await asyncio.sleep(0.005)
    (batch_id,) = server.batches
    sdk = openai.AsyncOpenAI(base_url=server.url, api_key="test", max_retries=0)
    await sdk.batches.cancel(batch_id)
    await sdk.close()
    answers = await run
    assert all(isinstance(a, LLMConfigurationError) and "was cancelled" in str(a) for a in answers)
    assert len(calls(server, "POST", "/v1/batches")) == 1
    assert state_files(tmp_path / "run") == []


async def test_concurrent_complete_calls_travel_as_one_batch(
    server: FakeOpenAIServer, make_client: Any, tmp_path: Path
) -> None:
    client = make_client()
    words = [f"word{i:02d}" for i in range(20)]
    answers = await asyncio.gather(*(client.complete(r) for r in requests_for(words)))
    assert_complete(list(answers), words)
    assert (
        len(calls(server, "POST", "/v1/files")) == 1
        and len(calls(server, "POST", "/v1/batches")) == 1
    )
    assert calls(server, "POST", "/v1/chat/completions") == []
    (lines,) = batch_inputs(server)
    assert len(lines) == 20
    assert state_files(tmp_path / "out") == []
    (row,) = client.usage()
    assert row.requests == 20 and row.cost_usd > 0


async def test_identical_concurrent_requests_share_one_line(
    server: FakeOpenAIServer, make_client: Any
) -> None:
    client = make_client()
    asked = requests_for(["alpha", "beta", "alpha", "alpha"])
    singles = asyncio.gather(*(client.complete(r) for r in asked))
    together = client.complete_all(requests_for(["beta", "gamma"]))
    answers, more = await asyncio.gather(singles, together)
    assert_complete([*answers, *more], ["alpha", "beta", "alpha", "alpha", "beta", "gamma"])
    assert answers[0] == answers[2] == answers[3] and answers[1] == more[0]
    (lines,) = batch_inputs(server)  # complete and complete_all calls share the batch
    assert sorted(line["body"]["messages"][1]["content"].split()[3] for line in lines) == [
        "alpha",
        "beta",
        "gamma",
    ]
    (row,) = client.usage()
    assert row.requests == 3 and row.cache_hits == 3


async def test_a_failing_line_is_retried_alone_and_fails_only_its_caller(
    server: FakeOpenAIServer, make_client: Any
) -> None:
    client = make_client()
    words = [f"word{i:02d}" for i in range(8)]
    server.script(
        Fault.schema_invalid().matching("word03"),
        *[Fault.refusal("Not this one.").matching("word05")] * 3,
    )
    answers = await asyncio.gather(
        *(client.complete(r) for r in requests_for(words)), return_exceptions=True
    )
    assert isinstance(answers[5], LLMRefusalError) and "reason: Not this one." in str(answers[5])
    assert_complete(answers[:5] + answers[6:], words[:5] + words[6:])
    first, *resent = batch_inputs(server)
    assert len(first) == 8 and [len(lines) for lines in resent] == [
        2,
        1,
    ]  # only the failing lines, again
    repaired = next(line for lines in resent for line in lines if "word03" in json.dumps(line))
    assert [m["role"] for m in repaired["body"]["messages"]] == [
        "system",
        "user",
        "assistant",
        "user",
    ]
    assert calls(server, "POST", "/v1/chat/completions") == []


async def test_a_rerun_of_collected_calls_makes_zero_requests(
    server: FakeOpenAIServer, make_client: Any, tmp_path: Path
) -> None:
    first = make_client(tmp_path / "run")
    answers = await asyncio.gather(*(first.complete(r) for r in requests_for(WORDS)))
    server.clear_log()
    again = make_client(tmp_path / "run")
    assert list(await asyncio.gather(*(again.complete(r) for r in requests_for(WORDS)))) == list(
        answers
    )
    assert server.count() == 0
    (row,) = again.usage()
    assert row.cache_hits == len(WORDS) and row.requests == 0 and row.cost_usd == 0


async def ask_spaced(client: ModelClient, words: list[str], spacing: float) -> list[Any]:
    """One ``complete`` call per word, started ``spacing`` seconds apart."""
    tasks = []
    for request in requests_for(words):
        tasks.append(asyncio.ensure_future(client.complete(request)))
        await asyncio.sleep(spacing)
    return list(await asyncio.gather(*tasks))


async def test_calls_spaced_beyond_the_idle_window_go_in_separate_batches(
    server: FakeOpenAIServer, make_client: Any, tmp_path: Path
) -> None:
    spaced = make_client(tmp_path / "spaced", batch_collect_seconds=0.05)
    assert_complete(await ask_spaced(spaced, WORDS[:3], 0.3), WORDS[:3])
    assert [len(lines) for lines in batch_inputs(server)] == [1, 1, 1]

    server.reset()
    close = make_client(tmp_path / "close", batch_collect_seconds=0.6)
    assert_complete(await ask_spaced(close, WORDS[:3], 0.03), WORDS[:3])
    assert [len(lines) for lines in batch_inputs(server)] == [3]


async def test_a_full_collector_sends_without_waiting_for_the_window(
    server: FakeOpenAIServer, make_client: Any
) -> None:
    client = make_client(batch_collect_seconds=60)
    assert client.batch is not None
    client.batch.options = dataclasses.replace(client.batch.options, collect_max=5)
    answers = await asyncio.wait_for(
        asyncio.gather(*(client.complete(r) for r in requests_for(WORDS))), 10
    )
    assert_complete(list(answers))
    assert [len(lines) for lines in batch_inputs(server)] == [5, 5]


async def test_a_restart_waits_for_recorded_lines_whatever_the_new_grouping(
    server: FakeOpenAIServer, make_client: Any, tmp_path: Path
) -> None:
    server.batch_polls = 10**6
    output = tmp_path / "run"
    crashed = make_client(output)
    run = asyncio.ensure_future(
        asyncio.gather(*(crashed.complete(r) for r in requests_for(WORDS[:6])))
    )
    (recorded,) = (await crash_once_recorded(run, output))["batches"]
    assert len(recorded["custom_ids"]) == 6

    server.clear_log()
    server.batch_polls = 0
    restarted = make_client(output)
    # Three recorded requests arrive with three new ones; the other three recorded ones only later.
    first = await asyncio.gather(
        *(restarted.complete(r) for r in requests_for(WORDS[:3] + WORDS[6:9]))
    )
    assert_complete(list(first), WORDS[:3] + WORDS[6:9])
    (new_batch,) = calls(server, "POST", "/v1/batches")
    assert [len(lines) for lines in batch_inputs(server)] == [3]
    assert {line["custom_id"] for line in batch_inputs(server)[0]}.isdisjoint(
        recorded["custom_ids"]
    )
    assert calls(server, "GET", f"/v1/batches/{recorded['batch_id']}")

    server.clear_log()
    later = await asyncio.gather(*(restarted.complete(r) for r in requests_for(WORDS[3:6])))
    assert_complete(list(later), WORDS[3:6])
    assert server.count() == 0  # answered by the recorded batch's lines, read once already
    assert len(server.batch_lines) == 9 and state_files(output) == []
    (row,) = restarted.usage()
    assert row.requests == 9


async def test_a_cancelled_caller_leaves_the_batch_to_the_others(
    server: FakeOpenAIServer, make_client: Any, tmp_path: Path
) -> None:
    server.batch_polls = 10**6
    client = make_client(tmp_path / "run")
    leaving, staying = (asyncio.ensure_future(client.complete(r)) for r in requests_for(WORDS[:2]))
    while not server.batches:
        await asyncio.sleep(0.005)
    leaving.cancel()
    with pytest.raises(asyncio.CancelledError):
        await leaving
    server.batch_polls = 0
    assert_complete([await staying], WORDS[1:2])
    assert len(calls(server, "POST", "/v1/batches")) == 1 and state_files(tmp_path / "run") == []
    server.clear_log()
    assert_complete([await client.complete(requests_for(WORDS[:1])[0])], WORDS[:1])
    assert server.count() == 0  # the abandoned request's answer was cached all the same


async def test_online_mode_sends_complete_calls_directly(
    server: FakeOpenAIServer, make_client: Any
) -> None:
    client = make_client(batch=False)
    answers = await asyncio.gather(*(client.complete(r) for r in requests_for(WORDS[:3])))
    assert_complete(list(answers), WORDS[:3])
    assert len(calls(server, "POST", "/v1/chat/completions")) == 3 and server.batches == {}


async def test_the_fake_batch_api_speaks_the_sdk(server: FakeOpenAIServer) -> None:
    sdk = openai.AsyncOpenAI(base_url=server.url, api_key="test", max_retries=0)
    try:
        bad = await sdk.files.create(
            file=("bad.jsonl", b'{"custom_id": "a"}\nnot json\n'), purpose="batch"
        )
        created = await sdk.batches.create(
            input_file_id=bad.id, endpoint="/v1/chat/completions", completion_window="24h"
        )
        assert created.status == "validating"
        failed = await sdk.batches.retrieve(created.id)  # validation ends at the next look
        assert failed.status == "failed" and failed.errors is not None
        assert [(e.line, e.code) for e in failed.errors.data or []] == [
            (1, "invalid_request"),
            (2, "invalid_json_line"),
        ]
        with pytest.raises(openai.NotFoundError):
            await sdk.batches.retrieve("batch-missing")

        server.batch_polls = 10**6
        good = await sdk.files.create(
            file=(
                "good.jsonl",
                json.dumps(
                    {
                        "custom_id": "x",
                        "method": "POST",
                        "url": "/v1/chat/completions",
                        "body": {"model": MODEL},
                    }
                ).encode(),
            ),
            purpose="batch",
        )
        assert (await sdk.files.content(good.id)).text.startswith('{"custom_id": "x"')
        running = await sdk.batches.create(
            input_file_id=good.id, endpoint="/v1/chat/completions", completion_window="24h"
        )
        assert (await sdk.batches.retrieve(running.id)).status == "in_progress"
        assert (await sdk.batches.cancel(running.id)).status == "cancelling"
        assert (await sdk.batches.retrieve(running.id)).status == "cancelled"
        listed = await sdk.batches.list()
        assert [b.id for b in listed.data] == [running.id, failed.id]
    finally:
        await sdk.close()


# --------------------------------------------------------------------------- stages and rounds


async def test_stages_left_out_of_batch_stages_go_online(
    server: FakeOpenAIServer, make_client: Any
) -> None:
    """A stage left out of batch_stages is asked online while the others batch."""
    client = make_client()
    online = [LLMRequest(TEMPLATE_ID, {"word": w}, WordAnswer, stage="memory") for w in WORDS[:2]]
    assert_complete(await client.complete_all(online), WORDS[:2])
    assert_complete([await client.complete(online[0])], WORDS[:1])  # cached, not sent again
    assert len(calls(server, "POST", "/v1/chat/completions")) == 2 and server.batches == {}
    assert_complete(await client.complete_all(requests_for(WORDS[2:5])), WORDS[2:5])
    assert len(batch_inputs(server)) == 1 and len(batch_inputs(server)[0]) == 3


def test_every_stage_is_batched_by_default() -> None:
    stages = Settings().endpoint.batch_stages
    assert {"queries", "timelines", "dialogues", "memory", "pgr", "pgr_judge"} <= set(stages)


async def test_a_persona_that_fails_leaves_the_lockstep() -> None:
    """The others go on to the next stage group without it, and its own waits end."""
    from memoryquest.orchestration.lockstep import Lockstep

    lockstep = Lockstep(3)
    reached: list[str] = []

    async def walk(name: str, fail: bool) -> None:
        with lockstep.member():
            await lockstep.reach("queries")
            if fail:
                raise RuntimeError(f"{name} failed")
            await lockstep.reach("memory")
            reached.append(name)

    results = await asyncio.wait_for(
        asyncio.gather(walk("a", False), walk("b", True), walk("c", False), return_exceptions=True),
        timeout=5,
    )
    assert [type(r).__name__ for r in results] == ["NoneType", "RuntimeError", "NoneType"]
    assert sorted(reached) == ["a", "c"]


SMALL_RUN = {
    "generation": {"queries_per_user": 2, "candidates_per_user": 8},
    "pgr": {"methods": ["query_only", "pgr_tot"], "judges": ["provenance"]},
}


@dataclasses.dataclass(frozen=True)
class BatchedRun:
    """What a whole pipeline run sent to the fake Batch API."""

    batches: int
    online: int  # chat requests sent online
    memory_lines: int  # memory extraction requests that travelled in batches
    memory_batches: int  # batches that carried any of them


def template_of(line: dict[str, Any]) -> str | None:
    return (line.get(HINTS_FIELD) or {}).get(TEMPLATE_HEADER)


async def batches_for_personas(
    users: list[str], server: FakeOpenAIServer, output: Path
) -> BatchedRun:
    """What the whole pipeline sends for ``users`` against the fake Batch API."""
    from memoryquest.intake import PersonaSelection, load_personas
    from memoryquest.pipeline import generate_dataset

    server.reset()
    # Rounds are counted, so no gate may ask again for one persona and not for the other
    # run: the learned framing checks (generation.announcing_probability_max and
    # pointing_probability_max) refuse a simulator sentence now and then, and each refusal is
    # a round of its own.
    generation = {
        **SMALL_RUN["generation"],
        "announcing_probability_max": 1.0,
        "pointing_probability_max": 1.0,
    }
    settings = Settings(
        output_dir=output,
        cache={"enabled": False},
        **{**SMALL_RUN, "generation": generation},
        endpoint={
            "base_url": server.url,
            "simulator_hints": True,
            "embedder": "local",
            "chat_model": MODEL,
            "batch": True,
            "batch_poll_seconds": 0.005,
            "batch_max_poll_seconds": 0.02,
            # Within one persona, concurrent steps still meet through the idle window:
            # 1 s holds on a busy two-core machine (the default is 2 s).
            "batch_collect_seconds": 1.0,
        },
        limits={"requests_per_minute": 60_000, "tokens_per_minute": 50_000_000},
    )
    intake = load_personas(
        Path(__file__).resolve().parent.parent / "personas" / "personalens",
        PersonaSelection(user_ids=users),
    )
    client = build_client(settings)
    try:
        dataset = await generate_dataset(intake.personas, client, settings)
    finally:
        await client.aclose()
    assert len(dataset.personas) == len(users) and dataset.queries
    online = calls(server, "POST", "/v1/chat/completions")
    memory = [
        sum(template_of(line) == "memory_extraction" for line in lines)
        for lines in batch_inputs(server)
    ]
    return BatchedRun(len(memory), len(online), sum(memory), sum(1 for n in memory if n))


async def test_batch_rounds_do_not_grow_with_the_number_of_personas(
    module_server: FakeOpenAIServer, tmp_path: Path, clean_settings_env: pytest.MonkeyPatch
) -> None:
    """The same step of every persona shares one batch: 3 personas take the rounds of 1, ±1.

    Memory too: its extractions are sequential per persona, and round k carries the k-th
    extraction of every persona, so nothing goes online and the stage is billed at the batch price.
    """
    one = await batches_for_personas(["user0"], module_server, tmp_path / "one")
    three = await batches_for_personas(
        ["user0", "user1", "user2"], module_server, tmp_path / "three"
    )
    assert abs(three.batches - one.batches) <= 1, (one, three)
    assert one.online == three.online == 0
    assert 0 < one.memory_lines < three.memory_lines
    assert one.memory_batches > 1 and abs(three.memory_batches - one.memory_batches) <= 1


# --------------------------------------------------------------------------- the enqueued-token queue


def input_tokens(server: FakeOpenAIServer, lines: list[dict[str, Any]]) -> int:
    """The prompt tokens a batch input enqueues, as the fake server counts them."""
    return sum(billed_prompt_tokens(line["body"]) for line in lines)


async def line_tokens_of(server: FakeOpenAIServer, make_client: Any, tmp_path: Path) -> list[int]:
    """The enqueued tokens of each WORDS line, measured by one unlimited run (then the log is cleared)."""
    assert_complete(await make_client(tmp_path / "measure").complete_all(requests_for(WORDS)))
    (lines,) = batch_inputs(server)
    server.reset()
    return [billed_prompt_tokens(line["body"]) for line in lines]


def refusals(server: FakeOpenAIServer) -> list[str]:
    return [
        batch_id
        for batch_id, batch in server.batches.items()
        if batch["errors"]
        and [e["code"] for e in batch["errors"]["data"]] == ["token_limit_exceeded"]
    ]


async def test_a_round_above_the_enqueued_token_limit_goes_in_several_files_that_fit(
    server: FakeOpenAIServer, make_client: Any, tmp_path: Path
) -> None:
    tokens = await line_tokens_of(server, make_client, tmp_path)
    limit = sum(tokens[:4])  # four lines fit at once, not five
    server.batch_enqueued_tokens_max = limit
    client = make_client(tmp_path / "run", batch_enqueued_tokens_max=limit)
    assert_complete(await client.complete_all(requests_for(WORDS)))
    inputs = batch_inputs(server)
    assert [len(lines) for lines in inputs] == [4, 4, 2]
    assert all(input_tokens(server, lines) <= limit for lines in inputs)
    assert refusals(server) == []  # each waited for the one before: the server never refused
    assert calls(server, "POST", "/v1/chat/completions") == []


async def test_a_batch_refused_for_the_queue_limit_goes_again_when_an_earlier_one_finishes(
    server: FakeOpenAIServer, make_client: Any, tmp_path: Path
) -> None:
    tokens = await line_tokens_of(server, make_client, tmp_path)
    server.batch_enqueued_tokens_max = sum(tokens[:7])  # one file of five fits, two do not
    client = make_client(tmp_path / "run")  # the client believes the published, larger limit
    assert client.batch is not None
    client.batch.options = dataclasses.replace(client.batch.options, max_lines=5)
    server.batch_polls = 10**6  # the first accepted batch runs only once the other was refused
    run = asyncio.ensure_future(client.complete_all(requests_for(WORDS)))
    for _ in range(2000):
        if refusals(server):
            break
        await asyncio.sleep(0.005)
    else:
        pytest.fail("the second batch was never refused")
    server.batch_polls = 0
    assert_complete(await run)
    (refused,) = refusals(server)
    created = [r.body["input_file_id"] for r in calls(server, "POST", "/v1/batches")]
    assert len(created) == 3 and created.count(server.batches[refused]["input_file_id"]) == 2
    assert calls(server, "POST", "/v1/chat/completions") == []
    assert len(server.batch_lines) == len(WORDS)  # a refused batch runs no line
    assert state_files(tmp_path / "run") == []


async def test_a_batch_refused_with_nothing_of_ours_in_flight_is_cut_to_fit_next_round(
    server: FakeOpenAIServer, make_client: Any, tmp_path: Path
) -> None:
    tokens = await line_tokens_of(server, make_client, tmp_path)
    server.batch_enqueued_tokens_max = sum(tokens[:6])  # the whole round (10 lines) is refused
    assert_complete(await make_client(tmp_path / "run").complete_all(requests_for(WORDS)))
    inputs = batch_inputs(server)
    assert [len(lines) for lines in inputs] == [10, 6, 4]  # then cut under the limit it stated
    assert len(refusals(server)) == 1
    assert calls(server, "POST", "/v1/chat/completions") == []


async def test_a_crashed_run_finds_its_batch_beyond_the_first_page_of_the_list(
    server: FakeOpenAIServer, make_client: Any, tmp_path: Path
) -> None:
    server.batch_polls = 10**6
    output = tmp_path / "run"
    run = asyncio.ensure_future(make_client(output).complete_all(requests_for(WORDS[:3])))
    state = await crash_once_recorded(run, output)
    (path,) = state_files(output)
    state["batches"][0]["batch_id"] = None  # as if the process died before writing the id down
    path.write_text(json.dumps(state))
    sdk = openai.AsyncOpenAI(base_url=server.url, api_key="test", max_retries=0)
    try:  # 120 newer batches of someone else push ours to the second page
        other = await sdk.files.create(
            file=("other.jsonl", json.dumps(fake_line("x")).encode()), purpose="batch"
        )
        for _ in range(120):
            await sdk.batches.create(
                input_file_id=other.id, endpoint="/v1/chat/completions", completion_window="24h"
            )
    finally:
        await sdk.close()

    server.clear_log()
    server.batch_polls = 0
    assert_complete(await make_client(output).complete_all(requests_for(WORDS[:3])), WORDS[:3])
    assert calls(server, "POST", "/v1/batches") == []
    assert len(calls(server, "GET", "/v1/batches")) == 2


def fake_line(custom_id: str) -> dict[str, Any]:
    return {
        "custom_id": custom_id,
        "method": "POST",
        "url": "/v1/chat/completions",
        "body": {"model": MODEL, "messages": [{"role": "user", "content": "hello there"}]},
    }


async def test_the_fake_batch_passes_through_validating_in_progress_and_finalizing(
    server: FakeOpenAIServer,
) -> None:
    server.batch_finalizing_polls = 1
    sdk = openai.AsyncOpenAI(base_url=server.url, api_key="test", max_retries=0)
    try:
        uploaded = await sdk.files.create(
            file=("one.jsonl", json.dumps(fake_line("a")).encode()), purpose="batch"
        )
        batch = await sdk.batches.create(
            input_file_id=uploaded.id, endpoint="/v1/chat/completions", completion_window="24h"
        )
        seen = [batch.status]
        while batch.status not in ("completed", "failed", "expired", "cancelled"):
            batch = await sdk.batches.retrieve(batch.id)
            seen.append(batch.status)
        assert seen == ["validating", "in_progress", "finalizing", "completed"]
        counts = batch.request_counts  # the line ran (no simulator hints: answered with an error)
        assert counts and counts.completed + counts.failed == 1 and batch.error_file_id
    finally:
        await sdk.close()


async def test_the_fake_refuses_a_batch_above_its_enqueued_token_limit_until_room_is_made(
    server: FakeOpenAIServer,
) -> None:
    server.batch_polls = 10**6  # the first batch stays in progress until let go
    line = fake_line("a")
    server.batch_enqueued_tokens_max = billed_prompt_tokens(line["body"]) * 3 // 2
    sdk = openai.AsyncOpenAI(base_url=server.url, api_key="test", max_retries=0)

    async def submit() -> str:
        uploaded = await sdk.files.create(
            file=("one.jsonl", json.dumps(line).encode()), purpose="batch"
        )
        created = await sdk.batches.create(
            input_file_id=uploaded.id, endpoint="/v1/chat/completions", completion_window="24h"
        )
        return created.id

    try:
        first = await submit()
        assert (await sdk.batches.retrieve(first)).status == "in_progress"
        second = await sdk.batches.retrieve(await submit())
        assert second.status == "failed" and second.errors and second.errors.data
        (error,) = second.errors.data
        assert error.code == "token_limit_exceeded" and "Enqueued token limit" in (
            error.message or ""
        )
        server.batch_polls = 0
        assert (await sdk.batches.retrieve(first)).status == "completed"  # its tokens leave
        third = await sdk.batches.retrieve(await submit())
        assert third.status == "completed" and third.errors is None
    finally:
        await sdk.close()


async def test_the_fake_batch_list_pages_like_the_service(server: FakeOpenAIServer) -> None:
    sdk = openai.AsyncOpenAI(base_url=server.url, api_key="test", max_retries=0)
    try:
        uploaded = await sdk.files.create(
            file=("one.jsonl", json.dumps(fake_line("a")).encode()), purpose="batch"
        )
        made = [
            (
                await sdk.batches.create(
                    input_file_id=uploaded.id,
                    endpoint="/v1/chat/completions",
                    completion_window="24h",
                )
            ).id
            for _ in range(5)
        ]
        first = await sdk.batches.list(limit=2)
        assert [b.id for b in first.data] == made[::-1][:2] and first.has_more
        second = await sdk.batches.list(limit=2, after=first.data[-1].id)
        assert [b.id for b in second.data] == made[::-1][2:4] and second.has_more
        last = await sdk.batches.list(limit=2, after=second.data[-1].id)
        assert [b.id for b in last.data] == made[:1] and not last.has_more
        assert [b.id async for b in sdk.batches.list(limit=2)] == made[::-1]  # the SDK's paging
        with pytest.raises(openai.BadRequestError):
            await sdk.batches.list(limit=101)
    finally:
        await sdk.close()


# --- the OpenAI adapter (memoryquest.llm.batch_openai), one call at a time ---------------------


def calls_for(client: ModelClient, words: list[str]) -> list[ChatCall]:
    exchange = client.exchange
    return [exchange.next_call(exchange.attempt(request)) for request in requests_for(words)]


async def finished(api: OpenAIBatchAPI, batch_id: str) -> RemoteBatch:
    for _ in range(500):
        batch = await api.retrieve(batch_id)
        if batch.status in TERMINAL_STATUSES:
            return batch
        await asyncio.sleep(0.01)
    raise AssertionError(f"batch {batch_id} did not finish")


async def test_a_line_is_the_online_request_body_with_the_cache_key_and_hints(
    make_client: Any,
) -> None:
    client = make_client(batch=False)
    api = openai_batch_api(client.chat_backend)
    (call,) = calls_for(client, ["pear"])
    encoded, size = api.line("key-pear", call)
    line = json.loads(encoded)
    assert encoded.endswith(b"\n") and size.size == len(encoded)
    assert line["custom_id"] == "key-pear" and line["method"] == "POST"
    assert line["url"] == "/v1/chat/completions"
    assert line["body"]["messages"] == call.sent_messages()
    assert line["body"]["response_format"]["type"] == "json_schema"
    assert "extra_headers" not in line["body"] and "extra_body" not in line["body"]
    assert line[HINTS_FIELD]  # endpoint.simulator_hints: the fake server reads them here
    assert size.model == MODEL and size.tokens > 0


async def test_a_batch_goes_up_runs_and_comes_back_line_by_line(
    server: FakeOpenAIServer, make_client: Any
) -> None:
    client = make_client(batch=False)
    api = openai_batch_api(client.chat_backend)
    server.script(Fault.server_error(503))  # the first line of the batch
    content = b"".join(
        api.line(key, call)[0]
        for key, call in zip(
            ["key-pear", "key-plum"], calls_for(client, ["pear", "plum"]), strict=True
        )
    )
    file_id = await api.upload("spell.jsonl", content, timeout=5.0)
    assert [line["custom_id"] for line in server.file_lines(file_id)] == ["key-pear", "key-plum"]
    batch_id = await api.create(file_id, 1)
    batch = await finished(api, batch_id)
    assert batch.status == "completed" and batch.input_file_id == file_id
    assert batch.finished_requests == batch.total_requests == 2
    page = await api.page(None)
    assert batch_id in [b.id for b in page.batches if b.input_file_id == file_id]
    outcomes: dict[str, Any] = {}
    for file in (batch.output_file_id, batch.error_file_id):
        if file:
            outcomes.update(api.outcomes(await api.download(file, timeout=5.0)))
    failed, answered = outcomes["key-pear"], outcomes["key-plum"]
    assert answered.status == 200 and answered.result is not None
    assert WordAnswer.model_validate_json(answered.result.text or "").word == "plum"
    assert answered.result.usage_reported and answered.result.input_tokens > 0
    assert failed.status == 503 and failed.result is None and not failed.refuses_format


async def test_a_line_refused_for_its_output_format_says_so(
    server: FakeOpenAIServer, make_client: Any
) -> None:
    client = make_client(batch=False)
    api = openai_batch_api(client.chat_backend)
    server.supports_json_schema = False
    encoded, _ = api.line("key-fig", calls_for(client, ["fig"])[0])
    batch = await finished(api, await api.create(await api.upload("f.jsonl", encoded, 5.0), 1))
    text = "".join(
        [await api.download(f, 5.0) for f in (batch.output_file_id, batch.error_file_id) if f]
    )
    refused = api.outcomes(text)["key-fig"]
    assert refused.status == 400 and refused.refuses_format and refused.result is None
    assert refused.message is not None and "json_schema" in refused.message


async def test_sdk_errors_come_back_as_backend_errors(make_client: Any) -> None:
    api = openai_batch_api(make_client(batch=False).chat_backend)
    with pytest.raises(PermanentBackendError) as raised:
        await api.retrieve("batch_that_does_not_exist")
    assert raised.value.status == 404


def test_only_the_openai_backends_have_a_batch_api() -> None:
    with pytest.raises(LLMConfigurationError, match="has no Batch API"):
        openai_batch_api(SimulatedChatBackend(seed=1))
