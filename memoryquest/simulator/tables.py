"""The simulator's data files, read from the package and checked against their schema at first use.

Each file (``data/*.json``) has one :class:`Table` schema; :func:`load` validates it once
per process, and a bad file fails with one ``file: entry: message`` line per problem.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from functools import cache
from importlib import resources
from importlib.resources.abc import Traversable
from typing import Any, ClassVar, TypeVar

from pydantic import AfterValidator, BaseModel, ConfigDict, ValidationError


class Row(BaseModel):
    """An entry of a data file: named fields only, no unknown ones, never changed once loaded."""

    model_config = ConfigDict(extra="forbid", frozen=True)


class Table(Row):
    """The schema of one whole data file."""

    file: ClassVar[str]


class DataFileError(ValueError):
    """A data file that does not match its schema (``file: entry: message`` per problem)."""


T = TypeVar("T", bound=Table)


def data_dir() -> Traversable:
    return resources.files("memoryquest.simulator") / "data"


def load(schema: type[T]) -> T:
    """The content of ``schema``'s file, validated once per process."""
    table = _loaded(schema)
    assert isinstance(table, schema)
    return table


@cache
def _loaded(schema: type[Table]) -> Table:
    return parse(schema, (data_dir() / schema.file).read_text(encoding="utf-8"))


def parse(schema: type[T], text: str) -> T:
    """``text`` as ``schema``'s file (validated with the whole file as context: an entry may name
    another, as a generator names a shared part)."""
    try:
        raw = json.loads(text)
    except json.JSONDecodeError as error:
        where = f"line {error.lineno} column {error.colno}"
        raise DataFileError(f"{schema.file}: {where}: {error.msg}") from None
    try:
        return schema.model_validate(raw, context=raw)
    except ValidationError as error:
        problems = (f"{schema.file}: {entry(e['loc'])}: {e['msg']}" for e in error.errors())
        raise DataFileError("\n".join(problems)) from None


def entry(location: Iterable[int | str]) -> str:
    """A validation error's location as a path into the file: ``generators[3].cores[0].text``."""
    path = ""
    for part in location:
        path += f"[{part}]" if isinstance(part, int) else f".{part}" if path else str(part)
    return path or "(the whole file)"


def compiled(flags: int = 0) -> Any:
    """A pattern field: a regex string, or a list of pieces joined, compiled with ``flags``."""

    def check(value: Any) -> Any:
        if isinstance(value, list):
            value = "".join(map(str, value))
        try:
            return re.compile(value, flags) if isinstance(value, str) else value
        except re.error as error:
            raise ValueError(f"not a regular expression: {error}") from None

    return check


def complete(keys: Iterable[Any]) -> AfterValidator:
    """A mapping field that must have every one of ``keys``."""
    wanted = tuple(keys)

    def check(mapping: dict[Any, Any]) -> dict[Any, Any]:
        missing = [str(k) for k in wanted if k not in mapping]
        if missing:
            raise ValueError(f"missing {', '.join(missing)}")
        return mapping

    return AfterValidator(check)
