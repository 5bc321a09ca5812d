"""Response schemas: pydantic models as the strict JSON schemas structured output accepts.

OpenAI's strict mode wants every object closed (``additionalProperties:
false``), every property listed in ``required``, an object at the root and
only a subset of JSON-Schema keywords. ``strict_json_schema`` rewrites a
pydantic schema into that shape, or returns ``None`` when the shape cannot
be expressed (free-form dicts, ``Any``, a non-object root) so the client
falls back to JSON mode. Keywords strict mode ignores are dropped from the
*sent* schema only: pydantic still validates the full model on our side.
"""

from __future__ import annotations

import copy
import hashlib
import json
import re
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError

ModelT = TypeVar("ModelT", bound=BaseModel)

# Keywords OpenAI strict mode accepts; anything else is stripped from the sent schema.
_ALLOWED = {
    "type",
    "properties",
    "required",
    "additionalProperties",
    "items",
    "anyOf",
    "enum",
    "const",
    "$ref",
    "$defs",
    "description",
    "pattern",
    "format",
    "minimum",
    "maximum",
    "exclusiveMinimum",
    "exclusiveMaximum",
    "multipleOf",
    "minItems",
    "maxItems",
}
_STRICT_FORMATS = {
    "date-time",
    "time",
    "date",
    "duration",
    "email",
    "hostname",
    "ipv4",
    "ipv6",
    "uuid",
}


class NotStrictable(ValueError):
    """The schema has a shape strict structured output cannot express."""


_SCHEMAS: dict[type[BaseModel], dict[str, Any]] = {}
_STRICT: dict[type[BaseModel], dict[str, Any] | None] = {}


def response_schema(model: type[BaseModel]) -> dict[str, Any]:
    """The model's JSON schema, computed once per class (it is slow to build). Do not mutate."""
    schema = _SCHEMAS.get(model)
    if schema is None:
        schema = _SCHEMAS[model] = model.model_json_schema()
    return schema


_FINGERPRINTS: dict[type[BaseModel], str] = {}


def schema_fingerprint(model: type[BaseModel]) -> str:
    """sha256 of the model's canonical JSON schema: stands for the schema in cache keys."""
    fingerprint = _FINGERPRINTS.get(model)
    if fingerprint is None:
        text = json.dumps(response_schema(model), sort_keys=True, separators=(",", ":"))
        fingerprint = _FINGERPRINTS[model] = hashlib.sha256(text.encode("utf-8")).hexdigest()
    return fingerprint


def strict_json_schema(model: type[BaseModel]) -> dict[str, Any] | None:
    """A strict-mode copy of the model's schema, or ``None`` when strict mode cannot express it."""
    if model not in _STRICT:
        try:
            _STRICT[model] = to_strict(response_schema(model))
        except NotStrictable:
            _STRICT[model] = None
    return _STRICT[model]


def schema_name(model: type[BaseModel]) -> str:
    """A name the API accepts: ``^[a-zA-Z0-9_-]{1,64}$``."""
    return re.sub(r"[^a-zA-Z0-9_-]", "_", model.__name__)[:64] or "response"


_GRAMMAR_ALLOWED = _ALLOWED | {"minLength", "maxLength"}
"""A grammar-constrained server (llama.cpp's json_object + schema) enforces string lengths too:
an answer model that refuses an empty string says so to the grammar, so it cannot be sent."""


def to_strict(
    schema: dict[str, Any], allowed: frozenset[str] | set[str] = _ALLOWED
) -> dict[str, Any]:
    root = copy.deepcopy(schema)
    defs = root.get("$defs", {})
    if _resolve(root, defs).get("type") != "object":
        raise NotStrictable("the root of a strict schema must be an object")
    converted = _convert(root, defs, allowed)
    if defs:
        converted["$defs"] = {name: _convert(body, defs, allowed) for name, body in defs.items()}
    return converted


def grammar_schema(schema: dict[str, Any]) -> dict[str, Any] | None:
    """The strict form of ``schema`` with its string lengths kept, for a server that turns the
    schema into a grammar; None when strict mode cannot express it."""
    try:
        return to_strict(schema, _GRAMMAR_ALLOWED)
    except NotStrictable:
        return None


