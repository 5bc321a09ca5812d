"""The simulator's data files: every one ships in the package, loads, and a bad one is named precisely."""

from __future__ import annotations

import json

import pytest

from memoryquest.simulator.schema import TABLES, BridgeTable, NeedsTable, UpdatesTable
from memoryquest.simulator.tables import DataFileError, Table, data_dir, load, parse


def raw(schema: type[Table]) -> dict:
    return json.loads((data_dir() / schema.file).read_text(encoding="utf-8"))


def error_of(schema: type[Table], content: object) -> str:
    text = content if isinstance(content, str) else json.dumps(content)
    with pytest.raises(DataFileError) as caught:
        parse(schema, text)
    return str(caught.value)


def test_every_data_file_in_the_package_has_a_schema_and_every_schema_a_file() -> None:
    shipped = {item.name for item in data_dir().iterdir() if item.name.endswith(".json")}
    assert shipped == {schema.file for schema in TABLES}


@pytest.mark.parametrize("schema", TABLES, ids=lambda schema: schema.file)
def test_every_data_file_loads_once(schema: type[Table]) -> None:
    table = load(schema)
    assert table.model_dump(exclude_defaults=True), f"{schema.file} loads as an empty table"
    assert load(schema) is table


def test_a_missing_field_names_the_file_and_the_entry() -> None:
    content = raw(UpdatesTable)
    del content["generators"][3]["cores"][1]["sayings"]
    assert error_of(UpdatesTable, content) == (
        "updates.json: generators[3].cores[1].sayings: Field required"
    )


def test_an_unknown_field_and_a_wrong_type_are_named_one_per_line() -> None:
    content = raw(BridgeTable)
    content["frame"] = content.pop("frames")
    content["hedges"] = "honestly"
    assert error_of(BridgeTable, content).splitlines() == [
        "bridges.json: hedges: Input should be a valid tuple",
        "bridges.json: frames: Field required",
        "bridges.json: frame: Extra inputs are not permitted",
    ]


def test_a_table_missing_a_domain_says_which() -> None:
    content = raw(BridgeTable)
    del content["scenes"]["Travel"]
    assert error_of(BridgeTable, content) == "bridges.json: scenes: Value error, missing Travel"


def test_a_bad_pattern_and_a_bad_reference_are_named() -> None:
    needs = raw(NeedsTable)
    needs["domain_cues"]["Alarm"] = r"\balarm(s?\b"
    assert error_of(NeedsTable, needs).startswith(
        "needs.json: domain_cues.Alarm: Value error, not a regular expression: missing )"
    )
    needs = raw(NeedsTable)
    needs["plans"]["Books"][0]["needs"].append("sigth")
    assert error_of(NeedsTable, needs) == (
        "needs.json: (the whole file): Value error, plans.Books.choose: unknown need 'sigth'"
    )
    updates = raw(UpdatesTable)
    updates["generators"][0]["limits"] = ["until", "untill"]
    assert error_of(UpdatesTable, updates) == (
        "updates.json: generators[0].limits[1]: Value error, no part named 'untill'"
    )


def test_a_generator_slot_needs_exactly_one_source() -> None:
    updates = raw(UpdatesTable)
    updates["generators"][0]["slots"]["allergen"] = {"persona": "allergen", "pick": ["nuts"]}
    assert error_of(UpdatesTable, updates) == (
        "updates.json: generators[0].slots.allergen: Value error, "
        "one source expected, got ['persona', 'pick']"
    )
    del updates["generators"][0]["slots"]["allergen"]
    assert error_of(UpdatesTable, updates) == (
        "updates.json: generators[0]: Value error, no source for slot 'allergen'"
    )


def test_broken_json_names_the_line() -> None:
    assert error_of(BridgeTable, '{\n  "scenes": {,\n}') == (
        "bridges.json: line 2 column 14: Expecting property name enclosed in double quotes"
    )
