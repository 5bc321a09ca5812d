"""The client on the offline path: simulator, local embedder, prompts, usage, errors."""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from pydantic import BaseModel

from memoryquest.llm.client import LLMOutputError, ModelClient
from memoryquest.llm.exchange import ChatExchange
from memoryquest.llm.factory import build_client, shared_local_embedder
from memoryquest.llm.local_embedder import MODEL_NAME, LocalEmbedder
from memoryquest.llm.prompts import PromptError, load_template
from memoryquest.llm.request import LLMRequest
from memoryquest.llm.simulated import SIMULATED_MODEL, SimulatedChatBackend
from memoryquest.llm.tokens import token_counter
from memoryquest.settings import Settings
from memoryquest.simulator import simulates

TEMPLATE_ID = "test_llm_client_plan"
TEMPLATE = f"""---
id: {TEMPLATE_ID}
version: 2
purpose: plan an errand from a persona's city (test-only template)
---
## system
You plan errands. Budget: $$20.
## user
Plan one errand for someone living in $city. Their interests: $interests
"""
BROKEN_ID = "test_llm_client_broken"


class Plan(BaseModel):
    city: str
    steps: list[str]


class Unanswerable(BaseModel):
    missing_field: int


@simulates(TEMPLATE_ID)
def _plan(variables: dict[str, Any], rng: random.Random) -> Plan:
    interests = list(variables["interests"])
    rng.shuffle(interests)
    return Plan(
        city=variables["city"], steps=[f"look for {i} in {variables['city']}" for i in interests]
    )


@simulates(BROKEN_ID)
def _broken(variables: dict[str, Any], rng: random.Random) -> dict[str, Any]:
    return {"something_else": True}


@pytest.fixture(scope="module")
def prompts_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    directory = tmp_path_factory.mktemp("prompts")
    (directory / f"{TEMPLATE_ID}.md").write_text(TEMPLATE, encoding="utf-8")
    (directory / f"{BROKEN_ID}.md").write_text(
        TEMPLATE.replace(TEMPLATE_ID, BROKEN_ID), encoding="utf-8"
    )
    (directory / "test_llm_client_no_header.md").write_text(
        "## system\nx\n## user\ny\n", encoding="utf-8"
    )
    (directory / "test_llm_client_wrong_id.md").write_text(TEMPLATE, encoding="utf-8")
    (directory / "test_llm_client_stray_dollar.md").write_text(
        TEMPLATE.replace(TEMPLATE_ID, "test_llm_client_stray_dollar").replace("$$20", "$ 20"),
        encoding="utf-8",
    )
    return directory


@pytest.fixture(scope="module")
def embedder() -> LocalEmbedder:
    return shared_local_embedder()


@pytest.fixture
def client(
    tmp_path: Path,
    prompts_dir: Path,
    embedder: LocalEmbedder,
    clean_settings_env: pytest.MonkeyPatch,
) -> ModelClient:
    return build_client(
        Settings(output_dir=tmp_path, seed=3), embedder=embedder, prompts_dir=prompts_dir
    )


def plan_request(
    city: str = "Lisbon", seed: int = 0, template: str = TEMPLATE_ID
) -> LLMRequest[Plan]:
    return LLMRequest(
        template,
        {"city": city, "interests": ["jazz", "bakeries", "tram rides"]},
        Plan,
        stage="queries",
        seed=seed,
    )


async def test_the_default_client_is_the_offline_simulator_with_the_local_embedder(
    tmp_path: Path, clean_settings_env: pytest.MonkeyPatch
) -> None:
    client = build_client(Settings(output_dir=tmp_path))
    assert client.simulated and client.chat_backend.name == "simulated"
    assert client.chat_backend.model == SIMULATED_MODEL
    assert client.embedder_name == MODEL_NAME
    assert client.embedder is shared_local_embedder()  # loaded once per process


async def test_a_simulated_answer_is_the_response_model_and_deterministic(
    client: ModelClient,
) -> None:
    first = await client.complete(plan_request())
    assert isinstance(first, Plan) and first.city == "Lisbon" and len(first.steps) == 3
    assert await client.complete(plan_request()) == first
    assert {tuple((await client.complete(plan_request(seed=s))).steps) for s in range(6)} != {
        tuple(first.steps)
    }


async def test_simulated_usage_counts_real_tokens_and_costs_nothing(
    client: ModelClient, prompts_dir: Path
) -> None:
    answer = await client.complete(plan_request())
    messages = load_template(TEMPLATE_ID, prompts_dir).render(
        {"city": "Lisbon", "interests": ["jazz", "bakeries", "tram rides"]}
    )
    counter = token_counter(SIMULATED_MODEL)
    (row,) = client.usage()
    assert row.stage == "queries" and row.requests == 1 and row.cache_hits == 0
    assert row.input_tokens == counter.count_messages(messages)
    assert row.output_tokens == counter.count(answer.model_dump_json())
    assert row.cost_usd == 0.0 and row.approximate_tokens is False
    assert row.seconds > 0


