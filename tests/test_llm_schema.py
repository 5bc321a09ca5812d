"""Strict JSON schemas from pydantic models, and JSON found inside replies."""

from __future__ import annotations

from enum import StrEnum
from typing import Any, Literal

import pytest
from pydantic import BaseModel, Field, ValidationError

from memoryquest.llm.schema import extract_json, schema_name, strict_json_schema, validate_answer


class Kind(StrEnum):
    A = "a"
    B = "b"


class Inner(BaseModel):
    label: str = Field(description="what it is", min_length=2)
    score: float = 0.5


class Outer(BaseModel):
    kind: Kind
    inner: Inner = Field(description="the nested part")
    items: list[Inner] = Field(default_factory=list, max_length=5)
    note: str | None = None
    mode: Literal["x", "y"] = "x"


def objects(node: Any) -> list[dict[str, Any]]:
    found: list[dict[str, Any]] = []
    if isinstance(node, dict):
        if node.get("type") == "object":
            found.append(node)
        for value in node.values():
            found.extend(objects(value))
    elif isinstance(node, list):
        for value in node:
            found.extend(objects(value))
    return found


def test_every_object_is_closed_and_requires_all_properties() -> None:
    schema = strict_json_schema(Outer)
    assert schema is not None
    assert set(schema["required"]) == {"kind", "inner", "items", "note", "mode"}
    for node in objects(schema):
        assert node["additionalProperties"] is False
        assert node["required"] == list(node["properties"])
    text = str(schema)
    assert "default" not in text and "minLength" not in text  # strict mode rejects these keywords
    assert schema["properties"]["items"]["maxItems"] == 5  # and accepts this one
    assert schema["properties"]["inner"]["description"] == "the nested part"


@pytest.mark.parametrize(
    "model",
    [
        type("WithDict", (BaseModel,), {"__annotations__": {"counts": dict[str, int]}}),
        type("WithAny", (BaseModel,), {"__annotations__": {"value": Any}}),
    ],
)
def test_shapes_strict_mode_cannot_express_fall_back(model: type[BaseModel]) -> None:
    assert strict_json_schema(model) is None


def test_schema_names_are_api_safe() -> None:
    assert schema_name(Outer) == "Outer"
    assert schema_name(type("Odd Name!", (BaseModel,), {})) == "Odd_Name_"


@pytest.mark.parametrize(
    ("reply", "expected"),
    [
        ('{"a": 1}', '{"a": 1}'),
        ("  [1, 2] ", "[1, 2]"),
        ('Sure!\n```json\n{"a": 1}\n```\nAnything else?', '{"a": 1}'),
        ('The answer is {"a": {"b": 2}} as requested.', '{"a": {"b": 2}}'),
        ("no json here", "no json here"),
    ],
)
def test_json_is_found_inside_a_reply(reply: str, expected: str) -> None:
    assert extract_json(reply) == expected


class Note(BaseModel):
    text: str
    tags: list[str]


def test_a_line_break_inside_a_string_is_read_not_refused() -> None:
    """Some servers' JSON grammars let a raw control character into a string: invalid JSON, but
    unambiguous, so the answer is read with it kept; anything else invalid is still refused."""
    raw = '{"text": "first line\nsecond line", "tags": ["a"]}'
    with pytest.raises(ValidationError):
        Note.model_validate_json(raw)
    assert validate_answer(Note, raw) == Note(text="first line\nsecond line", tags=["a"])
    with pytest.raises(ValidationError):
        validate_answer(Note, '{"text": "cut off')
    with pytest.raises(ValidationError):
        validate_answer(Note, '{"text": "a\nb"}')  # read, then held to the model: tags missing
