"""`estimate` predicts calls, tokens and cost offline, before any request is sent."""

from __future__ import annotations

import json

import pytest

from memoryquest.cli.main import main
from memoryquest.estimate import estimate_run, estimate_table
from memoryquest.intake import PersonaSelection, load_personas
from memoryquest.llm.prices import PriceTable
from memoryquest.resources import data_dir
from memoryquest.settings import load_settings

SMALL = {
    "generation": {"queries_per_user": 2, "candidates_per_user": 8},
    "pgr": {"methods": ["query_only", "pgr_tot"], "judges": ["provenance"]},
}


@pytest.fixture(scope="module")
def sample():
    return load_personas(
        data_dir("personas") / "personalens", PersonaSelection(user_ids=["user0"])
    ).personas


async def test_estimate_scales_the_dry_run_and_prices_it(sample, tmp_path) -> None:
    settings = load_settings(
        overrides={**SMALL, "output_dir": str(tmp_path), "endpoint": {"chat_model": "gpt-4o"}}
    )
    one = await estimate_run(settings, sample, planned_personas=1)
    ten = await estimate_run(settings, sample, planned_personas=10)
    assert one.total_requests > 0 and one.total_input_tokens > 0
    assert ten.total_requests == pytest.approx(10 * one.total_requests)
    assert ten.total_cost_usd == pytest.approx(10 * one.total_cost_usd, rel=1e-3)
    # Each estimate starts cold: the first one's embeddings are not hidden from the second.
    assert [s.embedding_requests for s in ten.stages] == pytest.approx(
        [10 * s.embedding_requests for s in one.stages]
    )
    assert sum(s.embedding_requests for s in one.stages) > 0
    assert one.total_cost_usd > 0  # gpt-4o is in the price table
    stages = {s.stage for s in one.stages}
    assert {"queries", "timelines", "dialogues", "memory", "pgr"} <= stages
    assert any("simulator" in note for note in one.approximations)
    assert "per persona" in estimate_table(ten)


async def test_batch_pricing_halves_the_cost_of_the_batched_stages(sample, tmp_path) -> None:
    online = load_settings(
        overrides={**SMALL, "output_dir": str(tmp_path), "endpoint": {"chat_model": "gpt-4o"}}
    )
    batch = load_settings(
        overrides={
            **SMALL,
            "output_dir": str(tmp_path),
            "endpoint": {"chat_model": "gpt-4o", "batch": True},
        }
    )
    memory_online = load_settings(
        overrides={
            **SMALL,
            "output_dir": str(tmp_path),
            "endpoint": {
                "chat_model": "gpt-4o",
                "batch": True,
                "batch_stages": ["queries", "timelines", "dialogues", "pgr", "pgr_judge"],
            },
        }
    )
    a = await estimate_run(online, sample, planned_personas=5)
    b = await estimate_run(batch, sample, planned_personas=5)
    c = await estimate_run(memory_online, sample, planned_personas=5)
    # By default every stage travels in batches, memory in lockstep rounds (test_llm_batch).
    assert b.total_cost_usd == pytest.approx(a.total_cost_usd / 2, rel=1e-3)
    extractions = next(t for t in b.templates if t.template_id == "memory_extraction")
    rounds = f"a persona's {extractions.calls_per_persona:,.0f} extraction requests are sequential"
    assert any(rounds in note for note in b.approximations)
    # A stage left out of endpoint.batch_stages is priced online.
    for full, batched in zip(a.stages, c.stages, strict=True):
        share = 1.0 if batched.stage == "memory" else 0.5
        assert batched.cost_usd == pytest.approx(full.cost_usd * share, rel=1e-3)
    assert any("memory online at the full price" in note for note in c.approximations)
    assert not any("extraction requests are sequential" in note for note in c.approximations)


