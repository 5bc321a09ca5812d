"""What the batch collector holds and the rounds settle: the options, rows, sets and their parts.

A :class:`Row` is one distinct request (by cache key) and the calls waiting
for it; a :class:`Group` is the rows sent together, settled by one task and
recorded in one state file; a :class:`Collector` is one event loop's queue
and its open groups. :func:`resolve` hands a row's outcome to its waiters.
"""

from __future__ import annotations

import asyncio
import weakref
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from memoryquest.llm.attempt import Attempt
from memoryquest.llm.backends import ChatCall
from memoryquest.llm.batch_queue import BatchQueue
from memoryquest.llm.errors import LLMError
from memoryquest.orchestration.lockstep import Lockstep


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
class Row:
    """One distinct request (by cache key) waiting for its answer."""

    key: str
    attempt: Attempt
    future: asyncio.Future[BaseModel]  # resolved once the row is settled
    value: BaseModel | None = None
    error: LLMError | None = None
    call: ChatCall | None = None  # what its latest batch line asked
    problem: str = ""  # why its latest batch line did not count (for the log)
    waiters: int = 0  # calls waiting for it now
    group: Group | None = None  # the set it was sent with; None while queued

    @property
    def done(self) -> bool:
        return self.value is not None or self.error is not None


@dataclass(eq=False)
class Group:
    """Rows sent together: settled by one task, recorded in one state file."""

    collector: Collector
    rows: dict[str, Row]  # grows when a request for an adopted, unasked line arrives
    path: Path | None
    state: dict[str, Any]
    orphans: set[str] = field(default_factory=set)  # adopted lines nobody has asked for yet
    task: asyncio.Task[None] | None = None


@dataclass(frozen=True)
class Part:
    """One input file of a round: its rows, its JSONL content, its prompt tokens per model."""

    rows: list[Row]
    content: bytes
    tokens: dict[str, int]


@dataclass(eq=False)
class Collector:
    """The queue of one event loop, and the sets it has sent that are still open.

    It holds no reference to its loop: it is the value of a weak mapping keyed by that loop.
    """

    enqueued: BatchQueue  # the prompt tokens its batches hold in the provider's queue
    queue: dict[str, Row] = field(default_factory=dict)
    rows: dict[str, Row] = field(default_factory=dict)  # every unsettled row, queued or sent
    orphans: dict[str, Group] = field(default_factory=dict)
    groups: set[Group] = field(default_factory=set)
    timer: asyncio.Task[None] | None = None  # sends once the clock reaches quiet_at
    quiet_at: float = 0.0
    # The lockstep walks requests came from (memoryquest.orchestration.lockstep), and since when a send is held for them.
    locksteps: weakref.WeakSet[Lockstep] = field(default_factory=weakref.WeakSet)
    held_since: float | None = None


def resolve(row: Row, failure: BaseException | None = None) -> None:
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


def resolve_done(group: Group) -> None:
    """Callers whose row is settled go on at once; the others wait for the next round."""
    collector = group.collector
    for row in group.rows.values():
        if row.done and not row.future.done():
            if collector.rows.get(row.key) is row:
                collector.rows.pop(row.key)
            resolve(row)


def release_orphans(group: Group) -> None:
    """Adopted lines read by now: a later request for one is answered from the lines kept unclaimed."""
    for key in group.orphans:
        if group.collector.orphans.get(key) is group:
            del group.collector.orphans[key]
    group.orphans.clear()
