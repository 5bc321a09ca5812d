"""One requests/min limit for every process of a run, held by the Prefect server.

Shards and Dask workers each build their own client, and each client's
limiter only knows its own process, so N workers would send N times
``limits.requests_per_minute`` to one endpoint. With
``limits.shared_limit_name`` set, every client also takes each request from
a Prefect global concurrency limit used as a rate limit, whose slots (a
burst of about one second) decay at ``requests_per_minute / 60`` requests'
worth per second. The
Prefect server coordinating the run already holds that state, so nothing
else needs deploying.

The first request of a process creates the limit, or sets its size and
decay to the settings' (every process of a run has the same settings).
A process keeps at most one request waiting at the server, which it asks
again no more often than the shared rate itself.
"""

from __future__ import annotations

import asyncio
import math
import weakref
from typing import Any

from memoryquest.llm.clock import SYSTEM_CLOCK, Clock
from memoryquest.llm.errors import LLMConfigurationError

# Slots one request occupies. The server decays whole slots from the time of the
# limit's last update, and every grant or refusal is an update: at one slot per
# request the fraction lost each time would cost up to half the rate.
SLOTS_PER_REQUEST = 100


class SharedRequestLimit:
    """A :class:`memoryquest.llm.limiter.RequestGate` backed by a Prefect global concurrency limit."""

    def __init__(
        self,
        name: str,
        requests_per_minute: float,
        *,
        burst_seconds: float = 1.0,
        clock: Clock = SYSTEM_CLOCK,
    ) -> None:
        if requests_per_minute <= 0:
            raise ValueError("requests_per_minute must be positive")
        self.name = name
        self.requests_per_minute = requests_per_minute
        self.per_second = requests_per_minute / 60.0
        self.clock = clock  # a refusal is asked again after waiting on it
        # The burst: at least one request, else about burst_seconds of the rate.
        self.slots = max(1, math.ceil(self.per_second * burst_seconds))
        self._ready = False
        self._locks: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, asyncio.Lock] = (
            weakref.WeakKeyDictionary()
        )
        self._clients: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, Any] = (
            weakref.WeakKeyDictionary()
        )

    async def ensure(self) -> None:
        """Create the limit on the Prefect server, or bring its size and decay to ours."""
        from prefect.exceptions import ObjectAlreadyExists

        client = await self._client()
        for _ in range(2):  # another process may create it between our read and our create
            try:
                await client.upsert_global_concurrency_limit_by_name(
                    self.name,
                    self.slots * SLOTS_PER_REQUEST,
                    slot_decay_per_second=self.per_second * SLOTS_PER_REQUEST,
                )
                break
            except ObjectAlreadyExists:
                continue
        self._ready = True

    async def acquire(self) -> None:
        """Wait until the server grants one request.

        A refusal (HTTP 423) is asked again after the server's Retry-After but
        at most one request interval later: the server's hint grows with every
        refusal it counts, and waiting it out in full leaves the shared rate
        partly unused.
        """
        import httpx

        loop = asyncio.get_running_loop()
        lock = self._locks.get(loop)
        if lock is None:
            lock = self._locks[loop] = asyncio.Lock()
        async with lock:  # one request of this process waits at the server at a time
            client = await self._client()
            if not self._ready:
                await self.ensure()
            while True:
                try:
                    response = await client.increment_concurrency_slots(
                        names=[self.name], slots=SLOTS_PER_REQUEST, mode="rate_limit"
                    )
                except httpx.HTTPStatusError as exc:
                    if exc.response.status_code != 423:
                        raise self._failed(exc) from exc
                    hint = float(exc.response.headers.get("Retry-After") or 0.0)
                    await self.clock.sleep(min(max(hint, 0.0), 1.0 / self.per_second))
                    continue
                except httpx.HTTPError as exc:
                    raise self._failed(exc) from exc
                if response.json():
                    return
                await self.ensure()  # the limit was deleted meanwhile: make it again

    def _failed(self, exc: Exception) -> LLMConfigurationError:
        return LLMConfigurationError(
            f"limits.shared_limit_name {self.name!r}: the Prefect server did not grant a request: {exc}"
        )

    async def _client(self) -> Any:
        """One Prefect client per event loop, kept open for the loop's lifetime."""
        from prefect.client.orchestration import get_client

        loop = asyncio.get_running_loop()
        client = self._clients.get(loop)
        if client is None:
            client = await get_client().__aenter__()
            self._clients[loop] = client
        return client
