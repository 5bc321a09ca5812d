"""`estimate` predicts calls, tokens and cost offline, before any request is sent."""

from __future__ import annotations

import asyncio
import json
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from memoryquest.cli.main import main
from memoryquest.contracts import Stage, StageUsage
from memoryquest.estimate import RunEstimate, estimate_run
from memoryquest.estimate.table import estimate_table
from memoryquest.intake import PersonaSelection, load_personas
from memoryquest.llm.backends import ChatBackend, ChatCall, ChatResult
from memoryquest.llm.factory import build_client
from memoryquest.llm.prices import PriceTable
from memoryquest.pipeline import STAGE_GROUPS, generate_dataset
from memoryquest.resources import data_dir
from memoryquest.settings import load_settings
from memoryquest.simulator import simulate
from memoryquest.testing import FakeOpenAIServer
from memoryquest.testing.fake_openai.chat import TemplateAnswer

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


async def test_online_and_batch_side_by_side_with_wall_time(sample, tmp_path) -> None:
    """Both ways of sending the run, from one dry run: the same requests and tokens, batch at half
    the price of its stages, online time from the quota, batch time from the rounds one persona
    takes (memory's extractions one round each: each waits for the facts so far)."""
    settings = load_settings(
        overrides={
            **SMALL,
            "output_dir": str(tmp_path),
            "endpoint": {"chat_model": "gpt-4o", "batch_turnaround_minutes": 30},
            "limits": {"requests_per_minute": 100, "tokens_per_minute": 10**9},
        }
    )
    estimate = await estimate_run(settings, sample, planned_personas=200)
    online, batch = estimate.modes
    assert (online.mode, batch.mode) == ("online", "batch")
    assert online.requests == batch.requests == pytest.approx(estimate.total_requests)
    assert batch.cost_usd == pytest.approx(online.cost_usd / 2, rel=0.02)
    # 100 requests a minute binds: the whole run's requests at that pace.
    assert online.wall_hours == pytest.approx(online.requests / 100 / 60)
    assert "100 requests/min" in online.wall_basis
    extractions = next(
        t.calls_per_persona for t in estimate.templates if t.template_id == "memory_extraction"
    )
    assert estimate.rounds["memory"] >= extractions  # sequential, a round each
    assert estimate.rounds["dialogues"] < next(
        t.calls_per_persona for t in estimate.templates if t.template_id == "dialogue_expansion"
    )  # asked together, a few rounds for many requests
    rounds = int(batch.wall_basis.split(" batch rounds")[0])
    assert rounds >= max(estimate.rounds.values())
    assert batch.wall_hours == pytest.approx(rounds * 30 / 60)
    assert f"memory takes {estimate.rounds['memory']} of the {rounds} batch rounds" in (
        estimate.memory_online_note
    )
    table = estimate_table(estimate)
    assert "online" in table and "batch" in table and "wall time" in table


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


async def test_a_request_both_pgr_methods_ask_is_counted_once(sample, tmp_path) -> None:
    """Both methods augment a query with the same prompt: a real run sends it once (its response
    cache, or the identical request in flight), unless the cache is off."""
    both = {**SMALL, "pgr": {"methods": ["pgr_cot", "pgr_tot"], "judges": ["provenance"]}}

    async def calls(cache: bool) -> dict[str, float]:
        settings = load_settings(
            overrides={**both, "output_dir": str(tmp_path), "cache": {"enabled": cache}}
        )
        estimate = await estimate_run(settings, sample, planned_personas=1)
        return {t.template_id: t.calls_per_persona for t in estimate.templates}

    cached, uncached = await calls(True), await calls(False)
    # One summary per query and method; one augmentation per query, or per method without the cache.
    assert cached["pgr_summary"] == 2 * cached["pgr_augment"] > 0
    assert uncached["pgr_augment"] == uncached["pgr_summary"] == cached["pgr_summary"]


# --------------------------------------------------------------------------- against a run

# How far the estimate may be from the run it predicts, per stage and per template (issue: 10 %).
TOLERANCE = 0.10


@dataclass
class RunUsage:
    """What a run sent: per stage as its manifest bills it, and per template as its requests left
    the client (calls, and the answer tokens the server reported for them)."""

    stages: list[StageUsage]
    calls: Counter[str] = field(default_factory=Counter)
    answer_tokens: Counter[str] = field(default_factory=Counter)


