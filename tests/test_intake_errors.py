"""Bad PersonaLens input: every error names the file and the field, and the other users still load.

Each test copies two real sample users into tmp_path, corrupts user1 and checks
that user0 loads while user1 is reported with the exact file, field and message.
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from memoryquest.intake import IntakeError, IntakeResult, PersonaSelection, load_personas


@pytest.fixture
def source(tmp_path: Path, personalens_sample_dir: Path) -> Path:
    root = tmp_path / "data"
    for user in ("user0", "user1"):
        shutil.copytree(personalens_sample_dir / "profile" / user, root / "profile" / user)
    return root


def user_file(source: Path, name: str, user: str = "user1") -> Path:
    return source / "profile" / user / name


def edit(path: Path, change: Callable[[Any], object]) -> None:
    """Change the decoded JSON in place (the callback's return value is ignored) and write it back."""
    data = json.loads(path.read_text(encoding="utf-8"))
    change(data)
    path.write_text(json.dumps(data), encoding="utf-8")


def only_error(result: IntakeResult) -> IntakeError:
    assert [p.source_user_id for p in result.personas] == ["user0"], result.errors
    assert len(result.errors) == 1, [str(e) for e in result.errors]
    return result.errors[0]


def assert_error(result: IntakeResult, file: Path | str, field: str | None, message: str) -> None:
    error = only_error(result)
    assert error.file == str(file)
    assert error.field == field
    assert message in error.message, error.message


def test_error_text_names_file_field_and_message() -> None:
    assert str(IntakeError("a/profile.json", "affinities.Books", "expected an object")) == (
        "a/profile.json: affinities.Books: expected an object"
    )
    assert (
        str(IntakeError("a/profile.json", None, "file is missing"))
        == "a/profile.json: file is missing"
    )


# --------------------------------------------------------------------------- unreadable files


def test_invalid_json(source: Path) -> None:
    path = user_file(source, "profile.json")
    path.write_text('{"demographics": {"age": "35-44"},\n "interests": [', encoding="utf-8")
    assert_error(load_personas(source), path, None, "invalid JSON: Expecting value (line 2, column")


def test_non_utf8_bytes(source: Path) -> None:
    path = user_file(source, "tasks.json")
    raw = path.read_bytes()
    path.write_bytes(raw[:40] + b"\xff\xfe" + raw[40:])
    assert_error(load_personas(source), path, None, "not valid UTF-8 (byte 0xff at offset 40)")


def test_a_byte_order_mark_is_tolerated(source: Path) -> None:
    path = user_file(source, "tasks_md.json")
    path.write_bytes(b"\xef\xbb\xbf" + path.read_bytes())
    result = load_personas(source)
    assert result.errors == []
    assert len(result.personas) == 2


def test_missing_file(source: Path) -> None:
    path = user_file(source, "tasks_md.json")
    path.unlink()
    assert_error(load_personas(source), path, None, "file is missing")


def test_every_broken_file_of_a_user_is_reported(source: Path) -> None:
    user_file(source, "tasks.json").unlink()
    user_file(source, "tasks_md.json").write_text("[1,", encoding="utf-8")
    result = load_personas(source)
    assert [p.source_user_id for p in result.personas] == ["user0"]
    assert [(e.file, e.message[:12]) for e in result.errors] == [
        (str(user_file(source, "tasks.json")), "file is miss"),
        (str(user_file(source, "tasks_md.json")), "invalid JSON"),
    ]


def test_oversized_file(source: Path) -> None:
    path = user_file(source, "profile.json")
    path.write_text(path.read_text(encoding="utf-8") + " " * 150_000, encoding="utf-8")
    size = path.stat().st_size
    result = load_personas(source, max_file_bytes=100_000)
    assert_error(result, path, None, f"file is {size} bytes, above the 100000-byte limit")


def test_unknown_user_id(source: Path) -> None:
    result = load_personas(source, PersonaSelection(user_ids=["user0", "user7"]))
    assert_error(
        result, source / "profile" / "user7", None, "unknown user id 'user7': no such directory"
    )


# --------------------------------------------------------------------------- profile.json


def test_profile_must_be_an_object(source: Path) -> None:
    path = user_file(source, "profile.json")
    path.write_text("[]", encoding="utf-8")
    assert_error(load_personas(source), path, None, "expected an object, got array")


@pytest.mark.parametrize("section", ["demographics", "interests", "affinities", "interactions"])
def test_missing_profile_section(source: Path, section: str) -> None:
    path = user_file(source, "profile.json")
    edit(path, lambda data: data.pop(section))
    assert_error(load_personas(source), path, section, "missing field")


def test_affinities_not_an_object(source: Path) -> None:
    path = user_file(source, "profile.json")
    edit(path, lambda data: data.update(affinities=["Books"]))
    assert_error(load_personas(source), path, "affinities", "expected an object, got array")


def test_affinity_domain_not_an_object(source: Path) -> None:
    path = user_file(source, "profile.json")
    edit(path, lambda data: data["affinities"].update(Books="science fiction"))
    assert_error(load_personas(source), path, "affinities.Books", "expected an object, got string")


def test_affinity_value_neither_string_nor_list(source: Path) -> None:
    path = user_file(source, "profile.json")
    edit(path, lambda data: data["affinities"]["Books"].update(Genre=3))
    assert_error(
        load_personas(source),
        path,
        "affinities.Books.Genre",
        "expected a string or a list of strings, got number",
    )


def test_affinity_list_item_not_a_string(source: Path) -> None:
    path = user_file(source, "profile.json")
    edit(path, lambda data: data["affinities"]["Books"].update(Genre=["history", {"name": "x"}]))
    assert_error(
        load_personas(source), path, "affinities.Books.Genre[1]", "expected a string, got object"
    )


def test_unknown_affinity_domain(source: Path) -> None:
    path = user_file(source, "profile.json")
    edit(path, lambda data: data["affinities"].update(Cooking={"Cuisine": "Thai"}))
    assert_error(
        load_personas(source),
        path,
        "affinities.Cooking",
        "unknown domain 'Cooking'; expected one of: Alarm,",
    )


def test_domain_given_twice(source: Path) -> None:
    path = user_file(source, "profile.json")
    edit(path, lambda data: data["interactions"].update(books="a second Books summary"))
    assert_error(
        load_personas(source),
        path,
        "interactions.books",
        "domain 'Books' is given twice (also as 'Books')",
    )


def test_unknown_interest_domain(source: Path) -> None:
    path = user_file(source, "profile.json")
    edit(path, lambda data: data["interests"].update(Gardening=1))
    assert_error(load_personas(source), path, "interests.Gardening", "unknown domain 'Gardening'")


def test_interest_flag_not_zero_or_one(source: Path) -> None:
    path = user_file(source, "profile.json")
    edit(path, lambda data: data["interests"].update(Books="yes"))
    assert_error(load_personas(source), path, "interests.Books", "expected 0 or 1, got 'yes'")


def test_interaction_not_a_string(source: Path) -> None:
    path = user_file(source, "profile.json")
    edit(path, lambda data: data["interactions"].update(Alarm=["set alarms"]))
    assert_error(load_personas(source), path, "interactions.Alarm", "expected a string, got array")


def test_demographic_not_a_string(source: Path) -> None:
    path = user_file(source, "profile.json")
    edit(path, lambda data: data["demographics"].update(age=["35", "44"]))
    assert_error(load_personas(source), path, "demographics.age", "expected a string, got array")


def test_demographics_user_id_must_match_the_directory(source: Path) -> None:
    path = user_file(source, "profile.json")
    edit(path, lambda data: data["demographics"].update(user_id="user9"))
    assert_error(
        load_personas(source),
        path,
        "demographics.user_id",
        "'user9' does not match the user id 'user1'",
    )


def test_all_errors_of_one_file_are_reported_together(source: Path) -> None:
    path = user_file(source, "profile.json")

    def break_twice(data: dict[str, Any]) -> None:
        data["affinities"]["Books"]["Genre"] = 1
        data["interactions"]["Alarm"] = None

    edit(path, break_twice)
    result = load_personas(source)
    assert [(e.field, e.message) for e in result.errors] == [
        ("affinities.Books.Genre", "expected a string or a list of strings, got number"),
        ("interactions.Alarm", "expected a string, got null"),
    ]


# --------------------------------------------------------------------------- tasks files


def test_tasks_file_must_be_an_object(source: Path) -> None:
    path = user_file(source, "tasks.json")
    path.write_text(
        json.dumps(list(json.loads(path.read_text(encoding="utf-8")).values())), encoding="utf-8"
    )
    assert_error(load_personas(source), path, None, "expected an object, got array")


def test_task_not_an_object(source: Path) -> None:
    path = user_file(source, "tasks.json")
    edit(path, lambda data: data.update({"Task 2": "set an alarm"}))
    assert_error(load_personas(source), path, "Task 2", "expected an object, got string")


@pytest.mark.parametrize(
    "key",
    [
        "task_id",
        "Task Description",
        "User Intent",
        "Task Goal",
        "Relevant Domains",
        "Relevant Affinity Types",
    ],
)
def test_missing_task_field(source: Path, key: str) -> None:
    path = user_file(source, "tasks_md.json")
    edit(path, lambda data: data["Task 3"].pop(key))
    assert_error(load_personas(source), path, f"Task 3.{key}", "missing field")


def test_task_field_of_the_wrong_type(source: Path) -> None:
    path = user_file(source, "tasks.json")
    edit(path, lambda data: data["Task 4"].update({"User Intent": 42}))
    assert_error(load_personas(source), path, "Task 4.User Intent", "expected a string, got number")


def test_empty_task_text(source: Path) -> None:
    path = user_file(source, "tasks.json")
    edit(path, lambda data: data["Task 4"].update({"Task Goal": "   "}))
    assert_error(load_personas(source), path, "Task 4.Task Goal", "is empty")


def test_unknown_task_domain(source: Path) -> None:
    path = user_file(source, "tasks_md.json")
    edit(path, lambda data: data["Task 1"].update({"Relevant Domains": ["Events", "Space Travel"]}))
    assert_error(
        load_personas(source), path, "Task 1.Relevant Domains[1]", "unknown domain 'Space Travel'"
    )


def test_task_without_domains(source: Path) -> None:
    path = user_file(source, "tasks.json")
    edit(path, lambda data: data["Task 1"].update({"Relevant Domains": []}))
    assert_error(load_personas(source), path, "Task 1.Relevant Domains", "names no domain")


def test_situations_not_an_object(source: Path) -> None:
    path = user_file(source, "tasks.json")
    edit(path, lambda data: data["Task 1"].update(situations=["Toronto"]))
    assert_error(load_personas(source), path, "Task 1.situations", "expected an object, got array")


def test_situation_value_not_a_string(source: Path) -> None:
    path = user_file(source, "tasks.json")
    edit(path, lambda data: data["Task 1"]["situations"].update(Device={"kind": "phone"}))
    assert_error(
        load_personas(source), path, "Task 1.situations.Device", "expected a string, got object"
    )


def test_two_spellings_of_one_task_key_conflict(source: Path) -> None:
    path = user_file(source, "tasks.json")
    edit(path, lambda data: data["Task 1"].update({"task goal": "a second goal"}))
    assert_error(load_personas(source), path, "Task 1.task goal", "conflicts with 'Task Goal'")


def test_task_id_used_twice(source: Path) -> None:
    path = user_file(source, "tasks_md.json")
    edit(path, lambda data: data["Task 1"].update(task_id="SD-Alarm-task-1"))
    assert_error(load_personas(source), path, "task_id", "task id 'SD-Alarm-task-1' is used twice")


# --------------------------------------------------------------------------- unsafe ids


@pytest.mark.parametrize(
    ("user_id", "message"),
    [
        ("", "user id is empty"),
        ("   ", "user id is empty"),
        ("../../victim", "contains a path separator"),
        ("user0/../user1", "contains a path separator"),
        ("user0\\x", "contains a path separator"),
        ("/etc", "is an absolute path"),
        ("C:victim", "is an absolute path"),
        ("..", "contains '..'"),
        ("user..1", "contains '..'"),
        ("user\x00", "contains a NUL byte"),
        (".victim", "may only contain letters"),
    ],
)
def test_unsafe_user_ids_are_rejected_before_any_file_access(
    tmp_path: Path, source: Path, personalens_sample_dir: Path, user_id: str, message: str
) -> None:
    # A valid user placed where "../../victim" would lead: it must never be read.
    shutil.copytree(personalens_sample_dir / "profile" / "user2", tmp_path / "victim")
    result = load_personas(source, PersonaSelection(user_ids=["user0", user_id]))
    assert_error(result, source, "user_ids", message)


def test_intake_writes_nothing(tmp_path: Path, source: Path) -> None:
    user_file(source, "tasks.json").write_text("{", encoding="utf-8")

    def snapshot() -> dict[str, tuple[int, int]]:
        return {
            str(p): (p.stat().st_size, p.stat().st_mtime_ns) for p in sorted(tmp_path.rglob("*"))
        }

    before, cwd_before = snapshot(), sorted(os.listdir("."))
    result = load_personas(source)
    assert len(result.personas) == 1 and len(result.errors) == 1
    assert snapshot() == before
    assert sorted(os.listdir(".")) == cwd_before
