"""``memoryquest generate``: what it loads while its temporary Prefect server boots, ``--model``,
and the persona selection as the command line and the flow's parameters spell it."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from memoryquest.cli.main import main
from memoryquest.testing import FakeOpenAIServer

try:
    from tests.cli_fixture import one_error_line
except ModuleNotFoundError:  # tests/ is not a package: pytest puts it on sys.path
    from cli_fixture import one_error_line

PROBE = """
import sys
from memoryquest.cli.generate import _warm_up
from memoryquest.settings import Settings
_warm_up(Settings(), publish={publish})
print(" ".join(name for name in ("matplotlib", "pyarrow", "sklearn.linear_model") if name in sys.modules))
"""


@pytest.mark.parametrize(
    ("publish", "loaded"),
    [(True, "matplotlib pyarrow sklearn.linear_model"), (False, "")],
)
def test_a_publishing_run_loads_the_publishing_libraries_during_the_warm_up(
    publish: bool, loaded: str
) -> None:
    """Fresh interpreters: what the warm-up imports and nothing the test process already has."""
    result = subprocess.run(
        [sys.executable, "-c", PROBE.format(publish=publish)],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    assert result.stdout.strip() == loaded


# --------------------------------------------------------------------------- --model and the selection


def test_model_sets_the_chat_model_the_run_announces_and_asks_for(
    clean_settings_env: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The run's first line names the chat model of ``--model``, over ``--set endpoint.chat_model``;
    a refused key stops it there, before Prefect or the output directory."""
    clean_settings_env.setenv("OPENAI_API_KEY", "sk-wrong")
    output = tmp_path / "run"
    with FakeOpenAIServer(api_key="sk-right") as server:
        url = server.url
        code = main(
            [
                "generate",
                "--users",
                "user0",
                "--output",
                str(output),
                "--set",
                "endpoint.backend=openai",
                "--set",
                f"endpoint.base_url={server.url}",
                "--set",
                "endpoint.chat_model=gpt-4o",
                "--model",
                "gpt-4o-mini",
            ]
        )
        requests = [(r.method, r.path, r.status) for r in server.requests]
    captured = capsys.readouterr()
    assert code == 2, captured.err
    assert captured.out.splitlines()[0].startswith(
        f"endpoint {url} (server kind from /models at the first request), chat model gpt-4o-mini; "
    ), captured.out
    assert requests == [("GET", "/v1/models", 401)]
    assert not output.exists()


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--users", "user0", "--range", "0:3"], "not both; count caps either"),
        (["--range", "30:30"], "range 30:30 is empty: its stop must be above its start"),
        (["--range", "thirty"], "range must look like START:STOP"),
        (["--range=-5:"], "range start must not be negative"),
        (["--range", "0:3", "--count", "0"], "count must be at least 1, got 0"),
        (["--range", "40:50"], "range 40:50 selects no persona: the source has 30 (range 0:30)"),
        (["--range", "30:", "--count", "2"], "range 30:32 selects no persona"),
    ],
)
def test_a_bad_selection_is_one_line_before_anything_starts(
    clean_settings_env: pytest.MonkeyPatch,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    argv: list[str],
    message: str,
) -> None:
    output = tmp_path / "run"
    line = one_error_line(capsys, ["generate", *argv, "--output", str(output)], seconds=5)
    assert message in line
    assert not output.exists()


def test_the_flow_takes_the_selection_as_the_command_line_spells_it() -> None:
    """The deployment parameters ``users``, ``range``, ``count`` validate as Prefect reads them
    from ``--param`` (``users`` as a list or as ``user0,user3``), and mean what the flags mean."""
    from memoryquest.intake import PersonaSelection
    from memoryquest.orchestration.flow import generate_benchmark

    parameters = generate_benchmark.parameters.properties
    assert {"users", "range", "count"} <= set(parameters)
    for given in (
        {"users": "user0,user3", "count": 1},
        {"users": ["user0", "user3"], "count": 1},
        {"range": "30:230", "count": 5},
    ):
        validated = generate_benchmark.validate_parameters(given)
        selection = PersonaSelection.parse(
            users=validated.get("users"),
            count=validated.get("count"),
            range_text=validated.get("range"),
        )
        expected = (
            PersonaSelection(start=30, stop=35)
            if "range" in given
            else PersonaSelection(user_ids=["user0"])
        )
        assert selection == expected


def test_the_flow_refuses_a_bad_selection_before_any_work(tmp_path: Path) -> None:
    import asyncio

    from memoryquest.orchestration.flow import generate_benchmark
    from memoryquest.settings import Settings

    settings = Settings(output_dir=str(tmp_path / "run"))
    with pytest.raises(ValueError, match="not both"):
        asyncio.run(generate_benchmark.fn(users="user0", range="0:3", settings=settings))
    with pytest.raises(ValueError, match="range 4:4 is empty"):
        asyncio.run(generate_benchmark.fn(range="4:4", settings=settings))
    assert not (tmp_path / "run").exists()
