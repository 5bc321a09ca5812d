"""Prompt caching end to end: prompt_cache_key per persona, cached tokens reported, billed and recorded.

One rule (``memoryquest.llm.prompt_cache_model``) decides the cached tokens of the
loopback server and of the offline simulator.
"""

from __future__ import annotations

import random
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel

from memoryquest.llm.client import ModelClient
from memoryquest.llm.factory import build_client
from memoryquest.llm.openai_backend import OpenAIChatBackend
from memoryquest.llm.openai_sdk import SdkConnection
from memoryquest.llm.prices import PriceTable
from memoryquest.llm.prompt_cache_model import PromptPrefixCache
from memoryquest.llm.prompts import load_template
from memoryquest.llm.request import LLMRequest
from memoryquest.llm.simulated import SIMULATED_MODEL
from memoryquest.llm.tokens import token_counter
from memoryquest.settings import Backend, Settings
from memoryquest.simulator import simulates
from memoryquest.testing import FakeOpenAIServer

TEMPLATE_ID = "test_llm_prompt_cache_ask"
TEMPLATE = f"""---
id: {TEMPLATE_ID}
version: 1
purpose: a long stable persona block first, a short question last (test-only template)
---
## system
You answer questions about one person.
$persona
## user
$question
"""
MODEL = "gpt-4o"


class Reply(BaseModel):
    answer: str


@simulates(TEMPLATE_ID)
def _reply(variables: dict[str, Any], rng: random.Random) -> Reply:
    return Reply(answer=f"about {variables['persona']['persona_id']}: {variables['question']}")


def persona(persona_id: str, words: int = 2500) -> dict[str, Any]:
    rng = random.Random(persona_id)
    vocabulary = ["garden", "violin", "harbour", "ledger", "comet", "saffron", "tundra", "quartz"]
    return {
        "persona_id": persona_id,
        "notes": " ".join(rng.choice(vocabulary) for _ in range(words)),
    }


def ask(who: dict[str, Any], question: str) -> LLMRequest[Reply]:
    return LLMRequest(
        TEMPLATE_ID, {"persona": who, "question": question}, Reply, stage="queries", temperature=0
    )


@pytest.fixture(scope="module")
def server() -> Iterator[FakeOpenAIServer]:
    with FakeOpenAIServer(prompt_caching=True) as running:
        yield running


def client_with(tmp_path: Path, templates: dict[str, str], **endpoint: Any) -> ModelClient:
    """A client with test-only templates (id -> text), no response cache and generous limits."""
    prompts = tmp_path / "prompts"
    prompts.mkdir(exist_ok=True)
    for template_id, text in templates.items():
        (prompts / f"{template_id}.md").write_text(text, encoding="utf-8")
    settings = Settings(
        output_dir=tmp_path / "out",
        cache={"enabled": False},
        endpoint=endpoint,
        limits={"requests_per_minute": 60_000, "tokens_per_minute": 50_000_000},
    )
    return build_client(settings, prompts_dir=prompts)


def loopback(server: FakeOpenAIServer, **endpoint: Any) -> dict[str, Any]:
    """Endpoint settings for the fake server, answering from the simulator."""
    return {"base_url": server.url, "simulator_hints": True, "chat_model": MODEL, **endpoint}


@pytest.fixture
async def client(
    server: FakeOpenAIServer, tmp_path: Path, clean_settings_env: pytest.MonkeyPatch
) -> AsyncIterator[ModelClient]:
    server.reset()
    made = client_with(tmp_path, {TEMPLATE_ID: TEMPLATE}, **loopback(server, prompt_cache_key=True))
    yield made
    await made.aclose()


def chat_bodies(server: FakeOpenAIServer) -> list[dict[str, Any]]:
    return [r.body for r in server.requests if r.path.endswith("/chat/completions")]


async def test_a_repeated_persona_prefix_is_reported_cached_billed_and_recorded(
    server: FakeOpenAIServer, client: ModelClient
) -> None:
    who = persona("p-001")
    await client.complete(ask(who, "What does this person do on Sundays?"))
    first = client.total_usage()
    assert first.cached_tokens == 0  # nothing seen before
    await client.complete(ask(who, "Which instrument would they pick?"))
    total = client.total_usage()
    cached = total.cached_tokens
    second_input = total.input_tokens - first.input_tokens
    assert cached >= 1024 and cached % 128 == 0
    assert second_input - 128 < cached <= second_input  # all but the differing question
    prices = PriceTable.load()
    expected = prices.cost(MODEL, second_input, total.output_tokens - first.output_tokens, cached)
    assert total.cost_usd - first.cost_usd == pytest.approx(expected, rel=1e-6)
    full = prices.cost(MODEL, second_input, total.output_tokens - first.output_tokens)
    assert expected < full  # cached input at $1.25/M instead of $2.50/M
    assert [b["prompt_cache_key"] for b in chat_bodies(server)] == ["persona:p-001"] * 2


async def test_other_personas_and_short_prompts_are_not_cached(
    server: FakeOpenAIServer, client: ModelClient
) -> None:
    await client.complete(ask(persona("p-001"), "Where do they live?"))
    await client.complete(ask(persona("p-002"), "Where do they live?"))  # another key and prefix
    await client.complete(ask(persona("p-003", words=50), "Hobbies?"))
    await client.complete(ask(persona("p-003", words=50), "Job?"))  # shared prefix under 1,024
    assert client.total_usage().cached_tokens == 0
    keys = [b["prompt_cache_key"] for b in chat_bodies(server)]
    assert keys == ["persona:p-001", "persona:p-002", "persona:p-003", "persona:p-003"]


