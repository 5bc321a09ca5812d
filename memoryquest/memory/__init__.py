"""Long-term memory: extraction with upsert, consolidation, and replay to any date.

* :mod:`memoryquest.memory.extraction` — the stage entry ``build_memory`` and the
  extraction prompt's answer models;
* :mod:`memoryquest.memory.store` — the fact store (upsert, merge, revisions);
* :mod:`memoryquest.memory.consolidation` — clustering, time windows, merge calls;
* :mod:`memoryquest.memory.snapshot` — ``memory_as_of``: the store on a given date.
"""
