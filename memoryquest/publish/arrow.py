"""Arrow schemas derived from the pydantic contracts, and conversion both ways.

The published Parquet files carry an explicit schema so every reader
(``datasets``, pandas, DuckDB, polars) sees the same typed columns: nested
lists and structs instead of JSON strings, dates as ``date32``, enums as their
string values, ``Optional`` as nullable. Field descriptions from the contracts
travel along as Arrow field metadata.
"""

from __future__ import annotations

import datetime as dt
import enum
import json
import types
from collections.abc import Sequence
from typing import Annotated, Any, Literal, TypeVar, Union, get_args, get_origin

import pyarrow as pa
from pydantic import BaseModel

from memoryquest.contracts import SCHEMA_VERSION

ModelT = TypeVar("ModelT", bound=BaseModel)

_SCALARS: dict[type, pa.DataType] = {
    str: pa.string(),
    int: pa.int64(),
    float: pa.float64(),
    bool: pa.bool_(),
    dt.date: pa.date32(),
}


class UnsupportedAnnotation(TypeError):
    """A contract field whose type has no published column representation."""


def _strip_optional(annotation: Any) -> tuple[Any, bool]:
    """``X | None`` -> (X, True); anything else -> (annotation, False)."""
    origin = get_origin(annotation)
    if origin is Union or origin is types.UnionType:
        args = [arg for arg in get_args(annotation) if arg is not type(None)]
        nullable = len(args) != len(get_args(annotation))
        if len(args) != 1:
            raise UnsupportedAnnotation(
                f"unions of several types are not publishable: {annotation!r}"
            )
        return args[0], nullable
    return annotation, False


def _literal_type(annotation: Any) -> pa.DataType:
    values = get_args(annotation)
    if all(isinstance(value, str) for value in values):  # enum members of a StrEnum too
        return pa.string()
    if all(type(value) is int for value in values):
        return pa.int64()
    raise UnsupportedAnnotation(f"Literal with mixed or unsupported values: {annotation!r}")


def arrow_type(annotation: Any, where: str = "field") -> tuple[pa.DataType, bool]:
    """The Arrow type of one annotation and whether it is nullable.

    ``where`` names the field in error messages.
    """
    annotation, nullable = _strip_optional(annotation)
    origin = get_origin(annotation)
    if origin is Annotated:
        inner, inner_nullable = arrow_type(get_args(annotation)[0], where)
        return inner, nullable or inner_nullable
    if origin is Literal:
        return _literal_type(annotation), nullable
    if origin is list:
        (item_annotation,) = get_args(annotation) or (None,)
        if item_annotation is None:
            raise UnsupportedAnnotation(f"{where}: a bare list has no item type")
        item_type, item_nullable = arrow_type(item_annotation, f"{where}[]")
        return pa.list_(pa.field("item", item_type, nullable=item_nullable)), nullable
    if origin is not None:
        raise UnsupportedAnnotation(
            f"{where}: {annotation!r} is not publishable as a column "
            "(only str, int, float, bool, date, datetime, enums, Literal, Optional, list and models are)"
        )
    if isinstance(annotation, type):
        if issubclass(annotation, BaseModel):
            return pa.struct(model_fields(annotation, prefix=f"{where}.")), nullable
        if issubclass(annotation, enum.Enum):
            return pa.string(), nullable
        if annotation is dt.datetime:  # before date: datetime is a subclass of date
            return pa.timestamp("us", tz="UTC"), nullable
        for python_type, data_type in _SCALARS.items():
            if annotation is python_type:
                return data_type, nullable
    raise UnsupportedAnnotation(f"{where}: {annotation!r} is not publishable as a column")


def _enum_values(annotation: Any) -> list[str]:
    """The allowed values of an enum or Literal field (also inside Optional / list)."""
    annotation, _ = _strip_optional(annotation)
    origin = get_origin(annotation)
    if origin is Annotated or origin is list:
        return _enum_values(get_args(annotation)[0])
    if origin is Literal:
        return [str(value) for value in get_args(annotation)]
    if isinstance(annotation, type) and issubclass(annotation, enum.Enum):
        return [str(member.value) for member in annotation]
    return []


def model_fields(model: type[BaseModel], prefix: str = "") -> list[pa.Field]:
    """One Arrow field per pydantic field, in declaration order."""
    fields: list[pa.Field] = []
    for name, info in model.model_fields.items():
        data_type, nullable = arrow_type(info.annotation, f"{prefix}{model.__name__}.{name}")
        metadata: dict[str, str] = {}
        if info.description:
            metadata["description"] = info.description
        choices = _enum_values(info.annotation)
        if choices:
            metadata["enum"] = json.dumps(choices)
        fields.append(pa.field(name, data_type, nullable=nullable, metadata=metadata or None))
    return fields


def arrow_schema(model: type[BaseModel], table: str) -> pa.Schema:
    """The schema of one published table; its metadata names the table and schema version."""
    metadata = {
        "schema_version": SCHEMA_VERSION,
        "table": table,
        "row_model": f"{model.__module__}.{model.__qualname__}",
    }
    return pa.schema(model_fields(model), metadata=metadata)


def rows_to_table(rows: Sequence[BaseModel], schema: pa.Schema) -> pa.Table:
    """Rows (already in their published order) -> a table with exactly ``schema``."""
    return pa.Table.from_pylist([row.model_dump(mode="python") for row in rows], schema=schema)


def table_to_rows(table: pa.Table, model: type[ModelT]) -> list[ModelT]:
    """The inverse of :func:`rows_to_table`: validate every record against the contract."""
    return [model.model_validate(record) for record in table.to_pylist()]


def describe_columns(schema: pa.Schema) -> list[tuple[str, str, bool, str]]:
    """Flatten a schema for documentation: (path, type, nullable, description).

    Nested struct fields appear as ``parent.child``; list items as ``parent[].child``.
    """
    described: list[tuple[str, str, bool, str]] = []

    def short(data_type: pa.DataType) -> str:
        if pa.types.is_list(data_type):
            return f"list<{short(data_type.value_type)}>"
        if pa.types.is_struct(data_type):
            return "struct"
        return str(data_type)

    def walk(field: pa.Field, path: str) -> None:
        metadata = field.metadata or {}
        description = metadata.get(b"description", b"").decode("utf-8")
        if b"enum" in metadata:
            choices = ", ".join(json.loads(metadata[b"enum"]))
            description = f"{description} One of: {choices}.".strip()
        described.append((path, short(field.type), field.nullable, description))
        data_type = field.type
        suffix = ""
        while pa.types.is_list(data_type):
            data_type = data_type.value_type
            suffix += "[]"
        if pa.types.is_struct(data_type):
            for index in range(data_type.num_fields):
                child = data_type.field(index)
                walk(child, f"{path}{suffix}.{child.name}")

    for field in schema:
        walk(field, field.name)
    return described
