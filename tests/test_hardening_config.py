"""Issue #13, configuration rows: everything is checked before any work starts, each problem one line.

Every case runs the real entry point (``memoryquest.cli.main.main``) and expects
exit code 2, nothing on stdout, and exactly one stderr line that names the
setting or file — for ``config show`` and, where the probe hit it, for
``generate``, which must fail before it creates anything or starts Prefect.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

try:
    from tests.cli_fixture import one_error_line
except ModuleNotFoundError:  # tests/ is not a package: pytest puts it on sys.path
    from cli_fixture import one_error_line
from memoryquest.pgr.baselines import BASELINE_METHODS
from memoryquest.settings import CONFIG_FILE_MAX_BYTES, KNOWN_BASELINES, load_settings

pytestmark = pytest.mark.usefixtures("clean_settings_env")


SETTING_CASES: dict[str, tuple[list[str], str, str]] = {
    # id: (--set assignments, the setting named, the message)
    "gamma_max=nan": (
        ["generation.gamma_max=nan"],
        "generation.gamma_max",
        "Input should be a finite number",
    ),
    "gamma_max=inf": (
        ["generation.gamma_max=inf"],
        "generation.gamma_max",
        "Input should be a finite number",
    ),
    "gamma_max=-1": (
        ["generation.gamma_max=-1"],
        "generation.gamma_max",
        "Input should be greater than 0",
    ),
    "gamma_max=1.5": (
        ["generation.gamma_max=1.5"],
        "generation.gamma_max",
        "less than or equal to 1",
    ),
    "reference_cosine_max=2": (
        ["generation.reference_cosine_max=2"],
        "generation.reference_cosine_max",
        "less than or equal to 1",
    ),
    "duplicate_cosine=-1.5": (
        ["generation.duplicate_cosine=-1.5"],
        "generation.duplicate_cosine",
        "greater than or equal to -1",
    ),
    "consolidation_similarity=nan": (
        ["generation.consolidation_similarity=nan"],
        "generation.consolidation_similarity",
        "finite number",
    ),
    "filler_similarity_max=NaN": (
        ["generation.filler_similarity_max=NaN"],
        "generation.filler_similarity_max",
        "finite number",
    ),
    "cosine_tolerance=-0.1": (
        ["generation.cosine_tolerance=-0.1"],
        "generation.cosine_tolerance",
        "greater than or equal to 0",
    ),
    "step_tau=nan": (["pgr.step_tau=nan"], "pgr.step_tau", "finite number"),
    "embedding_judge_threshold=inf": (
        ["pgr.embedding_judge_threshold=inf"],
        "pgr.embedding_judge_threshold",
        "finite number",
    ),
    "timeout_seconds=inf": (
        ["endpoint.timeout_seconds=inf"],
        "endpoint.timeout_seconds",
        "finite number",
    ),
    "retry_base_seconds=nan": (
        ["limits.retry_base_seconds=nan"],
        "limits.retry_base_seconds",
        "finite number",
    ),
    "publish.train=nan": (["publish.train=nan"], "publish.train", "finite number"),
    "exclusive_ngram_share_max=nan": (
        ["audit.exclusive_ngram_share_max=nan"],
        "audit.exclusive_ngram_share_max",
        "finite number",
    ),
    "methods=[bogus]": (
        ["pgr.methods=[bogus]"],
        "pgr.methods",
        "unknown retrieval method 'bogus'; choose from query_only",
    ),
    "judges=[oracle]": (
        ["pgr.judges=[oracle]"],
        "pgr.judges",
        "unknown judge 'oracle'; choose from provenance",
    ),
    "budget_baselines=[pgr_tot]": (
        ["pgr.budget_baselines=[pgr_tot]"],
        "pgr.budget_baselines",
        "unknown budget baseline 'pgr_tot'; choose from query_only, bm25, random",
    ),
    "methods listed twice": (
        ["pgr.methods=[query_only, query_only]"],
        "pgr.methods",
        "listed twice",
    ),
    "methods without judges": (
        ["pgr.judges=[]"],
        "pgr",
        "judges is empty, but methods are to be scored",
    ),
    "query_date_start after query_date_end": (
        ["generation.query_date_start=2025-03-01"],
        "generation",
        "query_date_start (2025-03-01) is after query_date_end (2025-02-28)",
    ),
    "ngram_min above ngram_max": (
        ["audit.ngram_min=6"],
        "audit",
        "ngram_min (6) is above ngram_max (5)",
    ),
    "retry backoff range": (
        ["limits.retry_base_seconds=60"],
        "limits",
        "retry_base_seconds (60) is above retry_max_seconds (30)",
    ),
    "bootstrap_samples huge": (
        ["pgr.bootstrap_samples=100000000"],
        "pgr.bootstrap_samples",
        "less than or equal to 1000000",
    ),
    "seed of 5000 digits": (
        ["seed=" + "9" * 5000],
        "seed",
        "Unable to parse input string as an integer",
    ),
    "seed=-1": (["seed=-1"], "seed", "greater than or equal to 0"),
}


@pytest.mark.parametrize("case", list(SETTING_CASES), ids=list(SETTING_CASES))
def test_a_bad_setting_is_one_line_naming_it(case: str, capsys: pytest.CaptureFixture[str]) -> None:
    assignments, setting, message = SETTING_CASES[case]
    argv = ["config", "show"]
    for assignment in assignments:
        argv += ["--set", assignment]
    line = one_error_line(capsys, argv)
    assert f"invalid setting {setting}" in line, line
    assert message in line, line


@pytest.mark.parametrize(
    "case",
    ["gamma_max=nan", "gamma_max=-1", "methods=[bogus]", "query_date_start after query_date_end"],
)
def test_generate_refuses_a_bad_setting_before_any_work(
    case: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The probe saw these accepted, then failing inside the flow after two Prefect retries (~50 s)."""
    assignments, setting, message = SETTING_CASES[case]
    output = tmp_path / "run"
    argv = ["generate", "--count", "1", "--output", str(output)]
    for assignment in assignments:
        argv += ["--set", assignment]
    line = one_error_line(capsys, argv, seconds=5)
    assert f"invalid setting {setting}" in line and message in line, line
    assert not output.exists()


