"""What the batch lifecycle needs from a provider's batch API and from the chat exchange.

The lifecycle (:mod:`memoryquest.llm.batch`, :mod:`memoryquest.llm.batch_rounds`)
collects requests, submits them as batch files, polls, reads the answers and
hands them back; it knows neither the provider's wire format nor its SDK.
A provider's adapter (:mod:`memoryquest.llm.batch_openai` for OpenAI and
Azure) implements :class:`BatchAPI`: each of its calls is one attempt, and
the lifecycle sends it through the exchange's retries and circuit breaker.
Of the exchange, the lifecycle uses :class:`BatchExchange` alone.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol, TypeVar

from memoryquest.llm.accounting import UsageLedger
from memoryquest.llm.attempt import Attempt, Lookup
from memoryquest.llm.backends import ChatCall, ChatResult
from memoryquest.llm.batch_queue import Line
from memoryquest.llm.clock import Clock
from memoryquest.llm.request import LLMRequest

T = TypeVar("T")

TERMINAL_STATUSES = frozenset({"completed", "failed", "expired", "cancelled"})


@dataclass(frozen=True)
class BatchFault:
    """Why the provider failed a whole batch (one entry of its list of errors)."""

    line: int | None
    code: str | None
    message: str | None


@dataclass(frozen=True)
class RemoteBatch:
    """A batch as the provider reports it when polled or listed."""

    id: str
    status: str  # validating, in_progress, finalizing, cancelling, or one of TERMINAL_STATUSES
    input_file_id: str
    output_file_id: str | None = None
    error_file_id: str | None = None
    faults: tuple[BatchFault, ...] = ()
    finished_requests: int | None = None  # answered or failed so far; None when not reported
    total_requests: int | None = None


@dataclass(frozen=True)
class BatchPage:
    """One page of the project's batches, newest first."""

    batches: list[RemoteBatch]
    has_more: bool


@dataclass(frozen=True)
class LineOutcome:
    """One line of a batch's output or error file: the answer, or why there is none."""

    status: int | None = None  # HTTP status of the line's request; None when it has none
    result: ChatResult | None = None  # a 200's answer; None when it has no choices
    code: str | None = None
    message: str | None = None
    refuses_format: bool = False  # the error says the requested output format is refused


class BatchAPI(Protocol):
    """A provider's files-and-batches API: one attempt per call, errors as backend errors."""

    def line(self, custom_id: str, call: ChatCall) -> tuple[bytes, Line]:
        """``call`` as one line of a batch input file, and its size and prompt tokens."""
        ...

    async def upload(self, name: str, content: bytes, timeout: float) -> str:
        """Upload a batch input file; its id."""
        ...

    async def create(self, input_file_id: str, round_number: int) -> str:
        """Create a batch from an uploaded input file; its id."""
        ...

    async def retrieve(self, batch_id: str) -> RemoteBatch: ...

    async def page(self, after: str | None) -> BatchPage:
        """The project's batches, newest first, after the batch id ``after``."""
        ...

    async def download(self, file_id: str, timeout: float) -> str: ...

    def outcomes(self, text: str) -> dict[str, LineOutcome]:
        """The lines of an output or error file, by custom_id."""
        ...


class BatchExchange(Protocol):
    """The part of :class:`memoryquest.llm.exchange.ChatExchange` the batch lifecycle uses."""

    @property
    def clock(self) -> Clock: ...

    @property
    def ledger(self) -> UsageLedger: ...

    @property
    def cache_directory(self) -> Path | None:
        """Where the response cache lives, when answers are cached (the batch state files go there)."""
        ...

    def lookup(self, request: LLMRequest[Any]) -> Lookup: ...

    def next_call(self, attempt: Attempt) -> ChatCall: ...

    def account_batch_answer(self, call: ChatCall, result: ChatResult) -> dict[str, Any]: ...

    def judge(self, attempt: Attempt, result: ChatResult) -> Any | None: ...

    def format_rejected(self, call: ChatCall, where: str, exc: Exception) -> None: ...

    def remember(self, key: str, attempt: Attempt, text: str, model: str | None) -> None: ...

    async def ask_from(self, attempt: Attempt) -> tuple[Any, ChatResult, dict[str, Any]]: ...

    async def call_endpoint(
        self,
        send: Callable[[], Awaitable[T]],
        *,
        where: str,
        reserve: int = 0,
        used: Callable[[T], int] = ...,
    ) -> T: ...
