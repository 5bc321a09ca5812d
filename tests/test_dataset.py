"""The working dataset on disk: every table round-trips, one compact JSON row a line, bad lines named."""

from __future__ import annotations

import gc
import json
from pathlib import Path

import pytest

from memoryquest.contracts import READABLE_TABLES, TABLES, HistorySession
from memoryquest.dataset import (
    DATASET_TABLES,
    LEGACY_TABLES,
    DatasetError,
    GeneratedDataset,
    ReadableDataset,
    split_tables,
    write_jsonl,
)


@pytest.fixture(scope="module")
def dataset(generated_dataset: GeneratedDataset) -> GeneratedDataset:
    """The pipeline's own output for three bundled users (tests/generated_dataset_fixture.py)."""
    return generated_dataset.model_copy(deep=True)


def test_every_table_and_the_manifest_round_trip(dataset: GeneratedDataset, tmp_path: Path) -> None:
    loaded = GeneratedDataset.load(dataset.save(tmp_path / "dataset"))
    for name in DATASET_TABLES:
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
        fact.model_dump(mode="json") for fact in split_tables(dataset)["facts"]
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


def test_the_files_are_the_split_tables_and_the_history_carries_no_label(
    dataset: GeneratedDataset, tmp_path: Path
) -> None:
    directory = dataset.save(tmp_path / "dataset")
    assert {p.name for p in directory.glob("*.jsonl")} == {f"{name}.jsonl" for name in TABLES}
    history = [
        json.loads(line)
        for line in (directory / "history.jsonl").read_text(encoding="utf-8").splitlines()
    ]
    assert len(history) == len(dataset.sessions) > 0
    assert {tuple(row) for row in history} == {
        ("schema_version", "persona_id", "session_id", "date", "turns")
    }
    order = [(row["persona_id"], row["date"], row["session_id"]) for row in history]
    assert order == sorted(order)
    facts = (directory / "facts.jsonl").read_text(encoding="utf-8")
    assert "source_reference_ids" not in facts
    assert any(f.source_reference_ids for f in dataset.facts), "nothing to hide: proves nothing"
    labels = (directory / "fact_labels.jsonl").read_text(encoding="utf-8")
    assert "source_reference_ids" in labels


def test_the_readable_view_reads_no_labels_file(dataset: GeneratedDataset, tmp_path: Path) -> None:
    directory = dataset.save(tmp_path / "dataset")
    for name in TABLES:
        if name not in READABLE_TABLES:
            (directory / f"{name}.jsonl").unlink()
    readable = ReadableDataset.load(directory)
    assert readable == ReadableDataset.of(dataset)
    assert len(readable.history) == len(dataset.sessions)
    assert {type(row) for row in readable.history} == {HistorySession}
    assert [q.query_id for q in readable.queries] != [] and not hasattr(
        readable.queries[0], "references"
    )


def test_a_history_row_without_its_labels_is_refused(
    dataset: GeneratedDataset, tmp_path: Path
) -> None:
    directory = dataset.save(tmp_path / "dataset")
    path = directory / "session_labels.jsonl"
    lines = path.read_text(encoding="utf-8").splitlines()
    path.write_text("\n".join(lines[1:]) + "\n", encoding="utf-8")
    with pytest.raises(DatasetError, match="history has 1 row.* with no session_labels row"):
        GeneratedDataset.load(directory)


def test_a_working_dataset_of_the_joined_layout_still_loads(
    dataset: GeneratedDataset, tmp_path: Path
) -> None:
    directory = tmp_path / "legacy"
    for name in LEGACY_TABLES:
        write_jsonl(getattr(dataset, name), directory / f"{name}.jsonl")
    loaded = GeneratedDataset.load(directory)
    for name in DATASET_TABLES:
        assert getattr(loaded, name) == getattr(dataset, name), name
