"""What can go wrong in the client layer, named so a stage (or a person) can act on it.

Two families: the *answer* was unusable (``LLMOutputError`` and its
refusal / truncation / content-filter subclasses), or the *endpoint* was
(``LLMTransportError``, ``CircuitOpenError``, ``LLMConfigurationError``).
Backends raise the small ``BackendError`` types below; only the client turns
them into retries or into one of the public errors.

Every message passes through :func:`memoryquest.redaction.redact_text` when
the error is made, so neither the configured API key nor anything shaped
like a key (an endpoint that echoes the key in its error body) can reach a
log, a traceback or Prefect's database through these errors.
"""

from __future__ import annotations

from typing import Any

from memoryquest.redaction import redact_text


class LLMError(RuntimeError):
    """Base of every error the client layer raises on purpose."""

    def __init__(self, message: str = "", *args: object) -> None:
        super().__init__(redact_text(str(message)), *args)


class LLMOutputError(LLMError):
    """The model's answer could not be turned into the response model."""


class LLMRefusalError(LLMOutputError):
    """The model refused to answer, on every permitted attempt."""

    def __init__(self, message: str, reason: str) -> None:
        super().__init__(message)
        self.reason = reason


class LLMTruncatedError(LLMOutputError):
    """The answer hit the output-token limit (finish_reason ``length``) on every attempt."""


class LLMContentFilterError(LLMOutputError):
    """The provider's content filter withheld the answer on every attempt."""


class LLMContextLengthError(LLMOutputError):
    """The prompt and its output allowance do not fit the model's context window.

    An output error, not a configuration one: it belongs to one item (its
    prompt is too long), which is rejected with the reason ``context_length``
    while the run goes on.

    ``learned_window``: the window a server named when it refused a request that
    was sized without knowing it. Planned again under that window (split into
    smaller calls, material trimmed), the item may fit; the stage asks again.
    """

    def __init__(self, message: str = "", *, learned_window: int | None = None) -> None:
        super().__init__(message)
        self.learned_window = learned_window


class LLMTransportError(LLMError):
    """The endpoint kept failing (429, 5xx, timeouts, connection errors) past the retry budget."""

    def __init__(
        self, message: str, attempts: int, last_error: BaseException | None = None
    ) -> None:
        super().__init__(message)
        self.attempts = attempts
        self.last_error = last_error


class CircuitOpenError(LLMError):
    """Too many consecutive failures: the run stops instead of hammering a broken endpoint."""


class LLMConfigurationError(LLMError):
    """The endpoint rejected the request for a reason retrying cannot fix (key, model, quota, input)."""


class LLMAuthenticationError(LLMConfigurationError):
    """HTTP 401/403: the key (or its permissions) was refused. Never retried."""


# Errors that another attempt of the same work cannot fix: Prefect must not retry a stage for them.
PERMANENT_ERRORS: tuple[type[BaseException], ...] = (LLMConfigurationError, CircuitOpenError)


def retry_unless_permanent(task: Any, task_run: Any, state: Any) -> bool:
    """A Prefect ``retry_condition_fn``: retry a failed stage unless its error is permanent.

    A refused key, a rejected model or an open circuit fail the same way on
    every attempt; retrying only repeats the request (and the error) twice more.
    """
    error = getattr(state, "data", None)
    return not isinstance(error, PERMANENT_ERRORS)


# --- raised by backends, consumed by the client -------------------------------------------


class BackendError(Exception):
    """One failed attempt, as a backend saw it."""

    def __init__(self, message: str, *, status: int | None = None) -> None:
        super().__init__(redact_text(message))
        self.status = status


class TransientBackendError(BackendError):
    """Worth retrying: rate limited, server error, timeout, dropped connection."""

    def __init__(
        self,
        message: str,
        *,
        kind: str,
        status: int | None = None,
        retry_after: float | None = None,
        quota: bool = False,
        limit_requests: float | None = None,
        limit_tokens: float | None = None,
    ) -> None:
        super().__init__(message, status=status)
        self.kind = kind  # "rate_limit" | "server" | "timeout" | "connection"
        self.retry_after = retry_after
        # A 429's quota headers: x-ratelimit-remaining-* at 0, and the announced per-minute limits.
        self.quota = quota
        self.limit_requests = limit_requests
        self.limit_tokens = limit_tokens

    @property
    def rate_limited(self) -> bool:
        return self.kind == "rate_limit"


class PermanentBackendError(BackendError):
    """Retrying the same request cannot succeed (bad key, unknown model, invalid input, no quota)."""


class AuthenticationBackendError(PermanentBackendError):
    """HTTP 401 or 403: the endpoint refused the credentials."""


class FieldRejectedError(PermanentBackendError):
    """The server refuses one optional request field (whatever status it said so with).

    ``field``: ``response_format`` (then a weaker output mode is tried), or one
    the backend can leave out of the next attempt (``seed``, ``prompt_cache_key``,
    ``max_completion_tokens``).
    """

    def __init__(self, message: str, *, field: str, status: int | None = None) -> None:
        super().__init__(message, status=status)
        self.field = field


class ResponseFormatRejectedError(FieldRejectedError):
    """The server does not accept the structured-output mode that was asked for."""

    def __init__(self, message: str, *, status: int | None = None) -> None:
        super().__init__(message, field="response_format", status=status)


class ContextLengthBackendError(PermanentBackendError):
    """The server says the prompt and output allowance exceed its context window (``window``, when it says)."""

    def __init__(self, message: str, *, window: int | None, status: int | None = None) -> None:
        super().__init__(message, status=status)
        self.window = window