def _resolve(node: dict[str, Any], defs: dict[str, Any]) -> dict[str, Any]:
    ref = node.get("$ref")
    if isinstance(ref, str) and ref.startswith("#/$defs/"):
        target = defs.get(ref.removeprefix("#/$defs/"))
        if target is None:
            raise NotStrictable(f"unresolvable reference {ref}")
        return dict(target)
    return node


def _convert(node: Any, defs: dict[str, Any], allowed: frozenset[str] | set[str]) -> dict[str, Any]:
    if not isinstance(node, dict):
        raise NotStrictable(f"unexpected schema node {node!r}")
    if "$ref" in node and len(node) > 1:
        # A $ref with siblings (pydantic adds description/default next to it): inline the target.
        extras = {k: v for k, v in node.items() if k != "$ref"}
        node = {**_resolve(node, defs), **{k: v for k, v in extras.items() if k == "description"}}
    if "oneOf" in node:  # discriminated unions: the alternatives are disjoint, anyOf says the same
        node = {
            **{k: v for k, v in node.items() if k not in ("oneOf", "discriminator")},
            "anyOf": node["oneOf"],
        }
    if "allOf" in node:
        parts = node["allOf"]
        if len(parts) != 1:
            raise NotStrictable("allOf with several parts")
        node = {**{k: v for k, v in node.items() if k != "allOf"}, **_resolve(parts[0], defs)}
    if not any(key in node for key in ("type", "$ref", "anyOf", "enum", "const")):
        raise NotStrictable("a value of any type (Any) cannot be strict")
    out: dict[str, Any] = {}
    for key, value in node.items():
        if key not in allowed:
            continue
        if key == "format" and value not in _STRICT_FORMATS:
            continue
        if key == "properties":
            out[key] = {name: _convert(sub, defs, allowed) for name, sub in value.items()}
        elif key == "items":
            if not isinstance(value, dict):
                raise NotStrictable("tuple-style items")
            out[key] = _convert(value, defs, allowed)
        elif key == "anyOf":
            out[key] = [_convert(sub, defs, allowed) for sub in value]
        elif key == "additionalProperties":
            continue  # set below for objects
        elif key == "$defs":
            continue  # handled at the root
        else:
            out[key] = value
    types = node.get("type")
    is_object = types == "object" or (isinstance(types, list) and "object" in types)
    if is_object:
        extra = node.get("additionalProperties")
        if extra not in (None, False) and not node.get("properties"):
            raise NotStrictable("free-form dict (additionalProperties) cannot be strict")
        out.setdefault("properties", {})
        out["required"] = list(out["properties"])
        out["additionalProperties"] = False
    return out


_FENCE = re.compile(r"```(?:json)?\s*(.*?)```", re.DOTALL)


def extract_json(text: str) -> str:
    """The JSON document inside a reply: as-is, inside a code fence, or the outermost braces.

    Servers without JSON mode often wrap the answer in prose or a fenced
    block; anything that is not JSON after this is left for the validator
    to report.
    """
    stripped = text.strip()
    if stripped.startswith(("{", "[")):
        return stripped
    fenced = _FENCE.search(stripped)
    if fenced:
        return fenced.group(1).strip()
    start, end = stripped.find("{"), stripped.rfind("}")
    if 0 <= start < end:
        return stripped[start : end + 1]
    return stripped


def validate_answer(model: type[ModelT], text: str) -> ModelT:
    """The answer as ``model``. A raw control character (a line break) inside a JSON string is
    invalid JSON but unambiguous, and some servers' JSON grammars let it through: such an answer
    is read with the control characters kept rather than asked for again."""
    document = extract_json(text)
    try:
        return model.model_validate_json(document)
    except ValidationError as exc:
        if not any(
            e["type"] == "json_invalid" and "control character" in e["msg"] for e in exc.errors()
        ):
            raise
        try:
            parsed = json.loads(document, strict=False)
        except ValueError:
            raise exc from None
        return model.model_validate(parsed)


def schema_instruction(schema: dict[str, Any]) -> str:
    """What JSON mode and plain-text servers are told, since they do not see the schema."""
    return (
        "Reply with one JSON object and nothing else (no prose, no code fence). "
        "It must validate against this JSON schema:\n" + json.dumps(schema, ensure_ascii=False)
    )


def repair_instruction(problem: str) -> str:
    """The follow-up turn asking the model to fix its own answer."""
    return (
        "Your previous answer could not be used: "
        + problem
        + "\nReply again with only the corrected JSON object, following the schema exactly."
    )
