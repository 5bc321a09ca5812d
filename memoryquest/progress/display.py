"""Progress on the terminal: live bars when stdout is a terminal, plain lines every few seconds when not.

A run started from a terminal gets a ``rich`` live display (bars per stage
group, request rate against the limit, tokens, dollars, 429s, rejections,
ETA). Where stdout is a file or a pipe (CI, a log file, a Prefect worker),
redrawing would fill the log with escape codes, so the same figures come as
one plain line every ``every_seconds`` and once at the end.

While the live display is up, log records that would be written to the
terminal are printed above it (warnings and errors) or left out (the
per-task INFO lines the bars replace), so the two do not garble each other;
they still reach Prefect's API and any file handler.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import sys
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from enum import StrEnum
from typing import TextIO

from rich.console import Console, Group, RenderableType
from rich.live import Live
from rich.progress_bar import ProgressBar
from rich.table import Table
from rich.text import Text

from memoryquest.contracts import StageGroupName
from memoryquest.progress.figures import ProgressSnapshot, RunFigures
from memoryquest.progress.text import count, duration, reasons

DEFAULT_EVERY_SECONDS = 10.0
# Log records of these loggers at INFO and below are what the live bars replace.
RUN_LOGGERS = ("prefect.task_runs", "prefect.flow_runs")


class ProgressMode(StrEnum):
    AUTO = "auto"  # live on a terminal, plain lines otherwise
    LIVE = "live"
    PLAIN = "plain"
    OFF = "off"

    def resolved(self, stream: TextIO) -> ProgressMode:
        if self is not ProgressMode.AUTO:
            return self
        isatty = getattr(stream, "isatty", None)
        return ProgressMode.LIVE if callable(isatty) and isatty() else ProgressMode.PLAIN


def _rate(snapshot: ProgressSnapshot) -> str:
    limit = snapshot.requests_per_minute_limit
    against = f" of {limit:,} limit" if limit else ""
    return f"{snapshot.requests_per_minute:,.0f}/min{against}"


def _money(snapshot: ProgressSnapshot) -> str:
    text = f"${snapshot.cost_usd:,.2f}"
    if snapshot.cost_estimate_usd is not None:
        return f"{text} of ${snapshot.cost_estimate_usd:,.2f} estimated"
    projected = snapshot.projected_cost_usd
    return f"{text} (projected ${projected:,.2f})" if projected is not None else text


def _eta(snapshot: ProgressSnapshot) -> str:
    return "-" if snapshot.eta_seconds is None else duration(snapshot.eta_seconds)


def plain_line(snapshot: ProgressSnapshot) -> str:
    """One line with every figure, for logs (no escape codes, no redrawing)."""
    parts = [
        f"progress {100 * snapshot.fraction:3.0f}% ({snapshot.steps_done}/{snapshot.steps_total} steps)"
    ]
    if snapshot.unit == "personas":
        parts.append(f"personas {snapshot.personas_done}/{snapshot.personas_total}")
        rejected = f"{snapshot.rejected_total:,} rejected"
        if snapshot.rejected:
            rejected += f" ({reasons(snapshot.rejected, limit=3)})"
        parts.append(f"queries {snapshot.queries_kept:,} kept, {rejected}")
        parts.append(f"sessions {snapshot.sessions:,}")
    else:
        parts.append(f"{snapshot.unit} {snapshot.steps_done}/{snapshot.steps_total}")
    if snapshot.spending:
        parts += [
            f"requests {snapshot.requests + snapshot.embedding_requests:,} ({_rate(snapshot)})",
            f"tokens {count(snapshot.input_tokens)} in / {count(snapshot.output_tokens)} out",
            _money(snapshot),
            f"429s {snapshot.rate_limited:,}, retries {snapshot.retries:,}",
        ]
    parts += [f"elapsed {duration(snapshot.elapsed_seconds)}", f"ETA {_eta(snapshot)}"]
    return " · ".join(parts)


def _stage_note(snapshot: ProgressSnapshot, stage: str) -> str:
    if snapshot.unit != "personas":
        return ""
    notes: dict[str, str] = {
        StageGroupName.QUERIES: f"{snapshot.queries_kept:,} kept, {snapshot.rejected_total:,} rejected",
        StageGroupName.CONVERSATIONS: f"{snapshot.sessions:,} sessions",
        StageGroupName.MEMORY: f"{snapshot.facts:,} facts",
        StageGroupName.PGR_VALIDATION: f"{snapshot.results:,} results",
    }
    return notes.get(stage, "")


def render(snapshot: ProgressSnapshot, title: str) -> RenderableType:
    """The live display: the overall bar, one bar per stage group, then the figures."""
    bars = Table.grid(padding=(0, 1))
    bars.add_column(style="bold")
    bars.add_column(width=32)
    bars.add_column(justify="right")
    bars.add_column(style="dim")

    def add(name: str, done: int, total: int, note: str) -> None:
        bar = ProgressBar(total=max(total, 1), completed=min(done, total), width=32)
        bars.add_row(name, bar, f"{done:,}/{total:,}", note)

    overall = f"{100 * snapshot.fraction:.0f}% · ETA {_eta(snapshot)}"
    add("overall", snapshot.steps_done, snapshot.steps_total, overall)
    if snapshot.unit == "personas":
        add("personas", snapshot.personas_done, snapshot.personas_total, "")
    for stage in snapshot.stages:
        note = _stage_note(snapshot, stage.stage)
        if stage.cached:
            note = f"{note}, {stage.cached} cached" if note else f"{stage.cached} cached"
        add(f"  {stage.stage}", stage.done, stage.total, note)

    figures = Table.grid(padding=(0, 2))
    figures.add_column(style="bold")
    figures.add_column()
    if snapshot.spending:
        figures.add_row(
            "requests",
            f"{snapshot.requests:,} chat + {snapshot.embedding_requests:,} embedding · {_rate(snapshot)}",
        )
        figures.add_row(
            "tokens", f"{count(snapshot.input_tokens)} in · {count(snapshot.output_tokens)} out"
        )
        figures.add_row("spent", _money(snapshot))
        figures.add_row("429s", f"{snapshot.rate_limited:,} · retries {snapshot.retries:,}")
    if snapshot.unit == "personas":
        figures.add_row("rejected", reasons(snapshot.rejected) or "none")
    figures.add_row("elapsed", duration(snapshot.elapsed_seconds))
    return Group(Text(title, style="bold"), bars, figures)


class _AboveLive(logging.Filter):
    """Sends a terminal handler's records through the live display instead of writing them itself."""

    def __init__(self, handler: logging.Handler, live: Live) -> None:
        super().__init__()
        self.handler = handler
        self.live = live

    def filter(self, record: logging.LogRecord) -> bool:
        if record.levelno < logging.WARNING and record.name.startswith(RUN_LOGGERS):
            return False  # the bars say it
        self.live.console.print(Text(self.handler.format(record)), soft_wrap=True)
        return False


