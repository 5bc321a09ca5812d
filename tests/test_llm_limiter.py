"""The limiter's pacing, pauses and concurrency; retry timing; the circuit breaker.

Pacing runs on a virtual clock (tests/virtual_clock.py): every send time below is exact.
"""

from __future__ import annotations

import asyncio
import random

import pytest
from virtual_clock import VirtualClock

from memoryquest.llm.errors import CircuitOpenError, TransientBackendError
from memoryquest.llm.exchange import ChatExchange
from memoryquest.llm.limiter import CircuitBreaker, RateLimiter, RateLimitSignal, RetryPolicy
from memoryquest.llm.simulated import SimulatedChatBackend


async def take(limiter: RateLimiter, count: int, tokens: int = 1, hold: float = 0.0) -> list[float]:
    """Send ``count`` requests at once; the seconds after the start at which each was sent."""
    clock = limiter.clock
    started = clock.monotonic()
    sent: list[float] = []

    async def one() -> None:
        async with limiter.slot(tokens) as permit:
            sent.append(clock.monotonic() - started)
            if hold:
                await clock.sleep(hold)
            permit.settle(tokens)

    await asyncio.gather(*(one() for _ in range(count)))
    return sent


def test_requests_per_minute_is_the_pace_after_a_small_burst() -> None:
    clock = VirtualClock()
    limiter = RateLimiter(3000, 10**9, 100, clock=clock)  # 50/s; a burst of 0.25 s
    sent = clock.run(take(limiter, 40))
    # Twelve at once (the burst less one interval), then one every 1/50 s.
    assert sent == pytest.approx([0.0] * 12 + [0.02 * k - 0.23 for k in range(12, 40)], abs=1e-9)
    assert sent[-1] == pytest.approx(0.55, abs=1e-9)


def test_tokens_per_minute_is_counted_before_sending() -> None:
    clock = VirtualClock()
    limiter = RateLimiter(10**6, 60_000, 100, clock=clock)  # 1,000 tokens/s
    sent = clock.run(take(limiter, 5, tokens=200))
    # 200 tokens a request is 0.2 s of the rate; the burst is 0.249 s of it.
    assert sent == pytest.approx([0.0, 0.0, 0.151, 0.351, 0.551], abs=1e-9)


def test_unused_tokens_are_handed_back() -> None:
    clock = VirtualClock()
    limiter = RateLimiter(10**6, 60_000, 100, clock=clock)

    async def five() -> None:
        for _ in range(5):
            async with limiter.slot(1_000) as permit:
                permit.settle(10)  # the answer used far less than reserved

    clock.run(five())
    assert clock.elapsed() == 0.0  # kept: 10 tokens each; reserved 1,000 (1 s of the rate) each


