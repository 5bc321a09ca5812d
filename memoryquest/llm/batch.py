"""OpenAI Batch API mode: a stage's fan-out as one batch, at the batch price, resumable.

With ``endpoint.batch`` on (OpenAI or Azure backends), ``ModelClient.complete_all``
sends the requests missing from the cache as ONE batch: a JSONL file of
``/v1/chat/completions`` bodies built exactly like online requests (same
messages, parameters and strict ``response_format``), each line's
``custom_id`` being the request's cache key. The file is uploaded (purpose
``batch``), the batch created (completion window ``24h``) and polled with a
growing interval (``endpoint.batch_poll_seconds``, x1.5 per poll, at most
``endpoint.batch_max_poll_seconds``); then the output and error files are
read and every answer line goes through the client's own checks
(``ModelClient._judge``: refusal, ``finish_reason`` length or content_filter,
schema validation, repair turn), so a batch answer is held to the same rules
as an online one. Good answers go to the per-request cache at once. Only a
set above the service's per-batch limits (50,000 lines, ~200 MB) is split
into several batches, sent and polled together.

Failed rows, and only those, go out again as a new, smaller batch: a
schema-invalid answer with its repair turn, a truncated one with twice the
output budget, a refusal or filtered answer as it was, a 429/5xx/expired row
as it was. At most ``endpoint.batch_rounds`` rounds of batches are sent per
request set (the first included); rows still unanswered after that are
finished ONLINE, at the full price, through the ordinary retry loop,
continuing from where their batch attempts left off. A row whose answer
exhausts its retries (three refusals, say) fails with the same
``LLMOutputError`` the online path raises; a request the API rejects for good
(HTTP 400/401/404, or a batch whose input the service rejects) fails with
``LLMConfigurationError``; the open rows of a batch someone cancelled fail
with ``LLMConfigurationError`` and are not sent again. ``complete_all``
raises the first error, in request order, only after every other answer
has been cached, or returns the errors in place with
``return_exceptions=True``.

Resuming: before a batch is created, a state file
``<cache>/batches/<sha256 of the request set's cache keys>.json`` records
its input file id and custom_ids, then its batch id. A restarted run asking
for the same request set finds it and polls that batch instead of sending a
new one (if the crash came between creating the batch and recording its id,
the batch is found again by its input file); rows answered before the crash
are in the cache and never sent again. The file is removed when the set is
done. A run asking for a different set (another persona selection, say)
does not see the old batch: it is still billed but not read. Without a cache
(``cache.enabled = false``) nothing is recorded and nothing can resume.

Accounting: every output line is billed with its own ``usage`` at the batch
price (``PriceTable.batch_multiplier``) to the stage of its request; online
fallback calls are billed in full. A stage's ``seconds`` include the wait.

A single ``ModelClient.complete`` call always goes online: one request does
not justify a wait of up to 24 hours. Embeddings always go online.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dt
import hashlib
import json
import logging
import os
import tempfile
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from pydantic import BaseModel, ValidationError

from memoryquest.llm.backends import ChatCall, ChatResult, OutputMode
from memoryquest.llm.errors import LLMConfigurationError, LLMError, PermanentBackendError
from memoryquest.llm.request import LLMRequest

if TYPE_CHECKING:
    from memoryquest.llm.client import Attempt, ModelClient

log = logging.getLogger(__name__)

T = TypeVar("T")

# A batch line has no HTTP headers: the loopback test server reads the hints
# (memoryquest.llm.hints) from this line field. Only sent to loopback servers.
HINTS_FIELD = "x_memoryquest_headers"
STATE_FORMAT = 1
TERMINAL_STATUSES = frozenset({"completed", "failed", "expired", "cancelled"})
_RESPONSE_FORMAT_WORDS = ("response_format", "json_schema", "json_object", "structured output", "strict")


@dataclass(frozen=True)
class BatchOptions:
    """How batches are polled and how often failed rows are sent again (``endpoint.batch_*``)."""

    poll_seconds: float = 30.0  # first wait between two polls
    max_poll_seconds: float = 600.0  # the wait grows by poll_backoff up to this
    poll_backoff: float = 1.5
    rounds: int = 3  # rounds of batches per request set, the first included; then online
    # The service's limits per batch; a larger set is split into several batches per round.
    max_lines: int = 50_000
    max_bytes: int = 190 * 2**20
    transfer_seconds: float = 600.0  # timeout of one upload or download


@dataclass
class _Row:
    """One distinct request (by cache key) of the set."""

    key: str
    attempt: Attempt
    value: BaseModel | None = None
    error: LLMError | None = None
    call: ChatCall | None = None  # what its latest batch line asked
    problem: str = ""  # why its latest batch line did not count (for the log)

    @property
    def done(self) -> bool:
        return self.value is not None or self.error is not None


class BatchRunner:
    """Runs ``ModelClient.complete_all`` through the Batch API; built by the client itself."""

    def __init__(self, client: ModelClient, options: BatchOptions) -> None:
        backend = client.chat_backend
        if not callable(getattr(backend, "request_body", None)) or not callable(getattr(backend, "sdk_client", None)):
            raise LLMConfigurationError(
                f"endpoint.batch needs the openai or azure backend; backend {backend.name!r} has no Batch API"
            )
        if options.rounds < 1:
            raise LLMConfigurationError(f"endpoint.batch_rounds must be at least 1, got {options.rounds}")
        self.client = client
        self.options = options
        self.url = "/chat/completions" if backend.name == "azure" else "/v1/chat/completions"

    # --- the set --------------------------------------------------------------------------

    async def complete_all(self, requests: Sequence[LLMRequest[Any]], *, return_exceptions: bool = False) -> list[Any]:
        client = self.client
        with contextlib.ExitStack() as stack:
            for stage in dict.fromkeys(r.stage for r in requests):
                stack.enter_context(client.ledger.timing(stage))
            rows, order = self._rows(requests)
            open_rows = [row for row in rows.values() if not row.done]
            if open_rows:
                await self._settle(rows, open_rows)
        answers: list[Any] = []
        first_error: LLMError | None = None
        for request, key in zip(requests, order, strict=True):
            row = rows[key]
            if row.error is not None:
                first_error = first_error or row.error
                answers.append(row.error)
            elif isinstance(row.value, request.response_model):
                answers.append(row.value)
            else:  # a duplicate asking for another class with the same schema
                assert row.value is not None
                answers.append(request.response_model.model_validate(row.value.model_dump()))
        if first_error is not None and not return_exceptions:
            raise first_error
        return answers

    def _rows(self, requests: Sequence[LLMRequest[Any]]) -> tuple[dict[str, _Row], list[str]]:
        """One row per distinct cache key; cached answers filled in."""
        client = self.client
        seed_base = int(getattr(client.chat_backend, "seed", 0))
        rows: dict[str, _Row] = {}
        order: list[str] = []
        for request in requests:
            template = client._template(request)
            messages = template.render(request.variables)
            seed = seed_base + request.seed
            key = client._key(request, template, messages, seed)
            order.append(key)
            if key in rows:
                client.ledger.cache_hits(request.stage)  # asked twice: sent once, like online
                continue
            row = rows[key] = _Row(key, client._attempt(request, template, messages, seed))
            row.value = self._cached(key, request)
            if row.value is not None:
                client.ledger.cache_hits(request.stage)
        return rows, order

    def _cached(self, key: str, request: LLMRequest[Any]) -> BaseModel | None:
        cache = self.client.cache
        if cache is None or not self.client._cache_on():
            return None
        entry = cache.get_chat(key)
        if entry is None:
            return None
        try:
            return request.response_model.model_validate_json(entry["text"])
        except ValidationError:
            return None  # the model's validators changed since: ask again

    def _state_path(self, rows: dict[str, _Row]) -> Path | None:
        cache = self.client.cache
        if cache is None or not self.client._cache_on():
            return None
        digest = hashlib.sha256("\n".join(sorted(rows)).encode("ascii")).hexdigest()
        return cache.directory / "batches" / f"{digest}.json"

    async def _settle(self, rows: dict[str, _Row], open_rows: list[_Row]) -> None:
        """Rounds of batches until every row is answered or failed for good, or the rounds are used up."""
        path = self._state_path(rows)
        state = _read_state(path)
        pending = {row.key: row for row in open_rows}
        while pending:
            resumed = bool(state["batches"])
            if not resumed:
                if state["rounds"] >= self.options.rounds:
                    break
                state["rounds"] += 1
                for part in self._split(list(pending.values())):
                    await self._upload(part, path, state)  # each recorded before its batch exists
            for inflight in state["batches"]:
                if inflight.get("batch_id") is None:
                    # A crash may have come between creating the batch and recording its id.
                    found = await self._find(inflight["input_file_id"]) if resumed else None
                    inflight["batch_id"] = found or await self._create(inflight["input_file_id"], state["rounds"])
                    _write_state(path, state)
                verb = "resuming" if resumed else "submitted"
                log.info(
                    "batch %s: %s, %d requests (round %d of at most %d)",
                    inflight["batch_id"], verb, len(inflight["custom_ids"]), state["rounds"], self.options.rounds,
                )
            batches = await asyncio.gather(*(self._poll(b["batch_id"], resumed=resumed) for b in state["batches"]))
            rejected: LLMConfigurationError | None = None
            for inflight, batch in zip(state["batches"], batches, strict=True):
                if batch is None:  # the recorded batch is gone: its rows go out again
                    continue
                try:
                    await self._collect(batch, [rows[key] for key in inflight["custom_ids"] if key in rows])
                except LLMConfigurationError as exc:
                    rejected = rejected or exc  # still read the other batches of the round: they are paid for
            state["batches"] = []
            _write_state(path, state)
            if rejected is not None:
                raise rejected
            pending = {key: row for key, row in pending.items() if not row.done}
            if pending:
                problems = "; ".join(sorted({r.problem for r in pending.values() if r.problem}))
                log.info("%d requests to send again (%s)", len(pending), problems)
        if pending:
            log.info("%d requests still unanswered after %d batches: finishing them online", len(pending), state["rounds"])
            await asyncio.gather(*(self._online(row) for row in pending.values()))
        if path is not None:
            path.unlink(missing_ok=True)

    # --- one batch ------------------------------------------------------------------------

    def _line(self, row: _Row) -> bytes:
        """The JSONL line of a row: the online request body, with ``custom_id`` = cache key."""
        client = self.client
        backend: Any = client.chat_backend
        row.call = client._chat_call(row.attempt)
        body = dict(backend.request_body(row.call))
        hints = body.pop("extra_headers", None)
        body.update(body.pop("extra_body", None) or {})
        line: dict[str, Any] = {"custom_id": row.key, "method": "POST", "url": self.url, "body": body}
        if hints and getattr(backend, "send_variables", False):
            line[HINTS_FIELD] = hints
        return (json.dumps(line, ensure_ascii=False) + "\n").encode("utf-8")

    def _split(self, batch_rows: list[_Row]) -> list[tuple[list[_Row], bytes]]:
        """The rows as input files within the service's per-batch limits (one file unless very large)."""
        parts: list[tuple[list[_Row], list[bytes]]] = [([], [])]
        size = 0
        for row in batch_rows:
            line = self._line(row)
            if len(line) > self.options.max_bytes:
                raise LLMConfigurationError(
                    f"{row.attempt.where}: one request is {len(line)} bytes, above the batch input limit "
                    f"of {self.options.max_bytes}"
                )
            part_rows, part_lines = parts[-1]
            if part_rows and (len(part_rows) >= self.options.max_lines or size + len(line) > self.options.max_bytes):
                parts.append(([], []))
                part_rows, part_lines = parts[-1]
                size = 0
            part_rows.append(row)
            part_lines.append(line)
            size += len(line)
        return [(part_rows, b"".join(part_lines)) for part_rows, part_lines in parts if part_rows]

    async def _upload(self, part: tuple[list[_Row], bytes], path: Path | None, state: dict[str, Any]) -> None:
        batch_rows, content = part
        name = f"memoryquest-{state['set'][:12]}-round{state['rounds']}-part{len(state['batches']) + 1}.jsonl"
        uploaded = await self._sdk(
            lambda sdk: sdk.files.create(
                file=(name, content, "application/jsonl"), purpose="batch", timeout=self.options.transfer_seconds
            ),
            f"uploading batch input {name}",
        )
        state["batches"].append(
            {
                "input_file_id": uploaded.id,
                "batch_id": None,
                "custom_ids": [row.key for row in batch_rows],
                "round": state["rounds"],
                "created": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
            }
        )
        _write_state(path, state)  # before the batch exists: a crash from here on resumes

    async def _create(self, input_file_id: str, round_number: int) -> str:
        batch = await self._sdk(
            lambda sdk: sdk.batches.create(
                input_file_id=input_file_id,
                endpoint=self.url,
                completion_window="24h",
                metadata={"source": "memoryquest", "round": str(round_number)},
            ),
            f"creating a batch from {input_file_id}",
        )
        return str(batch.id)

    async def _find(self, input_file_id: str) -> str | None:
        """A recent batch already made from this input file, if any."""
        page = await self._sdk(lambda sdk: sdk.batches.list(limit=100), "listing recent batches")
        for batch in page.data:
            if batch.input_file_id == input_file_id and batch.status not in ("failed", "cancelled", "cancelling"):
                return str(batch.id)
        return None

    async def _poll(self, batch_id: str, *, resumed: bool) -> Any | None:
        """The batch once it has finished; None when a resumed batch no longer exists."""
        delay = self.options.poll_seconds
        while True:
            try:
                batch = await self._sdk(lambda sdk: sdk.batches.retrieve(batch_id), f"polling batch {batch_id}")
            except LLMConfigurationError as exc:
                cause = exc.__cause__
                if resumed and isinstance(cause, PermanentBackendError) and cause.status == 404:
                    log.warning("batch %s recorded in the cache no longer exists: sending its requests again", batch_id)
                    return None
                raise
            if batch.status in TERMINAL_STATUSES:
                return batch
            counts = batch.request_counts
            log.info(
                "batch %s: %s%s", batch_id, batch.status,
                f" ({counts.completed + counts.failed}/{counts.total} done)" if counts else "",
            )
            await asyncio.sleep(delay)
            delay = min(self.options.max_poll_seconds, delay * self.options.poll_backoff)

    async def _collect(self, batch: Any, batch_rows: list[_Row]) -> None:
        if batch.status == "failed":
            errors = batch.errors.data if batch.errors and batch.errors.data else []
            detail = "; ".join(f"line {e.line}: {e.code}: {e.message}" for e in errors) or "no reason given"
            raise LLMConfigurationError(f"the Batch API rejected batch {batch.id} (input {batch.input_file_id}): {detail}")
        records: dict[str, dict[str, Any]] = {}
        for file_id in (batch.output_file_id, batch.error_file_id):
            if file_id:
                for raw in (await self._download(file_id)).splitlines():
                    if raw.strip():
                        record = json.loads(raw)
                        records[str(record.get("custom_id"))] = record
        for row in batch_rows:
            self._settle_line(row, records.get(row.key), batch.status)
        if batch.status == "cancelled":  # someone stopped it on purpose: do not send its rows again
            for row in batch_rows:
                if not row.done:
                    row.error = LLMConfigurationError(
                        f"{row.attempt.where}: batch {batch.id} was cancelled before this request was answered"
                    )

    async def _download(self, file_id: str) -> str:
        content = await self._sdk(
            lambda sdk: sdk.files.content(file_id, timeout=self.options.transfer_seconds),
            f"downloading batch file {file_id}",
        )
        return str(content.text)

    def _settle_line(self, row: _Row, record: dict[str, Any] | None, batch_status: str) -> None:
        """One output or error line: the answer checked and cached, or the row left for the next round."""
        client = self.client
        attempt = row.attempt
        call = row.call or client._chat_call(attempt)
        response = record.get("response") if record else None
        status = response.get("status_code") if isinstance(response, dict) else None
        if status == 200:
            assert isinstance(response, dict)
            result = _result_from_body(response.get("body"))
            if result is None:
                row.problem = "an answer without choices"
                return
            prompt_tokens = 0
            if not result.usage_reported:
                prompt_tokens = client._chat_tokens.count_messages(call.messages)
                if call.mode is OutputMode.JSON_SCHEMA:
                    prompt_tokens += client._schema_tokens(call)
            cost = client._account_chat(attempt.request.stage, result, prompt_tokens, client._chat_tokens, batch=True)
            if row.done:  # answered meanwhile (a resumed batch): billed, nothing more to do
                return
            attempt.add(cost)
            try:
                value = client._judge(attempt, result)
            except LLMError as exc:
                row.error = exc
                return
            if value is None:
                row.problem = _why_retried(result)
                return
            row.value = value
            if client._cache_on():
                client._remember(row.key, attempt.template, value.model_dump_json(), result.model, attempt.spent)
            return
        if row.done:
            return
        error = _error_of(record, response)
        message = str(error.get("message") or error.get("code") or f"no answer line (batch {batch_status})")
        if status is None or status in (408, 409, 429) or status >= 500:
            row.problem = f"HTTP {status}" if status else str(error.get("code") or "no answer")
            return
        text = f"{message} {error.get('param') or ''}".lower()
        if status == 400 and call.mode is not OutputMode.TEXT and any(w in text for w in _RESPONSE_FORMAT_WORDS):
            try:
                client._format_rejected(call, attempt.where, PermanentBackendError(f"HTTP 400: {message}", status=400))
            except LLMConfigurationError as exc:
                row.error = exc
            row.problem = f"output format {call.mode.value} rejected"
            return
        row.error = LLMConfigurationError(f"{attempt.where}: the Batch API rejected the request: HTTP {status}: {message}")

    async def _online(self, row: _Row) -> None:
        client = self.client
        try:
            value, result, spent = await client._ask_from(row.attempt)
        except LLMError as exc:
            row.error = exc
            return
        row.value = value
        if client._cache_on():
            client._remember(row.key, row.attempt.template, value.model_dump_json(), result.model, spent)

    async def _sdk(self, send: Callable[[Any], Awaitable[T]], where: str) -> T:
        """One Files/Batches API call with the client's retries, backoff and circuit breaker."""
        import openai

        from memoryquest.llm.openai_backend import translate_error

        client = self.client
        backend: Any = client.chat_backend

        async def attempt() -> T:
            try:
                return await send(backend.sdk_client())
            except openai.OpenAIError as exc:
                raise translate_error(exc) from exc

        if client.limiter is None:
            return await attempt()
        return await client._call_endpoint(attempt, reserve=0, used=lambda _: 0, where=where)


