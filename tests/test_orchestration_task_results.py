"""Stage task results: Prefect's pickle bytes, loaded with the cyclic GC paused and the heap frozen."""

from __future__ import annotations

import gc
from collections.abc import Iterator

import pytest
from prefect.serializers import PickleSerializer, Serializer
from test_memory_history import user0_history, user0_persona

from memoryquest.orchestration.flow import STAGE_TASKS
from memoryquest.orchestration.task_results import QuickLoadPickleSerializer, release_loaded_results


@pytest.fixture(autouse=True)
def unfrozen_afterwards() -> Iterator[None]:
    yield
    gc.unfreeze()


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


def test_the_loaded_objects_are_left_out_of_later_collections() -> None:
    history = [
        session.model_copy(deep=True)
        for _ in range(20)
        for session in user0_history(user0_persona())
    ]
    blob = QuickLoadPickleSerializer().dumps(history)
    frozen_before = gc.get_freeze_count()
    loaded = QuickLoadPickleSerializer().loads(blob)
    # Unfrozen, the load's objects would all be counted as new: the next allocation would start
    # a collection that scans every one of them.
    assert gc.get_count()[0] < 1_000
    assert gc.get_freeze_count() - frozen_before >= len(history)
    assert gc.is_tracked(loaded) and loaded == history
    release_loaded_results()
    assert gc.get_freeze_count() == 0
