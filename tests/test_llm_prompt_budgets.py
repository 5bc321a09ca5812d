"""Output budgets live in the templates' headers: sent unless a request names its own."""

from __future__ import annotations

import random
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel
from test_llm_prompt_cache import client_with, loopback

from memoryquest.llm.client import TRUNCATION_BUDGET_CAP, ModelClient
from memoryquest.llm.prompts import PromptError, all_templates, parse_template
from memoryquest.llm.request import DEFAULT_MAX_OUTPUT_TOKENS, LLMRequest
from memoryquest.simulator import simulates
from memoryquest.testing import FakeOpenAIServer, Fault

BUDGETED = "test_llm_prompt_budgets_short"
LONG = "test_llm_prompt_budgets_long"
UNBUDGETED = "test_llm_prompt_budgets_plain"


def template(template_id: str, budget: str | None) -> str:
    header = f"max_output_tokens: {budget}\n" if budget is not None else ""
    return (
        f"---\nid: {template_id}\nversion: 1\npurpose: echo a word (test-only template)\n"
        f"{header}---\n## system\nYou echo words.\n## user\nEcho $word.\n"
    )


class Echo(BaseModel):
    word: str


def _echo(variables: dict[str, Any], rng: random.Random) -> Echo:
    return Echo(word=variables["word"])


for _template_id in (BUDGETED, LONG, UNBUDGETED):
    simulates(_template_id)(_echo)


def echo(template_id: str, **options: Any) -> LLMRequest[Echo]:
    return LLMRequest(template_id, {"word": "alpha"}, Echo, stage="queries", **options)


@pytest.fixture(scope="module")
def module_server() -> Iterator[FakeOpenAIServer]:
    with FakeOpenAIServer() as server:
        yield server


@pytest.fixture
async def client(
    module_server: FakeOpenAIServer, tmp_path: Path, clean_settings_env: pytest.MonkeyPatch
) -> AsyncIterator[ModelClient]:
    module_server.reset()
    budgets = {BUDGETED: "300", LONG: "10000", UNBUDGETED: None}
    templates = {name: template(name, budget) for name, budget in budgets.items()}
    made = client_with(tmp_path, templates, **loopback(module_server))
    yield made
    await made.aclose()


def sent_budgets(server: FakeOpenAIServer) -> list[int]:
    return [r.body["max_tokens"] for r in server.requests if r.path.endswith("/chat/completions")]


async def test_a_request_without_a_budget_sends_its_templates(
    module_server: FakeOpenAIServer, client: ModelClient
) -> None:
    await client.complete(echo(BUDGETED))
    await client.complete(echo(BUDGETED, max_output_tokens=700))  # the request's own wins
    await client.complete(echo(UNBUDGETED))
    assert sent_budgets(module_server) == [300, 700, DEFAULT_MAX_OUTPUT_TOKENS]


async def test_a_truncated_answer_doubles_the_templates_budget_up_to_the_cap(
    module_server: FakeOpenAIServer, client: ModelClient
) -> None:
    module_server.script(Fault.truncated())
    await client.complete(echo(BUDGETED))
    module_server.script(Fault.truncated())
    await client.complete(echo(LONG))
    assert sent_budgets(module_server) == [300, 600, 10_000, TRUNCATION_BUDGET_CAP]


def test_every_shipped_template_declares_a_budget() -> None:
    templates = all_templates()
    assert templates
    for shipped in templates:
        assert shipped.max_output_tokens is not None, shipped.template_id
        assert 256 <= shipped.max_output_tokens <= TRUNCATION_BUDGET_CAP, shipped.template_id


def test_the_budget_header_is_optional_and_must_be_a_positive_integer() -> None:
    assert parse_template(template("t", "1_024"), "t.md").max_output_tokens == 1024
    assert parse_template(template("t", None), "t.md").max_output_tokens is None
    with pytest.raises(PromptError, match=r"t\.md: max_output_tokens must be an integer.*'lots'"):
        parse_template(template("t", "lots"), "t.md")
    with pytest.raises(PromptError, match="max_output_tokens must be positive"):
        parse_template(template("t", "0"), "t.md")


def test_a_dotted_placeholder_shows_one_key_of_a_mapping_variable() -> None:
    text = (
        "---\nid: dotted\nversion: 1\npurpose: show a part (test-only template)\n---\n"
        "## system\nThe request is on ${request.date}.\n## user\n$note\n"
    )
    template = parse_template(text, "dotted.md")
    variables = {"request": {"date": "2024-06-01", "text": "Plan my trip"}, "note": "hi"}
    system, user = template.render(variables)
    assert system["content"] == "The request is on 2024-06-01." and "Plan" not in system["content"]
    with pytest.raises(PromptError, match="request.when"):
        parse_template(text.replace("request.date", "request.when"), "dotted.md").render(variables)
