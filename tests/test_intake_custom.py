"""Custom personas: the documented JSON format, its example file and its errors."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from memoryquest.contracts import Domain, PersonaSource, TaskKind
from memoryquest.ids import make_id
from memoryquest.intake import IntakeResult, PersonaSelection, load_custom_personas, load_personas


@pytest.fixture
def example(custom_personas_example: Path) -> list[dict[str, Any]]:
    data = json.loads(custom_personas_example.read_text(encoding="utf-8"))
    assert isinstance(data, list)
    return data


def write(tmp_path: Path, document: object, name: str = "personas.json") -> Path:
    path = tmp_path / name
    path.write_text(json.dumps(document), encoding="utf-8")
    return path


def test_example_file_loads_grounded_personas(custom_personas_example: Path) -> None:
    result = load_personas(custom_personas_example)  # a .json source is a custom file
    assert result.errors == []
    maya, tomas = result.personas
    assert maya.source is PersonaSource.CUSTOM
    assert maya.source_user_id == "maya-okafor"
    assert maya.persona_id == make_id("persona", "custom", "maya-okafor")
    assert maya.demographics.reside_country == "United Kingdom"
    assert Domain.EVENTS in maya.interests
    names = [(a.domain, a.name) for a in maya.affinities]
    assert (Domain.BOOKS, "Favorite Authors") in names  # written "Favourite Authors"
    assert [a.values for a in maya.affinities if a.name == "Reading Format"] == [["audiobook"]]
    assert {i.domain for i in maya.interactions} >= {d for t in maya.tasks for d in t.domains}
    assert [t.kind for t in maya.tasks] == [
        TaskKind.SINGLE_DOMAIN,
        TaskKind.SINGLE_DOMAIN,
        TaskKind.MULTI_DOMAIN,
    ]
    assert maya.tasks[0].situations[0].name == "Location"
    # interests default to the affinity domains, in Domain order
    assert tomas.interests == [Domain.ALARM, Domain.BUSES, Domain.FINANCE, Domain.SPORTS]
    assert tomas.tasks[0].kind is TaskKind.MULTI_DOMAIN  # two domains, kind omitted
    assert tomas.tasks[0].affinity_types == ["Favorite Team", "Alarm Sound Preference"]


def test_one_object_is_a_file_of_one_persona(tmp_path: Path, example: list[dict[str, Any]]) -> None:
    result = load_custom_personas(write(tmp_path, example[1]))
    assert result.errors == []
    assert [p.source_user_id for p in result.personas] == ["tomas-lindqvist"]


def test_selection_applies_to_custom_files(custom_personas_example: Path) -> None:
    chosen = load_personas(custom_personas_example, PersonaSelection(user_ids=["tomas-lindqvist"]))
    assert [p.source_user_id for p in chosen.personas] == ["tomas-lindqvist"]
    first = load_personas(custom_personas_example, PersonaSelection(count=1))
    assert [p.source_user_id for p in first.personas] == ["maya-okafor"]
    missing = load_personas(custom_personas_example, PersonaSelection(user_ids=["nobody"]))
    assert missing.personas == []
    assert [(e.file, e.field) for e in missing.errors] == [(str(custom_personas_example), None)]
    assert "unknown user id 'nobody'" in missing.errors[0].message


def only_error(result: IntakeResult, loaded: list[str]) -> tuple[str, str | None, str]:
    assert [p.source_user_id for p in result.personas] == loaded
    assert len(result.errors) == 1, [str(e) for e in result.errors]
    error = result.errors[0]
    return error.file, error.field, error.message


def test_missing_field(tmp_path: Path, example: list[dict[str, Any]]) -> None:
    del example[1]["tasks"]
    path = write(tmp_path, example)
    assert only_error(load_custom_personas(path), ["maya-okafor"]) == (
        str(path),
        "[1].tasks",
        "Field required",
    )


def test_unknown_domain(tmp_path: Path, example: list[dict[str, Any]]) -> None:
    example[0]["affinities"]["Cooking"] = {"Cuisine": "Thai"}
    path = write(tmp_path, example)
    file, field, message = only_error(load_custom_personas(path), ["tomas-lindqvist"])
    assert (file, field) == (str(path), "[0].affinities.Cooking")
    assert "Input should be 'Alarm', 'Books'" in message


def test_mistyped_affinity_value(tmp_path: Path, example: list[dict[str, Any]]) -> None:
    example[1]["affinities"]["Alarm"]["Alarm Time Preference"] = ["6:30 AM", 7]
    path = write(tmp_path, example)
    file, field, message = only_error(load_custom_personas(path), ["maya-okafor"])
    assert field == "[1].affinities.Alarm.Alarm Time Preference[1]"
    assert message == "Input should be a valid string"


def test_unknown_key_is_an_error(tmp_path: Path, example: list[dict[str, Any]]) -> None:
    example[0]["tasks"][0]["priority"] = "high"
    path = write(tmp_path, example)
    assert only_error(load_custom_personas(path), ["tomas-lindqvist"]) == (
        str(path),
        "[0].tasks[0].priority",
        "Extra inputs are not permitted",
    )


def test_unsafe_user_id(tmp_path: Path, example: list[dict[str, Any]]) -> None:
    example[0]["user_id"] = "../maya"
    path = write(tmp_path, example)
    file, field, message = only_error(load_custom_personas(path), ["tomas-lindqvist"])
    assert field == "[0].user_id"
    assert "contains a path separator" in message


def test_duplicate_user_id(tmp_path: Path, example: list[dict[str, Any]]) -> None:
    example[1]["user_id"] = "maya-okafor"
    path = write(tmp_path, example)
    assert only_error(load_custom_personas(path), ["maya-okafor"]) == (
        str(path),
        "[1].user_id",
        "user id 'maya-okafor' is used twice",
    )


def test_duplicate_task_id(tmp_path: Path, example: list[dict[str, Any]]) -> None:
    example[0]["tasks"][2]["task_id"] = "maya-books-1"
    path = write(tmp_path, example)
    assert only_error(load_custom_personas(path), ["tomas-lindqvist"]) == (
        str(path),
        "[0].tasks[2].task_id",
        "task id 'maya-books-1' is used twice",
    )


def test_single_object_errors_have_no_index(tmp_path: Path, example: list[dict[str, Any]]) -> None:
    example[0]["interactions"] = {}
    path = write(tmp_path, example[0])
    assert only_error(load_custom_personas(path), []) == (
        str(path),
        "interactions",
        "Dictionary should have at least 1 item after validation, not 0",
    )


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (b'"just a string"', "expected a persona object or a list of them, got string"),
        (
            b"[{",
            "invalid JSON: Expecting property name enclosed in double quotes (line 1, column 3)",
        ),
        (b'[{"user_id": "caf\xe9"}]', "not valid UTF-8 (byte 0xe9 at offset 17)"),
    ],
)
def test_unreadable_files(tmp_path: Path, content: bytes, message: str) -> None:
    path = tmp_path / "personas.json"
    path.write_bytes(content)
    assert only_error(load_custom_personas(path), []) == (str(path), None, message)


def test_missing_and_oversized_files(tmp_path: Path, custom_personas_example: Path) -> None:
    missing = tmp_path / "none.json"
    assert only_error(load_personas(missing), []) == (str(missing), None, "file is missing")
    size = custom_personas_example.stat().st_size
    assert only_error(load_personas(custom_personas_example, max_file_bytes=1000), []) == (
        str(custom_personas_example),
        None,
        f"file is {size} bytes, above the 1000-byte limit",
    )
