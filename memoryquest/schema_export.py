"""JSON Schemas of the published tables, generated from the pydantic contracts.

Consumers of the dataset read ``schemas/<table>.schema.json`` instead of our
Python code, so the files must never drift from :mod:`memoryquest.contracts`:
``memoryquest schemas write`` regenerates them and a test compares a fresh
export with the committed files byte for byte. Formatting is fixed (sorted keys,
two-space indent, trailing newline) so regeneration is reproducible.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel
from pydantic.json_schema import GenerateJsonSchema
from pydantic_core import core_schema

from memoryquest.contracts import SCHEMA_VERSION, TABLES, RunManifest
from memoryquest.intake.custom import CustomPersonaFile

JSON_SCHEMA_DIALECT = "https://json-schema.org/draft/2020-12/schema"
SUFFIX = ".schema.json"


def schema_models() -> dict[str, type[BaseModel]]:
    """Schema name -> model: every published table, the run manifest, the custom persona input."""
    models: dict[str, type[BaseModel]] = dict(TABLES)
    models["manifest"] = RunManifest
    models["custom_persona"] = CustomPersonaFile
    return models


class PublishedRowSchema(GenerateJsonSchema):
    """In serialization mode every field is required: a written row always carries every key."""

    def field_is_required(
        self,
        field: core_schema.ModelField | core_schema.DataclassField | core_schema.TypedDictField,
        total: bool,
    ) -> bool:
        if self.mode == "serialization" and field.get("serialization_exclude_if") is None:
            return True
        return super().field_is_required(field, total)


def schema_document(name: str, model: type[BaseModel]) -> dict[str, Any]:
    # Published rows: describe what is written (every key present, defaults included).
    # The custom persona format is input: describe what is accepted (defaults optional).
    mode: Literal["validation", "serialization"] = (
        "validation" if name == "custom_persona" else "serialization"
    )
    schema = model.model_json_schema(mode=mode, schema_generator=PublishedRowSchema)
    schema["$schema"] = JSON_SCHEMA_DIALECT
    schema["$id"] = f"{name}{SUFFIX}"
    schema["x-memoryquest-schema-version"] = SCHEMA_VERSION
    if name == "custom_persona":
        schema["title"] = "CustomPersonaFile"
    return schema


def render(document: dict[str, Any]) -> str:
    return json.dumps(document, sort_keys=True, indent=2, ensure_ascii=False) + "\n"


def rendered_schemas() -> dict[str, str]:
    """File name -> exact file content."""
    return {
        f"{name}{SUFFIX}": render(schema_document(name, model))
        for name, model in schema_models().items()
    }


def export_schemas(directory: str | Path) -> list[Path]:
    """Write every schema into ``directory`` (created if needed); returns the paths written."""
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    written: list[Path] = []
    for file_name, content in rendered_schemas().items():
        path = directory / file_name
        path.write_text(content, encoding="utf-8", newline="\n")
        written.append(path)
    return written


def schema_drift(directory: str | Path) -> list[str]:
    """Human-readable differences between ``directory`` and a fresh export (empty when in sync)."""
    directory = Path(directory)
    expected = rendered_schemas()
    problems: list[str] = []
    for file_name, content in expected.items():
        path = directory / file_name
        if not path.is_file():
            problems.append(f"{path}: missing")
        elif path.read_bytes() != content.encode("utf-8"):
            problems.append(f"{path}: differs from the contracts")
    if directory.is_dir():
        for path in sorted(directory.glob(f"*{SUFFIX}")):
            if path.name not in expected:
                problems.append(f"{path}: no contract produces this file any more")
    return problems
