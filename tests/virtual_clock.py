"""A clock the tests move: asyncio code run on it jumps to its next timer instead of waiting.

``VirtualClock.run(main)`` runs ``main`` on an event loop whose time is the
clock's. Whenever every task waits for a timer (a sleep, a timeout), the clock
jumps to the earliest one, so a test of pacing takes no real time and its
expectations are exact, on a machine of any speed. Hand the same clock to the
code under test (``RateLimiter(..., clock=clock)``): it satisfies
``memoryquest.llm.clock.Clock``.

Only for code that waits on timers alone: while the loop waits for a socket or
a thread, the clock would jump past the answer, so the loopback HTTP server is
tested on real time (without wall-clock bounds).
"""

from __future__ import annotations

import asyncio
import selectors
from collections.abc import Coroutine
from typing import Any, TypeVar

T = TypeVar("T")


class VirtualClock:
    def __init__(self, start: float = 1_000.0) -> None:
        self.start = start
        self.now = start

    def monotonic(self) -> float:
        return self.now

    async def sleep(self, seconds: float) -> None:
        await asyncio.sleep(seconds)  # on the loop of run(): a timer the clock jumps to

    def advance(self, seconds: float) -> None:
        if seconds < 0:
            raise ValueError("a clock does not go back")
        self.now += seconds

    def elapsed(self) -> float:
        return self.now - self.start

    def run(self, main: Coroutine[Any, Any, T]) -> T:
        loop = _VirtualLoop(self)
        try:
            return loop.run_until_complete(main)
        finally:
            loop.close()


class _JumpingSelector(selectors.DefaultSelector):
    """Instead of blocking until the next timer is due, moves the clock there."""

    def __init__(self, clock: VirtualClock) -> None:
        super().__init__()
        self._clock = clock

    def select(self, timeout: float | None = None) -> list[tuple[selectors.SelectorKey, int]]:
        ready: list[tuple[selectors.SelectorKey, int]] = super().select(0)
        if ready or timeout == 0:
            return ready
        if timeout is None:  # no timer at all: only I/O can wake the loop
            return list(super().select(None))
        self._clock.advance(timeout)
        return ready


class _VirtualLoop(asyncio.SelectorEventLoop):
    def __init__(self, clock: VirtualClock) -> None:
        super().__init__(_JumpingSelector(clock))
        self._virtual_clock = clock

    def time(self) -> float:
        return self._virtual_clock.now