def _terminal_handlers() -> list[logging.Handler]:
    """Every handler that writes to a terminal (Prefect's console handler among them)."""
    loggers: list[logging.Logger] = [logging.getLogger()]
    loggers += [
        logger
        for logger in logging.Logger.manager.loggerDict.values()
        if isinstance(logger, logging.Logger)
    ]
    handlers: list[logging.Handler] = []
    for logger in loggers:
        for handler in logger.handlers:
            stream = getattr(handler, "stream", None)
            isatty = getattr(stream, "isatty", None)
            if callable(isatty) and isatty() and handler not in handlers:
                handlers.append(handler)
    return handlers


@contextlib.contextmanager
def _logs_above(live: Live) -> Iterator[None]:
    filters = [(handler, _AboveLive(handler, live)) for handler in _terminal_handlers()]
    for handler, log_filter in filters:
        handler.addFilter(log_filter)
    try:
        yield
    finally:
        for handler, log_filter in filters:
            handler.removeFilter(log_filter)


@contextlib.asynccontextmanager
async def showing(
    figures: RunFigures,
    mode: ProgressMode = ProgressMode.AUTO,
    *,
    title: str,
    every_seconds: float = DEFAULT_EVERY_SECONDS,
    stream: TextIO | None = None,
) -> AsyncIterator[None]:
    """Show ``figures`` on ``stream`` (stdout) while the block runs, live or as plain lines."""
    out = stream if stream is not None else sys.stdout
    resolved = mode.resolved(out)
    if resolved is ProgressMode.OFF:
        yield
    elif resolved is ProgressMode.LIVE:
        console = Console(file=out, force_terminal=mode is ProgressMode.LIVE or None)
        live = Live(
            get_renderable=lambda: render(figures.snapshot(), title),
            console=console,
            refresh_per_second=4,
            redirect_stdout=False,
            redirect_stderr=False,
        )
        with live, _logs_above(live):
            yield
    else:
        async with _plain_lines(figures, out, every_seconds, title):
            yield


@contextlib.asynccontextmanager
async def periodically(
    every_seconds: float, action: Callable[[], Awaitable[None]]
) -> AsyncIterator[None]:
    """Run ``action`` every ``every_seconds`` while the block runs, and once more at its end,
    so the last figures shown are the final ones."""

    async def every() -> None:
        while True:
            await asyncio.sleep(every_seconds)
            await action()

    ticker = asyncio.create_task(every())
    try:
        yield
    finally:
        ticker.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await ticker
        await action()


@contextlib.asynccontextmanager
async def _plain_lines(
    figures: RunFigures, out: TextIO, every_seconds: float, title: str
) -> AsyncIterator[None]:
    async def write() -> None:
        out.write(f"{title}: {plain_line(figures.snapshot())}\n")
        out.flush()

    async with periodically(every_seconds, write):
        yield
