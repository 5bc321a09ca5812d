"""How a stage task's result is stored: Prefect's pickle, read without waking the cyclic GC.

A cached re-run spends most of a task's own time loading its stored result.
Unpickling a persona's validation result builds some 100k objects, and while
it does, Python's cyclic garbage collector keeps starting collections over the
whole heap of the run (models, Prefect, every persona's state) and frees
nothing: measured on a 3-persona re-run, the 12 loads took 263-281 ms with the
collector on, one of them 170-190 ms, and 73-111 ms with it paused.

Pausing alone only postpones the work: the loaded objects are counted as new,
and the first allocations after the load start collections that scan them,
then again as they age into older generations, each load adding to what the
next full collection walks. So a load also freezes what is on the heap
(:func:`gc.freeze`): the collector leaves frozen objects alone, while
reference counting still frees them. On cached re-runs of the 30 bundled
personas the stage tasks took 3.4-4.8 s (7 runs) instead of 4.3-6.3 s (11
runs). The run gives the frozen objects back to the collector with
:func:`release_loaded_results` once its stage tasks are done, so cyclic
garbage that happened to be frozen is collected in the end. The bytes on
disk are the same as Prefect's own pickle serializer writes.
"""

from __future__ import annotations

import gc
from typing import Any

from prefect.serializers import PickleSerializer
from pydantic import Field

from memoryquest.heap import collector_paused


class QuickLoadPickleSerializer(PickleSerializer[Any]):
    """Prefect's pickle serializer; loading pauses the cyclic GC and freezes the heap (its type names
    it in the record)."""

    type: str = Field(default="memoryquest-pickle", frozen=True)

    def loads(self, blob: bytes) -> Any:
        with collector_paused():
            result = super().loads(blob)
            gc.freeze()
            return result


def release_loaded_results() -> None:
    """Hand what loads froze back to the cyclic GC (it is scanned once more, at the next full
    collection)."""
    gc.unfreeze()


__all__ = ["QuickLoadPickleSerializer", "release_loaded_results"]
