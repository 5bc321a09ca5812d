"""The committed JSON Schemas are exactly what the contracts produce, and they describe real data."""

from __future__ import annotations

import json
from pathlib import Path

import jsonschema
import pytest

from memoryquest.cli.main import main
from memoryquest.contracts import TABLES
from memoryquest.intake import PersonaSelection, load_personas
from memoryquest.schema_export import export_schemas, rendered_schemas, schema_drift

COMMITTED = Path(__file__).resolve().parent.parent / "schemas"
REGENERATE = "run `memoryquest schemas write` (or `memoryquest schemas write --directory schemas`) and commit the result"


def test_committed_schemas_match_the_contracts(tmp_path: Path) -> None:
    export_schemas(tmp_path)
    fresh = {p.name: p.read_bytes() for p in tmp_path.glob("*.schema.json")}
    committed = {p.name: p.read_bytes() for p in COMMITTED.glob("*.schema.json")}
    assert sorted(committed) == sorted(fresh), f"schema files differ in name: {REGENERATE}"
    drifted = [name for name in fresh if fresh[name] != committed[name]]
    assert not drifted, (
        f"schemas/{', '.join(drifted)} out of date with memoryquest/contracts.py: {REGENERATE}"
    )
    assert schema_drift(COMMITTED) == []


def test_one_schema_per_table_plus_manifest_and_custom_persona() -> None:
    names = set(rendered_schemas())
    assert names == {f"{table}.schema.json" for table in TABLES} | {
        "manifest.schema.json",
        "custom_persona.schema.json",
    }


@pytest.mark.parametrize("table", sorted(TABLES))
def test_table_schemas_require_every_written_key(table: str) -> None:
    document = json.loads(rendered_schemas()[f"{table}.schema.json"])
    assert document["required"] == list(TABLES[table].model_fields)
    assert document["properties"]["schema_version"]["const"] == "1.0"
    assert document["additionalProperties"] is False


def test_formatting_is_deterministic(tmp_path: Path) -> None:
    first = {p.name: p.read_bytes() for p in export_schemas(tmp_path / "a")}
    second = {p.name: p.read_bytes() for p in export_schemas(tmp_path / "b")}
    assert first == second
    text = first["personas.schema.json"].decode("utf-8")
    assert text.endswith("}\n") and not text.endswith("\n\n")
    document = json.loads(text)
    assert text == json.dumps(document, sort_keys=True, indent=2, ensure_ascii=False) + "\n"
    assert document["$schema"] == "https://json-schema.org/draft/2020-12/schema"


@pytest.mark.parametrize("name", sorted(rendered_schemas()))
def test_every_schema_is_a_valid_json_schema(name: str) -> None:
    jsonschema.Draft202012Validator.check_schema(json.loads(rendered_schemas()[name]))


def validator(name: str) -> jsonschema.Draft202012Validator:
    return jsonschema.Draft202012Validator(
        json.loads((COMMITTED / f"{name}.schema.json").read_text(encoding="utf-8"))
    )


def test_persona_rows_validate_against_the_published_schema(personalens_sample_dir: Path) -> None:
    personas = load_personas(personalens_sample_dir, PersonaSelection(count=5)).personas
    schema = validator("personas")
    for persona in personas:
        schema.validate(persona.model_dump(mode="json"))
    row = personas[0].model_dump(mode="json")
    row["persona_id"] = "persona-0"
    assert not schema.is_valid(row)
    row = personas[0].model_dump(mode="json") | {"surprise": 1}
    assert not schema.is_valid(row)


def test_custom_persona_schema_accepts_the_example_and_rejects_typos(
    custom_personas_example: Path,
) -> None:
    schema = validator("custom_persona")
    document = json.loads(custom_personas_example.read_text(encoding="utf-8"))
    schema.validate(document)
    schema.validate(document[0])  # one object is a valid file too
    document[0]["affinities"]["Cooking"] = {"Cuisine": "Thai"}
    assert not schema.is_valid(document)
    document[0]["affinities"].pop("Cooking")
    document[0]["tasks"][0]["domain"] = "Books"
    assert not schema.is_valid(document)


def test_cli_writes_and_checks_schemas(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    target = tmp_path / "schemas"
    assert main(["schemas", "write", "--directory", str(target)]) == 0
    written = capsys.readouterr().out.split()
    assert sorted(Path(p).name for p in written) == sorted(rendered_schemas())
    assert main(["schemas", "check", "--directory", str(target)]) == 0
    capsys.readouterr()

    (target / "queries.schema.json").write_text("{}\n", encoding="utf-8")
    (target / "old_table.schema.json").write_text("{}\n", encoding="utf-8")
    assert main(["schemas", "check", "--directory", str(target)]) == 1
    err = capsys.readouterr().err
    assert "queries.schema.json: differs from the contracts" in err
    assert "old_table.schema.json: no contract produces this file any more" in err
    assert "memoryquest schemas write" in err
