"""Every published table read back with the readers the dataset card promises.

The dataset is the real pipeline's output for three bundled users, published
once per session. Each reader's records are validated against the contracts and
compared with the rows that were published, so a type that a reader mangles
(dates, nested lists of structs, nullable columns) fails here.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow.parquet as pq
import pytest
import yaml

from memoryquest.contracts import READABLE_TABLES, TABLES
from memoryquest.dataset import GeneratedDataset, split_tables
from memoryquest.publish import PRIMARY_KEYS
from memoryquest.publish.splits import SPLITS


@pytest.fixture(scope="module")
def dataset(generated_dataset: GeneratedDataset) -> GeneratedDataset:
    """The pipeline's own output for three bundled users (tests/generated_dataset_fixture.py)."""
    return generated_dataset


@pytest.fixture(scope="module")
def published(published_generated: Path) -> Path:
    return published_generated


def test_the_generated_dataset_fills_every_table_in_every_split(
    published: Path, dataset: GeneratedDataset
) -> None:
    """So each reader below reads real rows of every config, the readable ones included."""
    assert set(READABLE_TABLES) <= set(TABLES)
    for name, rows in split_tables(dataset).items():
        assert rows, name
        assert [p.name for p in _parquet_files(published, name)] == [
            f"{split}-00000-of-00001.parquet" for split in sorted(SPLITS)
        ], name


def _expected(dataset: GeneratedDataset, name: str) -> dict[str, Any]:
    key = PRIMARY_KEYS[name]
    return {getattr(row, key): row for row in split_tables(dataset)[name]}


def _validated(name: str, records: list[dict[str, Any]]) -> dict[str, Any]:
    model = TABLES[name]
    key = PRIMARY_KEYS[name]
    rows = [model.model_validate(record) for record in records]
    return {getattr(row, key): row for row in rows}


def _plain(value: Any) -> Any:
    """numpy arrays / NaN (pandas) -> lists / None, recursively."""
    if isinstance(value, np.ndarray):
        return [_plain(v) for v in value.tolist()]
    if isinstance(value, list):
        return [_plain(v) for v in value]
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, float) and math.isnan(value):
        return None
    if isinstance(value, np.generic):
        return value.item()
    return value


def _parquet_files(root: Path, name: str) -> list[Path]:
    return sorted((root / "data" / name).glob("*.parquet"))


@pytest.mark.parametrize("name", list(TABLES))
def test_pyarrow(published: Path, dataset: GeneratedDataset, name: str) -> None:
    records = [
        r for path in _parquet_files(published, name) for r in pq.read_table(path).to_pylist()
    ]
    assert _validated(name, records) == _expected(dataset, name)


@pytest.mark.parametrize("name", list(TABLES))
def test_pandas(published: Path, dataset: GeneratedDataset, name: str) -> None:
    import pandas as pd

    frame = pd.concat(
        [pd.read_parquet(path) for path in _parquet_files(published, name)], ignore_index=True
    )
    assert list(frame.columns) == list(TABLES[name].model_fields)
    records = [_plain(record) for record in frame.to_dict(orient="records")]
    assert _validated(name, records) == _expected(dataset, name)


@pytest.mark.parametrize("name", list(TABLES))
def test_polars(published: Path, dataset: GeneratedDataset, name: str) -> None:
    import polars as pl

    frame = pl.read_parquet(str(published / "data" / name / "*.parquet"))
    assert frame.height == len(split_tables(dataset)[name])
    assert _validated(name, frame.to_dicts()) == _expected(dataset, name)


@pytest.mark.parametrize("name", list(TABLES))
def test_duckdb(published: Path, dataset: GeneratedDataset, name: str) -> None:
    import duckdb

    connection = duckdb.connect()
    try:
        relation = connection.sql(
            f"SELECT * FROM read_parquet('{published}/data/{name}/*.parquet')"
        )
        columns = relation.columns
        records = [dict(zip(columns, row, strict=True)) for row in relation.fetchall()]
        per_split = connection.sql(
            f"SELECT regexp_extract(filename, '([a-z]+)-00000', 1) AS split, count(*) "
            f"FROM read_parquet('{published}/data/{name}/*.parquet', filename = true) GROUP BY split"
        ).fetchall()
    finally:
        connection.close()
    assert _validated(name, records) == _expected(dataset, name)
    manifest_counts = {s: n for s, n in per_split}
    assert sum(manifest_counts.values()) == len(split_tables(dataset)[name])


def _card_configs(root: Path) -> dict[str, dict[str, str]]:
    card = (root / "README.md").read_text(encoding="utf-8")
    meta = yaml.safe_load(card.split("---\n", 2)[1])
    return {
        c["config_name"]: {f["split"]: f["path"] for f in c["data_files"]} for c in meta["configs"]
    }


@pytest.fixture()
def offline_datasets(monkeypatch: pytest.MonkeyPatch) -> Any:
    import datasets
    import huggingface_hub

    # Offline for these tests only: set for the whole process, it would keep later tests (the
    # Hub push) from reaching their loopback Hub.
    monkeypatch.setenv("HF_DATASETS_OFFLINE", "1")
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setattr(datasets.config, "HF_DATASETS_OFFLINE", True, raising=False)
    monkeypatch.setattr(datasets.config, "HF_HUB_OFFLINE", True, raising=False)
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_OFFLINE", True)
    datasets.disable_progress_bars()
    return datasets


def test_hugging_face_datasets_with_the_card_data_files(
    published: Path, dataset: GeneratedDataset, offline_datasets: Any, tmp_path: Path
) -> None:
    configs = _card_configs(published)
    assert set(configs) == set(TABLES)
    for name, data_files in configs.items():
        loaded = offline_datasets.load_dataset(
            "parquet",
            data_dir=str(published),
            data_files=data_files,
            cache_dir=str(tmp_path / "cache"),
        )
        assert list(loaded) == [s for s in SPLITS if s in data_files]
        records = [record for split in loaded for record in loaded[split]]
        assert _validated(name, records) == _expected(dataset, name), name
        for split in loaded:
            assert {r["persona_id"] for r in loaded[split]}.isdisjoint(
                {r["persona_id"] for other in loaded if other != split for r in loaded[other]}
            )


def test_hugging_face_datasets_through_the_card_configs(
    published: Path, dataset: GeneratedDataset, offline_datasets: Any, tmp_path: Path
) -> None:
    queries = offline_datasets.load_dataset(
        str(published), "query_labels", cache_dir=str(tmp_path / "cache")
    )
    assert sum(len(queries[s]) for s in queries) == len(dataset.queries)
    first = queries["train"][0]
    assert isinstance(first["references"], list) and {
        "reference_id",
        "date",
        "text",
        "domain",
        "cosine",
    } <= set(first["references"][0])
    sessions = offline_datasets.load_dataset(
        "parquet", data_dir=str(published / "data" / "history"), cache_dir=str(tmp_path / "cache2")
    )
    assert set(sessions) == set(SPLITS)
    assert sum(len(sessions[s]) for s in sessions) == len(dataset.sessions)
