"""Byte-stable Parquet and JSONL files for one table split.

Fixed writer options (zstd level, row-group size, statistics, no pandas
metadata) make the same rows produce the same bytes on every run, so a
published dataset can be checked by its sha256 sums.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
from pydantic import BaseModel

from memoryquest.publish.arrow import ModelT, rows_to_table, table_to_rows

COMPRESSION = "zstd"
COMPRESSION_LEVEL = 9
ROW_GROUP_SIZE = 10_000


def parquet_name(split: str) -> str:
    """Hugging Face shard naming; one shard per split."""
    return f"{split}-00000-of-00001.parquet"


def write_parquet(rows: Sequence[BaseModel], schema: pa.Schema, path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(
        rows_to_table(rows, schema),
        path,
        compression=COMPRESSION,
        compression_level=COMPRESSION_LEVEL,
        row_group_size=ROW_GROUP_SIZE,
        write_statistics=True,
        use_dictionary=True,
    )


def read_parquet(path: Path, model: type[ModelT]) -> list[ModelT]:
    return table_to_rows(pq.read_table(path), model)


def sha256_file(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()