async def test_complete_all_keeps_order_and_can_return_errors_in_place(client: ModelClient) -> None:
    cities = ["Oslo", "Lima", "Pune", "Graz"]
    answers = await client.complete_all([plan_request(c) for c in cities])
    assert [a.city for a in answers] == cities
    mixed = [plan_request("Oslo"), plan_request("Lima", template=BROKEN_ID), plan_request("Pune")]
    results = await client.complete_all(mixed, return_exceptions=True)
    assert results[0].city == "Oslo" and results[2].city == "Pune"
    assert isinstance(results[1], LLMOutputError)
    with pytest.raises(LLMOutputError):
        await client.complete_all(mixed)


async def test_an_answer_that_does_not_fit_names_template_and_model(client: ModelClient) -> None:
    with pytest.raises(
        LLMOutputError, match=rf"{BROKEN_ID} v2 \(stage queries\): answer does not fit Plan.*city"
    ):
        await client.complete(plan_request(template=BROKEN_ID))


async def test_the_simulator_output_must_match_the_requested_model(client: ModelClient) -> None:
    request = LLMRequest(
        TEMPLATE_ID, {"city": "Oslo", "interests": []}, Unanswerable, stage="queries"
    )
    with pytest.raises(LLMOutputError, match="Unanswerable.*missing_field"):
        await client.complete(request)


# --- prompt rendering errors are clear ---------------------------------------------------------


async def test_a_missing_variable_is_named(client: ModelClient) -> None:
    request = LLMRequest(TEMPLATE_ID, {"city": "Oslo"}, Plan, stage="queries")
    with pytest.raises(
        PromptError,
        match=rf"prompt {TEMPLATE_ID} v2: variable 'interests' not supplied \(given: city\)",
    ):
        await client.complete(request)


async def test_a_missing_template_names_the_path(client: ModelClient, prompts_dir: Path) -> None:
    with pytest.raises(
        PromptError, match=rf"no prompt template 'nope' \(looked for {prompts_dir}/nope.md\)"
    ):
        await client.complete(LLMRequest("nope", {}, Plan, stage="queries"))


@pytest.mark.parametrize(
    ("template_id", "message"),
    [
        ("test_llm_client_no_header", "missing the '---' header block"),
        (
            "test_llm_client_wrong_id",
            "header id 'test_llm_client_plan' does not match the file name",
        ),
    ],
)
def test_malformed_templates_are_rejected(
    prompts_dir: Path, template_id: str, message: str
) -> None:
    with pytest.raises(PromptError, match=message):
        load_template(template_id, prompts_dir)


def test_a_stray_dollar_is_reported_with_the_fix(prompts_dir: Path) -> None:
    template = load_template("test_llm_client_stray_dollar", prompts_dir)
    with pytest.raises(
        PromptError, match=r"system section: Invalid placeholder.*write a literal \$ as \$\$"
    ):
        template.render({"city": "Oslo", "interests": []})


def test_literal_dollars_and_json_values_render(prompts_dir: Path) -> None:
    system, user = load_template(TEMPLATE_ID, prompts_dir).render(
        {"city": "Oslo", "interests": ["a", "b"]}
    )
    assert system["content"].endswith("Budget: $20.")
    assert '"a",' in user["content"]


# --- embeddings -------------------------------------------------------------------------------


async def test_local_embeddings_are_normalised_ordered_and_cached(
    client: ModelClient, tmp_path: Path, prompts_dir: Path, embedder: LocalEmbedder
) -> None:
    texts = [
        "Loves science-fiction books",
        "Enjoys reading sci-fi novels",
        "Flies Air Canada",
        "Loves science-fiction books",
    ]
    vectors = await client.embed(texts, stage="memory")
    assert vectors.shape == (4, 384) and vectors.dtype == np.float32
    assert np.allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)
    assert np.array_equal(vectors[0], vectors[3])
    assert vectors[0] @ vectors[1] > vectors[0] @ vectors[2]
    (row,) = client.usage()
    assert row.embedding_requests == 1 and row.embedding_tokens > 0 and row.cost_usd == 0.0

    again = build_client(
        Settings(output_dir=tmp_path, seed=3), embedder=embedder, prompts_dir=prompts_dir
    )
    assert np.array_equal(await again.embed(texts, stage="memory"), vectors)
    (cached,) = again.usage()
    assert cached.cache_hits == 3 and cached.embedding_requests == 0


async def test_embedding_nothing_gives_an_empty_matrix(client: ModelClient) -> None:
    assert (await client.embed([], stage="memory")).shape == (0, 384)


async def test_a_client_built_without_settings_still_works(
    embedder: LocalEmbedder, prompts_dir: Path
) -> None:
    client = ModelClient(
        ChatExchange(SimulatedChatBackend(seed=3), prompts_dir=prompts_dir), embedder
    )
    assert (await client.complete(plan_request())).city == "Lisbon"
    assert client.cache_stats.hits == 0
