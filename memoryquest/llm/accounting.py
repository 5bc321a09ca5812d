"""Tokens, cost and time per stage, summed into ``contracts.StageUsage`` rows.

``requests`` counts chat calls that got an answer (repairs and retries for
refusals included, because they are billed); ``cache_hits`` counts chat
answers and embedded texts served from the cache; ``seconds`` is the wall
time during which the stage had at least one call in flight (overlapping
concurrent calls are not double-counted).

A run that is killed and resumed is several *attempts* at one output
directory. :meth:`UsageLedger.persist` makes the ledger append what it
accrues to ``<output>/usage.jsonl`` as it goes — every answer of a real
endpoint at once (``write_through``, set by the client), the simulator's
free calls at most ``flush_seconds`` behind and whenever a stage goes idle —
so what a killed attempt paid for survives it; the next attempt reads the file back, and
:meth:`UsageLedger.annotate` puts into the run manifest what was actually
spent across all attempts, split into this attempt and the earlier ones
whose answers this attempt reused (from the request cache and Prefect's
stage results) instead of paying again.

``usage.jsonl``: one JSON object per line — ``{"attempt", "started", "pid"}``
when an attempt begins, ``{"attempt", "at", "usage": [StageUsage deltas]}``
as usage accrues, ``{"attempt", "finished"}`` when it ends. A torn last line
(a kill mid-write) is skipped.
"""

from __future__ import annotations

import atexit
import datetime as dt
import json
import os
import threading
import time
import uuid
import weakref
from collections.abc import Iterable, Iterator
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import Any

from memoryquest.contracts import RunManifest, Stage, StageUsage, Usage

USAGE_FILE = "usage.jsonl"
COUNTERS = (
    "requests",
    "cache_hits",
    "input_tokens",
    "output_tokens",
    "cached_tokens",
    "embedding_requests",
    "embedding_tokens",
    "cost_usd",
    "seconds",
)


def _add(target: Usage, delta: Usage) -> None:
    for name in COUNTERS:
        setattr(target, name, getattr(target, name) + getattr(delta, name))
    target.approximate_tokens = target.approximate_tokens or delta.approximate_tokens


def _rounded(row: StageUsage) -> StageUsage:
    copy = row.model_copy()
    copy.cost_usd = round(copy.cost_usd, 8)
    copy.seconds = round(copy.seconds, 4)
    return copy


def merge_usage(*tables: Iterable[StageUsage]) -> list[StageUsage]:
    """Rows of several tables summed per stage, stages in first-seen order."""
    merged: dict[str, StageUsage] = {}
    for table in tables:
        for row in table:
            if row.stage not in merged:
                merged[row.stage] = StageUsage(stage=row.stage)
            _add(merged[row.stage], row)
    return [_rounded(row) for row in merged.values()]


def _now() -> str:
    return dt.datetime.now(dt.UTC).isoformat(timespec="milliseconds")


def _seconds_between(start: str | None, end: str | None) -> float:
    if not start or not end:
        return 0.0
    try:
        return max(
            0.0, (dt.datetime.fromisoformat(end) - dt.datetime.fromisoformat(start)).total_seconds()
        )
    except ValueError:
        return 0.0


class UsageJournal:
    """What earlier attempts recorded in a ``usage.jsonl``."""

    def __init__(self, rows: list[StageUsage], attempts: int, seconds: float) -> None:
        self.rows = rows
        self.attempts = attempts
        self.seconds = seconds  # wall time of those attempts (to their last record when killed)

    @classmethod
    def read(cls, path: Path) -> UsageJournal:
        try:
            lines = path.read_bytes().splitlines()
        except FileNotFoundError:
            return cls([], 0, 0.0)
        deltas: list[StageUsage] = []
        span: dict[str, list[str | None]] = {}  # attempt -> [started, last seen]
        for line in lines:
            try:
                record = json.loads(line)
                attempt = str(record["attempt"])
                rows = [StageUsage.model_validate(item) for item in record.get("usage", [])]
            except (ValueError, KeyError, TypeError):
                continue  # a torn line from a kill mid-write, or a foreign one
            first_last = span.setdefault(attempt, [None, None])
            stamp = record.get("started") or record.get("at") or record.get("finished")
            if record.get("started"):
                first_last[0] = record["started"]
            if isinstance(stamp, str):
                first_last[1] = stamp
            deltas.extend(rows)
        seconds = sum(_seconds_between(start, end) for start, end in span.values())
        return cls(merge_usage(deltas), len(span), round(seconds, 3))


