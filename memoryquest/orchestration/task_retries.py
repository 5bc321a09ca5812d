"""When Prefect may run a failed task again: for infrastructure failures only.

The client retries every LLM call itself, with backoff, Retry-After and a
circuit breaker (:mod:`memoryquest.llm.client`). A Prefect task retry on top
of that repeats the whole stage group and every one of the client's attempts
(an outage became 3 × 7 attempts of one request, and a refused key was sent
three times), and it cannot fix anything the client gave up on. Nor can it
fix a user error (a bad setting, an unreadable persona, a bug): the second
attempt fails like the first.

What another attempt can fix is the machine under the task: a dropped
connection (to the Prefect API, a Dask peer, a shared disk), an I/O error, a
process pool whose worker died. Those, and only those, are retried.

Only the error the task raised is looked at, not its causes: an
:class:`~memoryquest.llm.errors.LLMError` caused by a connection error is
the client's verdict after its own retries, and a ``ValueError`` caused by an
``OSError`` (a persona file that cannot be read) is the user's to fix.
"""

from __future__ import annotations

from concurrent.futures import BrokenExecutor
from typing import Any

import httpx

from memoryquest.llm.errors import LLMError

INFRASTRUCTURE_ERRORS: tuple[type[BaseException], ...] = (
    OSError,  # connections (ConnectionError, TimeoutError, Dask's CommClosedError), disks, files
    EOFError,  # a pipe to another process closed mid-message
    BrokenExecutor,  # a process or thread pool whose worker died
    httpx.TransportError,  # the Prefect API (or another HTTP service the task calls) unreachable
)
"""Errors a task may be retried for: the machine failed, not the work."""


def is_infrastructure_failure(error: BaseException) -> bool:
    """True when ``error`` is a failure of the machine another attempt may not meet again."""
    if isinstance(error, LLMError):  # the client has retried it already, or retrying cannot help
        return False
    return isinstance(error, INFRASTRUCTURE_ERRORS)


def retry_on_infrastructure_failure(task: Any, task_run: Any, state: Any) -> bool:
    """A Prefect ``retry_condition_fn``: retry the task only for an infrastructure failure.

    Prefect hands over the failed state; when the task raised, its ``data``
    is the exception (a task that returned a failed state is not retried).
    """
    error = getattr(state, "data", None)
    return isinstance(error, BaseException) and is_infrastructure_failure(error)


__all__ = ["INFRASTRUCTURE_ERRORS", "is_infrastructure_failure", "retry_on_infrastructure_failure"]
