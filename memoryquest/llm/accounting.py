"""Tokens, cost and time per stage, summed into ``contracts.StageUsage`` rows.

``requests`` counts chat calls that got an answer (repairs and retries for
refusals included, because they are billed); ``cache_hits`` counts chat
answers and embedded texts served from the cache; ``seconds`` is the wall
time during which the stage had at least one call in flight (overlapping
concurrent calls are not double-counted).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager

from memoryquest.contracts import StageUsage


class UsageLedger:
    def __init__(self) -> None:
        self._rows: dict[str, StageUsage] = {}
        self._active: dict[str, int] = {}
        self._busy_since: dict[str, float] = {}
        self._lock = threading.Lock()

    def _row(self, stage: str) -> StageUsage:
        row = self._rows.get(stage)
        if row is None:
            row = self._rows[stage] = StageUsage(stage=stage)
        return row

    def chat(
        self,
        stage: str,
        *,
        input_tokens: int,
        output_tokens: int,
        cached_tokens: int,
        cost_usd: float,
        approximate: bool,
    ) -> None:
        with self._lock:
            row = self._row(stage)
            row.requests += 1
            row.input_tokens += input_tokens
            row.output_tokens += output_tokens
            row.cached_tokens += cached_tokens
            row.cost_usd += cost_usd
            row.approximate_tokens = row.approximate_tokens or approximate

    def embedding(self, stage: str, *, tokens: int, cost_usd: float, approximate: bool) -> None:
        with self._lock:
            row = self._row(stage)
            row.embedding_requests += 1
            row.embedding_tokens += tokens
            row.cost_usd += cost_usd
            row.approximate_tokens = row.approximate_tokens or approximate

    def cache_hits(self, stage: str, count: int = 1) -> None:
        if count:
            with self._lock:
                self._row(stage).cache_hits += count

    @contextmanager
    def timing(self, stage: str) -> Iterator[None]:
        with self._lock:
            self._row(stage)
            self._active[stage] = self._active.get(stage, 0) + 1
            if self._active[stage] == 1:
                self._busy_since[stage] = time.perf_counter()
        try:
            yield
        finally:
            with self._lock:
                self._active[stage] -= 1
                if self._active[stage] == 0:
                    self._rows[stage].seconds += time.perf_counter() - self._busy_since.pop(stage)

    def rows(self) -> list[StageUsage]:
        """A copy per stage, in first-use order, costs rounded to micro-dollars."""
        with self._lock:
            out = []
            for row in self._rows.values():
                copy = row.model_copy()
                copy.cost_usd = round(copy.cost_usd, 8)
                copy.seconds = round(copy.seconds, 4)
                out.append(copy)
            return out

    def total(self) -> StageUsage:
        total = StageUsage(stage="total")
        for row in self.rows():
            for name in (
                "requests",
                "cache_hits",
                "input_tokens",
                "output_tokens",
                "cached_tokens",
                "embedding_requests",
                "embedding_tokens",
                "cost_usd",
                "seconds",
            ):
                setattr(total, name, getattr(total, name) + getattr(row, name))
            total.approximate_tokens = total.approximate_tokens or row.approximate_tokens
        total.cost_usd = round(total.cost_usd, 8)
        return total
