"""``memoryquest personas list|show`` and the --help of the persona and schema commands."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from memoryquest.cli.main import main
from memoryquest.contracts import Persona
from memoryquest.ids import make_id
from memoryquest.intake import PersonaSelection, load_personas

try:
    from tests.cli_fixture import one_error_line
except ModuleNotFoundError:  # tests/ is not a package: pytest puts it on sys.path
    from cli_fixture import one_error_line

pytestmark = pytest.mark.usefixtures("clean_settings_env")


def run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, list[str], str]:
    code = main(list(args))
    captured = capsys.readouterr()
    return code, captured.out.splitlines(), captured.err


def test_list_prints_one_line_per_persona(capsys: pytest.CaptureFixture[str]) -> None:
    code, lines, err = run(capsys, "personas", "list", "--count", "3")
    assert (code, err) == (0, "")
    assert [line.split()[0] for line in lines] == ["user0", "user1", "user2"]
    first = lines[0]
    assert make_id("persona", "personalens", "user0") in first
    assert "35-44 years old / Male / Canada" in first
    assert "90 affinities" in first and "89 tasks" in first


def test_list_by_range_and_by_users(capsys: pytest.CaptureFixture[str]) -> None:
    code, lines, _ = run(capsys, "personas", "list", "--range", "9:12")
    assert code == 0
    assert [line.split()[0] for line in lines] == ["user9", "user10", "user11"]
    code, lines, _ = run(capsys, "personas", "list", "--users", "user20,user2")
    assert [line.split()[0] for line in lines] == ["user20", "user2"]


def test_list_reports_failures_on_stderr_with_exit_code_1(
    capsys: pytest.CaptureFixture[str], personalens_sample_dir: Path
) -> None:
    code, lines, err = run(capsys, "personas", "list", "--users", "user0,user404,../etc")
    assert code == 1
    assert [line.split()[0] for line in lines] == ["user0"]
    assert (
        f"error: {personalens_sample_dir / 'profile' / 'user404'}: unknown user id 'user404'" in err
    )
    assert "user_ids: rejected: user id '../etc' contains a path separator" in err
    assert "1 personas loaded, 2 errors" in err


def test_list_a_custom_file_and_a_source_from_set(
    capsys: pytest.CaptureFixture[str], custom_personas_example: Path
) -> None:
    code, lines, _ = run(capsys, "personas", "list", "--source", str(custom_personas_example))
    assert code == 0
    assert [line.split()[0] for line in lines] == ["maya-okafor", "tomas-lindqvist"]
    assert "25-34 years old / Female / United Kingdom" in lines[0]
    code, lines, _ = run(
        capsys, "personas", "list", "--set", f"persona_source={custom_personas_example}"
    )
    assert len(lines) == 2


def test_show_summary(capsys: pytest.CaptureFixture[str]) -> None:
    code, lines, err = run(capsys, "personas", "show", "user0")
    assert (code, err) == (0, "")
    text = "\n".join(lines)
    assert lines[0].startswith(f"user0  ({make_id('persona', 'personalens', 'user0')}")
    assert "  age: 35-44 years old" in lines
    assert "    Favorite Authors: Carl Sagan, Stephen Hawking, Yuval Noah Harari" in lines
    assert "affinities (90 in 20 domains):" in lines
    assert "tasks (73 single-domain, 16 multi-domain):" in lines
    assert "  SD-Alarm-task-1 [Alarm] Set a new alarm" in text


def test_show_json_is_the_persona_row(
    capsys: pytest.CaptureFixture[str], personalens_sample_dir: Path
) -> None:
    code, lines, _ = run(capsys, "personas", "show", "user5", "--json")
    assert code == 0
    shown = Persona.model_validate_json("\n".join(lines))
    expected = load_personas(personalens_sample_dir, PersonaSelection(user_ids=["user5"])).personas[
        0
    ]
    assert shown == expected


def test_show_unknown_user_fails(capsys: pytest.CaptureFixture[str]) -> None:
    code, lines, err = run(capsys, "personas", "show", "user404")
    assert code == 1
    assert lines == []
    assert "unknown user id 'user404'" in err


def test_bad_selection_text_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run(capsys, "personas", "list", "--range", "ten")
    assert code == 2
    assert "range must look like START:STOP" in err


def test_http_source_needs_a_selection(capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run(capsys, "personas", "list", "--source", "http://127.0.0.1:9/data")
    assert code == 2
    assert "cannot be listed" in err


def test_count_caps_users_and_ranges(capsys: pytest.CaptureFixture[str]) -> None:
    code, lines, _ = run(
        capsys, "personas", "list", "--users", "user20,user2,user5", "--count", "2"
    )
    assert code == 0
    assert [line.split()[0] for line in lines] == ["user20", "user2"]
    code, lines, _ = run(capsys, "personas", "list", "--range", "9:20", "--count", "2")
    assert code == 0
    assert [line.split()[0] for line in lines] == ["user9", "user10"]


def test_users_with_a_range_is_refused_in_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    line = one_error_line(capsys, ["personas", "list", "--users", "user0", "--range", "0:3"])
    assert line == (
        "memoryquest: error: choose personas by user ids (users) or by a range (range), not both; "
        "count caps either"
    )


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("30:30", "range 30:30 is empty: its stop must be above its start"),
        ("5:2", "range 5:2 is empty: its stop must be above its start"),
        ("-3:", "range start must not be negative (positions count from 0), got -3"),
        (
            "30-40",
            "range must look like START:STOP (positions START to STOP-1, e.g. 30:230), got '30-40'",
        ),
        ("30:230", "range 30:230 selects no persona: the source has 30 (range 0:30)"),
    ],
)
def test_a_malformed_or_empty_range_is_one_line(
    capsys: pytest.CaptureFixture[str], text: str, message: str
) -> None:
    line = one_error_line(capsys, ["personas", "list", f"--range={text}"])
    assert line == f"memoryquest: error: {message}"


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (["personas", "--help"], "list"),
        (["personas", "list", "--help"], "--range START:STOP"),
        (["personas", "show", "--help"], "--json"),
        (["schemas", "--help"], "write"),
        (["schemas", "write", "--help"], "--directory"),
        (["schemas", "check", "--help"], "--directory"),
    ],
)
def test_help(capsys: pytest.CaptureFixture[str], args: list[str], expected: str) -> None:
    with pytest.raises(SystemExit) as exit_info:
        main(args)
    assert exit_info.value.code == 0
    assert expected in capsys.readouterr().out


def test_json_output_parses(
    capsys: pytest.CaptureFixture[str], custom_personas_example: Path
) -> None:
    code, lines, _ = run(
        capsys,
        "personas",
        "show",
        "tomas-lindqvist",
        "--source",
        str(custom_personas_example),
        "--json",
    )
    assert code == 0
    assert json.loads("\n".join(lines))["source"] == "custom"
