"""One request to the fake servers and its answer: what a route is given (:class:`LoggedRequest`),
what it returns (:data:`Reply`), and the exceptions by which it answers with an API error, a 429,
silence or a hung-up connection instead.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, TypeVar

from memoryquest.testing.fake_openai.faults import FaultKind


@dataclass
class LoggedRequest:
    method: str
    path: str
    headers: dict[str, str]
    body: Any
    status: int = 0
    fault: FaultKind | None = None
    at: float = field(default_factory=time.monotonic)
    params: dict[str, str] = field(
        default_factory=dict
    )  # path parameters (``/v1/batches/{batch_id}``)
    upload: tuple[str, bytes] | None = None  # multipart file: (filename, content)
    query: dict[str, str] = field(default_factory=dict)  # the URL's query parameters (last value)
    early: bool = False  # a retry sent before the Retry-After it was given had elapsed

    @property
    def template_id(self) -> str | None:
        return self.headers.get("x-memoryquest-template")


Reply = tuple[int, Any, dict[str, str]]
"""What a route replies: the HTTP status, the JSON body and extra response headers."""

Route = Callable[[LoggedRequest, dict[str, str]], Reply]


class ErrorAnswer(Exception):
    def __init__(
        self, status: int, message: str, *, code: str | None = None, param: str | None = None
    ) -> None:
        super().__init__(message)
        self.status = status
        self.body = {
            "error": {
                "message": message,
                "type": "invalid_request_error",
                "param": param,
                "code": code,
            }
        }


_RowT = TypeVar("_RowT")


def found(rows: Mapping[str, _RowT], key: str, message: str, param: str) -> _RowT:
    """``rows[key]``, or the API's 404 with ``message``, naming the parameter ``param``."""
    row = rows.get(key)
    if row is None:
        raise ErrorAnswer(404, message, param=param)
    return row


def error_body(message: str, code: str) -> dict[str, Any]:
    return {"error": {"message": message, "type": "server_error", "param": None, "code": code}}


class RateLimited(Exception):
    """A 429; with ``quota`` (the per-minute limit, 0 when unknown) it carries the quota headers."""

    def __init__(self, retry_after: float | None, *, ms: bool, quota: float | None = None) -> None:
        super().__init__("rate limited")
        self.retry_after = retry_after
        self.headers: dict[str, str] = {}
        if quota is not None:
            self.headers["x-ratelimit-remaining-requests"] = "0"
            if quota:
                self.headers["x-ratelimit-limit-requests"] = f"{quota:g}"
        if retry_after is not None:
            if ms:
                self.headers["retry-after-ms"] = str(max(1, math.ceil(retry_after * 1000)))
            self.headers["retry-after"] = (
                str(max(1, math.ceil(retry_after))) if ms else f"{retry_after:g}"
            )


class Disconnect(Exception):
    pass


class Stall(Exception):
    """Reply nothing for ``delay`` seconds, then hang up (the client has timed out by then)."""

    def __init__(self, delay: float) -> None:
        super().__init__("stall")
        self.delay = delay
