"""OpenAI's Files and Batches API (and Azure's), as the batch lifecycle's :class:`BatchAPI`.

One batch is a JSONL file of ``/v1/chat/completions`` bodies built exactly
like online requests (same messages, parameters and strict
``response_format``: :meth:`OpenAIChatBackend.request_body`), each line's
``custom_id`` being the request's cache key. The file is uploaded (purpose
``batch``) and the batch created (completion window ``24h``); its output and
error files are read line by line into :class:`LineOutcome`. Each call is one
attempt through the SDK (``max_retries=0``) whose exceptions become backend
errors (:func:`translate_error`), retried by the lifecycle like any other
call to the endpoint.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, Final, TypeVar

from memoryquest.llm.backends import ChatBackend, ChatCall
from memoryquest.llm.batch_api import BatchFault, BatchPage, LineOutcome, RemoteBatch
from memoryquest.llm.batch_queue import Line, line_tokens
from memoryquest.llm.errors import LLMConfigurationError
from memoryquest.llm.openai_backend import OpenAIChatBackend, chat_result
from memoryquest.llm.openai_errors import RESPONSE_FORMAT_WORDS, translate_error

if TYPE_CHECKING:
    from openai import AsyncOpenAI
    from openai.types import Batch

T = TypeVar("T")

# A batch line has no HTTP headers: the fake server reads the hints
# (memoryquest.llm.hints) from this line field. Sent only with endpoint.simulator_hints.
HINTS_FIELD = "x_memoryquest_headers"
OPENAI_CHAT_PATH: Final = "/v1/chat/completions"
# Azure names the chat path without /v1, a value the SDK's type for ``endpoint`` does not list.
AZURE_CHAT_PATH = "/chat/completions"


def openai_batch_api(backend: ChatBackend) -> OpenAIBatchAPI:
    """The Batch API of ``backend``'s endpoint; only the openai and azure backends have one."""
    if not isinstance(backend, OpenAIChatBackend):
        raise LLMConfigurationError(
            f"endpoint.batch needs the openai or azure backend; backend {backend.name!r} has no Batch API"
        )
    return OpenAIBatchAPI(backend)


class OpenAIBatchAPI:
    """Batch files and batches on the chat backend's endpoint, through its SDK client."""

    def __init__(self, backend: OpenAIChatBackend) -> None:
        self.backend = backend
        self.azure = backend.name == "azure"
        self.url = AZURE_CHAT_PATH if self.azure else OPENAI_CHAT_PATH

    def line(self, custom_id: str, call: ChatCall) -> tuple[bytes, Line]:
        """The online request body as a JSONL line (``custom_id``: the cache key), and its size."""
        body = dict(self.backend.request_body(call))
        hints = body.pop("extra_headers", None)
        body.update(body.pop("extra_body", None) or {})
        line: dict[str, Any] = {
            "custom_id": custom_id,
            "method": "POST",
            "url": self.url,
            "body": body,
        }
        if hints and self.backend.send_variables:
            line[HINTS_FIELD] = hints
        encoded = (json.dumps(line, ensure_ascii=False) + "\n").encode("utf-8")
        return encoded, Line(len(encoded), *line_tokens(body))

    async def upload(self, name: str, content: bytes, timeout: float) -> str:
        uploaded = await self._attempt(
            lambda sdk: sdk.files.create(
                file=(name, content, "application/jsonl"), purpose="batch", timeout=timeout
            )
        )
        return uploaded.id

    async def create(self, input_file_id: str, round_number: int) -> str:
        batch = await self._attempt(
            lambda sdk: sdk.batches.create(
                input_file_id=input_file_id,
                endpoint=OPENAI_CHAT_PATH,
                completion_window="24h",
                metadata={"source": "memoryquest", "round": str(round_number)},
                extra_body={"endpoint": AZURE_CHAT_PATH} if self.azure else None,
            )
        )
        return batch.id

    async def retrieve(self, batch_id: str) -> RemoteBatch:
        return _remote(await self._attempt(lambda sdk: sdk.batches.retrieve(batch_id)))

    async def page(self, after: str | None) -> BatchPage:
        from openai import omit

        page = await self._attempt(
            lambda sdk: sdk.batches.list(limit=100, after=after if after else omit)
        )
        return BatchPage([_remote(batch) for batch in page.data], bool(page.has_more))

    async def download(self, file_id: str, timeout: float) -> str:
        content = await self._attempt(lambda sdk: sdk.files.content(file_id, timeout=timeout))
        return content.text

    def outcomes(self, text: str) -> dict[str, LineOutcome]:
        outcomes: dict[str, LineOutcome] = {}
        for raw in text.splitlines():
            if raw.strip():
                record = json.loads(raw)
                outcomes[str(record.get("custom_id"))] = _outcome(record)
        return outcomes

    async def _attempt(self, send: Callable[[AsyncOpenAI], Awaitable[T]]) -> T:
        """One SDK call; its exception as a backend error."""
        import openai

        try:
            return await send(self.backend.sdk_client())
        except openai.OpenAIError as exc:
            raise translate_error(exc) from exc


def _remote(batch: Batch) -> RemoteBatch:
    counts = batch.request_counts
    errors = batch.errors.data if batch.errors and batch.errors.data else []
    return RemoteBatch(
        id=batch.id,
        status=batch.status,
        input_file_id=batch.input_file_id,
        output_file_id=batch.output_file_id,
        error_file_id=batch.error_file_id,
        faults=tuple(BatchFault(e.line, e.code, e.message) for e in errors),
        finished_requests=counts.completed + counts.failed if counts else None,
        total_requests=counts.total if counts else None,
    )


def _outcome(record: dict[str, Any]) -> LineOutcome:
    """One output or error line: a 200's answer, or the status and error of a line without one."""
    response = record.get("response")
    status = response.get("status_code") if isinstance(response, dict) else None
    status = status if isinstance(status, int) else None
    if status == 200:
        assert isinstance(response, dict)
        body = response.get("body")
        if isinstance(body, dict) and body.get("choices"):
            return LineOutcome(200, chat_result(body))
        return LineOutcome(200)  # an answer without choices
    error = _error_of(record, response)
    code = str(error["code"]) if error.get("code") else None
    message = str(error["message"]) if error.get("message") else None
    said = f"{message or code or ''} {error.get('param') or ''}".lower()
    return LineOutcome(
        status,
        code=code,
        message=message,
        refuses_format=any(word in said for word in RESPONSE_FORMAT_WORDS),
    )


def _error_of(record: dict[str, Any], response: Any) -> dict[str, Any]:
    if isinstance(response, dict):
        body = response.get("body")
        if isinstance(body, dict) and isinstance(body.get("error"), dict):
            return dict(body["error"])
    if isinstance(record.get("error"), dict):
        return dict(record["error"])
    return {}
