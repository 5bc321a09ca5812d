"""OpenAI Batch API mode: uncached chat requests travel in batches, at the batch price, resumable.

With ``endpoint.batch`` on (OpenAI or Azure backends), ``ModelClient.complete``
and ``ModelClient.complete_all`` do not call the endpoint themselves for the
stages of ``endpoint.batch_stages`` (``BatchOptions.stages``, asked through
:meth:`BatchProcessor.takes`): each such request missing from the cache joins a
per-event-loop COLLECTOR. Requests of the other stages go online at the full
price: left out, a stage that asks one question after another (memory, one
extraction after another) does not wait a whole batch round for each. The
collector sends what it holds as one batch once no new request has arrived
for ``endpoint.batch_collect_seconds`` (the idle window), or at once when it
holds ``BatchOptions.collect_max`` requests. Stages keep fanning out with
``asyncio.gather`` or plain concurrent ``complete`` calls, across personas
too; the concurrent requests of a run end up in few, large batches without
any stage knowing. Identical concurrent requests (same cache key) share one
line; each waiting call gets its own answer or its own exception, as soon
as its line is settled (a row retried in a later round does not hold up the
others).

Personas run in lockstep in batch mode (:mod:`memoryquest.orchestration.lockstep`): each
stage group starts once every persona has reached it, and the collector
knows which persona each waiting call comes from. When the idle window ends
while a persona of a lockstep is neither waiting for a batch answer nor
for the others (it is still embedding, say, or working through an online
stage), the send is held, up to ``BatchOptions.hold_seconds``, so its
request still makes the batch: the rounds do not grow with the personas.

One batch is a JSONL file of ``/v1/chat/completions`` bodies built exactly
like online requests (same messages, parameters and strict
``response_format``), each line's ``custom_id`` being the request's cache
key. The file is uploaded (purpose ``batch``), the batch created (completion
window ``24h``) and polled with a growing interval
(``endpoint.batch_poll_seconds``, x1.5 per poll, at most
``endpoint.batch_max_poll_seconds``); then the output and error files are
read and every answer line goes through the exchange's own checks
(``ChatExchange.judge``: refusal, ``finish_reason`` length or content_filter,
schema validation, repair turn), so a batch answer is held to the same rules
as an online one. Good answers go to the per-request cache at once. A set
above the service's per-batch limits (50,000 lines, ~200 MB) or above the
prompt tokens the provider lets a project hold in unfinished batches per
model (``endpoint.batch_enqueued_tokens_max``) is cut into several batch
files; each is created once our batches in flight leave it room, and a batch
the provider refuses for that limit goes again when an earlier one finishes
(:mod:`memoryquest.llm.batch_queue`). Polling looks for the batch's end
through every status the service reports (``validating``, ``in_progress``,
``finalizing``, ``cancelling``).

Failed rows, and only those, go out again as a new, smaller batch: a
schema-invalid answer with its repair turn, a truncated one with twice the
output budget, a refusal or filtered answer as it was, a 429/5xx/expired row
as it was. At most ``endpoint.batch_rounds`` rounds of batches are sent per
collected set (the first included); rows still unanswered after that are
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
``<cache>/batches/<sha256 of the set's cache keys>.json`` records its input
file id and custom_ids, then its batch id; it is removed when the set is
done. Since what the collector gathers depends on timing, a restarted run
matches recorded batches by REQUEST, not by set: when the collector sends,
any request whose cache key a recorded, unfinished batch holds waits for
that batch (polled, not sent again; if the crash came between creating the
batch and recording its id, the batch is found again by its input file,
looking through every page of the project's batch list).
Lines of an adopted batch nobody has asked for yet are kept in memory and
answer their request when it comes, without a new line. Rows answered
before the crash are in the cache and never sent again. A recorded batch
none of whose requests is asked again (another persona selection, say) is
billed by the service but not read. Without a cache (``cache.enabled =
false``) nothing is recorded and nothing can resume.

Cancellation: a waiting call that is cancelled stops waiting; the batch goes
on for the others. Once nobody waits for any row of a set, its task is
cancelled (the state file stays, so the set resumes when asked again), and
queued requests nobody waits for are dropped.

Accounting: every output line is billed with its own ``usage`` at the batch
price (``PriceTable.batch_multiplier``) to the stage of its request when it
is read (lines of an adopted batch when their request asks for them);
online fallback calls are billed in full. A stage's ``seconds`` include the
wait. Embeddings always go online.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dt
import functools
import hashlib
import json
import logging
import os
import tempfile
import weakref
from collections.abc import Awaitable, Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from pydantic import BaseModel

from memoryquest.llm.backends import ChatCall, ChatResult, OutputMode
from memoryquest.llm.batch_queue import (
    BatchQueue,
    Line,
    is_token_limit_refusal,
    line_tokens,
    published_enqueued_tokens,
    split_parts,
    stated_limit,
)
from memoryquest.llm.errors import LLMConfigurationError, LLMError, PermanentBackendError
from memoryquest.llm.exchange import Attempt, ChatExchange
from memoryquest.llm.openai_backend import RESPONSE_FORMAT_WORDS, chat_result
from memoryquest.llm.request import LLMRequest, ResponseT
from memoryquest.orchestration.lockstep import Lockstep, current_member

log = logging.getLogger(__name__)

T = TypeVar("T")

# A batch line has no HTTP headers: the fake server reads the hints
# (memoryquest.llm.hints) from this line field. Sent only with endpoint.simulator_hints.
HINTS_FIELD = "x_memoryquest_headers"
STATE_FORMAT = 1
TERMINAL_STATUSES = frozenset({"completed", "failed", "expired", "cancelled"})


@dataclass(frozen=True)
class BatchOptions:
    """How requests are collected, batches polled and failed rows sent again (``endpoint.batch_*``)."""

    poll_seconds: float = 30.0  # first wait between two polls
    max_poll_seconds: float = 600.0  # the wait grows by poll_backoff up to this
    poll_backoff: float = 1.5
    rounds: int = 3  # rounds of batches per collected set, the first included; then online
    # The collector sends once no request has arrived for collect_seconds, or at collect_max requests.
    collect_seconds: float = 2.0
    collect_max: int = 50_000
    # Personas in lockstep (memoryquest.orchestration.lockstep) still working towards a request hold a send this long at most.
    hold_seconds: float = 120.0
    # The service's limits per batch; a larger set is split into several batches per round.
    max_lines: int = 50_000
    max_bytes: int = 190 * 2**20
    transfer_seconds: float = 600.0  # timeout of one upload or download
    # Prompt tokens our unfinished batches may hold per model (memoryquest.llm.batch_queue);
    # None: the provider's published tier-1 figure for the model.
    enqueued_tokens_max: int | None = None
    # The stages (LLMRequest.stage) whose requests travel in batches; None: every stage.
    stages: frozenset[str] | None = None


@dataclass(eq=False)
class _Row:
    """One distinct request (by cache key) waiting for its answer."""

    key: str
    attempt: Attempt
    future: asyncio.Future[BaseModel]  # resolved once the row is settled
    value: BaseModel | None = None
    error: LLMError | None = None
    call: ChatCall | None = None  # what its latest batch line asked
    problem: str = ""  # why its latest batch line did not count (for the log)
    waiters: int = 0  # calls waiting for it now
    group: _Group | None = None  # the set it was sent with; None while queued

    @property
    def done(self) -> bool:
        return self.value is not None or self.error is not None


@dataclass(eq=False)
class _Group:
    """Rows sent together: settled by one task, recorded in one state file."""

    collector: _Collector
    rows: dict[str, _Row]  # grows when a request for an adopted, unasked line arrives
    path: Path | None
    state: dict[str, Any]
    orphans: set[str] = field(default_factory=set)  # adopted lines nobody has asked for yet
    task: asyncio.Task[None] | None = None


@dataclass(frozen=True)
class _Part:
    """One input file of a round: its rows, its JSONL content, its prompt tokens per model."""

    rows: list[_Row]
    content: bytes
    tokens: dict[str, int]


@dataclass(eq=False)
class _Collector:
    """The queue of one event loop, and the sets it has sent that are still open.

    It holds no reference to its loop: it is the value of a weak mapping keyed by that loop.
    """

    enqueued: BatchQueue  # the prompt tokens its batches hold in the provider's queue
    queue: dict[str, _Row] = field(default_factory=dict)
    rows: dict[str, _Row] = field(default_factory=dict)  # every unsettled row, queued or sent
    orphans: dict[str, _Group] = field(default_factory=dict)
    groups: set[_Group] = field(default_factory=set)
    timer: asyncio.Task[None] | None = None  # sends once the clock reaches quiet_at
    quiet_at: float = 0.0
    # The lockstep walks requests came from (memoryquest.orchestration.lockstep), and since when a send is held for them.
    locksteps: weakref.WeakSet[Lockstep] = field(default_factory=weakref.WeakSet)
    held_since: float | None = None


class BatchProcessor:
    """Answers requests through the Batch API: the online processor's sibling (see the module's text)."""

    def __init__(self, exchange: ChatExchange, options: BatchOptions) -> None:
        backend = exchange.chat_backend
        if not callable(getattr(backend, "request_body", None)) or not callable(
            getattr(backend, "sdk_client", None)
        ):
            raise LLMConfigurationError(
                f"endpoint.batch needs the openai or azure backend; backend {backend.name!r} has no Batch API"
            )
        if options.rounds < 1:
            raise LLMConfigurationError(
                f"endpoint.batch_rounds must be at least 1, got {options.rounds}"
            )
        if options.collect_seconds < 0 or options.collect_max < 1:
            raise LLMConfigurationError(
                f"the batch collector needs collect_seconds >= 0 and collect_max >= 1, "
                f"got {options.collect_seconds} and {options.collect_max}"
            )
        self.exchange = exchange
        self.options = options
        self.url = "/chat/completions" if backend.name == "azure" else "/v1/chat/completions"
        self._collectors: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, _Collector] = (
            weakref.WeakKeyDictionary()
        )
        self._owned: set[Path] = set()  # state files a set of this runner is settling
        # Lines of adopted batches whose request has not been asked yet: (record, batch status).
        self._unclaimed: dict[str, tuple[dict[str, Any], str]] = {}

    def enqueued_tokens_max(self, model: str) -> int:
        """How many prompt tokens of ``model`` our unfinished batches may hold at once."""
        return self.options.enqueued_tokens_max or published_enqueued_tokens(model)

    # --- the request processor's interface ------------------------------------------------------------

    def takes(self, request: LLMRequest[Any]) -> bool:
        """Whether ``request`` travels in a batch; the client sends the others online."""
        return self.options.stages is None or request.stage in self.options.stages

    async def complete(self, request: LLMRequest[ResponseT]) -> ResponseT:
        entry = self._entry(request)
        if isinstance(entry, BaseModel):
            return _as(entry, request.response_model)
        await self._wait([entry])
        return _as(entry.future.result(), request.response_model)

    async def complete_all(
        self, requests: Sequence[LLMRequest[Any]], *, return_exceptions: bool = False
    ) -> list[Any]:
        with contextlib.ExitStack() as stack:
            for stage in dict.fromkeys(r.stage for r in requests):
                stack.enter_context(self.exchange.ledger.timing(stage))
            entries = [self._entry(request) for request in requests]
            await self._wait(list(dict.fromkeys(e for e in entries if isinstance(e, _Row))))
        answers: list[Any] = []
        first_error: LLMError | None = None
        for request, entry in zip(requests, entries, strict=True):
            if isinstance(entry, BaseModel):
                answers.append(_as(entry, request.response_model))
                continue
            if entry.future.cancelled():
                raise asyncio.CancelledError(f"{entry.attempt.where}: its batch was cancelled")
            error = entry.future.exception()
            if error is None:
                answers.append(_as(entry.future.result(), request.response_model))
            elif isinstance(error, LLMError):
                first_error = first_error or error
                answers.append(error)
            else:
                raise error
        if first_error is not None and not return_exceptions:
            raise first_error
        return answers

    async def aclose(self) -> None:
        """Stop collecting on the running loop: queued requests and open sets are cancelled."""
        collector = self._collectors.pop(asyncio.get_running_loop(), None)
        if collector is None:
            return
        if collector.timer is not None:
            collector.timer.cancel()
        for row in collector.queue.values():
            row.future.cancel()
        collector.queue.clear()
        tasks = [group.task for group in collector.groups if group.task is not None]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)

    # --- the collector --------------------------------------------------------------------

    def _collector(self) -> _Collector:
        loop = asyncio.get_running_loop()
        collector = self._collectors.get(loop)
        if collector is None:
            collector = self._collectors[loop] = _Collector(BatchQueue(self.enqueued_tokens_max))
        return collector

    def _entry(self, request: LLMRequest[Any]) -> BaseModel | _Row:
        """The cached answer, or the row the request waits on (joined, or queued for the next batch)."""
        exchange = self.exchange
        attempt = exchange.attempt(request)
        key = exchange.cache_key(attempt)
        cached = exchange.cached(key, request)
        if cached is not None:
            exchange.ledger.cache_hits(request.stage)
            return cached
        collector = self._collector()
        member = current_member()
        if member is not None:
            collector.locksteps.add(member.lockstep)
        row = collector.rows.get(key)
        if row is not None:  # asked twice: sent once, like online
            exchange.ledger.cache_hits(request.stage)
            return row
        loop = asyncio.get_running_loop()
        row = _Row(key, attempt, loop.create_future())
        collector.rows[key] = row
        unclaimed = self._unclaimed.pop(key, None)
        if unclaimed is not None:  # answered by a resumed batch before anyone asked
            self._settle_line(row, *unclaimed)
            if row.done:
                collector.rows.pop(key)
                self._resolve(row)
                return row
        group = collector.orphans.pop(key, None)
        if group is not None:  # in a resumed batch still running: wait for its line
            group.orphans.discard(key)
            group.rows[key] = row
            row.group = group
            return row
        collector.queue[key] = row
        if len(collector.queue) >= self.options.collect_max:
            self._flush(collector)
        else:
            self._arm(collector)
        return row

    async def _wait(self, rows: list[_Row]) -> None:
        """Until every row is settled; a caller that gives up leaves the rows to the others."""
        for row in rows:
            row.waiters += 1
        member = current_member()
        try:
            waiting = [row.future for row in rows if not row.future.done()]
            if waiting:
                if member is not None:
                    member.waiting += 1
                try:
                    await asyncio.wait(waiting)  # cancelling the caller does not cancel the rows
                finally:
                    if member is not None:
                        member.waiting -= 1
        finally:
            for row in rows:
                row.waiters -= 1
            for row in rows:
                if row.waiters == 0 and not row.future.done():
                    self._abandon(row)

    def _abandon(self, row: _Row) -> None:
        """Nobody waits for ``row`` any more: drop it if queued, stop its set if nobody waits for any of it."""
        group = row.group
        if group is None:
            collector = self._collector()
            if collector.queue.pop(row.key, None) is row:
                collector.rows.pop(row.key, None)
                row.future.cancel()
                if not collector.queue and collector.timer is not None:
                    collector.timer.cancel()
                    collector.timer = None
            return
        if group.task is not None and not any(
            r.waiters for r in group.rows.values() if not r.future.done()
        ):
            group.task.cancel()  # the state file stays: the set resumes when asked again

    def _arm(self, collector: _Collector) -> None:
        """Call :meth:`_quiet` once ``collect_seconds`` pass on the clock without a new request."""
        collector.quiet_at = self.exchange.clock.monotonic() + self.options.collect_seconds
        if collector.timer is None:
            collector.timer = asyncio.ensure_future(self._when_quiet(collector))

    async def _when_quiet(self, collector: _Collector) -> None:
        clock = self.exchange.clock
        while (left := collector.quiet_at - clock.monotonic()) > 0:
            await clock.sleep(left)
        self._quiet(collector)

    def _quiet(self, collector: _Collector) -> None:
        """No request for ``collect_seconds``: send, unless a persona in lockstep is still on its way.

        A persona that works towards its next request (embeddings, an online
        stage, a long computation) would otherwise miss this batch and make
        one of its own; the send waits for it, up to ``hold_seconds``.
        """
        collector.timer = None
        now = self.exchange.clock.monotonic()
        busy = any(not lockstep.all_idle() for lockstep in collector.locksteps)
        if busy and collector.queue:
            if collector.held_since is None:
                collector.held_since = now
            if now - collector.held_since < self.options.hold_seconds:
                self._arm(collector)
                return
            log.info(
                "sending %d requests without waiting longer for every persona (held %.0f s)",
                len(collector.queue),
                now - collector.held_since,
            )
        self._flush(collector)

    def _flush(self, collector: _Collector) -> None:
        """Send the queue: rows a recorded batch already holds wait for it, the rest go out as a new set."""
        if collector.timer is not None:
            collector.timer.cancel()
            collector.timer = None
        collector.held_since = None
        rows = list(collector.queue.values())
        collector.queue.clear()
        if not rows:
            return
        try:
            adopted, fresh = self._adopt(rows)
            fresh_path = self._state_path(row.key for row in fresh) if fresh else None
            fresh_state = _read_state(fresh_path) if fresh else None
        except Exception as exc:  # runs from a timer: its callers must hear of it, not wait forever
            for row in rows:
                if collector.rows.get(row.key) is row:
                    collector.rows.pop(row.key)
                self._resolve(row, exc)
            return
        for path, state, mine in adopted:
            group = self._start(collector, mine, path, state)
            recorded = {key for inflight in state["batches"] for key in inflight["custom_ids"]}
            for key in (
                recorded - group.rows.keys() - collector.rows.keys() - collector.orphans.keys()
            ):
                group.orphans.add(key)
                collector.orphans[key] = group
            log.info("resuming %d requests from %s", len(mine), path.name)
        if fresh_state is not None:
            self._start(collector, fresh, fresh_path, fresh_state)
            log.info("collected %d requests for a batch", len(fresh))

    def _start(
        self, collector: _Collector, rows: list[_Row], path: Path | None, state: dict[str, Any]
    ) -> _Group:
        group = _Group(collector, {row.key: row for row in rows}, path, state)
        for row in rows:
            row.group = group
        if path is not None:
            self._owned.add(path)
        collector.groups.add(group)
        group.task = asyncio.get_running_loop().create_task(self._settle(group))
        group.task.add_done_callback(lambda task: self._finish(group, task))
        return group

    def _adopt(
        self, rows: list[_Row]
    ) -> tuple[list[tuple[Path, dict[str, Any], list[_Row]]], list[_Row]]:
        """Recorded unfinished batches holding some of ``rows`` (with those rows), and the rows left over."""
        cache = self.exchange.cache
        if cache is None or not self.exchange.caching:
            return [], rows
        directory = cache.directory / "batches"
        if not directory.is_dir():
            return [], rows
        left = {row.key: row for row in rows}
        adopted: list[tuple[Path, dict[str, Any], list[_Row]]] = []
        for path in sorted(directory.glob("*.json")):
            if not left:
                break
            if path.name.startswith(".") or path in self._owned:
                continue
            state = _read_state(path)
            recorded = dict.fromkeys(
                key for inflight in state["batches"] for key in inflight["custom_ids"]
            )
            mine = [left.pop(key) for key in recorded if key in left]
            if mine:
                adopted.append((path, state, mine))
        return adopted, list(left.values())

    def _finish(self, group: _Group, task: asyncio.Task[None]) -> None:
        """When a set's task ends, however it ends (even cancelled before it started): resolve every row."""
        failure = (
            None if task.cancelled() else task.exception()
        )  # every waiting call gets it, not just one
        collector = group.collector
        if group.path is not None:
            self._owned.discard(group.path)
        collector.groups.discard(group)
        self._release_orphans(group)
        for row in group.rows.values():
            if collector.rows.get(row.key) is row:
                collector.rows.pop(row.key)
            self._resolve(row, failure)

    def _resolve(self, row: _Row, failure: BaseException | None = None) -> None:
        """Hand the row's outcome to its waiters (a cancelled set cancels its open rows)."""
        future = row.future
        if future.done():
            return
        if row.value is not None:
            future.set_result(row.value)
            return
        error = row.error or failure
        if error is None:
            future.cancel()
            return
        future.set_exception(error)
        future.exception()  # retrieved: waiters re-raise it, nobody else must

    def _resolve_done(self, group: _Group) -> None:
        """Callers whose row is settled go on at once; the others wait for the next round."""
        collector = group.collector
        for row in group.rows.values():
            if row.done and not row.future.done():
                if collector.rows.get(row.key) is row:
                    collector.rows.pop(row.key)
                self._resolve(row)

    def _release_orphans(self, group: _Group) -> None:
        """Adopted lines read by now: a later request for one is answered from ``_unclaimed``."""
        for key in group.orphans:
            if group.collector.orphans.get(key) is group:
                del group.collector.orphans[key]
        group.orphans.clear()

    # --- the set --------------------------------------------------------------------------

    def _state_path(self, keys: Iterable[str]) -> Path | None:
        cache = self.exchange.cache
        if cache is None or not self.exchange.caching:
            return None
        digest = hashlib.sha256("\n".join(sorted(keys)).encode("ascii")).hexdigest()
        return cache.directory / "batches" / f"{digest}.json"

    async def _settle(self, group: _Group) -> None:
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
            _write_state(path, state)
            self._release_orphans(group)
            self._resolve_done(group)
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
            self._resolve_done(group)
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
    ) -> Any | None:
        """One batch of the round, created once the provider's queue has room for it, polled to its end.

        Refused for the enqueued-token limit, it goes again once one of our batches has finished;
        refused with none of ours in flight, None: its rows wait for the next round (see
        :mod:`memoryquest.llm.batch_queue`). None too for a resumed batch that no longer exists.
        """
        tokens: dict[str, int] = inflight.get("tokens") or {}

        async def may_go_again(messages: list[str]) -> bool:
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
                _write_state(path, state)
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
            _write_state(path, state)
            if not await may_go_again([e.message for e in batch.errors.data]):
                return None
            resumed = False

    # --- one batch ------------------------------------------------------------------------

    def _line(self, row: _Row) -> tuple[bytes, Line]:
        """The JSONL line of a row (the online request body, ``custom_id`` = cache key), and its size."""
        exchange = self.exchange
        backend: Any = exchange.chat_backend
        row.call = exchange.next_call(row.attempt)
        body = dict(backend.request_body(row.call))
        hints = body.pop("extra_headers", None)
        body.update(body.pop("extra_body", None) or {})
        line: dict[str, Any] = {
            "custom_id": row.key,
            "method": "POST",
            "url": self.url,
            "body": body,
        }
        if hints and getattr(backend, "send_variables", False):
            line[HINTS_FIELD] = hints
        encoded = (json.dumps(line, ensure_ascii=False) + "\n").encode("utf-8")
        return encoded, Line(len(encoded), *line_tokens(body))

    def _split(self, batch_rows: list[_Row], queue: BatchQueue) -> list[_Part]:
        """The rows as input files within the per-batch limits and the provider's queue limit."""
        lines = [self._line(row) for row in batch_rows]
        for row, (encoded, _) in zip(batch_rows, lines, strict=True):
            if len(encoded) > self.options.max_bytes:
                raise LLMConfigurationError(
                    f"{row.attempt.where}: one request is {len(encoded)} bytes, above the batch input limit "
                    f"of {self.options.max_bytes}"
                )
        parts: list[_Part] = []
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
                _Part(
                    [batch_rows[i] for i in indices], b"".join(lines[i][0] for i in indices), tokens
                )
            )
        return parts

    async def _upload(self, part: _Part, path: Path | None, state: dict[str, Any]) -> None:
        batch_rows, content = part.rows, part.content
        name = f"memoryquest-{state['set'][:12]}-round{state['rounds']}-part{len(state['batches']) + 1}.jsonl"
        uploaded = await self._sdk(
            lambda sdk: sdk.files.create(
                file=(name, content, "application/jsonl"),
                purpose="batch",
                timeout=self.options.transfer_seconds,
            ),
            f"uploading batch input {name}",
        )
        state["batches"].append(
            {
                "input_file_id": uploaded.id,
                "batch_id": None,
                "custom_ids": [row.key for row in batch_rows],
                "round": state["rounds"],
                "tokens": part.tokens,
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
        """A batch already made from this input file, if any: every page of the list is read."""
        after: str | None = None
        while True:
            page = await self._sdk(
                functools.partial(_list_batches, after=after),
                "listing batches",
            )
            for batch in page.data:
                if batch.input_file_id == input_file_id and batch.status not in (
                    "failed",
                    "cancelled",
                    "cancelling",
                ):
                    return str(batch.id)
            if not page.has_more or not page.data:
                return None
            after = str(page.data[-1].id)

    async def _poll(self, batch_id: str, *, resumed: bool) -> Any | None:
        """The batch once it has finished; None when a resumed batch no longer exists."""
        delay = self.options.poll_seconds
        while True:
            try:
                batch = await self._sdk(
                    lambda sdk: sdk.batches.retrieve(batch_id), f"polling batch {batch_id}"
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
            counts = batch.request_counts
            log.info(
                "batch %s: %s%s",
                batch_id,
                batch.status,
                f" ({counts.completed + counts.failed}/{counts.total} done)" if counts else "",
            )
            await self.exchange.clock.sleep(delay)
            delay = min(self.options.max_poll_seconds, delay * self.options.poll_backoff)

    async def _collect(self, batch: Any, custom_ids: list[str], group: _Group) -> None:
        if batch.status == "failed":
            errors = batch.errors.data if batch.errors and batch.errors.data else []
            detail = (
                "; ".join(f"line {e.line}: {e.code}: {e.message}" for e in errors)
                or "no reason given"
            )
            raise LLMConfigurationError(
                f"the Batch API rejected batch {batch.id} (input {batch.input_file_id}): {detail}"
            )
        records: dict[str, dict[str, Any]] = {}
        for file_id in (batch.output_file_id, batch.error_file_id):
            if file_id:
                for raw in (await self._download(file_id)).splitlines():
                    if raw.strip():
                        record = json.loads(raw)
                        records[str(record.get("custom_id"))] = record
        # From here on nothing awaits: rows that joined the set while it ran are settled too.
        batch_rows = [group.rows[key] for key in custom_ids if key in group.rows]
        for row in batch_rows:
            self._settle_line(row, records.get(row.key), batch.status)
        for key in custom_ids:  # an adopted line nobody has asked for yet
            if key not in group.rows and key in records and key not in group.collector.rows:
                self._unclaimed[key] = (records[key], batch.status)
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
        exchange = self.exchange
        attempt = row.attempt
        call = row.call or exchange.next_call(attempt)
        response = record.get("response") if record else None
        status = response.get("status_code") if isinstance(response, dict) else None
        if status == 200:
            assert isinstance(response, dict)
            result = _result_from_body(response.get("body"))
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
            if exchange.caching:
                exchange.remember(row.key, attempt, value.model_dump_json(), result.model)
            return
        if row.done:
            return
        error = _error_of(record, response)
        message = str(
            error.get("message") or error.get("code") or f"no answer line (batch {batch_status})"
        )
        if status is None or status in (408, 409, 429) or status >= 500:
            row.problem = f"HTTP {status}" if status else str(error.get("code") or "no answer")
            return
        text = f"{message} {error.get('param') or ''}".lower()
        if (
            status == 400
            and call.mode is not OutputMode.TEXT
            and any(w in text for w in RESPONSE_FORMAT_WORDS)
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

    async def _online(self, row: _Row) -> None:
        exchange = self.exchange
        try:
            value, result, _ = await exchange.ask_from(row.attempt)
        except LLMError as exc:
            row.error = exc
            return
        row.value = value
        if exchange.caching:
            exchange.remember(row.key, row.attempt, value.model_dump_json(), result.model)

    async def _sdk(self, send: Callable[[Any], Awaitable[T]], where: str) -> T:
        """One Files/Batches API call with the exchange's retries, backoff and circuit breaker."""
        import openai

        from memoryquest.llm.openai_backend import translate_error

        exchange = self.exchange
        backend: Any = exchange.chat_backend

        async def attempt() -> T:
            try:
                return await send(backend.sdk_client())
            except openai.OpenAIError as exc:
                raise translate_error(exc) from exc

        return await exchange.call_endpoint(attempt, where=where)


# --- helpers --------------------------------------------------------------------------------


def _result_from_body(body: Any) -> ChatResult | None:
    """A chat completion body from an output line, as the online backend would report it."""
    if not isinstance(body, dict) or not body.get("choices"):
        return None
    return chat_result(body)


def _list_batches(sdk: Any, *, after: str | None) -> Any:
    """One page of the project's batches, newest first, after the batch id ``after``."""
    return sdk.batches.list(limit=100, **({"after": after} if after else {}))


def _failed_for_the_token_limit(batch: Any) -> bool:
    """A batch the provider failed because the queue of enqueued prompt tokens was full."""
    if batch.status != "failed" or not batch.errors or not batch.errors.data:
        return False
    return is_token_limit_refusal([(e.code, e.message) for e in batch.errors.data])


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
    if (
        not isinstance(state, dict)
        or state.get("format") != STATE_FORMAT
        or not isinstance(state.get("rounds"), int)
    ):
        return fresh
    batches = state.get("batches")
    if not isinstance(batches, list) or not all(
        isinstance(b, dict) and b.get("input_file_id") and isinstance(b.get("custom_ids"), list)
        for b in batches
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


def _as(value: BaseModel, model: type[ResponseT]) -> ResponseT:
    """``value`` as ``model`` (a duplicate request may ask for another class with the same schema)."""
    if isinstance(value, model):
        return value
    return model.model_validate(value.model_dump())
