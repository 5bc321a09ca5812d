"""The real openai SDK path against the loopback server: faults, cache, limits, accounting."""

from __future__ import annotations

import json
import random
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from pydantic import BaseModel

from memoryquest.llm.client import ModelClient
from memoryquest.llm.errors import (
    CircuitOpenError,
    LLMConfigurationError,
    LLMContentFilterError,
    LLMRefusalError,
    LLMTransportError,
    LLMTruncatedError,
)
from memoryquest.llm.factory import build_client
from memoryquest.llm.limiter import RetryPolicy
from memoryquest.llm.request import LLMRequest
from memoryquest.llm.tokens import token_counter
from memoryquest.settings import Settings
from memoryquest.simulator import simulate, simulates
from memoryquest.testing import FakeOpenAIServer, Fault, FaultKind, ReplayOpenAIServer
from memoryquest.testing.fake_openai.embeddings import hashed_embedding

TEMPLATE_ID = "test_llm_openai_describe"
TEMPLATE = f"""---
id: {TEMPLATE_ID}
version: 3
purpose: describe a word (test-only template)
---
## system
You describe single words precisely.
## user
Describe the word $word and list a few tags for it.
"""
MODEL = "gpt-4o-mini"


class WordAnswer(BaseModel):
    word: str
    length: int
    tags: list[str]


class FreeFormAnswer(BaseModel):
    """A dict field: strict structured output cannot express it."""

    word: str
    counts: dict[str, int]


