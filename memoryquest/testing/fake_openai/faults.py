"""What can go wrong with a request to the fake server: the kinds of fault a test injects,
and how a test names one (``Fault.rate_limit(1.0)``, ``Fault.of(kind)``, ``.matching(text)``).

Which fault a request gets is decided in ``admission``.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, replace
from enum import StrEnum
from typing import Any


class FaultKind(StrEnum):
    RATE_LIMIT = "rate_limit"  # 429 with Retry-After, no quota headers (a busy server: noise)
    QUOTA = "quota"  # 429 with x-ratelimit-remaining-requests: 0 and Retry-After (a spent quota)
    SERVER_ERROR = "server_error"  # 5xx
    SLOW = "slow"  # answers correctly after an extra delay
    TIMEOUT = "timeout"  # answers only after the client has given up
    DISCONNECT = "disconnect"  # closes the connection without an answer
    MALFORMED_JSON = "malformed_json"  # content is not JSON
    SCHEMA_INVALID = "schema_invalid"  # JSON, but not the asked shape
    TRUNCATED = "truncated"  # finish_reason length, content cut in half
    REFUSAL = "refusal"  # message.refusal set, no content
    CONTENT_FILTER = "content_filter"  # finish_reason content_filter, no content
    UNAUTHORIZED = "unauthorized"  # 401 (or ``status`` 403) whose body echoes the presented key


# Faults that only make sense for a chat answer.
CONTENT_FAULTS = {
    FaultKind.MALFORMED_JSON,
    FaultKind.SCHEMA_INVALID,
    FaultKind.TRUNCATED,
    FaultKind.REFUSAL,
    FaultKind.CONTENT_FILTER,
}


@dataclass(frozen=True)
class Fault:
    kind: FaultKind
    retry_after: float | None = None  # RATE_LIMIT / SERVER_ERROR: seconds to announce
    retry_after_ms: bool = False  # announce with retry-after-ms instead of retry-after
    delay: float = 0.0  # SLOW: extra seconds; TIMEOUT: seconds before a (too late) answer
    status: int = 500  # SERVER_ERROR status
    endpoint: str = "chat"  # "chat", "embeddings" or "any"
    message: str = ""  # REFUSAL text
    match: str = ""  # scripted faults: only for requests whose JSON body contains this text

    @classmethod
    def rate_limit(
        cls, retry_after: float | None = 0.05, *, ms: bool = False, endpoint: str = "chat"
    ) -> Fault:
        return cls(
            FaultKind.RATE_LIMIT, retry_after=retry_after, retry_after_ms=ms, endpoint=endpoint
        )

    @classmethod
    def quota(cls, retry_after: float | None = 1.0, *, endpoint: str = "chat") -> Fault:
        """A 429 that says the quota is spent: ``x-ratelimit-remaining-requests: 0``."""
        return cls(FaultKind.QUOTA, retry_after=retry_after, endpoint=endpoint)

    @classmethod
    def server_error(cls, status: int = 500, *, endpoint: str = "chat") -> Fault:
        return cls(FaultKind.SERVER_ERROR, status=status, endpoint=endpoint)

    @classmethod
    def slow(cls, delay: float, *, endpoint: str = "chat") -> Fault:
        return cls(FaultKind.SLOW, delay=delay, endpoint=endpoint)

    @classmethod
    def timeout(cls, delay: float = 30.0, *, endpoint: str = "chat") -> Fault:
        return cls(FaultKind.TIMEOUT, delay=delay, endpoint=endpoint)

    @classmethod
    def disconnect(cls, *, endpoint: str = "chat") -> Fault:
        return cls(FaultKind.DISCONNECT, endpoint=endpoint)

    @classmethod
    def malformed_json(cls) -> Fault:
        return cls(FaultKind.MALFORMED_JSON)

    @classmethod
    def schema_invalid(cls) -> Fault:
        return cls(FaultKind.SCHEMA_INVALID)

    @classmethod
    def truncated(cls) -> Fault:
        return cls(FaultKind.TRUNCATED)

    @classmethod
    def refusal(cls, message: str = "I'm sorry, but I can't help with that request.") -> Fault:
        return cls(FaultKind.REFUSAL, message=message)

    @classmethod
    def content_filter(cls) -> Fault:
        return cls(FaultKind.CONTENT_FILTER)

    @classmethod
    def unauthorized(cls, status: int = 401, *, endpoint: str = "chat") -> Fault:
        """The key is refused (revoked mid-run); the error body repeats it, as careless servers do."""
        return cls(FaultKind.UNAUTHORIZED, status=status, endpoint=endpoint)

    @classmethod
    def of(cls, kind: FaultKind) -> Fault:
        """The default fault of a kind (used for probabilistic injection)."""
        return {
            FaultKind.RATE_LIMIT: cls.rate_limit(),
            FaultKind.QUOTA: cls.quota(),
            FaultKind.SERVER_ERROR: cls.server_error(),
            FaultKind.SLOW: cls.slow(0.05),
            FaultKind.TIMEOUT: cls.timeout(),
            FaultKind.DISCONNECT: cls.disconnect(),
        }.get(kind, cls(kind))

    def matching(self, text: str) -> Fault:
        """This fault, for the next request whose body contains ``text`` (e.g. one batch line)."""
        return replace(self, match=text)

    def applies_to(self, endpoint: str, body: Any = None) -> bool:
        if self.endpoint not in ("any", endpoint):
            return False
        return not self.match or self.match in json.dumps(body, ensure_ascii=False)
