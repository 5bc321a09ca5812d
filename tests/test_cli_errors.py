"""Every subcommand: a mistake of the user's is one line naming the file or setting, exit 2, no traceback.

Each case runs the real entry point (``memoryquest.cli.main.main``). Also:
``memoryquest --help`` imports no subcommand (what keeps it fast; the time
itself is measured by ``benchmarks/bench_cli_help.py``, not asserted here),
and the earlier flag spellings still work.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from memoryquest.cli.main import COMMANDS, main

try:
    from tests.cli_fixture import one_error_line
    from tests.publish_fixture import build_publish_fixture
except ModuleNotFoundError:  # tests/ is not a package: pytest puts it on sys.path
    from cli_fixture import one_error_line
    from publish_fixture import build_publish_fixture

pytestmark = pytest.mark.usefixtures("clean_settings_env")

DATASET_COMMANDS = {
    "validate": ["validate", "{dataset}"],
    "publish": ["publish", "{dataset}", "--output", "{tmp}/published"],
    "audit": ["audit", "{dataset}"],
    "explore": ["explore", "{dataset}"],
    "pgr run": ["pgr", "run", "{dataset}"],
}
"""Subcommands reading a dataset directory (DATASET_DIR, their first positional argument)."""

SETTINGS_COMMANDS = {
    "config show": ["config", "show"],
    "generate": ["generate", "--count", "1", "--output", "{tmp}/out"],
    "validate": ["validate", "{tmp}"],
    "publish": ["publish", "{tmp}", "--output", "{tmp}/published"],
    "audit": ["audit", "{tmp}"],
    "explore": ["explore", "{tmp}"],
    "pgr run": ["pgr", "run", "{tmp}"],
    "estimate": ["estimate", "--personas", "2"],
    "personas list": ["personas", "list"],
    "personas show": ["personas", "show", "user0"],
}
"""Subcommands reading settings (``--config``, ``--set``)."""


def error_line(capsys: pytest.CaptureFixture[str], argv: list[str]) -> str:
    return one_error_line(capsys, argv).removeprefix("memoryquest: error: ")


def filled(argv: list[str], tmp_path: Path) -> list[str]:
    return [arg.replace("{tmp}", str(tmp_path)) for arg in argv]


@pytest.fixture(scope="module")
def dataset_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A small generated dataset (one user, with facts), for the cases that need a valid input."""
    return build_publish_fixture(users=1, queries_per_user=1).save(
        tmp_path_factory.mktemp("cli-errors") / "dataset"
    )


# --------------------------------------------------------------------------- inputs