@simulates(TEMPLATE_ID)
def _describe(variables: dict[str, Any], rng: random.Random) -> dict[str, Any]:
    word = variables["word"]
    return {
        "word": word,
        "length": len(word),
        "tags": sorted(rng.sample(["short", "noun", "verb", "rare", "common"], 2)),
        "counts": {word: 1},
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


def make_settings(
    server: FakeOpenAIServer | ReplayOpenAIServer, output: Path, **sections: Any
) -> Settings:
    endpoint = {
        "base_url": server.url,
        "simulator_hints": True,  # the fake server answers from the simulator
        "chat_model": MODEL,
        "timeout_seconds": 3.0,  # a loaded machine answers late; the timeout fault waits 10 s
        "max_retries": 5,
        "embedder": "openai",  # the endpoint's embeddings (a non-OpenAI server's default is local)
    }
    limits = {
        "requests_per_minute": 60_000,
        "tokens_per_minute": 50_000_000,
        "max_concurrency": 8,
        "circuit_breaker_failures": 6,
    }
    endpoint.update(sections.pop("endpoint", {}))
    limits.update(sections.pop("limits", {}))
    return Settings(output_dir=output, endpoint=endpoint, limits=limits, **sections)


FAST_RETRY = RetryPolicy(max_retries=5, base_delay=0.005, max_delay=0.05)


@pytest.fixture
async def make_client(
    server: FakeOpenAIServer,
    prompts_dir: Path,
    tmp_path: Path,
    clean_settings_env: pytest.MonkeyPatch,
) -> AsyncIterator[Any]:
    made: list[ModelClient] = []

    def make(
        output: Path | None = None, retry: RetryPolicy = FAST_RETRY, **sections: Any
    ) -> ModelClient:
        settings = make_settings(server, output or tmp_path / "out", **sections)
        made.append(build_client(settings, retry=retry, prompts_dir=prompts_dir))
        return made[-1]

    yield make
    for client in made:
        await client.aclose()


def requests_for(
    words: list[str], model: type[BaseModel] = WordAnswer, **options: Any
) -> list[LLMRequest[Any]]:
    return [LLMRequest(TEMPLATE_ID, {"word": w}, model, stage="queries", **options) for w in words]


WORDS = [f"word{i:02d}" for i in range(12)]


def assert_complete(answers: list[Any], words: list[str] = WORDS) -> None:
    assert len(answers) == len(words)
    for word, answer in zip(words, answers, strict=True):
        assert isinstance(answer, WordAnswer)
        assert answer.word == word and answer.length == len(word) and len(answer.tags) == 2


def chat_log(server: FakeOpenAIServer) -> list[Any]:
    return [r for r in server.requests if r.path.endswith("/chat/completions")]


# --- every fault: the workload still completes, every answer valid, nothing lost ------------

TRANSPORT_FAULTS: dict[str, list[Fault]] = {
    "429 retry-after": [Fault.rate_limit(0.02), Fault.rate_limit(0.02)],
    "429 retry-after-ms": [Fault.rate_limit(0.02, ms=True)],
    "500": [Fault.server_error(500), Fault.server_error(503)],
    "slow": [Fault.slow(0.2)],
    "timeout": [Fault.timeout(10.0)],
    "disconnect": [Fault.disconnect()],
}
CONTENT_FAULTS: dict[str, list[Fault]] = {
    "malformed json": [Fault.malformed_json()],
    "schema-invalid json": [Fault.schema_invalid()],
    "truncated": [Fault.truncated()],
    "refusal": [Fault.refusal()],
    "content filter": [Fault.content_filter()],
}


ALL_FAULTS: dict[str, list[Fault]] = {**TRANSPORT_FAULTS, **CONTENT_FAULTS}


@pytest.mark.parametrize("faults", list(ALL_FAULTS.values()), ids=list(ALL_FAULTS))
async def test_each_fault_is_absorbed_and_every_answer_is_valid(
    server: FakeOpenAIServer, make_client: Any, faults: list[Fault]
) -> None:
    client = make_client()
    server.script(*faults)
    answers = await client.complete_all(requests_for(WORDS))
    assert_complete(answers)
    assert server.pending_faults == 0
    seen = [r.fault for r in chat_log(server) if r.fault is not None]
    assert seen == [f.kind for f in faults]
    extra_calls = 0 if faults[0].kind is FaultKind.SLOW else len(faults)
    assert len(chat_log(server)) == len(WORDS) + extra_calls


async def test_a_repair_sends_the_bad_answer_back_with_the_validation_error(
    server: FakeOpenAIServer, make_client: Any
) -> None:
    client = make_client()
    server.script(Fault.schema_invalid())
    (answer,) = await client.complete_all(requests_for(["alpha"]))
    assert answer.word == "alpha"
    first, repair = chat_log(server)
    assert len(first.body["messages"]) == 2
    messages = repair.body["messages"]
    assert [m["role"] for m in messages] == ["system", "user", "assistant", "user"]
    assert messages[2]["content"] == json.dumps({"unexpected": True})
    assert "could not be used" in messages[3]["content"] and "word" in messages[3]["content"]


async def test_a_truncated_answer_is_retried_with_a_larger_output_budget(
    server: FakeOpenAIServer, make_client: Any
) -> None:
    client = make_client()
    server.script(Fault.truncated())
    await client.complete(requests_for(["alpha"], max_output_tokens=300)[0])
    budgets = [r.body["max_tokens"] for r in chat_log(server)]
    assert budgets == [300, 600]


async def test_retry_after_is_honoured(server: FakeOpenAIServer, make_client: Any) -> None:
    client = make_client()
    server.script(Fault.rate_limit(0.3, ms=True))
    await client.complete(requests_for(["alpha"])[0])
    assert [r.status for r in chat_log(server)] == [429, 200]
    assert (
        server.early_retries == 0
    )  # the retry left once the 0.3 s had passed, by the server's clock
    assert client.limiter is not None and client.limiter.stats.rate_limited == 1


async def test_random_faults_with_a_seed_still_complete_the_workload(
    server: FakeOpenAIServer, make_client: Any
) -> None:
    client = make_client(
        retry=RetryPolicy(max_retries=10, base_delay=0.002, max_delay=0.02),
        limits={"circuit_breaker_failures": 50},
    )
    rates = {
        FaultKind.RATE_LIMIT: 0.08,
        FaultKind.SERVER_ERROR: 0.08,
        FaultKind.DISCONNECT: 0.04,
        FaultKind.MALFORMED_JSON: 0.04,
        FaultKind.SCHEMA_INVALID: 0.04,
        FaultKind.REFUSAL: 0.02,
    }
    server.set_fault_rates(rates, seed=11)
    words = [f"w{i}" for i in range(30)]
    answers = await client.complete_all(requests_for(words))
    assert_complete(answers, words)
    assert any(r.fault is not None for r in server.requests)


async def test_persistent_refusal_is_rejected_with_the_reason(
    server: FakeOpenAIServer, make_client: Any
) -> None:
    client = make_client()
    server.script(*[Fault.refusal("I cannot describe that word.")] * 3)
    with pytest.raises(
        LLMRefusalError, match="refused 3 times; reason: I cannot describe that word"
    ) as caught:
        await client.complete(requests_for(["alpha"])[0])
    assert caught.value.reason == "I cannot describe that word."
    assert TEMPLATE_ID in str(caught.value)
    assert len(chat_log(server)) == 3


async def test_persistent_content_filter_is_rejected_with_the_reason(
    server: FakeOpenAIServer, make_client: Any
) -> None:
    client = make_client()
    server.script(*[Fault.content_filter()] * 3)
    with pytest.raises(LLMContentFilterError, match="content filter.*finish_reason content_filter"):
        await client.complete(requests_for(["alpha"])[0])


async def test_persistent_truncation_is_rejected(
    server: FakeOpenAIServer, make_client: Any
) -> None:
    client = make_client()
    server.script(*[Fault.truncated()] * 3)
    with pytest.raises(LLMTruncatedError, match="finish_reason length"):
        await client.complete(requests_for(["alpha"])[0])


async def test_retries_are_bounded(server: FakeOpenAIServer, make_client: Any) -> None:
    client = make_client(
        retry=RetryPolicy(max_retries=2, base_delay=0.001), limits={"circuit_breaker_failures": 100}
    )
    server.script(*[Fault.server_error()] * 3)
    with pytest.raises(LLMTransportError, match="gave up after 3 attempts.*HTTP 500"):
        await client.complete(requests_for(["alpha"])[0])
    assert len(chat_log(server)) == 3


# --- cache --------------------------------------------------------------------------------


async def test_a_cached_workload_makes_zero_http_requests(
    server: FakeOpenAIServer, make_client: Any, tmp_path: Path
) -> None:
    first = make_client(tmp_path / "run")
    answers = await first.complete_all(requests_for(WORDS))
    vectors = await first.embed(WORDS, stage="memory")
    assert server.count() == len(WORDS) + 1
    server.clear_log()

    again = make_client(tmp_path / "run")  # a new process would see the same directory
    assert await again.complete_all(requests_for(WORDS)) == answers
    assert np.array_equal(await again.embed(WORDS, stage="memory"), vectors)
    assert server.count() == 0
    usage = {row.stage: row for row in again.usage()}
    assert usage["queries"].cache_hits == len(WORDS) and usage["queries"].requests == 0
    assert usage["memory"].cache_hits == len(WORDS) and usage["memory"].embedding_requests == 0
    assert usage["queries"].cost_usd == 0
    assert again.cache_stats.hits == 2 * len(WORDS) and again.cache_stats.bytes_read > 0


async def test_disabling_the_cache_goes_back_to_the_server(
    server: FakeOpenAIServer, make_client: Any, tmp_path: Path
) -> None:
    await make_client(tmp_path / "run").complete_all(requests_for(WORDS[:3]))
    server.clear_log()
    uncached = make_client(tmp_path / "run", cache={"enabled": False})
    await uncached.complete_all(requests_for(WORDS[:3]))
    assert server.count() == 3
    assert uncached.cache_stats.hits == 0


async def test_the_cache_key_changes_with_the_parameters(
    server: FakeOpenAIServer, make_client: Any, tmp_path: Path
) -> None:
    client = make_client(tmp_path / "run")
    await client.complete(requests_for(["alpha"])[0])
    await client.complete(requests_for(["alpha"], temperature=0.1)[0])
    await client.complete(requests_for(["alpha"], seed=5)[0])
    await client.complete(requests_for(["alpha"])[0])
    assert server.count() == 3


async def test_identical_concurrent_requests_are_sent_once(
    server: FakeOpenAIServer, make_client: Any
) -> None:
    client = make_client()
    server.latency = 0.05
    answers = await client.complete_all(requests_for(["same"] * 6))
    assert server.count() == 1
    assert all(a == answers[0] for a in answers)


# --- limiter and breaker ------------------------------------------------------------------


async def test_the_limiter_caps_concurrency(server: FakeOpenAIServer, make_client: Any) -> None:
    client = make_client(limits={"max_concurrency": 3})
    server.latency = 0.05
    await client.complete_all(requests_for(WORDS))
    assert server.max_in_flight == 3 and server.count() == len(WORDS)
    assert client.limiter is not None and client.limiter.peak_in_flight == 3


async def test_the_limiter_keeps_under_an_enforced_rate_limit(
    server: FakeOpenAIServer, make_client: Any
) -> None:
    server.set_rate_limit(600)  # 10 requests/s, one second of burst
    client = make_client(limits={"requests_per_minute": 540})
    await client.complete_all(requests_for(WORDS))
    assert server.count(status=429) == 0


async def test_the_circuit_breaker_stops_the_run_with_a_clear_message(
    server: FakeOpenAIServer, make_client: Any
) -> None:
    client = make_client(limits={"circuit_breaker_failures": 4, "max_concurrency": 2})
    server.set_fault_rates({FaultKind.SERVER_ERROR: 1.0})
    with pytest.raises(
        CircuitOpenError, match=r"4 consecutive requests to http://127\.0\.0\.1.*failed.*HTTP 500"
    ):
        await client.complete_all(requests_for(WORDS))
    # The breaker stopped it after its 4 failures (and the 2 already in flight), long before
    # each of the 10 requests had used its retries.
    assert server.count() <= 4 + 2
    with pytest.raises(CircuitOpenError):  # stays open: nothing more is sent
        await client.complete(requests_for(["late"])[0])
    assert server.count() <= 4 + 2


async def test_a_wrong_key_fails_at_once_without_retries(
    server: FakeOpenAIServer, make_client: Any
) -> None:
    server.api_key = "right-key"
    client = make_client(endpoint={"api_key": "wrong-key"})
    with pytest.raises(LLMConfigurationError, match="HTTP 401.*Incorrect API key"):
        await client.complete(requests_for(["alpha"])[0])
    assert server.count() == 1


@pytest.mark.parametrize(
    "fault",
    [
        Fault.server_error(400),
        Fault.unauthorized(401),
        Fault.unauthorized(403),
        Fault.server_error(404),
    ],
    ids=["400", "401", "403", "404"],
)
async def test_refusals_are_never_retried(
    server: FakeOpenAIServer, make_client: Any, fault: Fault
) -> None:
    client = make_client()
    server.script(fault)
    with pytest.raises(LLMConfigurationError, match=f"HTTP {fault.status}") as caught:
        await client.complete(requests_for(["alpha"])[0])
    assert len(chat_log(server)) == 1
    assert "\n" not in str(caught.value)


async def test_an_outage_ends_in_one_line(server: FakeOpenAIServer, make_client: Any) -> None:
    client = make_client(limits={"circuit_breaker_failures": 3, "max_concurrency": 1})
    server.set_fault_rates({FaultKind.SERVER_ERROR: 1.0})
    with pytest.raises(CircuitOpenError) as caught:
        await client.complete(requests_for(["alpha"])[0])
    assert "\n" not in str(caught.value) and "limits.circuit_breaker_failures" in str(caught.value)
    assert len(chat_log(server)) == 3


async def test_isolated_429s_delay_only_their_own_request(
    server: FakeOpenAIServer, make_client: Any
) -> None:
    client = make_client(limits={"max_concurrency": 4})
    server.script(Fault.rate_limit(0.4), Fault.rate_limit(0.4))
    answers = await client.complete_all(requests_for(WORDS))
    assert_complete(answers)
    limiter = client.limiter
    assert limiter is not None and limiter.stats.rate_limited == 2
    assert limiter.stats.quota_limited == 0 and limiter.factor == 1.0
    # The other requests went on meanwhile: between each 429 and its retry, other first tries
    # were sent (a pause for everyone would have sent nothing in between).
    log = chat_log(server)
    bodies = [json.dumps(r.body, sort_keys=True) for r in log]
    refused = [i for i, r in enumerate(log) if r.status == 429]
    assert len(refused) == 2 and len(log) == len(WORDS) + 2
    for i in refused:
        retry = bodies.index(bodies[i], i + 1)
        assert any(bodies[k] not in bodies[:k] for k in range(i + 1, retry)), (i, retry)
    assert server.early_retries == 0


async def test_a_quota_429_slows_everyone_and_pauses_until_retry_after(
    server: FakeOpenAIServer, make_client: Any
) -> None:
    client = make_client(limits={"max_concurrency": 4})
    server.script(Fault.quota(0.3))
    answers = await client.complete_all(requests_for(WORDS))
    assert_complete(answers)
    limiter = client.limiter
    assert limiter is not None and limiter.stats.quota_limited == 1
    assert limiter.stats.slowdowns == 1 and limiter.stats.min_window_seen < 4
    log = chat_log(server)
    limited = next(r for r in log if r.fault is FaultKind.QUOTA)
    # The pause runs from when the client read the 429 until its Retry-After (0.3 s). Requests
    # that arrive between the 429 and that moment were sent before the client knew (on a loaded
    # machine, a finished request's slot may be refilled first); during the pause only the three
    # others that may have been on their way then arrive.
    learned = limiter.paused_until - 0.3
    assert limited.at <= learned
    during_pause = [r for r in log if learned < r.at < limiter.paused_until]
    assert len(during_pause) <= 3 and len(log) == len(WORDS) + 1
    assert server.early_retries == 0


async def test_random_429s_are_never_retried_before_retry_after(
    server: FakeOpenAIServer, make_client: Any
) -> None:
    client = make_client(
        retry=RetryPolicy(max_retries=10, base_delay=0.002, max_delay=0.02),
        limits={"circuit_breaker_failures": 50},
    )
    server.set_fault_rates(
        {FaultKind.RATE_LIMIT: 0.3, FaultKind.SERVER_ERROR: 0.05},
        seed=3,
        faults={FaultKind.RATE_LIMIT: Fault.rate_limit(0.1)},
    )
    words = [f"w{i}" for i in range(30)]
    assert_complete(await client.complete_all(requests_for(words)), words)
    assert server.count(status=429) > 0 and server.early_retries == 0
    assert client.limiter is not None and client.limiter.stats.quota_limited == 0


# --- what travels in headers ----------------------------------------------------------------


async def test_persona_variables_travel_in_headers_only_when_simulator_hints_are_on(
    server: FakeOpenAIServer, make_client: Any
) -> None:
    """A loopback server (a user's own vLLM or Ollama) gets no prompt variables unless asked."""
    assert Settings().endpoint.simulator_hints is False
    client = make_client(endpoint={"simulator_hints": False})
    with pytest.raises(LLMConfigurationError, match="simulator_hints"):
        await client.complete(
            requests_for(["alpha"])[0]
        )  # the fake server cannot answer without them
    (request,) = chat_log(server)
    assert request.headers["x-memoryquest-template"] == TEMPLATE_ID
    assert "x-memoryquest-variables" not in request.headers
    await make_client().complete(requests_for(["beta"])[0])  # the fixture turns them on
    assert "x-memoryquest-variables" in chat_log(server)[-1].headers


# --- structured output modes --------------------------------------------------------------


async def test_strict_json_schema_is_sent_when_supported(
    server: FakeOpenAIServer, make_client: Any
) -> None:
    client = make_client()
    await client.complete(requests_for(["alpha"])[0])
    (request,) = chat_log(server)
    response_format = request.body["response_format"]
    assert response_format["type"] == "json_schema"
    schema = response_format["json_schema"]["schema"]
    assert response_format["json_schema"]["strict"] is True
    assert schema["additionalProperties"] is False and schema["required"] == [
        "word",
        "length",
        "tags",
    ]
    assert request.headers["x-memoryquest-template"] == TEMPLATE_ID


async def test_a_server_without_json_schema_falls_back_to_json_mode(
    server: FakeOpenAIServer, make_client: Any
) -> None:
    server.supports_json_schema = False
    client = make_client()
    answers = await client.complete_all(requests_for(WORDS[:4]))
    assert_complete(answers, WORDS[:4])
    answered = [r for r in chat_log(server) if r.status == 200]
    assert [r.body["response_format"]["type"] for r in answered] == ["json_object"] * 4
    assert "JSON schema" in answered[0].body["messages"][0]["content"]
    rejected = [r for r in chat_log(server) if r.status == 400]
    assert 1 <= len(rejected) <= 4  # requests already on their way when the first 400 came back
    server.clear_log()
    await client.complete(requests_for(["later"])[0])  # remembered: no second rejection
    assert [r.body["response_format"]["type"] for r in chat_log(server)] == ["json_object"]


async def test_a_server_without_any_json_mode_still_yields_valid_answers(
    server: FakeOpenAIServer, make_client: Any
) -> None:
    server.supports_json_schema = False
    server.supports_json_object = False
    client = make_client()
    answers = await client.complete_all(requests_for(WORDS[:3]))
    assert_complete(answers, WORDS[:3])
    assert "response_format" not in chat_log(server)[-1].body


async def test_strict_schema_off_uses_json_mode(server: FakeOpenAIServer, make_client: Any) -> None:
    client = make_client(endpoint={"strict_schema": False})
    await client.complete(requests_for(["alpha"])[0])
    assert chat_log(server)[0].body["response_format"] == {"type": "json_object"}


async def test_a_schema_strict_mode_cannot_express_uses_json_mode(
    server: FakeOpenAIServer, make_client: Any
) -> None:
    client = make_client()
    answer = await client.complete(requests_for(["alpha"], model=FreeFormAnswer)[0])
    assert answer.counts == {"alpha": 1}
    assert chat_log(server)[0].body["response_format"] == {"type": "json_object"}


# --- accounting ---------------------------------------------------------------------------


async def test_usage_and_cost_of_a_known_request(
    server: FakeOpenAIServer, make_client: Any
) -> None:
    server.cached_tokens = 10
    client = make_client()
    answer = await client.complete(requests_for(["alpha"])[0])
    (request,) = chat_log(server)
    counter = token_counter(MODEL)
    prompt = counter.count_messages(request.body["messages"])
    completion = counter.count(simulate(TEMPLATE_ID, {"word": "alpha"}, seed=0))
    assert answer.word == "alpha"
    (row,) = client.usage()
    assert row.stage == "queries" and row.requests == 1
    assert (row.input_tokens, row.output_tokens, row.cached_tokens) == (prompt, completion, 10)
    expected = ((prompt - 10) * 0.15 + 10 * 0.075 + row.output_tokens * 0.6) / 1e6
    assert row.cost_usd == pytest.approx(expected, rel=1e-6)
    assert row.approximate_tokens is False
    assert client.total_usage().cost_usd == pytest.approx(expected, rel=1e-6)


async def test_a_price_file_overrides_the_built_in_prices(
    server: FakeOpenAIServer, make_client: Any, tmp_path: Path
) -> None:
    prices = tmp_path / "prices.json"
    prices.write_text(
        json.dumps({"models": {MODEL: {"input": 1000.0, "output": 0.0}}}), encoding="utf-8"
    )
    client = make_client(prices_file=prices)
    await client.complete(requests_for(["alpha"])[0])
    (row,) = client.usage()
    assert row.cost_usd == pytest.approx(row.input_tokens * 1000.0 / 1e6)


async def test_the_cache_entry_records_what_the_answer_cost(
    server: FakeOpenAIServer, make_client: Any, tmp_path: Path
) -> None:
    client = make_client(tmp_path / "run")
    server.script(Fault.malformed_json())
    await client.complete(requests_for(["alpha"])[0])
    (entry_file,) = (tmp_path / "run" / ".cache" / "chat").rglob("*.json")
    entry = json.loads(entry_file.read_text(encoding="utf-8"))
    (row,) = client.usage()
    assert entry["calls"] == 2 == row.requests  # the malformed answer was paid for too
    assert entry["input_tokens"] == row.input_tokens and entry["cost_usd"] == pytest.approx(
        row.cost_usd
    )
    assert entry["template"] == [TEMPLATE_ID, 3] and entry["model"] == MODEL


async def test_without_reported_usage_tokens_are_counted_and_flagged(
    server: FakeOpenAIServer, make_client: Any
) -> None:
    server.report_usage = False
    client = make_client()
    await client.complete(requests_for(["alpha"])[0])
    (row,) = client.usage()
    assert row.input_tokens > 0 and row.output_tokens > 0
    assert row.approximate_tokens is True  # gpt-4o-mini is o200k; counted with cl100k offline


# --- embeddings ---------------------------------------------------------------------------


async def test_embeddings_are_batched_ordered_and_normalised(
    server: FakeOpenAIServer, make_client: Any
) -> None:
    server.shuffle_embeddings = True
    client = make_client()
    client.embedder.max_batch_texts = 4
    texts = [f"the {w} sentence number {i}" for i, w in enumerate(WORDS[:10])] + [
        "the word00 sentence number 0"
    ]
    vectors = await client.embed(texts, stage="memory")
    assert client.embedder_name == "text-embedding-3-small"
    assert vectors.shape == (11, 256)
    assert np.allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)
    for text, row in zip(texts, vectors, strict=True):
        assert np.allclose(row, hashed_embedding(text, 256), atol=1e-5)
    embedding_calls = [r for r in server.requests if r.path.endswith("/embeddings")]
    assert sorted(len(r.body["input"]) for r in embedding_calls) == [
        2,
        4,
        4,
    ]  # duplicates sent once
    (row,) = client.usage()
    assert row.embedding_requests == 3
    assert row.embedding_tokens == token_counter("text-embedding-3-small").count_many(texts[:10])
    assert row.cost_usd == pytest.approx(row.embedding_tokens * 0.02 / 1e6)


