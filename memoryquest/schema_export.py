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
from typing import Any

from pydantic import BaseModel

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


def schema_document(name: str, model: type[BaseModel]) -> dict[str, Any]:
    # Published rows always carry every field, so describe what is written
    # (serialization); the custom persona format is input, so describe what is accepted.
    mode = "validation" if name == "custom_persona" else "serialization"
    schema = model.model_json_schema(mode=mode)
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
    return {f"{name}{SUFFIX}": render(schema_document(name, model)) for name, model in schema_models().items()}


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