async def test_cached_input_is_shown_per_stage_and_priced_at_the_cached_rate(
    sample, tmp_path
) -> None:
    judged = {**SMALL, "pgr": {"methods": ["query_only", "pgr_tot"]}}  # every judge, the LLM's too
    settings = load_settings(
        overrides={**judged, "output_dir": str(tmp_path), "endpoint": {"chat_model": "gpt-4o"}}
    )
    estimate = await estimate_run(settings, sample, planned_personas=10)
    prices = PriceTable.load()
    cached_stages = [s for s in estimate.stages if s.cached_input_tokens > 0]
    assert cached_stages  # a persona's repeated prompt prefix reaches the provider's cache
    for s in estimate.stages:
        assert 0 <= s.cached_input_tokens <= s.input_tokens
    for s in cached_stages:  # embeddings run locally here: the cost is the chat cost
        uncached = prices.cost("gpt-4o", round(s.input_tokens), round(s.output_tokens))
        assert s.cost_usd < uncached
    assert estimate.total_cached_input_tokens == pytest.approx(
        sum(s.cached_input_tokens for s in estimate.stages)
    )
    assert any("1,024" in note and "order" in note for note in estimate.approximations)
    table = estimate_table(estimate).splitlines()
    assert "cached input" in table[1]
    assert f"{estimate.total_cached_input_tokens:,.0f}" in table[2 + len(estimate.stages)]
    dumped = json.loads(estimate.model_dump_json())  # what ``estimate --json`` prints
    assert dumped["total_cached_input_tokens"] == estimate.total_cached_input_tokens
    assert all("cached_input_tokens" in row for row in dumped["stages"])


def test_cli_estimate_rejects_bad_counts(capsys) -> None:
    assert main(["estimate", "--personas", "0", "--sample", "1"]) == 2
    assert "planned personas must be at least 1" in capsys.readouterr().err


async def test_the_estimate_says_the_output_length_it_assumed_per_template(
    sample, tmp_path
) -> None:
    settings = load_settings(
        overrides={**SMALL, "output_dir": str(tmp_path), "endpoint": {"chat_model": "gpt-4o"}}
    )
    estimate = await estimate_run(settings, sample, planned_personas=10)
    templates = {t.template_id: t for t in estimate.templates}
    assert {"query_generation", "timeline_synthesis", "memory_extraction"} <= set(templates)
    # Every dry-run call is counted under its template, and per persona of the sample.
    assert sum(t.calls_per_persona for t in templates.values()) * 10 == pytest.approx(
        estimate.total_requests
    )
    per_stage: dict[str, float] = {}
    for t in templates.values():
        assert 0 < t.output_tokens_per_call <= t.output_tokens_max <= t.allowance
        assert 0.0 <= t.cached_share <= 1.0
        per_stage[t.stage] = per_stage.get(t.stage, 0.0) + (
            t.calls_per_persona * t.output_tokens_per_call * 10
        )
    for stage in estimate.stages:
        assert per_stage[stage.stage] == pytest.approx(stage.output_tokens)
    table = estimate_table(estimate)
    assert "output lengths assumed per template: the offline simulator's answers" in table
    assert "memory_extraction" in table


async def test_the_blind_review_is_priced_as_the_judge_model_when_it_is_on(
    sample, tmp_path
) -> None:
    """generation.review adds one request per conversation and attempt, billed to `review`
    and priced as the model that answers it (endpoint.judge_model here)."""
    base = {**SMALL, "output_dir": str(tmp_path)}
    endpoint = {"chat_model": "gpt-4o", "judge_model": "gpt-4o-mini"}
    off = await estimate_run(load_settings(overrides={**base, "endpoint": endpoint}), sample, 1)
    reviewed = {**base, "generation": {**SMALL["generation"], "review": True}}
    on = await estimate_run(load_settings(overrides={**reviewed, "endpoint": endpoint}), sample, 1)
    assert "review" not in {s.stage for s in off.stages}
    review = next(s for s in on.stages if s.stage == "review")
    dialogues = next(s for s in on.stages if s.stage == "dialogues")
    assert 0 < review.requests <= dialogues.requests  # each conversation that passed the gates
    prices = PriceTable.load()
    as_judge = prices.cost(
        "gpt-4o-mini",
        round(review.input_tokens),
        round(review.output_tokens),
        round(review.cached_input_tokens),
    )
    as_author = prices.cost(
        "gpt-4o",
        round(review.input_tokens),
        round(review.output_tokens),
        round(review.cached_input_tokens),
    )
    assert review.cost_usd == pytest.approx(as_judge) and as_judge < as_author
    assert any("gpt-4o-mini" in note and "review" in note for note in on.approximations)
