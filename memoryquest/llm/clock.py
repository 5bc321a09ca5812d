"""Where the LLM layer reads the time and waits: one small protocol, so it can run on any clock.

The limiter, the retry waits, the shared limit and the Batch API collector and
polls take a :class:`Clock`; a run uses :data:`SYSTEM_CLOCK` (``time.monotonic``
and ``asyncio.sleep``, the event loop's own clock). A test hands them a clock
it moves itself, so their timing is checked exactly, on a machine of any speed.
"""

from __future__ import annotations

import asyncio
import time
from typing import Protocol


class Clock(Protocol):
    """Seconds that only go forward, and a way to wait some of them."""

    def monotonic(self) -> float: ...

    async def sleep(self, seconds: float) -> None: ...


class SystemClock:
    """The process's monotonic clock; waits on the running event loop."""

    def monotonic(self) -> float:
        return time.monotonic()

    async def sleep(self, seconds: float) -> None:
        await asyncio.sleep(seconds)


SYSTEM_CLOCK = SystemClock()


async def wait_until_set(event: asyncio.Event, seconds: float, clock: Clock) -> None:
    """Until ``event`` is set or ``seconds`` have passed on ``clock``, whichever comes first."""
    if event.is_set():
        return
    waiter = asyncio.ensure_future(event.wait())
    sleeper = asyncio.ensure_future(clock.sleep(seconds))
    try:
        await asyncio.wait((waiter, sleeper), return_when=asyncio.FIRST_COMPLETED)
    finally:
        waiter.cancel()
        sleeper.cancel()
