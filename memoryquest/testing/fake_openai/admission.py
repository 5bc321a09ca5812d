"""Who gets an answer: the API key, the requests/min limit, and the fault each request draws.

Faults are injected per test, either scripted (``server.script(...)``: the
next N matching requests fail in order) or drawn with a seeded RNG
(``server.set_fault_rates({...}, seed=...)``). An enforced requests/min
limit answers 429 with ``retry-after-ms``, ``retry-after`` and the quota
headers (``x-ratelimit-remaining-requests: 0``, ``x-ratelimit-limit-requests``)
like the real service, which enforces per-minute limits over one-second
windows; ``Fault.quota()`` sends the same headers at random, while
``Fault.rate_limit()`` is a 429 without them (a busy server). A request sent
again before the Retry-After it was given has elapsed is counted in
``server.early_retries``. Every request is logged (``server.requests``).
"""

from __future__ import annotations

import hashlib
import json
import random
import threading
import time
from collections import deque
from collections.abc import Callable
from typing import Any

from memoryquest.testing.fake_openai.exchange import (
    Disconnect,
    ErrorAnswer,
    LoggedRequest,
    RateLimited,
    Stall,
)
from memoryquest.testing.fake_openai.faults import CONTENT_FAULTS, Fault, FaultKind


class RateLimit:
    """Token bucket holding one second's worth of requests, refilled continuously."""

    def __init__(self, per_minute: float) -> None:
        self.per_minute = per_minute
        self.rate = per_minute / 60.0
        self.capacity = max(1.0, self.rate)
        self.level = self.capacity
        self.updated = time.monotonic()
        self.lock = threading.Lock()

    def take(self) -> float | None:
        """None when allowed, else the seconds until the next request would be (the quota is spent)."""
        with self.lock:
            now = time.monotonic()
            self.level = min(self.capacity, self.level + (now - self.updated) * self.rate)
            self.updated = now
            if self.level >= 1.0:
                self.level -= 1.0
                return None
            return (1.0 - self.level) / self.rate


class RequestAdmission:
    """What :class:`FakeOpenAIServer` checks before a route answers (a mixin of the server)."""

    # Set by the server's constructor (``server``).
    api_key: str | None
    echo_key: bool
    rate_limit: RateLimit | None
    early_retries: int
    _lock: threading.Lock
    _scripted: deque[Fault]
    _rates: dict[FaultKind, float]
    _drawn: dict[FaultKind, Fault]
    _rng: random.Random
    _not_before: dict[str, float]
    _sleep: Callable[[float], None]

    def script(self, *faults: Fault) -> None:
        """The next matching requests fail with these faults, in order."""
        with self._lock:
            self._scripted.extend(faults)

    def set_fault_rates(
        self,
        rates: dict[FaultKind, float],
        seed: int = 0,
        faults: dict[FaultKind, Fault] | None = None,
    ) -> None:
        """Each request draws at most one fault: ``kind`` with probability ``rates[kind]``.

        ``faults`` gives the fault drawn for a kind (e.g. ``Fault.rate_limit(1.0)``
        for a one-second Retry-After); by default ``Fault.of(kind)``.
        """
        if sum(rates.values()) > 1.0:
            raise ValueError("fault rates must sum to at most 1")
        with self._lock:
            self._rates = dict(rates)
            self._drawn = dict(faults or {})
            self._rng = random.Random(seed)

    def set_rate_limit(self, requests_per_minute: float | None) -> None:
        """Enforce (or, with None, stop enforcing) a requests/min limit."""
        self.rate_limit = RateLimit(requests_per_minute) if requests_per_minute else None

    @property
    def pending_faults(self) -> int:
        with self._lock:
            return len(self._scripted)

    def _next_fault(self, endpoint: str, body: Any = None) -> Fault | None:
        with self._lock:
            for index, fault in enumerate(self._scripted):
                if fault.applies_to(endpoint, body):
                    del self._scripted[index]
                    return fault
            if self._rates:
                draw = self._rng.random()
                for kind, rate in self._rates.items():
                    if draw < rate and (endpoint == "chat" or kind not in CONTENT_FAULTS):
                        return self._drawn.get(kind) or Fault.of(kind)
                    draw -= rate
        return None

    def _admit(
        self, entry: LoggedRequest, headers: dict[str, str], endpoint: str, *, limited: bool = True
    ) -> Fault | None:
        """Auth, rate limit and transport faults; returns the content fault, if any."""
        if self.api_key is not None and headers.get("authorization") != f"Bearer {self.api_key}":
            raise self._refused(headers)
        identity = self._check_retry(entry) if limited else None
        try:
            return self._admit_or_fault(entry, headers, endpoint, limited)
        except RateLimited as exc:
            if identity is not None and exc.retry_after is not None:
                with self._lock:
                    self._not_before[identity] = time.monotonic() + exc.retry_after
            raise

    def _check_retry(self, entry: LoggedRequest) -> str:
        """Count a request sent again before the Retry-After it was given had elapsed."""
        identity = hashlib.blake2b(
            json.dumps(entry.body, sort_keys=True, default=str).encode("utf-8"), digest_size=16
        ).hexdigest()
        with self._lock:
            not_before = self._not_before.pop(identity, None)
            if not_before is not None and entry.at < not_before - 0.001:
                self.early_retries += 1
                entry.early = True
        return identity

    def _admit_or_fault(
        self, entry: LoggedRequest, headers: dict[str, str], endpoint: str, limited: bool
    ) -> Fault | None:
        if limited and self.rate_limit is not None:
            wait = self.rate_limit.take()
            if wait is not None:
                entry.fault = FaultKind.QUOTA
                raise RateLimited(wait, ms=True, quota=self.rate_limit.per_minute)
        fault = self._next_fault(endpoint, entry.body)
        if fault is None:
            return None
        entry.fault = fault.kind
        if fault.kind is FaultKind.RATE_LIMIT:
            raise RateLimited(fault.retry_after, ms=fault.retry_after_ms)
        if fault.kind is FaultKind.QUOTA:
            limit = self.rate_limit.per_minute if self.rate_limit is not None else None
            raise RateLimited(fault.retry_after, ms=fault.retry_after_ms, quota=limit or 0.0)
        if fault.kind is FaultKind.SERVER_ERROR:
            raise ErrorAnswer(
                fault.status,
                "The server had an error while processing your request.",
                code="server_error",
            )
        if fault.kind is FaultKind.UNAUTHORIZED:
            raise self._refused(headers, status=fault.status, echo=True)
        if fault.kind is FaultKind.TIMEOUT:
            raise Stall(fault.delay)
        if fault.kind is FaultKind.DISCONNECT:
            raise Disconnect()
        if fault.kind is FaultKind.SLOW:
            self._sleep(fault.delay)
            return None
        return fault

    def _refused(
        self, headers: dict[str, str], *, status: int = 401, echo: bool | None = None
    ) -> ErrorAnswer:
        """The answer to a refused key; with ``echo`` (default ``self.echo_key``) it repeats the key."""
        presented = headers.get("authorization", "").removeprefix("Bearer ").strip()
        if echo if echo is not None else self.echo_key:
            message = f"Incorrect API key provided: {presented}. Authorization: Bearer {presented}"
        else:
            message = "Incorrect API key provided."
        return ErrorAnswer(status, message, code="invalid_api_key")
