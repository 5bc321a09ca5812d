"""Any memory system, evaluated from the history alone: the built-ins, and one plugged in from
outside the package (the documented example, registered as an entry point)."""

from __future__ import annotations

import asyncio
import datetime as dt
import json
import re
import sys
from collections.abc import Iterator, Sequence
from pathlib import Path

import pytest

from memoryquest.cli.main import main
from memoryquest.contracts import Role
from memoryquest.dataset import GeneratedDataset
from memoryquest.pgr.memory_systems import (
    BUILT_IN,
    DatedSession,
    MemoryResources,
    MemorySystemError,
    build_memory_system,
    dated_sessions,
    evaluate_memory,
    memory_factory,
    recall_cells,
)
from memoryquest.pgr.sample import sample_dataset

try:
    from tests.generation_fixture import generated, simulated_client
except ImportError:  # pragma: no cover - run from tests/
    from generation_fixture import generated, simulated_client

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def dataset() -> GeneratedDataset:
    """Two users' real generated history (simulator)."""
    return generated().dataset.model_copy(deep=True)


class Spy:
    """A system that records what it is given and when; it recalls every user turn it has."""

    name = "spy"
    version = "0"

    def __init__(self, resources: MemoryResources) -> None:
        self.log: list[tuple[str, str, dt.date]] = []
        self.sessions: dict[str, list[DatedSession]] = {}

    async def ingest(self, persona_id: str, session: DatedSession) -> None:
        self.log.append(("ingest", persona_id, session.date))
        self.sessions.setdefault(persona_id, []).append(session)

    async def retrieve(
        self, persona_id: str, query: str, date: dt.date, budget: int
    ) -> Sequence[str]:
        self.log.append(("retrieve", persona_id, date))
        return [
            t.content
            for s in self.sessions.get(persona_id, [])
            for t in s.turns
            if t.role is Role.USER
        ]


def test_a_system_is_given_the_history_in_order_and_never_a_later_session(
    dataset: GeneratedDataset,
) -> None:
    client = simulated_client()
    spy = Spy(MemoryResources(client))
    results, unjudged = asyncio.run(
        evaluate_memory(spy, dataset.queries, dated_sessions(dataset.sessions), 5, client)
    )
    assert not unjudged and len(results) == len(dataset.queries)
    # What a system gets of a session: its id, date and turns, nothing that labels it.
    assert set(DatedSession.model_fields) == {"session_id", "date", "turns"}
    for persona_id in {q.persona_id for q in dataset.queries}:
        mine = [entry for entry in spy.log if entry[1] == persona_id]
        ingested: list[dt.date] = []
        for kind, _, date in mine:
            if kind == "ingest":
                assert not ingested or date >= ingested[-1]  # date order
                ingested.append(date)
            else:  # everything before the query's date, nothing on or after it
                assert all(d < date for d in ingested)
                before = [
                    s for s in dataset.sessions if s.persona_id == persona_id and s.date < date
                ]
                assert len(ingested) == len(before)
    # The budget holds: the spy offers every turn, the harness keeps five.
    assert all(len(r.retrieved) <= 5 and r.budget == 5 for r in results)


def test_the_built_in_systems_recall_what_the_history_says(dataset: GeneratedDataset) -> None:
    """Each built-in, on two users' generated history: turns and the whole history find the
    references the sessions state; the judge's recall lies between 0 and 1 and, for the whole
    history, is at least what a budget of 20 exchanges finds."""
    client = simulated_client()
    facts = asyncio.run(sample_dataset(client, background=40)).facts
    history = dated_sessions(dataset.sessions)
    recall: dict[str, float] = {}
    for name in BUILT_IN:
        system = build_memory_system(name, MemoryResources(client, facts))
        results, unjudged = asyncio.run(
            evaluate_memory(system, dataset.queries, history, 20, client)
        )
        assert not unjudged and len(results) == len(dataset.queries)
        recall[name] = sum(r.recall for r in results) / len(results)
    assert recall["long_context"] >= recall["turns"] > 0.0
    assert all(0.0 <= value <= 1.0 for value in recall.values())
    assert {r.budget for r in results} == {None}  # long_context is reported as unbounded