# --- helpers --------------------------------------------------------------------------------


def _result_from_body(body: Any) -> ChatResult | None:
    """A chat completion body from an output line, as the online backend would report it."""
    if not isinstance(body, dict) or not body.get("choices"):
        return None
    choice = body["choices"][0]
    message = choice.get("message") or {}
    usage = body.get("usage")
    usage = usage if isinstance(usage, dict) else None
    details = (usage or {}).get("prompt_tokens_details") or {}
    return ChatResult(
        text=message.get("content"),
        finish_reason=choice.get("finish_reason") or "stop",
        input_tokens=int((usage or {}).get("prompt_tokens") or 0),
        output_tokens=int((usage or {}).get("completion_tokens") or 0),
        cached_tokens=int(details.get("cached_tokens") or 0),
        refusal=message.get("refusal"),
        usage_reported=usage is not None,
        model=body.get("model"),
    )


def _error_of(record: dict[str, Any] | None, response: Any) -> dict[str, Any]:
    if isinstance(response, dict):
        body = response.get("body")
        if isinstance(body, dict) and isinstance(body.get("error"), dict):
            return dict(body["error"])
    if record and isinstance(record.get("error"), dict):
        return dict(record["error"])
    return {}


def _why_retried(result: ChatResult) -> str:
    if result.refusal:
        return "refused"
    if result.finish_reason in ("length", "content_filter"):
        return f"finish_reason {result.finish_reason}"
    return "answer did not fit the schema"