class SentPerTemplate:
    """The run's chat backend, unchanged, with each request it sends counted under its template:
    the manifest bills by stage, and a stage (pgr has nine templates) can hide one template's
    answers doubling in its total."""

    def __init__(self, inner: ChatBackend, usage: RunUsage) -> None:
        self.inner = inner
        self.usage = usage

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    async def chat(self, call: ChatCall) -> ChatResult:
        result = await self.inner.chat(call)
        self.usage.calls[call.request.template_id] += 1
        self.usage.answer_tokens[call.request.template_id] += result.output_tokens
        return result


def persona_of(user: str) -> list[Any]:
    return load_personas(
        data_dir("personas") / "personalens", PersonaSelection(user_ids=[user])
    ).personas


def estimate_of(user: str, output: Path) -> RunEstimate:
    """The estimate for ``user`` at the demo's settings (the defaults)."""
    settings = load_settings(overrides={"output_dir": str(output / "estimate")})
    return asyncio.run(estimate_run(settings, persona_of(user), 1))


def run_of(user: str, output: Path, answers: dict[str, TemplateAnswer] | None = None) -> RunUsage:
    """The usage of a run of ``user`` at the estimate's settings, made through the request path a
    real run takes: the OpenAI SDK against the loopback server (usage counted by the server,
    prompt caching as the provider does it), the response cache and the local embedder. The
    server's model is the simulator, except for the templates ``answers`` gives another model."""

    async def run() -> RunUsage:
        with FakeOpenAIServer(prompt_caching=True) as server:
            for template_id, answer in (answers or {}).items():
                server.answer_with(template_id, answer)
            settings = load_settings(
                overrides={
                    "output_dir": str(output / "run"),
                    "endpoint": {
                        "backend": "openai",
                        "base_url": server.url,
                        "api_key": "test",
                        "simulator_hints": True,
                        "embedder": "local",
                    },
                    "limits": {
                        "requests_per_minute": 10**6,
                        "tokens_per_minute": 10**10,
                        "max_concurrency": 64,
                    },
                }
            )
            client = build_client(settings)
            assert client.judge_client is None  # every request passes the one counted backend
            usage = RunUsage(stages=[])
            client.chat_backend = SentPerTemplate(client.chat_backend, usage)
            try:
                dataset = await generate_dataset(persona_of(user), client, settings)
            finally:
                await client.aclose()
        assert dataset.manifest is not None
        usage.stages = dataset.manifest.usage
        return usage

    return asyncio.run(run())


def close(estimated: float, measured: float, tolerance: float = TOLERANCE) -> bool:
    return abs(estimated - measured) <= tolerance * measured


def estimate_misses(estimate: RunEstimate, run: RunUsage) -> list[str]:
    """Where the estimate is further than ``TOLERANCE`` from the run, printed as a table: per stage
    its requests and input and output tokens (the cached input, which depends on the order
    requests reach the provider, is printed only); per template its calls and the answer tokens
    per call, so one template's answers changing length shows even inside a large stage."""
    by_stage = {row.stage: row for row in run.stages}
    misses: list[str] = []
    if [s.stage for s in estimate.stages] != list(by_stage):
        misses.append(
            f"stages: estimated {[s.stage for s in estimate.stages]}, ran {list(by_stage)}"
        )
    print(
        "stage     requests (est, run)  input (est, run)    output (est, run)   cached (est, run)"
    )
    for stage in estimate.stages:
        measured = by_stage.get(stage.stage, StageUsage(stage=stage.stage))
        figures: list[tuple[str, float, float]] = [
            ("requests", stage.requests, measured.requests),
            ("input", stage.input_tokens, measured.input_tokens),
            ("output", stage.output_tokens, measured.output_tokens),
        ]
        for name, estimated, actual in figures:
            if not close(estimated, actual):
                misses.append(f"{stage.stage} {name}: estimated {estimated:,.0f}, ran {actual:,}")
        print(
            f"{stage.stage:<10}"
            + "".join(f"{e:>10,.0f}{a:>10,}" for _, e, a in figures)
            + f"{stage.cached_input_tokens:>10,.0f}{measured.cached_tokens:>10,}"
        )
    templates = {t.template_id: t for t in estimate.templates}
    if set(templates) != set(run.calls):
        misses.append(f"templates: estimated {sorted(templates)}, ran {sorted(run.calls)}")
    print("template              calls (est, run)  answer tokens per call (est, run)")
    for template_id in sorted(set(templates) & set(run.calls)):
        t, calls = templates[template_id], run.calls[template_id]
        per_call = run.answer_tokens[template_id] / calls
        print(
            f"{template_id:<22}{t.calls_per_persona:>8,.0f}{calls:>8,}"
            f"{t.output_tokens_per_call:>12,.1f}{per_call:>12,.1f}"
        )
        if not close(t.calls_per_persona, calls):
            misses.append(
                f"{template_id} calls: estimated {t.calls_per_persona:,.0f}, ran {calls:,}"
            )
        if not close(t.output_tokens_per_call, per_call):
            misses.append(
                f"{template_id} answer tokens per call: estimated {t.output_tokens_per_call:,.1f}, "
                f"ran {per_call:,.1f}"
            )
    return misses


