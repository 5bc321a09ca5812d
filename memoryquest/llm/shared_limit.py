"""One requests/min and one tokens/min limit for every process of a run, held by the Prefect server.

Shards and Dask workers each build their own client, and each client's
limiter only knows its own process, so N workers would send N times
``limits.requests_per_minute`` and ``limits.tokens_per_minute`` to one
endpoint. With ``limits.shared_limit_name`` set, every client also takes
each request from two Prefect global concurrency limits used as rate
limits: ``<name>`` counts requests, ``<name>-tokens`` counts tokens. Their
slots (a burst of about one second) decay at the per-second rate. The
Prefect server coordinating the run already holds that state, so nothing
else needs deploying.

Tokens are counted as the process's own limiter counts them: a request
takes the tokens it reserves (its prompt plus its output budget) before it
is sent, and gives back what the answer says it did not use, or all of it
when the attempt failed. A request reserving more than the burst takes its
tokens in several grants, each waiting for room.

The first request of a process creates the limits, or sets their size and
decay to the settings' (every process of a run has the same settings).
A process keeps at most one request waiting at the server, which it asks
again no more often than the shared rate itself (for tokens, at least every
``TOKENS_RECHECK_SECONDS``), and writes to the server once at a time.
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import weakref
from typing import Any

from memoryquest.llm.clock import SYSTEM_CLOCK, Clock
from memoryquest.llm.errors import LLMConfigurationError

# Slots one request occupies. The server decays whole slots from the time of the
# limit's last update, and every grant or refusal is an update: at one slot per
# request the fraction lost each time would cost up to half the rate.
SLOTS_PER_REQUEST = 100
# Slots one token occupies. A request takes tens to thousands of tokens, so the
# under-one-token lost at each update is a negligible share of it.
SLOTS_PER_TOKEN = 1
# The longest a refused request waits before asking for its tokens again. Room comes
# back sooner than the decay frees it: a request holds its whole reservation only
# until its answer, then gives back what it did not use (often most of its output
# budget), so waiting for the decay alone would leave much of tokens/min unused.
TOKENS_RECHECK_SECONDS = 0.05
TOKENS_SUFFIX = "-tokens"


class _ServerRate:
    """One Prefect global concurrency limit used as a rate of ``per_minute`` units."""

    def __init__(
        self,
        name: str,
        per_minute: float,
        slots_per_unit: int,
        burst_seconds: float,
        recheck_seconds: float = math.inf,
    ) -> None:
        if per_minute <= 0:
            raise ValueError(f"{name}: the rate must be positive")
        self.name = name
        self.per_second = per_minute / 60.0
        self.slots_per_unit = slots_per_unit
        self.recheck_seconds = recheck_seconds  # the longest wait after a refusal
        # The burst: at least one unit, else about burst_seconds of the rate.
        self.burst = max(1, math.ceil(self.per_second * burst_seconds))

    async def ensure(self, client: Any) -> None:
        """Create the limit on the Prefect server, or bring its size and decay to ours."""
        from prefect.exceptions import ObjectAlreadyExists

        for _ in range(2):  # another process may create it between our read and our create
            try:
                await client.upsert_global_concurrency_limit_by_name(
                    self.name,
                    self.burst * self.slots_per_unit,
                    slot_decay_per_second=self.per_second * self.slots_per_unit,
                )
                return
            except ObjectAlreadyExists:
                continue

    async def ask(self, client: Any, units: int) -> float | None:
        """Ask the server once for ``units`` (at most a burst): None when granted, else the seconds
        to wait before asking again.

        That is the server's Retry-After but at most the time the rate takes to
        free what was asked, and at most ``recheck_seconds``: the server's hint
        grows with every refusal it counts, and waiting it out in full leaves
        the shared rate partly unused.
        """
        import httpx

        try:
            response = await client.increment_concurrency_slots(
                names=[self.name], slots=units * self.slots_per_unit, mode="rate_limit"
            )
        except httpx.HTTPStatusError as exc:
            if exc.response.status_code != 423:
                raise self._failed(exc) from exc
            hint = float(exc.response.headers.get("Retry-After") or 0.0)
            return min(max(hint, 0.0), units / self.per_second, self.recheck_seconds)
        except httpx.HTTPError as exc:
            raise self._failed(exc) from exc
        if not response.json():
            await self.ensure(client)  # the limit was deleted meanwhile: make it again
            return 0.0
        return None

    async def give_back(self, client: Any, units: int) -> None:
        """Return ``units`` taken but not used; a failure to return them only errs on the safe side."""
        import httpx

        with contextlib.suppress(httpx.HTTPError):
            await client.release_concurrency_slots(
                names=[self.name],
                slots=units * self.slots_per_unit,
                occupancy_seconds=None,  # a rate limit's slots decay; no occupancy to average
            )

    def _failed(self, exc: Exception) -> LLMConfigurationError:
        return LLMConfigurationError(
            f"limits.shared_limit_name: the Prefect server did not grant from {self.name!r}: {exc}"
        )


class SharedRequestLimit:
    """A :class:`memoryquest.llm.limiter.RequestGate` backed by Prefect global concurrency limits."""

    def __init__(
        self,
        name: str,
        requests_per_minute: float,
        tokens_per_minute: float | None = None,
        *,
        burst_seconds: float = 1.0,
        clock: Clock = SYSTEM_CLOCK,
    ) -> None:
        if requests_per_minute <= 0 or (tokens_per_minute is not None and tokens_per_minute <= 0):
            raise ValueError("requests_per_minute and tokens_per_minute must be positive")
        self.name = name
        self.requests = _ServerRate(name, requests_per_minute, SLOTS_PER_REQUEST, burst_seconds)
        self.tokens = (
            _ServerRate(
                name + TOKENS_SUFFIX,
                tokens_per_minute,
                SLOTS_PER_TOKEN,
                burst_seconds,
                recheck_seconds=TOKENS_RECHECK_SECONDS,
            )
            if tokens_per_minute is not None
            else None
        )
        self.clock = clock  # a refusal is asked again after waiting on it
        self._ready = False
        self._locks: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, asyncio.Lock] = (
            weakref.WeakKeyDictionary()
        )
        self._clients: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, Any] = (
            weakref.WeakKeyDictionary()
        )
        # Tokens given back but not yet returned to the server; requests asking or waiting to.
        self._unused: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, int] = (
            weakref.WeakKeyDictionary()
        )
        self._asking: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, int] = (
            weakref.WeakKeyDictionary()
        )

    @property
    def rates(self) -> list[_ServerRate]:
        return [self.requests] if self.tokens is None else [self.requests, self.tokens]

    async def ensure(self) -> None:
        """Create the limits on the Prefect server, or bring their size and decay to ours."""
        client = await self._client()
        for rate in self.rates:
            await rate.ensure(client)
        self._ready = True

    async def acquire(self, tokens: int = 0) -> None:
        """Wait until the server grants one request and its ``tokens``."""
        loop = asyncio.get_running_loop()
        self._asking[loop] = self._asking.get(loop, 0) + 1
        try:
            async with self._lock():  # one request of this process waits at the server at a time
                client = await self._client()
                if not self._ready:
                    await self.ensure()
                await self._take(client, self.requests, 1)
                if self.tokens is not None and tokens > 0:
                    await self._take(client, self.tokens, tokens)
                await self._return_unused(client)  # what was given back while this one asked
        finally:
            self._asking[loop] -= 1

    async def give_back(self, tokens: int) -> None:
        """Return the tokens a granted request did not use (all of them when its attempt failed).

        Sent at once, unless a request of this process is asking the server
        or waiting to (it sends them before its next ask) or they are being
        sent (the sender sends these too). A process writes to the server
        once at a time; requests that end together would otherwise each write
        at once, and on a SQLite server such writes queue for seconds.
        """
        if self.tokens is None or tokens <= 0:
            return
        loop = asyncio.get_running_loop()
        self._unused[loop] = self._unused.get(loop, 0) + tokens
        lock = self._lock()
        if self._asking.get(loop, 0) or lock.locked():
            return
        async with lock:
            await self._return_unused(await self._client())

    async def _take(self, client: Any, rate: _ServerRate, units: int) -> None:
        """Wait until ``rate`` grants ``units``, at most a burst at a time."""
        while units > 0:
            await self._return_unused(client)
            chunk = min(units, rate.burst)
            wait = await rate.ask(client, chunk)
            if wait is None:
                units -= chunk
            else:
                await self.clock.sleep(wait)

    async def _return_unused(self, client: Any) -> None:
        """Send the tokens given back so far (with this process's lock held)."""
        loop = asyncio.get_running_loop()
        while self.tokens is not None and (unused := self._unused.pop(loop, 0)) > 0:
            await self.tokens.give_back(client, unused)

    def _lock(self) -> asyncio.Lock:
        loop = asyncio.get_running_loop()
        lock = self._locks.get(loop)
        if lock is None:
            lock = self._locks[loop] = asyncio.Lock()
        return lock

    async def _client(self) -> Any:
        """One Prefect client per event loop, kept open for the loop's lifetime."""
        from prefect.client.orchestration import get_client

        loop = asyncio.get_running_loop()
        client = self._clients.get(loop)
        if client is None:
            client = await get_client().__aenter__()
            self._clients[loop] = client
        return client
