"""`estimate` predicts calls, tokens and cost offline, before any request is sent."""

from __future__ import annotations

import pytest

from memoryquest.cli.main import main
from memoryquest.estimate import estimate_run, estimate_table
from memoryquest.intake import PersonaSelection, load_personas
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
    assert one.total_cost_usd > 0  # gpt-4o is in the price table
    stages = {s.stage for s in one.stages}
    assert {"queries", "timelines", "dialogues", "memory", "pgr"} <= stages
    assert any("simulator" in note for note in one.approximations)
    assert "per persona" in estimate_table(ten)


async def test_batch_pricing_halves_the_llm_cost(sample, tmp_path) -> None:
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
    a = await estimate_run(online, sample, planned_personas=5)
    b = await estimate_run(batch, sample, planned_personas=5)
    assert b.total_cost_usd == pytest.approx(a.total_cost_usd / 2, rel=1e-3)


def test_cli_estimate_rejects_bad_counts(capsys) -> None:
    assert main(["estimate", "--personas", "0", "--sample", "1"]) == 2
    assert "planned personas must be at least 1" in capsys.readouterr().err
