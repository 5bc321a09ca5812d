"""The limiter's pacing, pauses and concurrency; retry timing; the circuit breaker."""

from __future__ import annotations

import asyncio
import random
import time

import pytest

from memoryquest.llm.errors import CircuitOpenError
from memoryquest.llm.limiter import CircuitBreaker, RateLimiter, RateLimitSignal, RetryPolicy


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


async def test_a_quota_429_pauses_everyone_and_lowers_rate_and_window_then_recovers() -> None:
    limiter = RateLimiter(10**6, 10**9, 10, recovery_per_second=10.0)
    assert limiter.on_rate_limited(RateLimitSignal(retry_after=0.2, quota=True))
    assert limiter.factor == pytest.approx(0.7) and limiter.window == pytest.approx(7.0)
    limiter.on_rate_limited(RateLimitSignal(retry_after=0.2, quota=True))  # same burst: one cut
    assert limiter.factor == pytest.approx(0.7)
    elapsed = await take(limiter, 3)
    assert elapsed >= 0.18  # nobody is sent before the quota's Retry-After
    await asyncio.sleep(0.05)
    limiter.on_success()
    assert limiter.factor == 1.0 and limiter.window == pytest.approx(7.0 + 1 / 7.0)


async def test_an_isolated_429_delays_nobody_else_and_slows_nothing() -> None:
    limiter = RateLimiter(10**6, 10**9, 10)
    assert not limiter.on_rate_limited(RateLimitSignal(retry_after=2.0))
    assert limiter.factor == 1.0 and limiter.window == 10.0 and limiter.paused_until == 0.0
    assert await take(limiter, 3) < 0.1


def test_what_counts_as_a_quota() -> None:
    limiter = RateLimiter(10**6, 10**9, 10, quota_retry_after=5.0, quota_streak=3)
    assert limiter.is_quota(RateLimitSignal(quota=True))
    assert limiter.is_quota(RateLimitSignal(retry_after=5.0))  # a long Retry-After
    assert not limiter.is_quota(RateLimitSignal(retry_after=1.0))
    limiter.on_rate_limited(RateLimitSignal(retry_after=0.1))
    limiter.on_rate_limited(RateLimitSignal(retry_after=0.1))
    assert limiter.on_rate_limited(RateLimitSignal(retry_after=0.1))  # the third 429 in a row
    limiter.on_success()
    assert not limiter.on_rate_limited(RateLimitSignal(retry_after=0.1))  # a success broke the run


async def test_a_quota_that_names_its_limit_caps_the_rate() -> None:
    limiter = RateLimiter(6000, 10**9, 10, recovery_per_second=100.0, burst_seconds=0.0)
    limiter.on_rate_limited(RateLimitSignal(quota=True, limit_requests=600))
    await asyncio.sleep(0.02)
    limiter.on_success()  # the factor is back at 1, the ceiling stays
    assert limiter.factor == 1.0
    elapsed = await take(limiter, 6)
    assert 0.45 <= elapsed <= 0.8  # 10/s, not 100/s


async def test_the_window_caps_concurrency_after_a_cut() -> None:
    limiter = RateLimiter(10**6, 10**9, 8, decrease=0.5)
    limiter.on_rate_limited(RateLimitSignal(quota=True))
    await take(limiter, 12, hold=0.02)
    assert limiter.peak_in_flight == 4


async def test_retries_are_sent_before_requests_that_have_not_been_sent_yet() -> None:
    limiter = RateLimiter(600, 10**9, 100, burst_seconds=0.0)  # one request every 0.1 s
    order: list[str] = []

    async def one(name: str, retry_of: int | None = None) -> int:
        async with limiter.slot(1, retry_of=retry_of) as permit:
            order.append(name)
            return permit.ticket

    first = await one("first")
    newer = [asyncio.create_task(one(f"new{i}")) for i in range(3)]
    await asyncio.sleep(0.01)  # the new ones are queued
    retry = asyncio.create_task(one("retry of first", retry_of=first))
    await asyncio.gather(*newer, retry)
    assert order == ["first", "retry of first", "new0", "new1", "new2"]
    assert limiter.stats.retries == 1


async def test_a_failed_attempt_gives_back_its_whole_reservation() -> None:
    limiter = RateLimiter(10**6, 60_000, 100, burst_seconds=0.0)  # 1,000 tokens/s
    for _ in range(5):
        with pytest.raises(RuntimeError):
            async with limiter.slot(1_000):
                raise RuntimeError("HTTP 500")
    started = time.monotonic()
    async with limiter.slot(500) as permit:
        permit.settle(500)
    assert time.monotonic() - started < 0.3  # five failed reservations of 1 s each were refunded


async def test_settling_keeps_what_was_used_and_refunds_the_rest() -> None:
    limiter = RateLimiter(10**6, 60_000, 100, burst_seconds=0.0)
    async with limiter.slot(3_000) as permit:
        permit.settle(400)
        permit.settle(0)  # settled once only
    # 400 tokens at 1,000/s: the next request waits about 0.4 s, not 3 s (or 0).
    assert limiter.tokens.tat - time.monotonic() == pytest.approx(0.4, abs=0.05)


async def test_a_refused_request_is_given_back_to_the_rate() -> None:
    limiter = RateLimiter(60, 10**9, 10, burst_seconds=0.0)  # one request per second
    async with limiter.slot(1) as permit:
        permit.give_back_request()
    assert await take(limiter, 1) < 0.1


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


def test_retry_after_is_a_floor() -> None:
    policy = RetryPolicy(base_delay=0.01, max_delay=0.1)
    rng = random.Random(2)
    for attempt in (1, 5):
        assert 2.0 <= policy.delay(attempt, retry_after=2.0, rng=rng) <= 2.2


def test_the_breaker_opens_after_consecutive_failures_only() -> None:
    breaker = CircuitBreaker(3, "http://example.test/v1")
    breaker.failure("HTTP 500")
    breaker.failure("HTTP 500")
    breaker.success()
    breaker.failure("HTTP 502")
    breaker.failure("timeout")
    breaker.check()
    breaker.failure("connection refused")
    breaker.failure("HTTP 503: upstream\n  unavailable\n")
    with pytest.raises(
        CircuitOpenError,
        match=r"4 consecutive requests to http://example.test/v1 failed.*HTTP 503: upstream unavailable",
    ) as caught:
        breaker.check()
    assert "\n" not in str(caught.value)
