"""The limiter's pacing, pauses and concurrency; retry timing; the circuit breaker."""

from __future__ import annotations

import asyncio
import random
import time

import pytest

from memoryquest.llm.errors import CircuitOpenError
from memoryquest.llm.limiter import CircuitBreaker, RateLimiter, RetryPolicy


async def take(limiter: RateLimiter, count: int, tokens: int = 1, hold: float = 0.0) -> float:
    async def one() -> None:
        async with limiter.slot(tokens) as permit:
            if hold:
                await asyncio.sleep(hold)
            permit.settle(tokens)

    started = time.monotonic()
    await asyncio.gather(*(one() for _ in range(count)))
    return time.monotonic() - started


async def test_requests_per_minute_is_the_pace_after_a_small_burst() -> None:
    limiter = RateLimiter(3000, 10**9, 100)  # 50/s; burst of 0.25 s = 12 requests
    elapsed = await take(limiter, 40)
    assert 0.45 <= elapsed <= 1.0  # (40 - 1 - 12) / 50 = 0.54 s


async def test_tokens_per_minute_is_counted_before_sending() -> None:
    limiter = RateLimiter(10**6, 60_000, 100)  # 1,000 tokens/s
    elapsed = await take(limiter, 5, tokens=200)
    assert (
        0.45 <= elapsed <= 1.2
    )  # the 5th request goes once 1000 - 200 - 250 tokens refilled: 0.55 s


async def test_unused_tokens_are_handed_back() -> None:
    limiter = RateLimiter(10**6, 60_000, 100)
    started = time.monotonic()
    for _ in range(5):
        async with limiter.slot(1_000) as permit:
            permit.settle(10)  # the answer used far less than reserved
    assert time.monotonic() - started < 0.3


async def test_concurrency_is_capped() -> None:
    limiter = RateLimiter(10**6, 10**9, 4)
    await take(limiter, 20, hold=0.02)
    assert limiter.peak_in_flight == 4 and limiter.in_flight == 0


async def test_a_429_pauses_everyone_and_slows_down_then_recovers() -> None:
    limiter = RateLimiter(10**6, 10**9, 10, recovery_per_second=10.0)
    limiter.on_rate_limited(0.2)
    assert limiter.factor == pytest.approx(0.75)
    limiter.on_rate_limited(0.2)  # within the cut interval: no second cut
    assert limiter.factor == pytest.approx(0.75)
    elapsed = await take(limiter, 3)
    assert elapsed >= 0.18
    await asyncio.sleep(0.05)
    limiter.on_success()
    assert limiter.factor == 1.0


def test_the_limiter_works_across_event_loops() -> None:
    limiter = RateLimiter(6000, 10**9, 2)
    for _ in range(2):
        asyncio.run(take(limiter, 4, hold=0.001))
    assert limiter.stats.acquired == 8


def test_bad_limits_are_rejected() -> None:
    with pytest.raises(ValueError, match="must be positive"):
        RateLimiter(0, 10, 1)


def test_backoff_grows_exponentially_with_jitter_and_a_cap() -> None:
    policy = RetryPolicy(base_delay=0.5, max_delay=4.0)
    rng = random.Random(1)
    for attempt, ceiling in [(1, 0.5), (2, 1.0), (3, 2.0), (4, 4.0), (8, 4.0)]:
        delays = [policy.delay(attempt, rng=rng) for _ in range(50)]
        assert all(ceiling / 2 <= d <= ceiling for d in delays)
        assert len(set(delays)) > 1


def test_retry_after_wins_and_is_capped() -> None:
    policy = RetryPolicy(base_delay=0.01, max_retry_after=60)
    rng = random.Random(2)
    assert 2.0 <= policy.delay(1, retry_after=2.0, rng=rng) <= 2.2
    assert policy.delay(1, retry_after=3600, rng=rng) <= 66


def test_the_breaker_opens_after_consecutive_failures_only() -> None:
    breaker = CircuitBreaker(3, "http://example.test/v1")
    breaker.failure("HTTP 500")
    breaker.failure("HTTP 500")
    breaker.success()
    breaker.failure("HTTP 502")
    breaker.failure("timeout")
    breaker.check()
    breaker.failure("connection refused")
    with pytest.raises(
        CircuitOpenError,
        match=r"3 consecutive requests to http://example.test/v1 failed.*connection refused",
    ):
        breaker.check()
