"""One requests/min limit for every process of a run, held by the Prefect server.

Shards and Dask workers each build their own client, and each client's
limiter only knows its own process, so N workers would send N times
``limits.requests_per_minute`` to one endpoint. With
``limits.shared_limit_name`` set, every client also takes each request from
a Prefect global concurrency limit used as a rate limit: ``limit`` slots
(the burst) that decay at ``requests_per_minute / 60`` per second. The
Prefect server coordinating the run already holds that state, so nothing
else needs deploying.

The first request of a process creates the limit, or sets its size and
decay to the settings' (every process of a run has the same settings).
Prefect serialises a process's acquisitions for one limit, so a process
keeps at most one request waiting at the server.
"""

from __future__ import annotations

import math

from memoryquest.llm.errors import LLMConfigurationError


class SharedRequestLimit:
    """A :class:`memoryquest.llm.limiter.RequestGate` backed by a Prefect global concurrency limit."""

    def __init__(
        self, name: str, requests_per_minute: float, *, burst_seconds: float = 1.0
    ) -> None:
        if requests_per_minute <= 0:
            raise ValueError("requests_per_minute must be positive")
        self.name = name
        self.requests_per_minute = requests_per_minute
        self.decay_per_second = requests_per_minute / 60.0
        # The burst: at least one request, else about burst_seconds of the rate.
        self.slots = max(1, math.ceil(self.decay_per_second * burst_seconds))
        self._ready = False

    async def ensure(self) -> None:
        """Create the limit on the Prefect server, or bring its size and decay to ours."""
        from prefect.client.orchestration import get_client
        from prefect.exceptions import ObjectAlreadyExists

        async with get_client() as client:
            for _ in range(2):  # another process may create it between our read and our create
                try:
                    await client.upsert_global_concurrency_limit_by_name(
                        self.name, self.slots, slot_decay_per_second=self.decay_per_second
                    )
                    break
                except ObjectAlreadyExists:
                    continue
        self._ready = True

    async def acquire(self) -> None:
        """Wait until the server grants one request."""
        from prefect.concurrency.asyncio import ConcurrencySlotAcquisitionError, rate_limit

        if not self._ready:
            await self.ensure()
        try:
            await rate_limit(self.name, occupy=1, strict=True)
        except ConcurrencySlotAcquisitionError as exc:
            raise LLMConfigurationError(
                f"limits.shared_limit_name {self.name!r}: the Prefect server did not grant a request: {exc}"
            ) from exc