@pytest.fixture(scope="module")
def user0_estimate(tmp_path_factory: pytest.TempPathFactory) -> RunEstimate:
    return estimate_of("user0", tmp_path_factory.mktemp("estimate"))


@pytest.fixture(scope="module")
def user0_run(tmp_path_factory: pytest.TempPathFactory) -> RunUsage:
    return run_of("user0", tmp_path_factory.mktemp("run"))


@pytest.mark.slow
def test_the_estimate_of_one_persona_is_within_ten_percent_of_its_run(
    user0_estimate: RunEstimate, user0_run: RunUsage
) -> None:
    """Per stage, requests and input and output tokens; per template, calls and answer tokens
    per call."""
    misses = estimate_misses(user0_estimate, user0_run)
    assert not misses, misses


def twice_as_long(template_id: str, text_field: str) -> TemplateAnswer:
    """Another model's answers to ``template_id``: the simulator's, with the free text of
    ``text_field`` said twice, as when a changed prompt asks the model for twice as much."""

    def answer(variables: dict[str, Any], model: str) -> Any:
        said = json.loads(simulate(template_id, variables))
        said[text_field] = f"{said[text_field]} {said[text_field]}"
        return said

    return answer


@pytest.mark.slow
def test_answers_twice_as_long_for_one_template_put_the_estimate_out(
    user0_estimate: RunEstimate, user0_run: RunUsage, tmp_path: Path
) -> None:
    """The estimate predicts a model that answers as the simulator does; a run whose model answers
    one prompt (pgr_augment, one of the pgr stage's nine templates) at twice the length is out of
    it, and the check above says where, though the pgr stage's total moves by less than 10 %."""
    doubled = run_of(
        "user0", tmp_path, {"pgr_augment": twice_as_long("pgr_augment", "augmented_query")}
    )
    ratio = (doubled.answer_tokens["pgr_augment"] / doubled.calls["pgr_augment"]) / (
        user0_run.answer_tokens["pgr_augment"] / user0_run.calls["pgr_augment"]
    )
    assert 1.7 < ratio < 2.1  # the answers really are about twice as long
    pgr_output = {row.stage: row.output_tokens for row in doubled.stages}["pgr"]
    estimated = next(s.output_tokens for s in user0_estimate.stages if s.stage == "pgr")
    assert close(estimated, pgr_output)  # the stage's total alone would not show it
    misses = estimate_misses(user0_estimate, doubled)
    assert any(m.startswith("pgr_augment answer tokens per call") for m in misses), misses


@pytest.mark.slow
def test_every_stage_of_the_pipeline_is_in_the_estimate(
    user0_estimate: RunEstimate, user0_run: RunUsage
) -> None:
    """A stage added to the pipeline (contracts.Stage, pipeline.STAGE_GROUPS) must reach the
    estimate: it is priced there as the run bills it."""
    in_groups = [stage for group in STAGE_GROUPS for stage in group.stages]
    outside = {Stage.PGR_SAMPLE, Stage.INVARIANTS}  # embeddings billed outside the pipeline
    assert sorted(in_groups) == sorted(set(Stage) - outside), "a Stage that no stage group runs"
    estimated: dict[str, Any] = {s.stage: s for s in user0_estimate.stages}
    billed = {row.stage: row for row in user0_run.stages}
    assert set(estimated) == set(billed)
    # Today every stage sends requests; one that sends none is billed nothing and estimated nothing.
    for stage in in_groups:
        if stage.value in billed:
            assert stage.value in estimated, f"stage {stage.value} is billed but not estimated"
            assert (estimated[stage.value].requests > 0) == (billed[stage.value].requests > 0)