def test_recall_is_reported_per_category_with_intervals(dataset: GeneratedDataset) -> None:
    client = simulated_client()
    system = build_memory_system("turns", MemoryResources(client))
    results, _ = asyncio.run(
        evaluate_memory(system, dataset.queries, dated_sessions(dataset.sessions), 10, client)
    )
    cells = recall_cells(results, dataset.queries, samples=200)
    overall = next(c for c in cells if c.category == "all")
    assert overall.n == len(dataset.queries) and overall.low <= overall.recall <= overall.high
    domains = [c for c in cells if c.category.startswith("domain=")]
    assert sum(c.n for c in domains) == overall.n
    ages = [c for c in cells if c.category.startswith("reference age")]
    assert sum(c.n for c in ages) == sum(len(q.references) for q in dataset.queries)


def test_an_unknown_system_is_one_clear_error() -> None:
    with pytest.raises(MemorySystemError, match="unknown memory system 'nope'; choose from"):
        memory_factory("nope")
    with pytest.raises(MemorySystemError, match="cannot be loaded"):
        memory_factory("no_such_module:build")


# --------------------------------------------------------------------------- a system from outside


def documented_example() -> str:
    """The plug-in example of docs/memory-systems.md, as a user would copy it."""
    text = (ROOT / "docs" / "memory-systems.md").read_text(encoding="utf-8")
    (block,) = re.findall(r"```python\n(.*?)```", text, flags=re.DOTALL)
    return block


@pytest.fixture
def installed_plugin(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """The documented example as a module of another distribution that declares the entry point."""
    (tmp_path / "keyword_memory.py").write_text(documented_example(), encoding="utf-8")
    info = tmp_path / "keyword_memory-1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(
        "Metadata-Version: 2.1\nName: keyword-memory\nVersion: 1.0\n", encoding="utf-8"
    )
    (info / "entry_points.txt").write_text(
        "[memoryquest.memory_systems]\nkeyword = keyword_memory:build\n", encoding="utf-8"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    yield "keyword"
    sys.modules.pop("keyword_memory", None)


def test_a_system_from_outside_the_package_is_evaluated_by_name(
    dataset: GeneratedDataset,
    installed_plugin: str,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    clean_settings_env: pytest.MonkeyPatch,
) -> None:
    source = dataset.save(tmp_path / "dataset")
    out = tmp_path / "memory.jsonl"
    code = main(
        [
            "pgr", "run", str(source), "--memory", installed_plugin, "--memory", "turns",
            "--budget", "8", "--set", f"cache.directory={tmp_path / 'cache'}",
            "--output", str(out),
        ]
    )  # fmt: skip
    captured = capsys.readouterr()
    printed = captured.out
    assert code == 0, captured.err
    rows = [json.loads(line) for line in out.read_text(encoding="utf-8").splitlines()]
    assert {r["system"] for r in rows} == {"keyword", "turns"}
    keyword = [r for r in rows if r["system"] == "keyword"]
    assert len(keyword) == len(dataset.queries) and all(len(r["retrieved"]) <= 8 for r in keyword)
    assert all(r["system_version"] == "1.0" for r in keyword)
    assert re.search(r"keyword\s+all\s+\d+\s+[\d.]+ \[[\d.]+,[\d.]+\]", printed)
    record = json.loads((tmp_path / "memory.run.json").read_text(encoding="utf-8"))
    assert record["memory_systems"]["keyword"] == "1.0"
    # The same module by import path, without the entry point.
    assert memory_factory("keyword_memory:build") is memory_factory("keyword")


def test_memory_flags_refuse_what_does_not_go_together(
    dataset: GeneratedDataset,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    clean_settings_env: pytest.MonkeyPatch,
) -> None:
    source = dataset.save(tmp_path / "dataset")
    assert main(["pgr", "run", str(source), "--memory", "nope"]) == 2
    assert "unknown memory system 'nope'" in capsys.readouterr().err
    assert main(["pgr", "run", str(source), "--budget", "5"]) == 2
    assert "--budget goes with --memory" in capsys.readouterr().err
    assert main(["pgr", "run", str(source), "--memory", "turns", "--budget", "0"]) == 2
    assert "--budget must be at least 1" in capsys.readouterr().err
