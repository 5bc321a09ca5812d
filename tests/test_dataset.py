"""The working dataset on disk: every table round-trips, one compact JSON row a line, bad lines named."""

from __future__ import annotations

import gc
import json
from pathlib import Path

import pytest

from memoryquest.contracts import TABLES
from memoryquest.dataset import DatasetError, GeneratedDataset

try:
    from tests.publish_fixture import build_publish_fixture
except ModuleNotFoundError:  # tests/ is not a package: pytest puts it on sys.path
    from publish_fixture import build_publish_fixture


@pytest.fixture(scope="module")
def dataset() -> GeneratedDataset:
    return build_publish_fixture(users=2, queries_per_user=2)


def test_every_table_and_the_manifest_round_trip(dataset: GeneratedDataset, tmp_path: Path) -> None:
    loaded = GeneratedDataset.load(dataset.save(tmp_path / "dataset"))
    for name in TABLES:
        assert getattr(loaded, name) == getattr(dataset, name), name
        assert getattr(dataset, name), f"the fixture has no {name} rows: the check proves nothing"
    assert loaded.manifest == dataset.manifest


def test_loading_starts_at_most_one_young_collection(
    dataset: GeneratedDataset, tmp_path: Path, collections: list[int]
) -> None:
    directory = dataset.save(tmp_path / "dataset")
    gc.collect()
    collections.clear()
    loaded = GeneratedDataset.load(directory)
    # One young collection may start once the rows are in (the manifest's read allocates);
    # without the pause, every 700 allocations start one while the rows are built.
    assert collections in ([], [0]), collections
    assert gc.isenabled()
    assert loaded.facts == dataset.facts


def test_each_line_is_one_row_as_plain_json(dataset: GeneratedDataset, tmp_path: Path) -> None:
    directory = dataset.save(tmp_path / "dataset")
    lines = (directory / "facts.jsonl").read_text(encoding="utf-8").splitlines()
    assert len(lines) == len(dataset.facts)
    assert [json.loads(line) for line in lines] == [
        fact.model_dump(mode="json") for fact in dataset.facts
    ]


def test_saving_twice_writes_the_same_bytes(dataset: GeneratedDataset, tmp_path: Path) -> None:
    first = dataset.save(tmp_path / "a")
    second = GeneratedDataset.load(first).save(tmp_path / "b")
    for name in TABLES:
        assert (first / f"{name}.jsonl").read_bytes() == (second / f"{name}.jsonl").read_bytes()


@pytest.mark.parametrize(
    "damage",
    [
        pytest.param(lambda line: line[: len(line) // 2], id="cut-short"),
        pytest.param(lambda line: "", id="blank"),
        pytest.param(lambda line: line.replace('"fid"', '"fact_id"'), id="wrong-field"),
    ],
)
def test_a_bad_line_is_named_by_file_and_number(
    dataset: GeneratedDataset, tmp_path: Path, damage: object
) -> None:
    directory = dataset.save(tmp_path / "dataset")
    path = directory / "facts.jsonl"
    lines = path.read_text(encoding="utf-8").splitlines()
    assert callable(damage)
    lines[2] = damage(lines[2])
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    with pytest.raises(DatasetError, match=r"facts\.jsonl:3: "):
        GeneratedDataset.load(directory)
