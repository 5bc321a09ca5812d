"""Settings: the paper's constants by default, and file < environment < --set precedence."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from memoryquest.cli.main import main
from memoryquest.contracts import Stage
from memoryquest.settings import Backend, Settings, load_settings, parse_assignments

pytestmark = pytest.mark.usefixtures("clean_settings_env")


def show(capsys: pytest.CaptureFixture[str], *args: str) -> dict[str, Any]:
    assert main(["config", "show", *args]) == 0
    out: dict[str, Any] = json.loads(capsys.readouterr().out)
    return out


def failure(capsys: pytest.CaptureFixture[str], *args: str) -> str:
    assert main(["config", "show", *args]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    return captured.err


def test_defaults_are_the_papers_constants() -> None:
    settings = load_settings()
    generation, pgr = settings.generation, settings.pgr
    assert generation.gamma_max == 0.3
    assert generation.queries_per_user == 15  # n_q
    assert (generation.references_min, generation.references_max) == (3, 5)
    assert (generation.events_min, generation.events_max) == (5, 10)
    assert (generation.turns_min, generation.turns_max) == (5, 30)
    assert generation.consolidation_new_facts == 50
    assert generation.consolidation_window_days == 7
    assert pgr.query_only_k == 20  # K of the query-only baseline
    assert pgr.step_k == 5  # K per prospection step
    assert pgr.step_tau == 0.3  # tau
    assert pgr.augment_tau == 0.6  # tau_o
    assert pgr.delta == 5
    assert pgr.max_iterations == 10  # I_max
    assert settings.endpoint.resolved_backend() is Backend.SIMULATED


def test_default_persona_source_is_the_bundled_sample(personalens_sample_dir: Path) -> None:
    assert Path(load_settings().persona_source).resolve() == personalens_sample_dir.resolve()


def test_environment_overrides_a_default(clean_settings_env: pytest.MonkeyPatch) -> None:
    clean_settings_env.setenv("MEMORYQUEST_GENERATION__GAMMA_MAX", "0.25")
    clean_settings_env.setenv("MEMORYQUEST_PGR__MAX_ITERATIONS", "3")
    settings = load_settings()
    assert settings.generation.gamma_max == 0.25
    assert settings.pgr.max_iterations == 3
    assert settings.generation.queries_per_user == 15  # untouched siblings keep their defaults


def test_openai_api_key_is_picked_up_and_masked(
    clean_settings_env: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    clean_settings_env.setenv("OPENAI_API_KEY", "sk-test-do-not-print-0123456789")
    settings = load_settings()
    assert settings.endpoint.api_key is not None
    assert settings.endpoint.api_key.get_secret_value() == "sk-test-do-not-print-0123456789"
    assert settings.endpoint.resolved_backend() is Backend.OPENAI
    assert "sk-test" not in repr(settings)

    assert main(["config", "show"]) == 0
    out = capsys.readouterr().out
    assert "sk-test-do-not-print" not in out
    assert json.loads(out)["endpoint"]["api_key"] == "****"


def test_without_a_key_nothing_is_masked(capsys: pytest.CaptureFixture[str]) -> None:
    assert show(capsys)["endpoint"]["api_key"] is None


def test_file_then_environment_then_set(
    tmp_path: Path, clean_settings_env: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    config = tmp_path / "memoryquest.toml"
    config.write_text(
        "seed = 7\n[generation]\ngamma_max = 0.2\nqueries_per_user = 9\n[pgr]\ndelta = 4\n",
        encoding="utf-8",
    )
    from_file = show(capsys, "--config", str(config))
    assert from_file["generation"]["gamma_max"] == 0.2
    assert from_file["generation"]["queries_per_user"] == 9
    assert from_file["pgr"]["delta"] == 4
    assert from_file["seed"] == 7

    clean_settings_env.setenv("MEMORYQUEST_GENERATION__GAMMA_MAX", "0.25")
    with_env = show(capsys, "--config", str(config))
    assert with_env["generation"]["gamma_max"] == 0.25  # env beats file
    assert with_env["generation"]["queries_per_user"] == 9  # file still beats default

    with_set = show(
        capsys, "--config", str(config), "--set", "generation.gamma_max=0.27", "--set", "seed=3"
    )
    assert with_set["generation"]["gamma_max"] == 0.27  # --set beats env
    assert with_set["seed"] == 3
    assert with_set["pgr"]["delta"] == 4


def test_config_file_from_the_environment(
    tmp_path: Path, clean_settings_env: pytest.MonkeyPatch
) -> None:
    config = tmp_path / "memoryquest.toml"
    config.write_text("[pgr]\nstep_k = 7\n", encoding="utf-8")
    clean_settings_env.setenv("MEMORYQUEST_CONFIG", str(config))
    assert load_settings().pgr.step_k == 7


def test_parse_assignments() -> None:
    assert parse_assignments(
        ["generation.gamma_max=0.25", "pgr.methods=[query_only, pgr_cot]"]
    ) == {
        "generation": {"gamma_max": "0.25"},
        "pgr": {"methods": ["query_only", "pgr_cot"]},
    }
    # Lists as TOML and JSON write them mean the same.
    assert parse_assignments(["pgr.methods=[\"query_only\", 'pgr_cot']"]) == {
        "pgr": {"methods": ["query_only", "pgr_cot"]}
    }


def test_bad_environment_value_is_a_clear_error(
    clean_settings_env: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    clean_settings_env.setenv("MEMORYQUEST_GENERATION__GAMMA_MAX", "abc")
    err = failure(capsys)
    assert "generation.gamma_max" in err
    assert "Input should be a valid number" in err


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--set", "nope"], "--set expects section.key=value, got 'nope'"),
        (["--set", "generation.unknown=1"], "Extra inputs are not permitted"),
        (["--set", "generation.unknown=1"], "generation.unknown"),
        (
            ["--set", "generation.references_min=6"],
            "references_min (6) is above references_max (5)",
        ),
        (["--set", "generation.turns_min=1"], "Input should be greater than or equal to 2"),
        (["--set", "publish.train=0.9"], "split ratios must sum to 1, got 1.100"),
        (
            ["--set", "endpoint.backend=gemini"],
            "Input should be 'auto', 'simulated', 'openai' or 'azure'",
        ),
        (
            ["--config", "/nonexistent/memoryquest.toml"],
            "config file /nonexistent/memoryquest.toml does not exist",
        ),
    ],
)
def test_bad_values_are_clear_errors(
    capsys: pytest.CaptureFixture[str], args: list[str], message: str
) -> None:
    err = failure(capsys, *args)
    assert err.startswith("memoryquest: error:")
    assert message in err


def test_batch_stages_are_stages_however_they_are_written(
    tmp_path: Path, clean_settings_env: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    config = tmp_path / "memoryquest.toml"
    config.write_text('[endpoint]\nbatch_stages = ["queries", "pgr_judge"]\n', encoding="utf-8")
    assert load_settings(config).endpoint.batch_stages == [Stage.QUERIES, Stage.PGR_JUDGE]
    clean_settings_env.setenv("MEMORYQUEST_ENDPOINT__BATCH_STAGES", '["memory"]')
    assert load_settings().endpoint.batch_stages == [Stage.MEMORY]
    clean_settings_env.delenv("MEMORYQUEST_ENDPOINT__BATCH_STAGES")
    shown = show(capsys, "--set", "endpoint.batch_stages=[dialogues, review]")
    assert shown["endpoint"]["batch_stages"] == ["dialogues", "review"]  # written as the strings

    err = failure(capsys, "--set", "endpoint.batch_stages=[queries, memroy]")
    assert "endpoint.batch_stages" in err
    assert f"unknown stage 'memroy'; choose from {', '.join(Stage)}" in err
    with pytest.raises(ValueError, match="unknown stage 'conversations'; choose from queries, "):
        Settings.model_validate({"endpoint": {"batch_stages": ["conversations"]}})


def test_invalid_toml_is_a_clear_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    config = tmp_path / "broken.toml"
    config.write_text("[generation\ngamma_max = 0.2\n", encoding="utf-8")
    err = failure(capsys, "--config", str(config))
    assert f"config file {config} is not valid TOML" in err


def test_unknown_key_in_the_config_file(tmp_path: Path) -> None:
    config = tmp_path / "typo.toml"
    config.write_text("[generation]\ngama_max = 0.2\n", encoding="utf-8")
    with pytest.raises(ValueError, match=r"generation\.gama_max"):
        load_settings(config)


def test_masked_keeps_everything_else(clean_settings_env: pytest.MonkeyPatch) -> None:
    clean_settings_env.setenv("OPENAI_API_KEY", "sk-abc")
    settings = Settings()
    masked = settings.masked()
    assert masked["endpoint"]["api_key"] == "****"
    assert masked["generation"] == settings.generation.model_dump(mode="json")
