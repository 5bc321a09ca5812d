from __future__ import annotations

import datetime as dt
import json
from enum import StrEnum
from typing import Literal

import pyarrow as pa
import pytest
from pydantic import BaseModel

from memoryquest.contracts import TABLES, Id, QueryLabels, RunManifest
from memoryquest.dataset import GeneratedDataset, split_tables
from memoryquest.publish.arrow import (
    UnsupportedAnnotation,
    arrow_schema,
    arrow_type,
    describe_columns,
    rows_to_table,
    table_to_rows,
)


class Colour(StrEnum):
    RED = "red"
    BLUE = "blue"


class Inner(BaseModel):
    when: dt.date
    tags: list[str]


class Sample(BaseModel):
    name: str
    count: int
    score: float
    flag: bool
    day: dt.date
    stamp: dt.datetime
    colour: Colour
    maybe: int | None = None
    ids: list[Id]
    inner: Inner
    inners: list[Inner]
    nested: list[list[int]]
    optional_inner: Inner | None = None


def test_scalar_and_nested_types() -> None:
    schema = arrow_schema(Sample, "sample")
    assert schema.field("name").type == pa.string() and not schema.field("name").nullable
    assert schema.field("count").type == pa.int64()
    assert schema.field("score").type == pa.float64()
    assert schema.field("flag").type == pa.bool_()
    assert schema.field("day").type == pa.date32()
    assert schema.field("stamp").type == pa.timestamp("us", tz="UTC")
    assert schema.field("colour").type == pa.string()
    assert json.loads(schema.field("colour").metadata[b"enum"]) == ["red", "blue"]
    assert schema.field("maybe").type == pa.int64() and schema.field("maybe").nullable
    assert schema.field("ids").type == pa.list_(pa.field("item", pa.string(), nullable=False))
    inner = pa.struct(
        [
            pa.field("when", pa.date32(), nullable=False),
            pa.field(
                "tags", pa.list_(pa.field("item", pa.string(), nullable=False)), nullable=False
            ),
        ]
    )
    assert schema.field("inner").type == inner
    assert schema.field("inners").type == pa.list_(pa.field("item", inner, nullable=False))
    assert schema.field("nested").type.value_type.value_type == pa.int64()
    assert schema.field("optional_inner").nullable
    assert schema.metadata[b"schema_version"] == b"1.0"
    assert schema.metadata[b"table"] == b"sample"


def test_round_trip_through_arrow() -> None:
    row = Sample(
        name="a",
        count=3,
        score=0.25,
        flag=True,
        day=dt.date(2024, 2, 29),
        stamp=dt.datetime(2024, 1, 1, 9, 30, 15, 123456, tzinfo=dt.UTC),
        colour=Colour.BLUE,
        ids=["q_0123456789abcdef"],
        inner=Inner(when=dt.date(2024, 1, 1), tags=["x"]),
        inners=[Inner(when=dt.date(2023, 12, 31), tags=[])],
        nested=[[1, 2], []],
    )
    schema = arrow_schema(Sample, "sample")
    table = rows_to_table([row], schema)
    assert table.schema.equals(schema, check_metadata=True)
    assert table_to_rows(table, Sample) == [row]


def test_unpublishable_annotations_are_named() -> None:
    with pytest.raises(UnsupportedAnnotation, match="RunManifest.settings"):
        arrow_schema(RunManifest, "manifest")
    with pytest.raises(UnsupportedAnnotation, match="unions of several types"):
        arrow_type(int | str)


def test_every_published_table_has_a_schema_with_nested_columns() -> None:
    for name, model in TABLES.items():
        schema = arrow_schema(model, name)
        assert "schema_version" in schema.names
        assert schema.names == list(model.model_fields)
    queries = arrow_schema(QueryLabels, "query_labels")
    references = queries.field("references").type
    assert pa.types.is_list(references) and pa.types.is_struct(references.value_type)
    assert references.value_type.field("date").type == pa.date32()
    # the one deliberate JSON column stays a string
    assert arrow_schema(TABLES["rejected"], "rejected").field("payload_json").type == pa.string()


class Narrowed(BaseModel):
    colour: Literal[Colour.BLUE]
    maybe: Literal[1, 2] | None = None


def test_a_literal_of_enum_members_is_a_string_column_listing_just_those_members() -> None:
    schema = arrow_schema(Narrowed, "narrowed")
    assert schema.field("colour").type == pa.string() and not schema.field("colour").nullable
    assert json.loads(schema.field("colour").metadata[b"enum"]) == ["blue"]
    assert schema.field("maybe").type == pa.int64() and schema.field("maybe").nullable
    row = Narrowed(colour=Colour.BLUE, maybe=2)
    assert table_to_rows(rows_to_table([row], schema), Narrowed) == [row]
    with pytest.raises(UnsupportedAnnotation, match="mixed"):
        arrow_type(Literal[Colour.BLUE, 1])
    with pytest.raises(UnsupportedAnnotation, match="mixed"):
        arrow_type(Literal[True, 1])


def test_generated_tables_convert_exactly(generated_dataset: GeneratedDataset) -> None:
    tables = split_tables(generated_dataset)
    for name, model in TABLES.items():
        rows = tables[name]
        table = rows_to_table(rows, arrow_schema(model, name))
        assert table.num_rows == len(rows)
        assert table_to_rows(table, model) == rows


def test_describe_columns_flattens_nested_fields() -> None:
    described = {
        path: (kind, nullable, text)
        for path, kind, nullable, text in describe_columns(
            arrow_schema(QueryLabels, "query_labels")
        )
    }
    assert described["references"][0] == "list<struct>"
    assert described["references[].cosine"][0] == "double"
    assert "Cosine similarity" in described["references[].cosine"][2]
    assert "One of: Alarm" in described["domain"][2]
