"""How a stage task's result is stored: Prefect's pickle, read with the cyclic GC paused.

A cached re-run spends most of a task's own time loading its stored result.
Unpickling a persona's validation result builds some 100k objects, and while
it does, Python's cyclic garbage collector keeps starting collections over the
whole heap of the run (models, Prefect, every persona's state) and frees
nothing: measured on a 3-persona re-run, the 12 loads took 263-281 ms with the
collector on, one of them 170-190 ms, and 73-111 ms with it paused. The bytes
on disk are the same as Prefect's own pickle serializer writes.
"""

from __future__ import annotations

import gc
from typing import Any

from prefect.serializers import PickleSerializer
from pydantic import Field


class QuickLoadPickleSerializer(PickleSerializer[Any]):
    """Prefect's pickle serializer; loading pauses the cyclic GC (its type names it in the record)."""

    type: str = Field(default="memoryquest-pickle", frozen=True)

    def loads(self, blob: bytes) -> Any:
        was_enabled = gc.isenabled()
        gc.disable()
        try:
            return super().loads(blob)
        finally:
            if was_enabled:
                gc.enable()


__all__ = ["QuickLoadPickleSerializer"]