class UsageLedger:
    def __init__(self) -> None:
        self._rows: dict[Stage, StageUsage] = {}
        self._active: dict[Stage, int] = {}
        self._busy_since: dict[Stage, float] = {}
        self._lock = threading.Lock()
        # Persistence (see the module docstring); off until persist() is called.
        self._journal: int | None = None
        self._journal_path: Path | None = None
        self._attempt = uuid.uuid4().hex
        self._pending: dict[Stage, StageUsage] = {}
        self._flushed_at = 0.0
        self.flush_seconds = 0.5
        # Write each answer's usage at once (set for a real endpoint, where every call costs).
        self.write_through = False
        self.earlier = UsageJournal([], 0, 0.0)

    # --- recording -------------------------------------------------------------------------

    def _row(self, stage: Stage) -> StageUsage:
        row = self._rows.get(stage)
        if row is None:
            row = self._rows[stage] = StageUsage(stage=stage)
        return row

    def _delta(self, stage: Stage) -> StageUsage | None:
        """The not-yet-written part of ``stage`` (None when nothing is persisted)."""
        if self._journal is None:
            return None
        delta = self._pending.get(stage)
        if delta is None:
            delta = self._pending[stage] = StageUsage(stage=stage)
        return delta

    @contextmanager
    def _recording(self, stage: Stage) -> Iterator[list[StageUsage]]:
        """Under the lock: ``stage``'s total and its not-yet-written part (when persisted);
        written after, at once for a real endpoint (``write_through``), else in a while."""
        with self._lock:
            yield [row for row in (self._row(stage), self._delta(stage)) if row is not None]
            self._flush() if self.write_through else self._maybe_flush()

    def chat(
        self,
        stage: Stage,
        *,
        input_tokens: int,
        output_tokens: int,
        cached_tokens: int,
        cost_usd: float,
        approximate: bool,
    ) -> None:
        with self._recording(stage) as rows:
            for row in rows:
                row.requests += 1
                row.input_tokens += input_tokens
                row.output_tokens += output_tokens
                row.cached_tokens += cached_tokens
                row.cost_usd += cost_usd
                row.approximate_tokens = row.approximate_tokens or approximate

    def embedding(self, stage: Stage, *, tokens: int, cost_usd: float, approximate: bool) -> None:
        with self._recording(stage) as rows:
            for row in rows:
                row.embedding_requests += 1
                row.embedding_tokens += tokens
                row.cost_usd += cost_usd
                row.approximate_tokens = row.approximate_tokens or approximate

    def cache_hits(self, stage: Stage, count: int = 1) -> None:
        if count:
            with self._lock:
                self._row(stage).cache_hits += count
                delta = self._delta(stage)
                if delta is not None:
                    delta.cache_hits += count
                self._maybe_flush()

    @contextmanager
    def timing(self, stage: Stage) -> Iterator[None]:
        with self._lock:
            self._row(stage)
            self._active[stage] = self._active.get(stage, 0) + 1
            if self._active[stage] == 1:
                self._busy_since[stage] = time.perf_counter()
        try:
            yield
        finally:
            with self._lock:
                self._active[stage] -= 1
                if self._active[stage] == 0:
                    elapsed = time.perf_counter() - self._busy_since.pop(stage)
                    self._rows[stage].seconds += elapsed
                    delta = self._delta(stage)
                    if delta is not None:
                        delta.seconds += elapsed
                        self._flush()  # the stage went idle: write down what it spent

    # --- reading ---------------------------------------------------------------------------

    def rows(self) -> list[StageUsage]:
        """This attempt: a copy per stage, in first-use order, costs rounded to micro-dollars."""
        with self._lock:
            return [_rounded(row) for row in self._rows.values()]

    def total(self) -> Usage:
        total = Usage(stage="total")
        for row in self.rows():
            _add(total, row)
        total.cost_usd = round(total.cost_usd, 8)
        return total

    # --- persistence -----------------------------------------------------------------------

    def persist(self, path: str | Path, *, flush_seconds: float = 0.5) -> None:
        """Append this attempt's usage to ``path`` as it accrues, after reading the earlier attempts from it."""
        path = Path(path)
        with self._lock:
            if self._journal is not None:
                return
            self.earlier = UsageJournal.read(path)
            fd = os.open(
                path, os.O_WRONLY | os.O_CREAT | os.O_APPEND | getattr(os, "O_CLOEXEC", 0), 0o644
            )
            size = os.fstat(fd).st_size
            if size:
                with path.open("rb") as handle:
                    handle.seek(size - 1)
                    torn = handle.read(1) != b"\n"
                if torn:
                    os.write(fd, b"\n")  # a kill mid-line: start ours on a line of its own
            self._journal = fd
            self._journal_path = path
            self.flush_seconds = flush_seconds
            self._write({"attempt": self._attempt, "started": _now(), "pid": os.getpid()})
            # Write what this attempt accrued before persist() was called, too.
            for stage, row in self._rows.items():
                self._pending[stage] = row.model_copy()
            self._flush()
        _flush_at_exit.add(self)

    def _write(self, record: dict[str, Any]) -> None:
        assert self._journal is not None
        # One write() per line on an O_APPEND descriptor: lines never interleave or tear, short of a crash.
        os.write(self._journal, (json.dumps(record, separators=(",", ":")) + "\n").encode("utf-8"))

    def _maybe_flush(self) -> None:
        if self._journal is not None and time.monotonic() - self._flushed_at >= self.flush_seconds:
            self._flush()

    def _flush(self) -> None:
        if self._journal is None:
            return
        self._flushed_at = time.monotonic()
        rows = [row for row in self._pending.values() if any(getattr(row, n) for n in COUNTERS)]
        self._pending.clear()
        if rows:
            usage = [row.model_dump(exclude_defaults=True) | {"stage": row.stage} for row in rows]
            self._write({"attempt": self._attempt, "at": _now(), "usage": usage})

    def flush(self) -> None:
        with self._lock:
            self._flush()

    def close(self) -> None:
        """Write what is pending and that the attempt finished; later usage is no longer persisted."""
        with self._lock:
            if self._journal is None:
                return
            self._flush()
            self._write({"attempt": self._attempt, "finished": _now()})
            os.close(self._journal)
            self._journal = None

    def annotate(self, manifest: RunManifest) -> RunManifest:
        """``manifest`` (built from this attempt's rows) with the usage of every attempt of the run.

        ``usage`` and ``total_cost_usd`` become what all attempts spent;
        ``usage_this_attempt`` / ``cost_this_attempt_usd`` what this one spent;
        ``reused_from_cache`` / ``reused_cost_usd`` what the earlier ones spent.
        """
        this = [_rounded(row) for row in manifest.usage]
        earlier = self.earlier.rows
        total = merge_usage(earlier, this)
        return manifest.model_copy(
            update={
                "usage": total,
                "total_cost_usd": round(sum(row.cost_usd for row in total), 6),
                "usage_this_attempt": this,
                "cost_this_attempt_usd": round(sum(row.cost_usd for row in this), 6),
                "reused_from_cache": earlier,
                "reused_cost_usd": round(sum(row.cost_usd for row in earlier), 6),
                "attempts": self.earlier.attempts + 1,
                "wall_seconds_all_attempts": round(self.earlier.seconds + manifest.wall_seconds, 3),
            }
        )


class _ExitFlusher:
    """Flushes every persisting ledger when the interpreter exits normally (a kill is what flush_seconds bounds)."""

    def __init__(self) -> None:
        self._ledgers: weakref.WeakSet[UsageLedger] = weakref.WeakSet()
        atexit.register(self._flush_all)

    def add(self, ledger: UsageLedger) -> None:
        self._ledgers.add(ledger)

    def _flush_all(self) -> None:
        for ledger in list(self._ledgers):
            with suppress(OSError):
                ledger.flush()


_flush_at_exit = _ExitFlusher()
