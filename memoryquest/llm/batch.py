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

The lifecycle is provider-neutral and split by concern: this module
collects requests and hands answers back; :mod:`memoryquest.llm.batch_rounds`
submits a collected set, polls, retrieves and settles each line, in rounds,
then finishes what is left online; :mod:`memoryquest.llm.batch_state`
records the sets for a restart. The provider is reached through one adapter
(:class:`memoryquest.llm.batch_api.BatchAPI`; OpenAI's and Azure's Files and
Batches API: :mod:`memoryquest.llm.batch_openai`), and of the exchange only
:class:`memoryquest.llm.batch_api.BatchExchange` is used. A row whose answer
exhausts its retries (three refusals, say) fails with the same
``LLMOutputError`` the online path raises. ``complete_all`` raises the first
error, in request order, only after every other answer has been cached, or
returns the errors in place with ``return_exceptions=True``.

Resuming: when the collector sends, any request whose cache key a recorded,
unfinished batch holds waits for that batch (polled, not sent again; if the
crash came between creating the batch and recording its id, the batch is
found again by its input file, looking through every page of the project's
batch list). Lines of an adopted batch nobody has asked for yet are kept in
memory and answer their request when it comes, without a new line. Rows
answered before the crash are in the cache and never sent again. A recorded
batch none of whose requests is asked again (another persona selection,
say) is billed by the service but not read.

Cancellation: a waiting call that is cancelled stops waiting; the batch goes
on for the others. Once nobody waits for any row of a set, its task is
cancelled (the state file stays, so the set resumes when asked again), and
queued requests nobody waits for are dropped.

A stage's ``seconds`` include the wait. Embeddings always go online.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import weakref
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from memoryquest.llm.batch_api import BatchAPI, BatchExchange
from memoryquest.llm.batch_queue import BatchQueue, published_enqueued_tokens
from memoryquest.llm.batch_rounds import BatchRounds
from memoryquest.llm.batch_sets import (
    BatchOptions,
    Collector,
    Group,
    Row,
    release_orphans,
    resolve,
)
from memoryquest.llm.batch_state import read_state, recorded_sets, state_path
from memoryquest.llm.errors import LLMConfigurationError, LLMError
from memoryquest.llm.request import LLMRequest, ResponseT
from memoryquest.orchestration.lockstep import current_member

log = logging.getLogger(__name__)

__all__ = ["BatchProcessor"]