def test_concurrency_is_capped() -> None:
    clock = VirtualClock()
    limiter = RateLimiter(10**6, 10**9, 4, clock=clock)
    sent = clock.run(take(limiter, 20, hold=0.02))
    assert limiter.peak_in_flight == 4 and limiter.in_flight == 0
    # Four at a time: each group of four goes once the one before has finished.
    assert sorted(sent) == pytest.approx([0.02 * (k // 4) for k in range(20)], abs=1e-9)


def test_a_quota_429_pauses_everyone_and_lowers_rate_and_window_then_recovers() -> None:
    clock = VirtualClock()
    limiter = RateLimiter(10**6, 10**9, 10, recovery_per_second=10.0, clock=clock)
    assert limiter.on_rate_limited(RateLimitSignal(retry_after=0.2, quota=True))
    assert limiter.factor == pytest.approx(0.7) and limiter.window == pytest.approx(7.0)
    limiter.on_rate_limited(RateLimitSignal(retry_after=0.2, quota=True))  # same burst: one cut
    assert limiter.factor == pytest.approx(0.7)
    sent = clock.run(take(limiter, 3))
    assert sent == pytest.approx([0.2] * 3, abs=1e-9)  # nobody before the quota's Retry-After
    clock.advance(0.05)  # 0.25 s after the cut: 0.7 + 10/s x 0.25 s is past 1
    limiter.on_success()
    assert limiter.factor == 1.0 and limiter.window == pytest.approx(7.0 + 1 / 7.0)


def test_the_rate_recovers_with_the_time_since_the_cut() -> None:
    clock = VirtualClock()
    limiter = RateLimiter(10**6, 10**9, 10, recovery_per_second=0.05, clock=clock)
    limiter.on_rate_limited(RateLimitSignal(quota=True))
    clock.advance(2.0)
    limiter.on_success()
    assert limiter.factor == pytest.approx(0.7 + 0.05 * 2.0, abs=1e-12)


def test_an_isolated_429_delays_nobody_else_and_slows_nothing() -> None:
    clock = VirtualClock()
    limiter = RateLimiter(10**6, 10**9, 10, clock=clock)
    assert not limiter.on_rate_limited(RateLimitSignal(retry_after=2.0))
    assert limiter.factor == 1.0 and limiter.window == 10.0 and limiter.paused_until == 0.0
    assert clock.run(take(limiter, 3)) == [0.0, 0.0, 0.0]


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


def test_a_quota_that_names_its_limit_caps_the_rate() -> None:
    clock = VirtualClock()
    limiter = RateLimiter(
        6000, 10**9, 10, recovery_per_second=100.0, burst_seconds=0.0, clock=clock
    )
    limiter.on_rate_limited(RateLimitSignal(quota=True, limit_requests=600))
    clock.advance(0.02)
    limiter.on_success()  # the factor is back at 1, the ceiling stays
    assert limiter.factor == 1.0
    sent = clock.run(take(limiter, 6))
    assert sent == pytest.approx([0.1 * k for k in range(6)], abs=1e-9)  # 10/s, not 100/s


def test_the_window_caps_concurrency_after_a_cut() -> None:
    clock = VirtualClock()
    limiter = RateLimiter(10**6, 10**9, 8, decrease=0.5, clock=clock)
    limiter.on_rate_limited(RateLimitSignal(quota=True))
    clock.run(take(limiter, 12, hold=0.02))
    assert limiter.peak_in_flight == 4


def test_retries_are_sent_before_requests_that_have_not_been_sent_yet() -> None:
    clock = VirtualClock()
    limiter = RateLimiter(600, 10**9, 100, burst_seconds=0.0, clock=clock)  # one every 0.1 s
    order: list[tuple[str, float]] = []

    async def one(name: str, retry_of: int | None = None) -> int:
        async with limiter.slot(1, retry_of=retry_of) as permit:
            order.append((name, round(clock.elapsed(), 9)))
            return permit.ticket

    async def main() -> None:
        first = await one("first")
        newer = [asyncio.create_task(one(f"new{i}")) for i in range(3)]
        await clock.sleep(0.01)  # the new ones are queued
        retry = asyncio.create_task(one("retry of first", retry_of=first))
        await asyncio.gather(*newer, retry)

    clock.run(main())
    assert order == [
        ("first", 0.0),
        ("retry of first", 0.1),
        ("new0", 0.2),
        ("new1", 0.3),
        ("new2", 0.4),
    ]
    assert limiter.stats.retries == 1


def test_a_failed_attempt_gives_back_its_whole_reservation() -> None:
    clock = VirtualClock()
    limiter = RateLimiter(10**6, 60_000, 100, burst_seconds=0.0, clock=clock)  # 1,000 tokens/s

    async def main() -> None:
        for _ in range(5):
            with pytest.raises(RuntimeError):
                async with limiter.slot(1_000):
                    raise RuntimeError("HTTP 500")
        async with limiter.slot(500) as permit:
            permit.settle(500)

    clock.run(main())
    # Five failed reservations of 1 s each were refunded: the sixth waits only for its turn in
    # requests/min (one every 60/10**6 s, no burst), not for their tokens.
    assert clock.elapsed() == pytest.approx(5 * 60 / 10**6, abs=1e-9)


def test_settling_keeps_what_was_used_and_refunds_the_rest() -> None:
    clock = VirtualClock()
    limiter = RateLimiter(10**6, 60_000, 100, burst_seconds=0.0, clock=clock)

    async def main() -> None:
        async with limiter.slot(3_000) as permit:
            permit.settle(400)
            permit.settle(0)  # settled once only

    clock.run(main())
    # 400 tokens at 1,000/s: the next request waits 0.4 s, not 3 s (or 0).
    assert limiter.tokens.tat - clock.monotonic() == pytest.approx(0.4, abs=1e-9)
    assert clock.run(take(limiter, 1)) == pytest.approx([0.4], abs=1e-9)


class Ledger:
    """A :class:`RequestGate` that grants at once and keeps what it was asked and given back."""

    def __init__(self) -> None:
        self.asked: list[int] = []
        self.given_back: list[int] = []

    async def acquire(self, tokens: int) -> None:
        self.asked.append(tokens)

    async def give_back(self, tokens: int) -> None:
        self.given_back.append(tokens)


def test_the_gate_is_asked_for_the_reservation_and_given_back_what_was_not_used() -> None:
    clock = VirtualClock()
    gate = Ledger()
    limiter = RateLimiter(10**6, 10**9, 100, gate=gate, clock=clock)

    async def main() -> None:
        async with limiter.slot(3_000) as permit:
            permit.settle(400)
        async with limiter.slot(500) as permit:
            permit.settle(500)  # used all it reserved: nothing to give back
        with pytest.raises(RuntimeError):
            async with limiter.slot(700):
                raise RuntimeError("HTTP 500")  # a failed attempt used nothing

    clock.run(main())
    assert gate.asked == [3_000, 500, 700]
    assert gate.given_back == [2_600, 700]


class ScriptedEndpoint:
    """Attempt n (0-based) is refused with a 429 (Retry-After 1 s, no quota headers) when
    n % 5 == 0 and fails with a 500 when n % 20 == 1: 20 % and 5 %, the send times kept."""

    def __init__(self, clock: VirtualClock) -> None:
        self.clock = clock
        self.sent: list[float] = []
        self.answered = self.refused = self.failed = 0

    async def send(self) -> str:
        attempt = len(self.sent)
        self.sent.append(self.clock.elapsed())
        if attempt % 5 == 0:
            self.refused += 1
            raise TransientBackendError("HTTP 429", kind="rate_limit", status=429, retry_after=1.0)
        if attempt % 20 == 1:
            self.failed += 1
            raise TransientBackendError("HTTP 500", kind="server", status=500)
        self.answered += 1
        return "answer"


def test_every_attempt_counts_against_requests_per_minute() -> None:
    """A 429 without quota headers keeps its place in the request budget: the provider counts it."""
    clock = VirtualClock()
    limiter = RateLimiter(60, 10**9, 8, burst_seconds=0.0, clock=clock)  # one attempt a second
    exchange = ChatExchange(
        SimulatedChatBackend(seed=0),
        limiter=limiter,
        retry=RetryPolicy(max_retries=8, base_delay=0.5, max_delay=2.0),
        rng=random.Random(0),
    )
    endpoint = ScriptedEndpoint(clock)

    async def run(count: int) -> list[str]:
        calls = (exchange.call_endpoint(endpoint.send, where="test") for _ in range(count))
        return list(await asyncio.gather(*calls))

    answers = clock.run(run(120))
    assert answers == ["answer"] * 120 and endpoint.answered == 120
    assert limiter.stats.rate_limited == endpoint.refused > 0 and endpoint.failed > 0
    assert limiter.stats.quota_limited == 0  # noise, not a quota: no slowdown
    assert limiter.stats.acquired == len(endpoint.sent) == 120 + endpoint.refused + endpoint.failed
    # One attempt a second, refused ones included: never two within a second, at most 60 a minute.
    gaps = [b - a for a, b in zip(endpoint.sent, endpoint.sent[1:], strict=False)]
    assert min(gaps) == pytest.approx(1.0, abs=1e-9)
    for start in endpoint.sent:
        assert sum(1 for t in endpoint.sent if start <= t < start + 60.0) <= 60
    # While requests wait, the budget is used in full: 60 attempts in the first minute, of
    # which the script answers 3 in 4.
    assert sum(1 for t in endpoint.sent if t < 60.0) == 60


def test_a_retry_waits_for_retry_after_on_the_clock() -> None:
    clock = VirtualClock()
    limiter = RateLimiter(10**6, 10**9, 8, clock=clock)
    exchange = ChatExchange(SimulatedChatBackend(seed=0), limiter=limiter, rng=random.Random(0))
    sent: list[float] = []

    async def send() -> str:
        sent.append(clock.elapsed())
        if len(sent) == 1:
            raise TransientBackendError("HTTP 429", kind="rate_limit", status=429, retry_after=2.0)
        return "answer"

    assert clock.run(exchange.call_endpoint(send, where="test")) == "answer"
    # Never sooner than the Retry-After, at most 10 % later (RetryPolicy.delay).
    assert sent[0] == 0.0 and 2.0 <= sent[1] <= 2.2


def test_the_limiter_works_across_event_loops() -> None:
    clock = VirtualClock()
    limiter = RateLimiter(6000, 10**9, 2, clock=clock)
    for _ in range(2):
        clock.run(take(limiter, 4, hold=0.001))
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
