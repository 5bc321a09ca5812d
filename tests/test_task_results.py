"""Stage task results: Prefect's pickle bytes, loaded with the cyclic GC paused."""

from __future__ import annotations

import gc
from collections.abc import Iterator

import pytest
from prefect.serializers import PickleSerializer, Serializer
from test_memory_history import user0_history, user0_persona

from memoryquest.orchestration import STAGE_TASKS
from memoryquest.task_results import QuickLoadPickleSerializer


@pytest.fixture
def collections() -> Iterator[list[int]]:
    """Generations of the cyclic collections that start while the test runs."""
    started: list[int] = []

    def note(phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            started.append(info["generation"])

    gc.callbacks.append(note)
    yield started
    gc.callbacks.remove(note)


def test_a_real_history_round_trips_as_prefects_own_pickle(collections: list[int]) -> None:
    # Fifty separate copies of a real history: enough objects for the collector to start.
    history = [
        session.model_copy(deep=True)
        for _ in range(50)
        for session in user0_history(user0_persona())
    ]
    blob = QuickLoadPickleSerializer().dumps(history)
    assert PickleSerializer().loads(blob) == history
    assert collections, "loading this many objects starts collections when nothing pauses them"
    collections.clear()
    loaded = QuickLoadPickleSerializer().loads(blob)
    assert collections == []
    assert loaded == history
    assert gc.isenabled()


def test_a_collector_paused_by_the_caller_stays_paused() -> None:
    blob = QuickLoadPickleSerializer().dumps(user0_persona())
    gc.disable()
    try:
        QuickLoadPickleSerializer().loads(blob)
        assert not gc.isenabled()
    finally:
        gc.enable()


def test_stored_records_name_it_and_every_stage_task_uses_it() -> None:
    assert isinstance(Serializer(type="memoryquest-pickle"), QuickLoadPickleSerializer)
    assert all(
        isinstance(task.result_serializer, QuickLoadPickleSerializer)
        for task in STAGE_TASKS.values()
    )