def test_a_bad_value_in_the_environment_is_one_line(
    clean_settings_env: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    clean_settings_env.setenv("MEMORYQUEST_GENERATION__GAMMA_MAX", "nan")
    line = one_error_line(capsys, ["config", "show"])
    assert "invalid setting generation.gamma_max: Input should be a finite number" in line


def test_the_known_budget_baselines_match_the_runner() -> None:
    assert tuple(m.value for m in BASELINE_METHODS) == KNOWN_BASELINES


def test_the_defaults_still_load() -> None:
    settings = load_settings()
    assert settings.generation.gamma_max == 0.3 and settings.pgr.methods == [
        "query_only",
        "pgr_cot",
        "pgr_tot",
    ]


# --------------------------------------------------------------------------- config files


def _directory(tmp_path: Path) -> tuple[str, str]:
    return str(tmp_path), f"config file {tmp_path} is a directory, not a TOML file"


def _dev_zero(tmp_path: Path) -> tuple[str, str]:
    return "/dev/zero", "config file /dev/zero is not a regular file"


def _fifo(tmp_path: Path) -> tuple[str, str]:
    fifo = tmp_path / "run.toml"
    os.mkfifo(fifo)  # opening it would block for ever
    return str(fifo), f"config file {fifo} is not a regular file"


def _too_big(tmp_path: Path) -> tuple[str, str]:
    big = tmp_path / "big.toml"
    big.write_text("# padding\n" * (CONFIG_FILE_MAX_BYTES // 10 + 1), encoding="utf-8")
    return str(
        big
    ), f"config file {big} is {big.stat().st_size} bytes, above the 1000000-byte limit"


def _not_utf8(tmp_path: Path) -> tuple[str, str]:
    path = tmp_path / "latin1.toml"
    path.write_bytes("[generation]\n# caf\xe9\n".encode("latin-1"))
    return str(path), f"config file {path} is not UTF-8 text (byte offset 18)"


def _huge_integer(tmp_path: Path) -> tuple[str, str]:
    path = tmp_path / "digits.toml"
    path.write_text("seed = " + "9" * 5000 + "\n", encoding="utf-8")
    return str(path), f"config file {path} is not valid TOML: Exceeds the limit (4300 digits)"


def _deep_nesting(tmp_path: Path) -> tuple[str, str]:
    path = tmp_path / "deep.toml"
    path.write_text("x = " + "[" * 50_000 + "]" * 50_000 + "\n", encoding="utf-8")
    return str(path), f"config file {path} is not valid TOML: nested too deeply"


def _nan_in_toml(tmp_path: Path) -> tuple[str, str]:
    path = tmp_path / "nan.toml"
    path.write_text("[generation]\ngamma_max = nan\n", encoding="utf-8")
    return str(path), "invalid setting generation.gamma_max: Input should be a finite number"


def _missing(tmp_path: Path) -> tuple[str, str]:
    return str(tmp_path / "nope.toml"), f"config file {tmp_path / 'nope.toml'} does not exist"


CONFIG_CASES = {
    "--config <directory>": _directory,
    "--config /dev/zero": _dev_zero,
    "--config <fifo>": _fifo,
    "--config <2 MB file>": _too_big,
    "--config <latin-1 file>": _not_utf8,
    "--config <5000-digit integer>": _huge_integer,
    "--config <nested 50000 deep>": _deep_nesting,
    "--config <gamma_max = nan>": _nan_in_toml,
    "--config <missing>": _missing,
}


@pytest.mark.parametrize("case", list(CONFIG_CASES), ids=list(CONFIG_CASES))
@pytest.mark.parametrize(
    "command", [["config", "show"], ["generate", "--count", "1"]], ids=["config-show", "generate"]
)
def test_a_bad_config_file_is_one_line_naming_it(
    case: str, command: list[str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config, message = CONFIG_CASES[case](tmp_path)
    argv = [*command, "--config", config]
    if command[0] == "generate":
        argv += ["--output", str(tmp_path / "out")]
    line = one_error_line(capsys, argv, seconds=5)
    assert message in line, line
    assert not (tmp_path / "out").exists()


def test_the_config_file_from_the_environment_is_checked_too(
    clean_settings_env: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    clean_settings_env.setenv("MEMORYQUEST_CONFIG", "/dev/zero")
    assert one_error_line(capsys, ["config", "show"]) == (
        "memoryquest: error: config file /dev/zero is not a regular file"
    )


# --------------------------------------------------------------------------- output and inputs of generate


def test_output_that_is_a_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    output = tmp_path / "run"
    output.write_text("not a directory", encoding="utf-8")
    line = one_error_line(capsys, ["generate", "--count", "1", "--output", str(output)], seconds=5)
    assert line == f"memoryquest: error: output {output} exists and is not a directory"


def test_output_below_a_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "file").write_text("x", encoding="utf-8")
    output = tmp_path / "file" / "run"
    line = one_error_line(capsys, ["generate", "--count", "1", "--output", str(output)], seconds=5)
    assert line == f"memoryquest: error: cannot create output directory {output}: Not a directory"


def test_output_directory_that_is_not_writable(
    unwritable_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    output = unwritable_dir
    line = one_error_line(capsys, ["generate", "--count", "1", "--output", str(output)], seconds=5)
    assert line.startswith(f"memoryquest: error: output directory {output} is not writable: "), line


def test_missing_persona_source(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    source = tmp_path / "nowhere"
    argv = ["generate", "--count", "1", "--source", str(source), "--output", str(tmp_path / "out")]
    line = one_error_line(capsys, argv, seconds=5)
    assert line == f"memoryquest: error: persona source {source} does not exist"


def test_bad_selection(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["generate", "--count", "0", "--output", str(tmp_path / "out")]
    assert (
        one_error_line(capsys, argv, seconds=5)
        == "memoryquest: error: count must be at least 1, got 0"
    )
    argv = ["generate", "--users", "user0", "--range", "0:2", "--output", str(tmp_path / "out")]
    assert "not both" in one_error_line(capsys, argv, seconds=5)
    argv = ["generate", "--range", "7:7", "--output", str(tmp_path / "out")]
    assert one_error_line(capsys, argv, seconds=5) == (
        "memoryquest: error: range 7:7 is empty: its stop must be above its start"
    )
    assert not (tmp_path / "out").exists()


def test_validate_no_longer_passes_a_nan_or_negative_threshold(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The probe's `validate` passed gamma_max=nan and =-1; the settings refuse both before it reads anything."""
    for value, message in (("nan", "finite number"), ("-1", "greater than 0")):
        line = one_error_line(
            capsys, ["validate", str(tmp_path), "--set", f"generation.gamma_max={value}"]
        )
        assert "invalid setting generation.gamma_max" in line and message in line
