"""memory_as_of replays the store to any date: revisions in force, merges, and no leaks."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import pytest
from test_memory_history import long_history, make_session, user0_history, user0_persona

from memoryquest.contracts import Domain, Fact, FactRevision, FactState, FactType, Session
from memoryquest.ids import make_id
from memoryquest.llm.client import ModelClient
from memoryquest.llm.factory import build_client
from memoryquest.memory.extraction import MemoryStageResult, build_memory
from memoryquest.memory.snapshot import memory_as_of
from memoryquest.settings import GenerationSettings, load_settings


@pytest.fixture
def client(tmp_path: Path, clean_settings_env: pytest.MonkeyPatch) -> ModelClient:
    """Offline client; the factory shares one local embedder per process."""
    settings = load_settings(
        overrides={"output_dir": str(tmp_path), "endpoint": {"backend": "simulated"}}
    )
    return build_client(settings)


async def replay(client: ModelClient) -> tuple[list[Session], MemoryStageResult]:
    persona = user0_persona()
    history = user0_history(persona)
    return history, await build_memory(
        persona, history, client, GenerationSettings(memory_every_sessions=3)
    )


def _days(start: dt.date, end: dt.date) -> list[dt.date]:
    return [start + dt.timedelta(days=n) for n in range((end - start).days + 1)]


async def test_an_updated_fact_shows_the_revision_in_force(client: ModelClient) -> None:
    history, result = await replay(client)
    aisle = next(f for f in result.facts if "aisle" in f.info)
    assert aisle.fid not in {i.fid for i in memory_as_of(result.facts, dt.date(2024, 3, 2))}
    for day in (dt.date(2024, 3, 3), dt.date(2024, 3, 11)):
        (item,) = [i for i in memory_as_of(result.facts, day) if i.fid == aisle.fid]
        assert item.session_ids == (history[1].session_id,) and item.date == dt.date(2024, 3, 3)
    (item,) = [i for i in memory_as_of(result.facts, dt.date(2024, 3, 12)) if i.fid == aisle.fid]
    assert item.session_ids == (history[1].session_id, history[4].session_id)


async def test_nothing_from_a_later_session_is_visible(client: ModelClient) -> None:
    history, result = await replay(client)
    date_of = {s.session_id: s.date for s in history}
    sizes = []
    for day in _days(dt.date(2024, 2, 28), dt.date(2024, 3, 25)):
        visible = memory_as_of(result.facts, day)
        sizes.append(len(visible))
        for item in visible:
            assert item.date <= day
            assert all(date_of[sid] <= day for sid in item.session_ids), (day, item)
    assert sizes[0] == 0 and sizes[-1] == len(result.facts)
    assert sizes == sorted(sizes)  # nothing is merged in this history, so memory only grows
    # Facts from the session of 15 March are not there on the 14th, and are there on the 15th.
    music = {f.fid for f in result.facts if history[5].session_id in f.session_ids}
    assert music and not music & {i.fid for i in memory_as_of(result.facts, dt.date(2024, 3, 14))}
    assert music <= {i.fid for i in memory_as_of(result.facts, dt.date(2024, 3, 15))}


async def test_originals_before_the_consolidation_date_merged_fact_from_it(
    client: ModelClient,
) -> None:
    persona = user0_persona()
    sessions = [
        make_session(
            persona, 0, dt.date(2024, 4, 1), Domain.BOOKS, ["I love science-fiction books."]
        ),
        make_session(
            persona, 1, dt.date(2024, 4, 3), Domain.BOOKS, ["I enjoy reading sci-fi novels."]
        ),
        make_session(
            persona,
            2,
            dt.date(2024, 4, 5),
            Domain.FLIGHTS,
            ["I usually fly Air Canada when I can."],
        ),
    ]
    settings = GenerationSettings(
        memory_every_sessions=1, consolidation_new_facts=3, consolidation_similarity=0.7
    )
    result = await build_memory(persona, sessions, client, settings)
    merged = next(f for f in result.facts if f.merged_fids)
    before = {i.fid for i in memory_as_of(result.facts, dt.date(2024, 4, 4))}
    on = {i.fid for i in memory_as_of(result.facts, dt.date(2024, 4, 5))}
    after = {i.fid for i in memory_as_of(result.facts, dt.date(2024, 6, 1))}
    assert before == set(merged.merged_fids)
    assert merged.fid in on and not on & set(merged.merged_fids) and len(on) == 2
    assert after == on


def _revision(day: int, info: str, frequency: int) -> FactRevision:
    return FactRevision(
        valid_from=dt.date(2024, 1, day),
        info=info,
        type=FactType.GOAL,
        frequency=frequency,
        related_entities=[],
        session_ids=[],
        state=FactState.UPDATE if frequency > 1 else FactState.ADD,
    )


def test_the_last_revision_of_a_day_wins() -> None:
    revisions = [
        _revision(1, "Plans a trip", 1),
        _revision(5, "Plans a trip to Rome", 2),
        _revision(5, "Plans a trip to Rome in May", 3),
    ]
    fact = Fact(
        fid=make_id("fact", "rome"),
        persona_id=make_id("persona", "x"),
        info=revisions[-1].info,
        type=FactType.GOAL,
        frequency=3,
        related_entities=[],
        session_ids=[],
        state=FactState.UPDATE,
        created_on=dt.date(2024, 1, 1),
        updated_on=dt.date(2024, 1, 5),
        revisions=revisions,
    )
    assert [i.info for i in memory_as_of([fact], dt.date(2024, 1, 4))] == ["Plans a trip"]
    assert [i.info for i in memory_as_of([fact], dt.date(2024, 1, 5))] == [
        "Plans a trip to Rome in May"
    ]
    retired = fact.model_copy(update={"retired_on": dt.date(2024, 1, 9)})
    assert [i.info for i in memory_as_of([retired], dt.date(2024, 1, 8))] == [
        "Plans a trip to Rome in May"
    ]
    assert memory_as_of([retired], dt.date(2024, 1, 9)) == []


async def test_replaying_a_consolidated_store_never_leaks_or_double_counts(
    client: ModelClient,
) -> None:
    persona = user0_persona()
    history = long_history(persona, 40)
    config = GenerationSettings(memory_every_sessions=2, consolidation_new_facts=12)
    result = await build_memory(persona, history, client, config)
    assert result.merges >= 2
    date_of = {s.session_id: s.date for s in history}
    merged_into = {f.fid: f.merged_into for f in result.facts if f.merged_into}
    for day in _days(
        history[0].date - dt.timedelta(days=1), history[-1].date + dt.timedelta(days=1)
    ):
        visible = memory_as_of(result.facts, day)
        fids = {i.fid for i in visible}
        for item in visible:
            assert item.date <= day and all(date_of[sid] <= day for sid in item.session_ids)
            assert merged_into.get(item.fid) not in fids  # never an original next to its merge
        # Every session up to this day is represented (its facts or the merges that absorbed them).
        seen = {sid for i in visible for sid in i.session_ids}
        assert seen == {s.session_id for s in history if s.date <= day}
