"""One limiter for requests/min, tokens/min and concurrency, plus retry timing and a breaker.

Rates use the generic cell rate algorithm (GCRA): each bucket keeps a
"theoretical arrival time"; a request is sent once both its request and its
tokens are due. Only a small burst is allowed (``burst_seconds`` of the
rate): providers enforce per-minute limits over much shorter windows.

Tokens are reserved before sending (prompt tokens plus the request's own
output budget, as providers count ``max_tokens`` against TPM), settled to
what the answer says it used, and handed back in full when the attempt
fails: a rejected request consumed nothing.

Concurrency is a window adjusted by additive increase / multiplicative
decrease (AIMD), and so is the rate: a 429 only lowers them when it carries
evidence of a quota (``x-ratelimit-remaining-*`` at 0, a Retry-After of at
least ``quota_retry_after`` seconds, or ``quota_streak`` 429s in a row with
no success between them). Such a 429 also pauses every request until its
Retry-After, since the quota is everyone's. An isolated 429 (a busy server,
noise) only delays its own request. Every attempt, refused or not, keeps its
place in the request budget: providers count failed requests against
requests/min, so attempts stay within the limit however many are refused.

Waiting requests form one queue per event loop, retries first, each in the
order of its first try: a retried request keeps its place ahead of newer
ones instead of rejoining the back. The state is shared, behind a thread
lock, by every event loop and thread of the process. An optional
:class:`RequestGate` (``memoryquest.llm.shared_limit``) adds limits held
outside the process, for runs that span workers: it is asked for each
request and its reserved tokens once the local limits admit it, and given
back what the attempt did not use. Time is read from, and
waited on, the limiter's :class:`~memoryquest.llm.clock.Clock`.
"""

from __future__ import annotations

import asyncio
import bisect
import itertools
import random
import threading
import weakref
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Protocol

from memoryquest.llm.clock import SYSTEM_CLOCK, Clock, wait_until_set
from memoryquest.llm.errors import CircuitOpenError


class RequestGate(Protocol):
    """Requests/min and tokens/min limits held elsewhere (a server every process asks)."""

    async def acquire(self, tokens: int) -> None:
        """Wait for one request and its ``tokens``."""

    async def give_back(self, tokens: int) -> None:
        """Return ``tokens`` a granted request did not use."""


class _Bucket:
    """GCRA state for one rate, in seconds of 'rate time'."""

    def __init__(self, per_minute: float, burst_seconds: float) -> None:
        self.per_minute = per_minute
        self.ceiling: float | None = None  # a lower limit the server announced
        self.burst_seconds = burst_seconds
        self.tat = 0.0  # theoretical arrival time

    def interval(self, factor: float) -> float:
        rate = self.per_minute if self.ceiling is None else min(self.per_minute, self.ceiling)
        return 60.0 / (rate * factor)

    def tolerance(self, factor: float) -> float:
        return max(0.0, self.burst_seconds - self.interval(factor))


@dataclass(frozen=True)
class RateLimitSignal:
    """What a 429 said about its cause."""

    retry_after: float | None = None
    quota: bool = False  # x-ratelimit-remaining-requests or -tokens was 0
    limit_requests: float | None = None  # x-ratelimit-limit-requests (per minute)
    limit_tokens: float | None = None  # x-ratelimit-limit-tokens (per minute)


@dataclass
class LimiterStats:
    acquired: int = 0  # attempts sent
    retries: int = 0  # of which retries
    waited_seconds: float = 0.0
    rate_limited: int = 0  # 429s
    quota_limited: int = 0  # of which counted as a quota
    slowdowns: int = 0
    min_factor_seen: float = 1.0
    min_window_seen: float = 0.0


class _Queue:
    """The requests of one event loop waiting to be sent, retries first, then by first try."""

    def __init__(self) -> None:
        self._keys: list[tuple[int, int]] = []
        self._events: list[asyncio.Event] = []

    def join(self, key: tuple[int, int]) -> asyncio.Event:
        event = asyncio.Event()
        index = bisect.bisect_right(self._keys, key)
        self._keys.insert(index, key)
        self._events.insert(index, event)
        return event

    def first(self) -> asyncio.Event | None:
        return self._events[0] if self._events else None

    def leave(self, event: asyncio.Event) -> None:
        index = self._events.index(event)
        del self._keys[index]
        del self._events[index]
        self.wake()

    def wake(self) -> None:
        if self._events:
            self._events[0].set()

    def __len__(self) -> int:
        return len(self._events)