@pytest.mark.parametrize("command", list(DATASET_COMMANDS), ids=list(DATASET_COMMANDS))
@pytest.mark.parametrize("kind", ["missing", "file", "empty directory"])
def test_a_dataset_that_is_not_one_is_named(
    command: str, kind: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    target = tmp_path / "given"
    if kind == "file":
        target.write_text("not a dataset", encoding="utf-8")
    elif kind == "empty directory":
        target.mkdir()
    argv = [
        arg.replace("{dataset}", str(target)) for arg in filled(DATASET_COMMANDS[command], tmp_path)
    ]
    line = error_line(capsys, argv)
    assert str(target) in line, line
    assert "not a dataset" in line or "does not exist" in line or "not a directory" in line, line


@pytest.mark.parametrize("command", list(SETTINGS_COMMANDS), ids=list(SETTINGS_COMMANDS))
def test_a_config_that_is_a_directory_is_named(
    command: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = tmp_path / "run.toml"
    config.mkdir()
    argv = [*filled(SETTINGS_COMMANDS[command], tmp_path), "--config", str(config)]
    assert error_line(capsys, argv) == f"config file {config} is a directory, not a TOML file"
    assert not (tmp_path / "out").exists() and not (tmp_path / "published").exists()


def test_a_persona_source_that_is_not_one_is_named(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    missing = tmp_path / "nowhere"
    assert error_line(capsys, ["personas", "list", "--source", str(missing)]) == (
        f"persona source {missing} is not a directory"
    )
    line = error_line(capsys, ["personas", "show", "user0", "--source", str(tmp_path)])
    assert line.startswith(f"persona source {tmp_path} has no profile/ directory"), line


# --------------------------------------------------------------------------- outputs


def test_an_output_that_is_a_file_is_named(
    dataset_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    taken = tmp_path / "taken"
    taken.write_text("x", encoding="utf-8")
    expected = f"output {taken} exists and is not a directory"
    assert error_line(capsys, ["generate", "--count", "1", "--output", str(taken)]) == expected
    assert error_line(capsys, ["publish", str(dataset_dir), "--output", str(taken)]) == expected
    assert error_line(capsys, ["explore", str(dataset_dir), "--output", str(taken)]) == expected
    assert error_line(capsys, ["schemas", "write", "--directory", str(taken)]) == expected
    # pgr run writes a file: a directory is the wrong kind, and so is a file as its parent.
    assert error_line(capsys, ["pgr", "run", str(dataset_dir), "--output", str(tmp_path)]) == (
        f"output {tmp_path} is a directory; give a file name"
    )
    assert (
        error_line(capsys, ["pgr", "run", str(dataset_dir), "--output", str(taken / "pgr.jsonl")])
        == expected
    )


def test_an_unwritable_output_directory_is_named(
    dataset_dir: Path, unwritable_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    expected = f"output directory {unwritable_dir} is not writable: "
    for argv in (
        ["generate", "--count", "1", "--output", str(unwritable_dir)],
        ["publish", str(dataset_dir), "--output", str(unwritable_dir / "published")],
        ["explore", str(dataset_dir), "--output", str(unwritable_dir / "explorer")],
        ["pgr", "run", str(dataset_dir), "--output", str(unwritable_dir / "pgr.jsonl")],
    ):
        line = error_line(capsys, argv)
        assert line.startswith(expected), (argv, line)


def test_publish_without_a_destination_names_the_flag(
    dataset_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert "--output" in error_line(capsys, ["publish", str(dataset_dir)])


# --------------------------------------------------------------------------- endpoint


@pytest.mark.parametrize(
    "argv",
    [
        ["generate", "--count", "1", "--output", "{tmp}/out"],
        ["pgr", "run", "{dataset}", "--method", "query_only", "--judge", "provenance"],
    ],
    ids=["generate", "pgr run"],
)
def test_a_missing_api_key_names_the_setting(
    argv: list[str], dataset_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = [arg.replace("{dataset}", str(dataset_dir)) for arg in filled(argv, tmp_path)]
    line = error_line(capsys, [*argv, "--set", "endpoint.backend=openai"])
    assert "endpoint.api_key" in line and "OPENAI_API_KEY" in line, line
    assert not (tmp_path / "out").exists()  # nothing is created for a run that cannot start


# --------------------------------------------------------------------------- help and spellings


def test_help_imports_no_subcommand() -> None:
    """What keeps ``memoryquest --help`` fast: the subcommand table is all it loads."""
    script = (
        "import sys\n"
        "from memoryquest.cli.main import main\n"
        "try:\n"
        "    main(['--help'])\n"
        "except SystemExit:\n"
        "    pass\n"
        "heavy = ('prefect', 'pydantic', 'matplotlib', 'numpy', 'memoryquest.settings')\n"
        "loaded = [m for m in sys.modules if m.startswith(('memoryquest.cli.', *heavy))]\n"
        "print(sorted(loaded))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, check=True
    )
    assert done.stdout.splitlines()[-1] == "['memoryquest.cli.main']"
    assert all(name in done.stdout for name in COMMANDS)


def test_every_subcommand_help_shows_one_spelling(capsys: pytest.CaptureFixture[str]) -> None:
    for argv, shown, hidden in (
        (["publish", "--help"], ["DATASET_DIR", "--output"], ["--to"]),
        (
            ["pgr", "run", "--help"],
            ["DATASET_DIR", "--output", "--users USER,USER"],
            ["--out ", "--dataset"],
        ),
        (["explore", "--help"], ["DATASET_DIR", "--output"], []),
        (["generate", "--help"], ["--output", "--users USER,USER"], []),
        (["personas", "list", "--help"], ["--users USER,USER"], []),
    ):
        with pytest.raises(SystemExit):
            main(argv)
        text = capsys.readouterr().out
        assert all(flag in text for flag in shown), (argv, text)
        assert not any(flag in text for flag in hidden), (argv, text)


def test_earlier_spellings_still_work(
    dataset_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "pgr.jsonl"
    argv = [
        "pgr",
        "run",
        "--dataset",
        str(dataset_dir),
        "--out",
        str(out),
        "--set",
        "pgr.max_iterations=1",
    ]
    assert main([*argv, "--method", "query_only", "--judge", "provenance"]) == 0
    assert out.is_file() and all(json.loads(line) for line in out.read_text().splitlines())
    taken = tmp_path / "taken"
    taken.write_text("x", encoding="utf-8")
    capsys.readouterr()
    assert error_line(capsys, ["publish", str(dataset_dir), "--to", str(taken)]) == (
        f"output {taken} exists and is not a directory"
    )