async def test_embedding_faults_are_retried(server: FakeOpenAIServer, make_client: Any) -> None:
    client = make_client()
    server.script(
        Fault.rate_limit(0.01, endpoint="embeddings"), Fault.server_error(endpoint="embeddings")
    )
    vectors = await client.embed(["one", "two"], stage="memory")
    assert vectors.shape == (2, 256)
    assert server.count(path="/embeddings") == 3


# --- the request as built, the answer parsed once, and replaying recorded answers ----------


async def test_the_body_goes_as_built_and_the_answer_is_read_once(
    server: FakeOpenAIServer, make_client: Any
) -> None:
    client = make_client(endpoint={"server": "openai"})
    answer = await client.complete(requests_for(["apple"], extra={"top_p": 0.5})[0])
    assert isinstance(answer, WordAnswer) and answer.word == "apple"
    (sent,) = chat_log(server)
    body = sent.body
    assert body["top_p"] == 0.5  # extra parameters join the body itself
    assert body["response_format"]["type"] == "json_schema"
    assert "extra_body" not in body and "extra_headers" not in body and "timeout" not in body
    assert sent.headers["x-memoryquest-template"] == TEMPLATE_ID
    (row,) = client.usage()
    assert row.input_tokens > 0 and row.output_tokens > 0 and not row.approximate_tokens