def test_the_cache_scope_is_explicit_or_the_persona() -> None:
    explicit = LLMRequest("t", {"persona_id": "p-9"}, Reply, stage="queries", cache_scope="run-7")
    assert explicit.prompt_cache_scope() == "run-7"
    assert LLMRequest("t", {"persona_id": "p-9"}, Reply, stage="queries").prompt_cache_scope() == (
        "persona:p-9"
    )
    assert LLMRequest("t", {"word": "x"}, Reply, stage="queries").prompt_cache_scope() is None


async def test_prompt_cache_key_goes_only_where_it_is_accepted(
    server: FakeOpenAIServer, tmp_path: Path, clean_settings_env: pytest.MonkeyPatch
) -> None:
    """A compatible server (a user's vLLM) may reject unknown fields: not sent unless turned on."""
    server.reset()
    client = client_with(tmp_path, {TEMPLATE_ID: TEMPLATE}, **loopback(server))
    try:
        await client.complete(ask(persona("p-001", words=20), "Name?"))
    finally:
        await client.aclose()
    assert "prompt_cache_key" not in chat_bodies(server)[0]
    assert OpenAIChatBackend(
        model=MODEL, connection=SdkConnection(api_key="sk-test")
    ).send_cache_key  # OpenAI itself


def block(words: int, seed: str = "block") -> str:
    """Text of about ``words`` cl100k tokens (one common word each)."""
    rng = random.Random(seed)
    return " ".join(rng.choice(["garden", "violin", "harbour", "ledger"]) for _ in range(words))


def prompt(*parts: str) -> list[dict[str, str]]:
    return [
        {"role": "system", "content": parts[0]},
        {"role": "user", "content": "".join(parts[1:])},
    ]


def test_the_prefix_rule_counts_shared_prefixes_from_1024_tokens_in_steps_of_128() -> None:
    counter = token_counter(SIMULATED_MODEL)
    cache = PromptPrefixCache()
    stable = block(1500)
    assert cache.cached_tokens("p1", prompt(stable, "first?"), counter) == 0
    cached = cache.cached_tokens("p1", prompt(stable, "second?"), counter)
    shared = counter.count(f"system\n{stable}\nuser\n")
    assert cached % 128 == 0 and shared - 128 < cached <= shared
    assert cache.cached_tokens("p2", prompt(stable, "second?"), counter) == 0  # another scope
    short = block(900, "short")
    cache.cached_tokens("p3", prompt(short, "a"), counter)
    assert cache.cached_tokens("p3", prompt(short, "b"), counter) == 0  # under 1,024 tokens
    # The part that differs comes first: nothing is shared, however long the rest.
    cache.cached_tokens("p4", prompt("Question one.", stable), counter)
    assert cache.cached_tokens("p4", prompt("Question two.", stable), counter) == 0


def test_the_prefix_rule_forgets_old_prompts_and_idle_scopes() -> None:
    counter = token_counter(SIMULATED_MODEL)
    cache = PromptPrefixCache(history=2, max_scopes=2)
    stable = block(1200)
    cache.cached_tokens("a", prompt(stable, "q"), counter)
    cache.cached_tokens("a", prompt("other", "1"), counter)
    cache.cached_tokens("a", prompt("other", "2"), counter)  # the stable prompt drops out
    assert cache.cached_tokens("a", prompt(stable, "q"), counter) == 0
    cache.cached_tokens("b", prompt(stable, "q"), counter)
    cache.cached_tokens("a", prompt("other", "3"), counter)  # "a" used more recently than "b"
    cache.cached_tokens("c", prompt("other", "4"), counter)  # a third scope evicts "b"
    assert cache.cached_tokens("a", prompt(stable, "again"), counter) > 0
    assert cache.cached_tokens("b", prompt(stable, "q"), counter) == 0


async def test_the_simulator_reports_cached_tokens_by_the_same_rule(
    tmp_path: Path, clean_settings_env: pytest.MonkeyPatch
) -> None:
    """Offline, the second question about a persona is recorded as cached as the provider bills it."""
    client = client_with(tmp_path, {TEMPLATE_ID: TEMPLATE}, backend=Backend.SIMULATED)
    requests = [ask(persona("p-001"), "Sundays?"), ask(persona("p-001"), "Instrument?")]
    requests.append(ask(persona("p-002"), "Sundays?"))
    try:
        for request in requests:
            await client.complete(request)
    finally:
        await client.aclose()
    expected = PromptPrefixCache()
    template = load_template(TEMPLATE_ID, tmp_path / "prompts")
    counter = token_counter(SIMULATED_MODEL)
    cached = [
        expected.cached_tokens(r.prompt_cache_scope(), template.render(r.variables), counter)
        for r in requests
    ]
    assert cached[0] == 0 and cached[1] >= 1024 and cached[2] == 0
    [row] = client.usage()
    assert row.stage == "queries" and row.cached_tokens == sum(cached)
    assert row.cached_tokens <= row.input_tokens and row.cost_usd == 0  # the simulator is free
