"""The one retry policy of calls to an endpoint: limiter, retries with backoff, circuit breaker.

Every call to the endpoint goes through :meth:`EndpointPolicy.call` (chat
requests, embeddings, the Batch API's file and batch calls); a refused key
is remembered so that nothing more is sent with it (:func:`check_access`
finds it out before any work).
"""

from __future__ import annotations

import random
from collections.abc import Awaitable, Callable
from typing import TypeVar

from memoryquest.llm.backends import ChatBackend
from memoryquest.llm.errors import (
    AuthenticationBackendError,
    BackendError,
    ContextLengthBackendError,
    FieldRejectedError,
    LLMAuthenticationError,
    LLMConfigurationError,
    LLMContextLengthError,
    LLMTransportError,
    PermanentBackendError,
    TransientBackendError,
)
from memoryquest.llm.limiter import (
    CircuitBreaker,
    RateLimiter,
    RateLimitSignal,
    RetryPolicy,
    one_line,
)

T = TypeVar("T")


class EndpointPolicy:
    """How one endpoint is called: its limiter, retries, circuit breaker and a refused key."""

    def __init__(
        self,
        limiter: RateLimiter | None,
        retry: RetryPolicy,
        breaker: CircuitBreaker,
        rng: random.Random,
    ) -> None:
        self.limiter = limiter
        self.retry = retry
        self.breaker = breaker
        self.rng = rng
        # The message of a refused key; once set, nothing more is sent.
        self.auth_failure: str | None = None

    def authentication_failed(self, endpoint: str, exc: BackendError) -> LLMAuthenticationError:
        """One message for a refused key, remembered so no later request is sent with it."""
        if self.auth_failure is None:
            self.auth_failure = str(authentication_error(endpoint, exc))
        return LLMAuthenticationError(self.auth_failure)

    async def call(
        self,
        backend: ChatBackend,
        send: Callable[[], Awaitable[T]],
        *,
        where: str,
        reserve: int = 0,
        used: Callable[[T], int] = lambda _: 0,
    ) -> T:
        """One logical request to the endpoint: limiter, retries with backoff, circuit breaker.

        The one retry policy of the project: 429s, 5xx, timeouts and dropped
        connections are retried here (never sooner than the server's
        Retry-After); 400, 401, 403, 404 and other refusals are not retried at
        all. A run of failures opens the circuit breaker, which ends every
        request with one line naming the endpoint and the last error.
        ``reserve`` tokens are held while it runs, settled to ``used(result)``
        and handed back when an attempt fails. Without a limiter (the
        simulator, some tests) it is sent once, as it is.
        """
        if self.limiter is None:
            return await send()
        limiter = self.limiter
        attempt = 0
        ticket: int | None = None  # the first try's place in the queue, kept by the retries
        while True:
            if self.auth_failure is not None:
                raise LLMAuthenticationError(self.auth_failure)
            self.breaker.check()
            try:
                async with limiter.slot(reserve, retry_of=ticket) as permit:
                    ticket = permit.ticket
                    self.breaker.check()
                    try:
                        result = await send()
                    except TransientBackendError as exc:
                        if exc.rate_limited:
                            # Counted against requests/min all the same: providers count
                            # refused attempts, so giving the place back would send more
                            # than the limit whenever 429s come at random.
                            limiter.on_rate_limited(_signal(exc))
                        raise
                    permit.settle(used(result))
            except FieldRejectedError:
                raise
            except ContextLengthBackendError as exc:
                learn = getattr(backend, "learn_window", None)
                if exc.window and callable(learn):
                    learn(exc.window)
                raise LLMContextLengthError(
                    f"{where}: {self.breaker.endpoint} says the request exceeds the model's "
                    f"context window: {one_line(str(exc))}"
                ) from exc
            except AuthenticationBackendError as exc:
                raise self.authentication_failed(endpoint_label(backend), exc) from None
            except PermanentBackendError as exc:
                raise LLMConfigurationError(
                    f"{where}: {self.breaker.endpoint} rejected the request: {one_line(str(exc))}"
                ) from exc
            except TransientBackendError as exc:
                attempt += 1
                if not exc.rate_limited:
                    self.breaker.failure(str(exc))
                    self.breaker.check()
                retry_after = exc.retry_after
                too_long = retry_after is not None and retry_after > self.retry.max_retry_after
                if attempt > self.retry.max_retries or too_long:
                    if exc.rate_limited:
                        self.breaker.failure(f"rate limited on every attempt: {exc}")
                    why = (
                        f"the server asks to wait {retry_after:.0f} s, more than {self.retry.max_retry_after:.0f} s"
                        if too_long and retry_after is not None
                        else f"gave up after {attempt} attempts (endpoint.max_retries={self.retry.max_retries})"
                    )
                    raise LLMTransportError(
                        f"{where}: {why}; last error: {one_line(str(exc))}", attempt, exc
                    ) from exc
                await limiter.clock.sleep(self.retry.delay(attempt, retry_after, self.rng))
                continue
            limiter.on_success()
            self.breaker.success()
            return result


def endpoint_label(backend: ChatBackend) -> str:
    """Where a backend sends requests, for messages: its URL (the SDK's default included), else its name."""
    return str(getattr(backend, "endpoint_url", None) or backend.base_url or backend.name)


def authentication_error(endpoint: str, exc: BackendError) -> LLMAuthenticationError:
    """One line: where, the server's (redacted, shortened) reason, and what to check."""
    reason = " ".join(str(exc).split())
    if len(reason) > 200:
        reason = reason[:199] + "…"
    return LLMAuthenticationError(
        f"authentication failed for {endpoint} ({reason}); check endpoint.api_key "
        "(or OPENAI_API_KEY / AZURE_OPENAI_API_KEY)"
    )


async def check_access(backend: ChatBackend) -> None:
    """Raise :class:`LLMAuthenticationError` when ``backend``'s endpoint refuses the key.

    One free request (``GET /models``). Only a refused key (401/403) is
    conclusive; any other answer (a server without ``/models``, a slow start)
    is left for the run itself to report. The simulator has nothing to check.
    """
    check = getattr(backend, "check_access", None)
    if backend.simulated or not callable(check):
        return
    try:
        await check()
    except AuthenticationBackendError as exc:
        raise authentication_error(endpoint_label(backend), exc) from None
    except BackendError:
        return


def _signal(exc: TransientBackendError) -> RateLimitSignal:
    return RateLimitSignal(
        retry_after=exc.retry_after,
        quota=exc.quota,
        limit_requests=exc.limit_requests,
        limit_tokens=exc.limit_tokens,
    )