class RateLimiter:
    def __init__(
        self,
        requests_per_minute: float,
        tokens_per_minute: float,
        max_concurrency: int,
        *,
        burst_seconds: float = 0.25,
        quota_retry_after: float = 5.0,
        quota_streak: int = 8,
        decrease: float = 0.7,
        min_factor: float = 0.1,
        min_concurrency: int = 1,
        cut_interval: float = 1.0,
        recovery_per_second: float = 0.05,
        poll_seconds: float = 0.05,
        gate: RequestGate | None = None,
        clock: Clock = SYSTEM_CLOCK,
    ) -> None:
        if requests_per_minute <= 0 or tokens_per_minute <= 0 or max_concurrency < 1:
            raise ValueError(
                "requests_per_minute, tokens_per_minute and max_concurrency must be positive"
            )
        self.requests = _Bucket(requests_per_minute, burst_seconds)
        self.tokens = _Bucket(tokens_per_minute, burst_seconds)
        self.max_concurrency = max_concurrency
        self.min_concurrency = max(1, min(min_concurrency, max_concurrency))
        self.quota_retry_after = quota_retry_after
        self.quota_streak = quota_streak
        self.decrease = decrease
        self.min_factor = min_factor
        self.cut_interval = cut_interval
        self.recovery_per_second = recovery_per_second
        self.poll_seconds = poll_seconds
        self.gate = gate
        self.clock = clock
        self.factor = 1.0  # share of the rate currently used
        self.window = float(max_concurrency)  # concurrency currently allowed
        self.paused_until = 0.0
        self.streak = 0  # 429s since the last success
        self._last_cut = -1e9
        self._last_recovery = clock.monotonic()
        self._lock = threading.Lock()
        self._tickets = itertools.count()
        self._queues: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, _Queue] = (
            weakref.WeakKeyDictionary()
        )
        self.in_flight = 0
        self.peak_in_flight = 0
        self.stats = LimiterStats(min_window_seen=self.window)

    def _queue(self) -> _Queue:
        loop = asyncio.get_running_loop()
        with self._lock:
            queue = self._queues.get(loop)
            if queue is None:
                queue = self._queues[loop] = _Queue()
            return queue

    def _try_admit(self, tokens: int) -> float:
        """Admit one request with ``tokens`` if the window and both rates allow now (0), else the seconds to wait."""
        with self._lock:
            now = self.clock.monotonic()
            if self.in_flight >= max(self.min_concurrency, int(self.window)):
                return self.poll_seconds  # a release wakes the queue sooner
            ready_at = max(
                self.paused_until,
                self.requests.tat - self.requests.tolerance(self.factor),
                self.tokens.tat - self.tokens.tolerance(self.factor),
            )
            if ready_at > now:
                return ready_at - now
            self.requests.tat = max(self.requests.tat, now) + self.requests.interval(self.factor)
            self.tokens.tat = max(self.tokens.tat, now) + tokens * self.tokens.interval(self.factor)
            self.in_flight += 1
            self.peak_in_flight = max(self.peak_in_flight, self.in_flight)
            return 0.0

    @asynccontextmanager
    async def slot(self, tokens: int, *, retry_of: int | None = None) -> AsyncIterator[Permit]:
        """Hold one place in the window, sent no earlier than both rates allow.

        ``retry_of``: the ticket of the request's first try (``Permit.ticket``);
        a retry waits ahead of every request that has not been sent yet.
        """
        queue = self._queue()
        ticket = next(self._tickets) if retry_of is None else retry_of
        me = queue.join((1 if retry_of is None else 0, ticket))
        started = self.clock.monotonic()
        try:
            while True:
                me.clear()
                if queue.first() is me:
                    wait = self._try_admit(tokens)
                    if wait == 0:
                        break
                    # Wake at least every poll_seconds: a refund, a lifted pause or another loop's release.
                    await wait_until_set(me, min(wait, self.poll_seconds), self.clock)
                else:
                    await me.wait()  # set when this request becomes the first
        finally:
            queue.leave(me)
        permit = Permit(self, tokens, ticket)
        granted = False  # by the gate, which then gets back what the attempt did not use
        try:
            if self.gate is not None:
                await self.gate.acquire(tokens)
                granted = True
            with self._lock:
                self.stats.acquired += 1
                self.stats.retries += retry_of is not None
                self.stats.waited_seconds += self.clock.monotonic() - started
            yield permit
        finally:
            permit.settle(0)  # an attempt that failed used nothing; a settled one is unchanged
            with self._lock:
                self.in_flight -= 1
            self._queue().wake()
            if granted and self.gate is not None and permit.unused > 0:
                await self.gate.give_back(permit.unused)

    def cap_concurrency(self, slots: int) -> None:
        """At most ``slots`` requests at once: a server that works on fewer queues the rest, and their
        timeouts would run while they wait."""
        with self._lock:
            self.max_concurrency = max(1, min(self.max_concurrency, slots))
            self.min_concurrency = min(self.min_concurrency, self.max_concurrency)
            self.window = min(self.window, float(self.max_concurrency))

    def refund(self, tokens: int) -> None:
        if tokens > 0:
            with self._lock:
                self.tokens.tat -= tokens * self.tokens.interval(self.factor)

    def is_quota(self, signal: RateLimitSignal) -> bool:
        """Whether a 429 is the quota speaking rather than noise (see the module docstring)."""
        long_wait = signal.retry_after is not None and signal.retry_after >= self.quota_retry_after
        return signal.quota or long_wait or self.streak + 1 >= self.quota_streak

    def on_rate_limited(self, signal: RateLimitSignal) -> bool:
        """Record a 429; a quota slows everyone down and pauses them until Retry-After. Returns: quota?"""
        quota = self.is_quota(signal)
        with self._lock:
            now = self.clock.monotonic()
            self.streak += 1
            self.stats.rate_limited += 1
            if not quota:
                return False
            self.stats.quota_limited += 1
            if signal.limit_requests:
                self.requests.ceiling = signal.limit_requests
            if signal.limit_tokens:
                self.tokens.ceiling = signal.limit_tokens
            if signal.retry_after is not None and signal.retry_after > 0:
                self.paused_until = max(self.paused_until, now + signal.retry_after)
                self.requests.tat = max(self.requests.tat, self.paused_until)
            if now - self._last_cut >= max(self.cut_interval, signal.retry_after or 0.0):
                self._last_cut = now
                self.factor = max(self.min_factor, self.factor * self.decrease)
                self.window = max(float(self.min_concurrency), self.window * self.decrease)
                self.stats.slowdowns += 1
                self.stats.min_factor_seen = min(self.stats.min_factor_seen, self.factor)
                self.stats.min_window_seen = min(self.stats.min_window_seen, self.window)
            self._last_recovery = now
            return True

    def on_success(self) -> None:
        """Additive increase: the rate recovers with time, the window by one per window of answers."""
        with self._lock:
            now = self.clock.monotonic()
            self.streak = 0
            if self.factor < 1.0:
                self.factor = min(
                    1.0, self.factor + self.recovery_per_second * (now - self._last_recovery)
                )
            if self.window < self.max_concurrency:
                self.window = min(float(self.max_concurrency), self.window + 1.0 / self.window)
            self._last_recovery = now


