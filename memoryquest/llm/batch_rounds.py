"""The rounds of one collected set: submit, poll, retrieve, settle each line, then online.

A set's rows go out as batch input files within the per-batch limits
(50,000 lines, ~200 MB) and the prompt tokens the provider lets a project
hold in unfinished batches per model (``endpoint.batch_enqueued_tokens_max``,
:mod:`memoryquest.llm.batch_queue`); each is created once our batches in
flight leave it room, and a batch the provider refuses for that limit goes
again when an earlier one finishes. Polling waits with a growing interval
(``endpoint.batch_poll_seconds``, x1.5 per poll, at most
``endpoint.batch_max_poll_seconds``) through every status the service
reports (``validating``, ``in_progress``, ``finalizing``, ``cancelling``).
Then the output and error files are read and every answer line goes through
the exchange's own checks (``judge``: refusal, ``finish_reason`` length or
content_filter, schema validation, repair turn), so a batch answer is held to
the same rules as an online one; good answers go to the cache at once.

Failed rows, and only those, go out again as a new, smaller batch: a
schema-invalid answer with its repair turn, a truncated one with twice the
output budget, a refusal or filtered answer as it was, a 429/5xx/expired row
as it was. At most ``endpoint.batch_rounds`` rounds of batches are sent per
collected set (the first included); rows still unanswered after that are
finished ONLINE, at the full price, through the ordinary retry loop,
continuing from where their batch attempts left off. A request the API
rejects for good (HTTP 400/401/404, or a batch whose input the service
rejects) fails with ``LLMConfigurationError``; the open rows of a batch
someone cancelled fail with ``LLMConfigurationError`` and are not sent again.

Every output line is billed with its own ``usage`` at the batch price
(``PriceTable.batch_multiplier``) to the stage of its request when it is
read (lines of an adopted batch when their request asks for them). Every
call to the provider's API is one attempt of the adapter
(:class:`memoryquest.llm.batch_api.BatchAPI`) sent through the exchange's
retries, backoff and circuit breaker.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import functools
import logging
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, TypeVar

from memoryquest.llm.backends import ChatResult, OutputMode
from memoryquest.llm.batch_api import (
    TERMINAL_STATUSES,
    BatchAPI,
    BatchExchange,
    LineOutcome,
    RemoteBatch,
)
from memoryquest.llm.batch_queue import (
    BatchQueue,
    Line,
    is_token_limit_refusal,
    split_parts,
    stated_limit,
)
from memoryquest.llm.batch_sets import BatchOptions, Group, Part, Row, release_orphans, resolve_done
from memoryquest.llm.batch_state import write_state
from memoryquest.llm.errors import LLMConfigurationError, LLMError, PermanentBackendError

log = logging.getLogger(__name__)

T = TypeVar("T")


class BatchRounds:
    """Settles the sets a batch collector sends, through a provider's :class:`BatchAPI`."""

    def __init__(
        self, exchange: BatchExchange, api: BatchAPI, options: Callable[[], BatchOptions]
    ) -> None:
        self.exchange = exchange
        self.api = api
        self._options = options  # the processor's, read when used: a test may replace them
        # Lines of adopted batches whose request has not been asked yet: (line, batch status).
        self.unclaimed: dict[str, tuple[LineOutcome, str]] = {}

    @property
    def options(self) -> BatchOptions:
        return self._options()

    def claim(self, row: Row) -> None:
        """Settle ``row`` from a line an adopted batch answered before anyone asked for it, if any."""
        unclaimed = self.unclaimed.pop(row.key, None)
        if unclaimed is not None:
            self._settle_line(row, *unclaimed)

    async def settle(self, group: Group) -> None:
        """Rounds of batches until every row is answered or failed for good, or the rounds are used up."""
        rows, path, state = group.rows, group.path, group.state
        queue = group.collector.enqueued
        while True:
            pending = [row for row in rows.values() if not row.done]
            resumed = bool(state["batches"])
            if not resumed:
                if not pending or state["rounds"] >= self.options.rounds:
                    break
                state["rounds"] += 1
                for part in self._split(pending, queue):
                    await self._upload(part, path, state)  # each recorded before its batch exists
            batches = await asyncio.gather(
                *(
                    self._run(inflight, path, state, queue, resumed=resumed)
                    for inflight in state["batches"]
                )
            )
            rejected: LLMConfigurationError | None = None
            for inflight, batch in zip(state["batches"], batches, strict=True):
                if batch is None:  # gone, or refused for the queue limit: its rows go out again
                    continue
                try:
                    await self._collect(batch, inflight["custom_ids"], group)
                except LLMConfigurationError as exc:
                    rejected = (
                        rejected or exc
                    )  # still read the other batches of the round: they are paid for
            state["batches"] = []
            write_state(path, state)
            release_orphans(group)
            resolve_done(group)
            if rejected is not None:
                raise rejected
            open_rows = [row for row in rows.values() if not row.done]
            if open_rows:
                problems = "; ".join(sorted({r.problem for r in open_rows if r.problem}))
                log.info("%d requests to send again (%s)", len(open_rows), problems)
        if pending:
            log.info(
                "%d requests still unanswered after %d batches: finishing them online",
                len(pending),
                state["rounds"],
            )
            await asyncio.gather(*(self._online(row) for row in pending))
            resolve_done(group)
        if path is not None:
            path.unlink(missing_ok=True)

    async def _run(
        self,
        inflight: dict[str, Any],
        path: Path | None,
        state: dict[str, Any],
        queue: BatchQueue,
        *,
        resumed: bool,
    ) -> RemoteBatch | None:
        """One batch of the round, created once the provider's queue has room for it, polled to its end.

        Refused for the enqueued-token limit, it goes again once one of our batches has finished;
        refused with none of ours in flight, None: its rows wait for the next round (see
        :mod:`memoryquest.llm.batch_queue`). None too for a resumed batch that no longer exists.
        """
        tokens: dict[str, int] = inflight.get("tokens") or {}

        async def may_go_again(messages: list[str | None]) -> bool:
            """Refused for the enqueued-token limit (``messages`` may state it): wait for room."""
            return await queue.refused(
                tokens,
                inflight["input_file_id"],
                len(inflight["custom_ids"]),
                stated_limit(messages),
            )

        while True:
            batch_id = inflight.get("batch_id")
            if batch_id is None and resumed:
                # A crash may have come between creating the batch and recording its id.
                batch_id = await self._find(inflight["input_file_id"])
            if batch_id is None:
                await queue.acquire(tokens)
                try:
                    batch_id = await self._create(inflight["input_file_id"], state["rounds"])
                except BaseException as exc:  # cancelled too: the tokens were never enqueued
                    queue.release(tokens)
                    if not isinstance(exc, LLMError) or not is_token_limit_refusal(
                        [(None, str(exc)), (None, str(exc.__cause__))]
                    ):
                        raise
                    if not await may_go_again([str(exc), str(exc.__cause__)]):
                        return None
                    resumed = False
                    continue
            else:
                queue.hold(tokens)
            if inflight.get("batch_id") != batch_id:
                inflight["batch_id"] = batch_id
                write_state(path, state)
            log.info(
                "batch %s: %s, %d requests (round %d of at most %d)",
                batch_id,
                "resuming" if resumed else "submitted",
                len(inflight["custom_ids"]),
                state["rounds"],
                self.options.rounds,
            )
            try:
                batch = await self._poll(batch_id, resumed=resumed)
            finally:
                queue.release(tokens)
            if batch is None or not _failed_for_the_token_limit(batch):
                return batch
            inflight["batch_id"] = None
            write_state(path, state)
            if not await may_go_again([fault.message for fault in batch.faults]):
                return None
            resumed = False

    # --- one batch ------------------------------------------------------------------------

    def _line(self, row: Row) -> tuple[bytes, Line]:
        """The batch input line of a row (its latest call, ``custom_id`` = cache key), and its size."""
        row.call = self.exchange.next_call(row.attempt)
        return self.api.line(row.key, row.call)

    def _split(self, batch_rows: list[Row], queue: BatchQueue) -> list[Part]:
        """The rows as input files within the per-batch limits and the provider's queue limit."""
        lines = [self._line(row) for row in batch_rows]
        for row, (encoded, _) in zip(batch_rows, lines, strict=True):
            if len(encoded) > self.options.max_bytes:
                raise LLMConfigurationError(
                    f"{row.attempt.where}: one request is {len(encoded)} bytes, above the batch input limit "
                    f"of {self.options.max_bytes}"
                )
        parts: list[Part] = []
        for indices in split_parts(
            [line for _, line in lines],
            max_lines=self.options.max_lines,
            max_bytes=self.options.max_bytes,
            max_tokens=queue.max_tokens,
        ):
            tokens: dict[str, int] = {}
            for i in indices:
                model, count = lines[i][1].model, lines[i][1].tokens
                tokens[model] = tokens.get(model, 0) + count
            parts.append(
                Part(
                    [batch_rows[i] for i in indices], b"".join(lines[i][0] for i in indices), tokens
                )
            )
        return parts

    async def _upload(self, part: Part, path: Path | None, state: dict[str, Any]) -> None:
        batch_rows, content = part.rows, part.content
        name = f"memoryquest-{state['set'][:12]}-round{state['rounds']}-part{len(state['batches']) + 1}.jsonl"
        input_file_id = await self._call(
            lambda: self.api.upload(name, content, self.options.transfer_seconds),
            f"uploading batch input {name}",
        )
        state["batches"].append(
            {
                "input_file_id": input_file_id,
                "batch_id": None,
                "custom_ids": [row.key for row in batch_rows],
                "round": state["rounds"],
                "tokens": part.tokens,
                "created": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
            }
        )
        write_state(path, state)  # before the batch exists: a crash from here on resumes

    async def _create(self, input_file_id: str, round_number: int) -> str:
        return await self._call(
            lambda: self.api.create(input_file_id, round_number),
            f"creating a batch from {input_file_id}",
        )

    async def _find(self, input_file_id: str) -> str | None:
        """A batch already made from this input file, if any: every page of the list is read."""
        after: str | None = None
        while True:
            page = await self._call(functools.partial(self.api.page, after), "listing batches")
            for batch in page.batches:
                if batch.input_file_id == input_file_id and batch.status not in (
                    "failed",
                    "cancelled",
                    "cancelling",
                ):
                    return batch.id
            if not page.has_more or not page.batches:
                return None
            after = page.batches[-1].id

    async def _poll(self, batch_id: str, *, resumed: bool) -> RemoteBatch | None:
        """The batch once it has finished; None when a resumed batch no longer exists."""
        delay = self.options.poll_seconds
        while True:
            try:
                batch = await self._call(
                    lambda: self.api.retrieve(batch_id), f"polling batch {batch_id}"
                )
            except LLMConfigurationError as exc:
                cause = exc.__cause__
                if resumed and isinstance(cause, PermanentBackendError) and cause.status == 404:
                    log.warning(
                        "batch %s recorded in the cache no longer exists: sending its requests again",
                        batch_id,
                    )
                    return None
                raise
            if batch.status in TERMINAL_STATUSES:
                return batch
            progress = (
                f" ({batch.finished_requests}/{batch.total_requests} done)"
                if batch.total_requests is not None
                else ""
            )
            log.info("batch %s: %s%s", batch_id, batch.status, progress)
            await self.exchange.clock.sleep(delay)
            delay = min(self.options.max_poll_seconds, delay * self.options.poll_backoff)

    async def _collect(self, batch: RemoteBatch, custom_ids: list[str], group: Group) -> None:
        if batch.status == "failed":
            detail = (
                "; ".join(f"line {e.line}: {e.code}: {e.message}" for e in batch.faults)
                or "no reason given"
            )
            raise LLMConfigurationError(
                f"the Batch API rejected batch {batch.id} (input {batch.input_file_id}): {detail}"
            )
        records: dict[str, LineOutcome] = {}
        for file_id in (batch.output_file_id, batch.error_file_id):
            if file_id:
                records.update(self.api.outcomes(await self._download(file_id)))
        # From here on nothing awaits: rows that joined the set while it ran are settled too.
        batch_rows = [group.rows[key] for key in custom_ids if key in group.rows]
        for row in batch_rows:
            self._settle_line(row, records.get(row.key), batch.status)
        for key in custom_ids:  # an adopted line nobody has asked for yet
            if key not in group.rows and key in records and key not in group.collector.rows:
                self.unclaimed[key] = (records[key], batch.status)
        if batch.status == "cancelled":  # someone stopped it on purpose: do not send its rows again
            for row in batch_rows:
                if not row.done:
                    row.error = LLMConfigurationError(
                        f"{row.attempt.where}: batch {batch.id} was cancelled before this request was answered"
                    )

    async def _download(self, file_id: str) -> str:
        return await self._call(
            lambda: self.api.download(file_id, self.options.transfer_seconds),
            f"downloading batch file {file_id}",
        )

    def _settle_line(self, row: Row, line: LineOutcome | None, batch_status: str) -> None:
        """One output or error line: the answer checked and cached, or the row left for the next round."""
        exchange = self.exchange
        attempt = row.attempt
        call = row.call or exchange.next_call(attempt)
        status = line.status if line is not None else None
        if status == 200:
            assert line is not None
            result = line.result
            if result is None:
                row.problem = "an answer without choices"
                return
            cost = exchange.account_batch_answer(call, result)
            if row.done:  # answered meanwhile (a resumed batch): billed, nothing more to do
                return
            attempt.add(cost)
            try:
                value = exchange.judge(attempt, result)
            except LLMError as exc:
                row.error = exc
                return
            if value is None:
                row.problem = _why_retried(result)
                return
            row.value = value
            exchange.remember(row.key, attempt, value.model_dump_json(), result.model)
            return
        if row.done:
            return
        code = line.code if line is not None else None
        said = line.message if line is not None else None
        message = said or code or f"no answer line (batch {batch_status})"
        if status is None or status in (408, 409, 429) or status >= 500:
            row.problem = f"HTTP {status}" if status else str(code or "no answer")
            return
        if (
            status == 400
            and call.mode is not OutputMode.TEXT
            and line is not None
            and line.refuses_format
        ):
            try:
                exchange.format_rejected(
                    call, attempt.where, PermanentBackendError(f"HTTP 400: {message}", status=400)
                )
            except LLMConfigurationError as exc:
                row.error = exc
            row.problem = f"output format {call.mode.value} rejected"
            return
        row.error = LLMConfigurationError(
            f"{attempt.where}: the Batch API rejected the request: HTTP {status}: {message}"
        )

    async def _online(self, row: Row) -> None:
        exchange = self.exchange
        try:
            value, result, _ = await exchange.ask_from(row.attempt)
        except LLMError as exc:
            row.error = exc
            return
        row.value = value
        exchange.remember(row.key, row.attempt, value.model_dump_json(), result.model)

    async def _call(self, send: Callable[[], Awaitable[T]], where: str) -> T:
        """One call to the provider's API with the exchange's retries, backoff and circuit breaker."""
        return await self.exchange.call_endpoint(send, where=where)


def _failed_for_the_token_limit(batch: RemoteBatch) -> bool:
    """A batch the provider failed because the queue of enqueued prompt tokens was full."""
    if batch.status != "failed" or not batch.faults:
        return False
    return is_token_limit_refusal([(fault.code, fault.message) for fault in batch.faults])


def _why_retried(result: ChatResult) -> str:
    if result.refusal:
        return "refused"
    if result.finish_reason in ("length", "content_filter"):
        return f"finish_reason {result.finish_reason}"
    return "answer did not fit the schema"