async def test_a_200_that_is_not_json_is_retried(
    server: FakeOpenAIServer, make_client: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    from memoryquest.llm import openai_backend

    client = make_client()
    backend = client.chat_backend
    original = backend._clients.get
    broken: list[bool] = []

    def first_answer_broken() -> Any:
        sdk = original()
        post = sdk.post

        async def patched(path: str, **kwargs: Any) -> Any:
            text = await post(path, **kwargs)
            if not broken:
                broken.append(True)
                return "<html>bad gateway</html>"
            return text

        monkeypatch.setattr(sdk, "post", patched)
        return sdk

    monkeypatch.setattr(backend._clients, "get", first_answer_broken)
    answer = await client.complete(requests_for(["pear"])[0])
    assert answer.word == "pear" and broken == [True]
    assert server.count(path="/chat/completions") == 2
    with pytest.raises(openai_backend.TransientBackendError, match="without choices"):
        openai_backend.chat_result({"choices": []})


async def test_recorded_answers_are_replayed_without_hints(
    prompts_dir: Path, tmp_path: Path, clean_settings_env: pytest.MonkeyPatch
) -> None:
    words = WORDS[:4]
    with FakeOpenAIServer(record=True) as recorder:
        # A named server kind: nothing is discovered (the replay server answers only /models).
        settings = make_settings(recorder, tmp_path / "record", endpoint={"server": "openai"})
        client = build_client(settings, retry=FAST_RETRY, prompts_dir=prompts_dir)
        recorded = await client.complete_all(requests_for(words))
        await client.embed(["one sentence", "another one"], stage="memory")
        await client.aclose()
        recording = dict(recorder.recording or {})
    assert len(recording) == len(words) + 1
    with ReplayOpenAIServer(recording, latency=0.01) as replay:
        settings = make_settings(
            replay,
            tmp_path / "replay",
            endpoint={"simulator_hints": False, "server": "openai"},
            limits={"circuit_breaker_failures": 50},
        )
        client = build_client(settings, retry=FAST_RETRY, prompts_dir=prompts_dir)
        try:
            replayed = await client.complete_all(requests_for(words))
            vectors = await client.embed(["one sentence", "another one"], stage="memory")
            assert vectors.shape == (2, 256)
            assert replay.misses == 0
            with pytest.raises(LLMTransportError):  # not recorded: a 500 on every try
                await client.complete(requests_for(["unheard"])[0])
        finally:
            await client.aclose()
    assert replayed == recorded
    assert replay.misses >= 1
    answered = [r for r in replay.log if r.status == 200]
    assert len(answered) == len(words) + 1
    assert all(r.answered >= r.arrived + 0.01 for r in answered)


async def test_a_replayed_embedding_batch_need_not_match_the_recorded_one(
    prompts_dir: Path, tmp_path: Path, clean_settings_env: pytest.MonkeyPatch
) -> None:
    """A pipeline groups texts for embedding as they come, so a replay sees batches the
    recording never did: each text gets the vector it was recorded with, in any batch."""
    with FakeOpenAIServer(record=True) as recorder:
        settings = make_settings(recorder, tmp_path / "record", endpoint={"server": "openai"})
        client = build_client(settings, retry=FAST_RETRY, prompts_dir=prompts_dir)
        recorded = await client.embed(["one sentence", "another one"], stage="memory")
        await client.aclose()
        recording = dict(recorder.recording or {})
    with ReplayOpenAIServer(recording) as replay:
        settings = make_settings(
            replay, tmp_path / "replay", endpoint={"simulator_hints": False, "server": "openai"}
        )
        client = build_client(settings, retry=FAST_RETRY, prompts_dir=prompts_dir)
        try:
            alone = await client.embed(["another one"], stage="memory")
        finally:
            await client.aclose()
    assert np.allclose(alone[0], recorded[1])
    assert (replay.misses, replay.recomputed) == (0, 1)