class BatchProcessor:
    """Answers requests through the Batch API: the online processor's sibling (see the module's text)."""

    def __init__(self, exchange: BatchExchange, options: BatchOptions, api: BatchAPI) -> None:
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
        self.rounds = BatchRounds(exchange, api, lambda: self.options)
        self._collectors: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, Collector] = (
            weakref.WeakKeyDictionary()
        )
        self._owned: set[Path] = set()  # state files a set of this runner is settling

    @property
    def state_directory(self) -> Path | None:
        """Where the sets are recorded (:mod:`memoryquest.llm.batch_state`); None without a cache."""
        directory = self.exchange.cache_directory
        return directory / "batches" if directory is not None else None

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
            return as_model(entry, request.response_model)
        await self._wait([entry])
        return as_model(entry.future.result(), request.response_model)

    async def complete_all(
        self, requests: Sequence[LLMRequest[Any]], *, return_exceptions: bool = False
    ) -> list[Any]:
        with contextlib.ExitStack() as stack:
            for stage in dict.fromkeys(r.stage for r in requests):
                stack.enter_context(self.exchange.ledger.timing(stage))
            entries = [self._entry(request) for request in requests]
            await self._wait(list(dict.fromkeys(e for e in entries if isinstance(e, Row))))
        answers: list[Any] = []
        first_error: LLMError | None = None
        for request, entry in zip(requests, entries, strict=True):
            if isinstance(entry, BaseModel):
                answers.append(as_model(entry, request.response_model))
                continue
            if entry.future.cancelled():
                raise asyncio.CancelledError(f"{entry.attempt.where}: its batch was cancelled")
            error = entry.future.exception()
            if error is None:
                answers.append(as_model(entry.future.result(), request.response_model))
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

    def _collector(self) -> Collector:
        loop = asyncio.get_running_loop()
        collector = self._collectors.get(loop)
        if collector is None:
            collector = self._collectors[loop] = Collector(BatchQueue(self.enqueued_tokens_max))
        return collector

    def _entry(self, request: LLMRequest[Any]) -> BaseModel | Row:
        """The cached answer, or the row the request waits on (joined, or queued for the next batch)."""
        exchange = self.exchange
        found = exchange.lookup(request)
        if found.answer is not None:
            return found.answer
        attempt, key = found.attempt, found.key
        collector = self._collector()
        member = current_member()
        if member is not None:
            collector.locksteps.add(member.lockstep)
        row = collector.rows.get(key)
        if row is not None:  # asked twice: sent once, like online
            exchange.ledger.cache_hits(request.stage)
            return row
        loop = asyncio.get_running_loop()
        row = Row(key, attempt, loop.create_future())
        collector.rows[key] = row
        self.rounds.claim(row)
        if row.done:  # answered by a resumed batch before anyone asked
            collector.rows.pop(key)
            resolve(row)
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

    async def _wait(self, rows: list[Row]) -> None:
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

    def _abandon(self, row: Row) -> None:
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

    def _arm(self, collector: Collector) -> None:
        """Call :meth:`_quiet` once ``collect_seconds`` pass on the clock without a new request."""
        collector.quiet_at = self.exchange.clock.monotonic() + self.options.collect_seconds
        if collector.timer is None:
            collector.timer = asyncio.ensure_future(self._when_quiet(collector))

    async def _when_quiet(self, collector: Collector) -> None:
        clock = self.exchange.clock
        while (left := collector.quiet_at - clock.monotonic()) > 0:
            await clock.sleep(left)
        self._quiet(collector)

    def _quiet(self, collector: Collector) -> None:
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

    def _flush(self, collector: Collector) -> None:
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
            fresh_path = (
                state_path(self.state_directory, (row.key for row in fresh)) if fresh else None
            )
            fresh_state = read_state(fresh_path) if fresh else None
        except Exception as exc:  # runs from a timer: its callers must hear of it, not wait forever
            for row in rows:
                if collector.rows.get(row.key) is row:
                    collector.rows.pop(row.key)
                resolve(row, exc)
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
        self, collector: Collector, rows: list[Row], path: Path | None, state: dict[str, Any]
    ) -> Group:
        group = Group(collector, {row.key: row for row in rows}, path, state)
        for row in rows:
            row.group = group
        if path is not None:
            self._owned.add(path)
        collector.groups.add(group)
        group.task = asyncio.get_running_loop().create_task(self.rounds.settle(group))
        group.task.add_done_callback(lambda task: self._finish(group, task))
        return group

    def _adopt(
        self, rows: list[Row]
    ) -> tuple[list[tuple[Path, dict[str, Any], list[Row]]], list[Row]]:
        """Recorded unfinished batches holding some of ``rows`` (with those rows), and the rows left over."""
        left = {row.key: row for row in rows}
        adopted: list[tuple[Path, dict[str, Any], list[Row]]] = []
        for path, state in recorded_sets(self.state_directory, self._owned):
            recorded = dict.fromkeys(
                key for inflight in state["batches"] for key in inflight["custom_ids"]
            )
            mine = [left.pop(key) for key in recorded if key in left]
            if mine:
                adopted.append((path, state, mine))
            if not left:
                break
        return adopted, list(left.values())

    def _finish(self, group: Group, task: asyncio.Task[None]) -> None:
        """When a set's task ends, however it ends (even cancelled before it started): resolve every row."""
        failure = (
            None if task.cancelled() else task.exception()
        )  # every waiting call gets it, not just one
        collector = group.collector
        if group.path is not None:
            self._owned.discard(group.path)
        collector.groups.discard(group)
        release_orphans(group)
        for row in group.rows.values():
            if collector.rows.get(row.key) is row:
                collector.rows.pop(row.key)
            resolve(row, failure)


def as_model(value: BaseModel, model: type[ResponseT]) -> ResponseT:
    """``value`` as ``model`` (a duplicate request may ask for another class with the same schema)."""
    if isinstance(value, model):
        return value
    return model.model_validate(value.model_dump())
