"""OpenAI SDK exceptions as the client's backend errors, redacted on the way.

SDK exceptions become ``memoryquest.llm.errors`` backend errors here and
nowhere else; stages never import ``openai``. The SDK exception itself is
scrubbed (:func:`scrub_sdk_error`): an endpoint that echoes the key in its
error body must not get it into a traceback.
"""

from __future__ import annotations

import email.utils
import re
import time
from typing import Any

from memoryquest.llm.backends import OutputMode
from memoryquest.llm.errors import (
    AuthenticationBackendError,
    ContextLengthBackendError,
    FieldRejectedError,
    PermanentBackendError,
    ResponseFormatRejectedError,
    TransientBackendError,
)
from memoryquest.redaction import redact, redact_text

# Words in an HTTP 400 that mean the server refuses the requested output format (online or in a batch line).
RESPONSE_FORMAT_WORDS = (
    "response_format",
    "json_schema",
    "json_object",
    "structured output",
    "strict",
)


def scrub_sdk_error(exc: BaseException) -> None:
    """Redact an SDK exception in place: its args, ``message`` and ``body`` (the server's error text)."""
    exc.args = tuple(redact_text(a) if isinstance(a, str) else a for a in exc.args)
    message = getattr(exc, "message", None)
    if isinstance(message, str):
        exc.message = redact_text(message)  # type: ignore[attr-defined]
    body = getattr(exc, "body", None)
    if body is not None:
        exc.body = redact(body)  # type: ignore[attr-defined]


def parse_retry_after(headers: Any) -> float | None:
    """Seconds from ``retry-after-ms`` or ``retry-after`` (seconds or an HTTP date)."""
    if headers is None:
        return None
    for name, divisor in (("retry-after-ms", 1000.0), ("retry-after", 1.0)):
        raw = headers.get(name)
        if raw is None:
            continue
        try:
            return max(0.0, float(raw) / divisor)
        except ValueError:
            pass
    raw = headers.get("retry-after")
    if raw:
        try:
            parsed = email.utils.parsedate_to_datetime(raw)
            return max(0.0, parsed.timestamp() - time.time())
        except (TypeError, ValueError):
            return None
    return None


def _header_number(headers: Any, name: str) -> float | None:
    raw = headers.get(name) if headers is not None else None
    try:
        return float(raw) if raw is not None else None
    except ValueError:
        return None


def quota_headers(headers: Any) -> dict[str, Any]:
    """What a 429's ``x-ratelimit-*`` headers say: a quota is spent (remaining at 0), and its limits."""
    remaining = [
        _header_number(headers, f"x-ratelimit-remaining-{kind}") for kind in ("requests", "tokens")
    ]
    return {
        "quota": any(value is not None and value <= 0 for value in remaining),
        "limit_requests": _header_number(headers, "x-ratelimit-limit-requests"),
        "limit_tokens": _header_number(headers, "x-ratelimit-limit-tokens"),
    }


# Phrases servers use when a prompt does not fit (OpenAI, vLLM, llama-cpp-python, llama.cpp, Ollama).
_OVERFLOW = (
    re.compile(r"maximum context length is (\d+)"),
    re.compile(r"context window of (\d+)"),
    re.compile(r"context (?:size|length) (?:of |is )?\(?(\d+)"),
    re.compile(r"exceeds? (?:the )?(?:available )?context (?:size|length|window)"),
    re.compile(r"context_length_exceeded"),
)
# Optional fields a server may refuse; the next attempt leaves the field out.
DROPPABLE_FIELDS = ("prompt_cache_key", "seed", "max_completion_tokens")
_STRUCTURED = (OutputMode.JSON_SCHEMA, OutputMode.JSON_OBJECT_SCHEMA, OutputMode.JSON_OBJECT)


def context_overflow(text: str) -> int | None:
    """The window named in a server's context-length refusal; 0 when it names none, None when ``text`` is no such refusal."""
    for pattern in _OVERFLOW:
        found = pattern.search(text)
        if found:
            return int(found.group(1)) if found.groups() else 0
    return None


def refused_field(
    text: str, status: int, mode: OutputMode | None, sent: frozenset[str] = frozenset()
) -> str | None:
    """The optional field an error refuses, whatever its status: llama.cpp says so with a 500.

    A structured-output word counts for ``response_format`` only when one was
    sent; on a 5xx only the field's own name counts, never the looser words.
    """
    if mode in _STRUCTURED:
        words = RESPONSE_FORMAT_WORDS if status in (400, 422) else RESPONSE_FORMAT_WORDS[:3]
        if any(word in text for word in words):
            return "response_format"
    for name in DROPPABLE_FIELDS:
        if name in sent and name in text:
            return name
    return None


def translate_error(
    exc: Exception, mode: OutputMode | None = None, sent: frozenset[str] = frozenset()
) -> Exception:
    """An SDK exception as a backend error the client knows how to handle (both redacted).

    ``mode`` and ``sent`` (the optional fields in the request) let a refusal
    of one of them be told from any other error.
    """
    import openai

    scrub_sdk_error(exc)

    if isinstance(exc, openai.APITimeoutError):
        return TransientBackendError(f"request timed out: {exc}", kind="timeout")
    if isinstance(exc, openai.APIConnectionError):
        return TransientBackendError(f"connection failed: {exc}", kind="connection")
    if isinstance(exc, openai.APIResponseValidationError):
        return TransientBackendError(
            f"malformed response body: {exc}", kind="server", status=exc.response.status_code
        )
    if isinstance(exc, openai.APIStatusError):
        status = exc.status_code
        retry_after = parse_retry_after(exc.response.headers)
        body = exc.body if isinstance(exc.body, dict) else {}
        code = str(body.get("code") or "")
        detail = f"HTTP {status}: {exc.message}"
        if status in (401, 403):
            return AuthenticationBackendError(detail, status=status)
        text = f"{exc.message} {body.get('param') or ''} {code}".lower()
        if status < 500 or status == 501:
            window = context_overflow(text)
            if window is not None:
                return ContextLengthBackendError(detail, window=window or None, status=status)
        refused = refused_field(text, status, mode, sent)
        if refused == "response_format":
            return ResponseFormatRejectedError(detail, status=status)
        if refused is not None:
            return FieldRejectedError(detail, field=refused, status=status)
        if status == 429:
            if code == "insufficient_quota" or "insufficient_quota" in exc.message:
                return PermanentBackendError(
                    f"{detail} (the account has no quota left)", status=status
                )
            return TransientBackendError(
                detail,
                kind="rate_limit",
                status=status,
                retry_after=retry_after,
                **quota_headers(exc.response.headers),
            )
        if status >= 500 or status in (408, 409):
            return TransientBackendError(
                detail, kind="server", status=status, retry_after=retry_after
            )
        return PermanentBackendError(detail, status=status)
    return exc