def _read_state(path: Path | None) -> dict[str, Any]:
    """The recorded state of a request set; a fresh one when none (or an unreadable one) exists."""
    digest = path.stem if path is not None else "uncached"
    fresh: dict[str, Any] = {"format": STATE_FORMAT, "set": digest, "rounds": 0, "batches": []}
    if path is None:
        return fresh
    try:
        state = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return fresh
    except (OSError, ValueError) as exc:
        log.warning("ignoring unreadable batch state %s: %s", path, exc)
        return fresh
    if not isinstance(state, dict) or state.get("format") != STATE_FORMAT or not isinstance(state.get("rounds"), int):
        return fresh
    batches = state.get("batches")
    if not isinstance(batches, list) or not all(
        isinstance(b, dict) and b.get("input_file_id") and isinstance(b.get("custom_ids"), list) for b in batches
    ):
        log.warning("ignoring malformed batch state %s", path)
        return fresh
    return state


def _write_state(path: Path | None, state: dict[str, Any]) -> None:
    """Atomically, like the cache entries next to it."""
    if path is None:
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    handle, temp = tempfile.mkstemp(dir=path.parent, prefix=".tmp-", suffix=".json")
    try:
        with os.fdopen(handle, "w", encoding="utf-8") as out:
            json.dump(state, out, indent=1)
        os.replace(temp, path)
    except BaseException:
        Path(temp).unlink(missing_ok=True)
        raise