@dataclass
class Permit:
    limiter: RateLimiter
    reserved_tokens: int
    ticket: int = 0  # the request's place in the queue, kept by its retries
    settled: bool = field(default=False)
    unused: int = 0  # reserved tokens given back when settled

    def settle(self, used_tokens: int) -> None:
        """Give back what was reserved but not used (all of it when the attempt failed)."""
        if not self.settled:
            self.settled = True
            self.unused = max(0, self.reserved_tokens - used_tokens)
            self.limiter.refund(self.unused)


@dataclass(frozen=True)
class RetryPolicy:
    """Exponential backoff with jitter; a server's Retry-After is a floor, never shortened."""

    max_retries: int = 6
    base_delay: float = 0.5
    max_delay: float = 30.0
    max_retry_after: float = 120.0  # a longer Retry-After ends the request instead

    def delay(
        self, attempt: int, retry_after: float | None = None, rng: random.Random | None = None
    ) -> float:
        """Seconds to wait before retry number ``attempt`` (1-based)."""
        draw = (rng or random).random()
        backoff = min(self.max_delay, self.base_delay * (2 ** (attempt - 1)))
        jittered = backoff * (0.5 + 0.5 * draw)  # "equal jitter": never less than half the backoff
        if retry_after is not None and retry_after > 0:
            return retry_after * (1.0 + 0.1 * draw)
        return jittered


class CircuitBreaker:
    """Opens after ``threshold`` consecutive failures; then every call fails fast with the reason."""

    def __init__(self, threshold: int, endpoint: str) -> None:
        self.threshold = threshold
        self.endpoint = endpoint
        self.consecutive = 0
        self.open = False
        self.last_error = ""
        self._lock = threading.Lock()

    def check(self) -> None:
        if self.open:
            raise CircuitOpenError(self.message())

    def message(self) -> str:
        return (
            f"stopping: {self.consecutive} consecutive requests to {self.endpoint} failed "
            f"(circuit breaker threshold {self.threshold}, limits.circuit_breaker_failures); "
            f"last error: {self.last_error}"
        )

    def failure(self, error: str) -> None:
        with self._lock:
            self.consecutive += 1
            self.last_error = one_line(error)
            if self.consecutive >= self.threshold:
                self.open = True

    def success(self) -> None:
        with self._lock:
            if not self.open:
                self.consecutive = 0


def one_line(text: str, limit: int = 300) -> str:
    """``text`` on one line, shortened: what ends up on the console when a run stops."""
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"
