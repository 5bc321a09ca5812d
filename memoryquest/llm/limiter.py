"""One limiter for requests/min, tokens/min and concurrency, plus retry timing and a breaker.

The two rates use the generic cell rate algorithm (GCRA): each bucket keeps
a "theoretical arrival time"; a caller takes a request and its tokens when
both are due, else sleeps until they are (waking at least every
``poll_seconds``, so tokens handed back or a lifted pause are seen soon).
The state sits behind a thread lock and is shared by every event loop and
thread of the process; the concurrency cap is per event loop. Tokens are
taken before sending (prompt tokens counted with the tokenizer plus the
requested output budget, as providers count ``max_tokens`` against TPM)
and the unused part is handed back once the answer says what was used.

Only a small burst is allowed (``burst_seconds`` of the rate): providers
enforce per-minute limits over much shorter windows, so a minute's worth of
burst would be answered with 429s.

Under 429s the limiter slows itself (multiplicative decrease, at most once
per ``cut_interval``), pauses everybody until the server's Retry-After, and
recovers linearly while answers succeed.
"""

from __future__ import annotations

import asyncio
import random
import threading
import time
import weakref
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field

from memoryquest.llm.errors import CircuitOpenError


class _Bucket:
    """GCRA state for one rate, in seconds of 'rate time'."""

    def __init__(self, per_minute: float, burst_seconds: float) -> None:
        self.per_minute = per_minute
        self.burst_seconds = burst_seconds
        self.tat = 0.0  # theoretical arrival time

    def interval(self, factor: float) -> float:
        return 60.0 / (self.per_minute * factor)

    def tolerance(self, factor: float) -> float:
        return max(0.0, self.burst_seconds - self.interval(factor)) if self.per_minute else 0.0


@dataclass
class LimiterStats:
    acquired: int = 0
    waited_seconds: float = 0.0
    rate_limited: int = 0
    slowdowns: int = 0
    min_factor_seen: float = 1.0


class RateLimiter:
    def __init__(
        self,
        requests_per_minute: float,
        tokens_per_minute: float,
        max_concurrency: int,
        *,
        burst_seconds: float = 0.25,
        slowdown: float = 0.75,
        min_factor: float = 0.1,
        cut_interval: float = 1.0,
        recovery_per_second: float = 0.05,
        poll_seconds: float = 0.05,
    ) -> None:
        if requests_per_minute <= 0 or tokens_per_minute <= 0 or max_concurrency < 1:
            raise ValueError(
                "requests_per_minute, tokens_per_minute and max_concurrency must be positive"
            )
        self.requests = _Bucket(requests_per_minute, burst_seconds)
        self.tokens = _Bucket(tokens_per_minute, burst_seconds)
        self.max_concurrency = max_concurrency
        self.slowdown = slowdown
        self.min_factor = min_factor
        self.cut_interval = cut_interval
        self.recovery_per_second = recovery_per_second
        self.poll_seconds = poll_seconds
        self.factor = 1.0
        self.paused_until = 0.0
        self._last_cut = -1e9
        self._last_recovery = time.monotonic()
        self._lock = threading.Lock()
        self._semaphores: weakref.WeakKeyDictionary[
            asyncio.AbstractEventLoop, asyncio.Semaphore
        ] = weakref.WeakKeyDictionary()
        self.in_flight = 0
        self.peak_in_flight = 0
        self.stats = LimiterStats()

    def _semaphore(self) -> asyncio.Semaphore:
        loop = asyncio.get_running_loop()
        with self._lock:
            semaphore = self._semaphores.get(loop)
            if semaphore is None:
                semaphore = self._semaphores[loop] = asyncio.Semaphore(self.max_concurrency)
            return semaphore

    def _try_take(self, tokens: int) -> float:
        """Take one request and ``tokens`` if both rates allow now (returns 0), else the seconds to wait."""
        with self._lock:
            now = time.monotonic()
            ready_at = max(
                self.paused_until,
                self.requests.tat - self.requests.tolerance(self.factor),
                self.tokens.tat - self.tokens.tolerance(self.factor),
            )
            if ready_at > now:
                return ready_at - now
            self.requests.tat = max(self.requests.tat, now) + self.requests.interval(self.factor)
            self.tokens.tat = max(self.tokens.tat, now) + tokens * self.tokens.interval(self.factor)
            return 0.0

    @asynccontextmanager
    async def slot(self, tokens: int) -> AsyncIterator[Permit]:
        """Hold one concurrency slot, sent no earlier than both rates allow."""
        semaphore = self._semaphore()
        async with semaphore:
            started = time.monotonic()
            while (wait := self._try_take(tokens)) > 0:
                # Wake at least every poll_seconds: a refund or a lifted pause can make room sooner.
                await asyncio.sleep(min(wait, self.poll_seconds))
            permit = Permit(self, tokens)
            with self._lock:
                self.in_flight += 1
                self.peak_in_flight = max(self.peak_in_flight, self.in_flight)
                self.stats.acquired += 1
                self.stats.waited_seconds += time.monotonic() - started
            try:
                yield permit
            finally:
                with self._lock:
                    self.in_flight -= 1

    def refund(self, tokens: int) -> None:
        if tokens > 0:
            with self._lock:
                self.tokens.tat -= tokens * self.tokens.interval(self.factor)

    def on_rate_limited(self, retry_after: float | None) -> None:
        """A 429: pause everyone until Retry-After and slow down (at most once per cut_interval)."""
        with self._lock:
            now = time.monotonic()
            self.stats.rate_limited += 1
            if retry_after is not None and retry_after > 0:
                self.paused_until = max(self.paused_until, now + retry_after)
                self.requests.tat = max(self.requests.tat, self.paused_until)
            if now - self._last_cut >= self.cut_interval:
                self._last_cut = now
                self.factor = max(self.min_factor, self.factor * self.slowdown)
                self.stats.slowdowns += 1
                self.stats.min_factor_seen = min(self.stats.min_factor_seen, self.factor)
            self._last_recovery = now

    def on_success(self) -> None:
        with self._lock:
            now = time.monotonic()
            if self.factor < 1.0:
                self.factor = min(
                    1.0, self.factor + self.recovery_per_second * (now - self._last_recovery)
                )
            self._last_recovery = now


@dataclass
class Permit:
    limiter: RateLimiter
    reserved_tokens: int
    settled: bool = field(default=False)

    def settle(self, used_tokens: int) -> None:
        """Give back what was reserved but not used."""
        if not self.settled:
            self.settled = True
            self.limiter.refund(self.reserved_tokens - used_tokens)


@dataclass(frozen=True)
class RetryPolicy:
    """Exponential backoff with jitter; a server's Retry-After wins when it says more."""

    max_retries: int = 6
    base_delay: float = 0.5
    max_delay: float = 30.0
    max_retry_after: float = 120.0

    def delay(
        self, attempt: int, retry_after: float | None = None, rng: random.Random | None = None
    ) -> float:
        """Seconds to wait before retry number ``attempt`` (1-based)."""
        draw = (rng or random).random()
        backoff = min(self.max_delay, self.base_delay * (2 ** (attempt - 1)))
        jittered = backoff * (0.5 + 0.5 * draw)  # "equal jitter": never less than half the backoff
        if retry_after is not None and retry_after > 0:
            return min(self.max_retry_after, retry_after) * (1.0 + 0.1 * draw)
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
            self.last_error = error
            if self.consecutive >= self.threshold:
                self.open = True

    def success(self) -> None:
        with self._lock:
            if not self.open:
                self.consecutive = 0
