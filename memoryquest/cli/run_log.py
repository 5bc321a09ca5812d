"""A command's log: a file in its output directory, on the terminal only with ``--verbose``.

Prefect's flow engine logs every failed flow or task run with its traceback
(loggers ``prefect.flow_runs``, ``prefect.task_runs``, ``prefect.engine``),
and Prefect's console handler printed all of it on stderr: an endpoint that
kept answering 503 ended ``generate`` in about a hundred lines and three
chained tracebacks above the one line the user needs. While a command runs
(:func:`command_log`):

* every log record that would have reached the terminal goes to the
  command's log file instead: ``OUTPUT/logs/run.log`` for ``generate``, and
  the ``logs`` directory of the run that wrote the dataset
  (``DATASET_DIR/../logs/pgr.log``, ``.../publish.log``) for ``pgr run`` and
  ``publish``. It is appended to, redacted, tracebacks included, and created
  only when there is something to write. Prefect's API handler still sends
  the run's logs to its database;
* the terminal's handlers (Prefect's console handler; Python's last-resort
  handler when Prefect is not loaded) stay silent, unless ``--verbose``: then
  they print as before, and ``memoryquest``'s own info lines too;
* Python warnings are logged (``py.warnings``), so they follow the same way;
* the exception that ends the command is logged there with its traceback,
  unless the flow engine logged it already, and
  :func:`memoryquest.cli.main.main` names the file in its one error line.

A log file that cannot be written gives its records back to the terminal:
nothing is lost.
"""

from __future__ import annotations

import argparse
import contextlib
import logging
import os
import shlex
import sys
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any, TextIO

from memoryquest.cli.main import RUN_LOG_ATTRIBUTE, one_line

LOG_DIR = "logs"  # under a run's output directory
RUN_LOG = "run.log"  # generate's log file
_DATE_FORMAT = "%Y-%m-%d %H:%M:%S"


def add_verbose_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--verbose",
        action="store_true",
        help="also show the log on stderr (for generate, Prefect's flow and task run logs, "
        "tracebacks included); it is always written to the run's logs directory (OUTPUT/logs)",
    )


def log_dir_of_dataset(dataset: Path) -> Path:
    """The ``logs`` directory of the run that wrote ``dataset`` (``OUTPUT/dataset``): ``OUTPUT/logs``."""
    return dataset.absolute().parent / LOG_DIR


class LogFormatter(logging.Formatter):
    """``date time.ms | LEVEL | logger (flow or task run) - message``, then any traceback; redacted."""

    def format(self, record: logging.LogRecord) -> str:
        from memoryquest.redaction import redact_text

        where = record.name
        task_run = getattr(record, "task_run_name", None)
        flow_run = getattr(record, "flow_run_name", None)
        if task_run:
            where += f" (task run {task_run!r})"
        elif flow_run:
            where += f" (flow run {flow_run!r})"
        when = f"{self.formatTime(record, _DATE_FORMAT)}.{int(record.msecs):03d}"
        text = f"{when} | {record.levelname:<7} | {where} - {record.getMessage()}"
        if record.exc_info:
            text += "\n" + (record.exc_text or self.formatException(record.exc_info))
        if record.stack_info:
            text += "\n" + self.formatStack(record.stack_info)
        return redact_text(text)


class CommandLogHandler(logging.FileHandler):
    """Appends to the log file, opened (its directory created) at the first record.

    Remembers the exceptions it wrote a traceback of, and whether it wrote
    anything; a record it cannot write goes to ``fallback`` (the terminal).
    """

    def __init__(self, path: Path, fallback: TextIO) -> None:
        super().__init__(path, mode="a", encoding="utf-8", delay=True)
        self.path = path
        self.written = False
        self.tracebacks: list[BaseException] = []
        self.fallback = fallback
        self.setFormatter(LogFormatter())

    def _open(self) -> Any:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        return super()._open()

    def emit(self, record: logging.LogRecord) -> None:
        try:
            if self.stream is None:  # delay=True: opened at the first record
                self.stream = self._open()
            self.stream.write(self.format(record) + self.terminator)
            self.flush()
        except Exception:
            self.handleError(record)
            return
        self.written = True
        if record.exc_info and record.exc_info[1] is not None:
            self.tracebacks.append(record.exc_info[1])

    def handleError(self, record: logging.LogRecord) -> None:
        """Unwritable: the record goes to the terminal instead of a "--- Logging error ---" report."""
        with contextlib.suppress(Exception):
            self.fallback.write(self.format(record) + self.terminator)
            self.fallback.flush()

    def logged(self, exc: BaseException) -> bool:
        """Whether a traceback of ``exc`` (or of an exception it was raised from) was written."""
        for shown in self.tracebacks:
            seen: set[int] = set()
            current: BaseException | None = shown
            while current is not None and id(current) not in seen:
                if current is exc:
                    return True
                seen.add(id(current))
                current = current.__cause__ or current.__context__
        return False


class _Silenced(logging.Filter):
    """A terminal handler's filter while the log goes to the file: it lets nothing through."""

    def filter(self, record: logging.LogRecord) -> bool:
        return False


def _loggers() -> list[logging.Logger]:
    return [logging.getLogger()] + [
        logger
        for logger in list(logging.Logger.manager.loggerDict.values())
        if isinstance(logger, logging.Logger)
    ]


def _is_terminal(handler: logging.Handler) -> bool:
    """A handler writing to stdout or stderr: Prefect's console and debug handlers, a StreamHandler."""
    if isinstance(handler, logging.FileHandler) or not isinstance(handler, logging.StreamHandler):
        return False
    streams = [sys.stderr, sys.stdout, sys.__stderr__, sys.__stdout__]
    return type(handler).__module__.startswith("prefect.") or any(
        handler.stream is stream for stream in streams if stream is not None
    )


def _warning_to_log(
    message: Warning | str,
    category: type[Warning],
    filename: str,
    lineno: int,
    file: TextIO | None = None,
    line: str | None = None,
) -> None:
    text = warnings.formatwarning(message, category, filename, lineno, line).rstrip()
    logging.getLogger("py.warnings").warning("%s", text)


@contextlib.contextmanager
def command_log(
    args: argparse.Namespace, path: Path, *, prefect_flows: bool = False
) -> Iterator[CommandLogHandler]:
    """Send the command's log to ``path`` (and to the terminal only with ``args.verbose``) for the block.

    ``prefect_flows``: the block runs Prefect flows, and Prefect's logging is set up
    first (``prefect.main`` does it when imported: its console handler on the
    root logger, silenced here). Were it set up later, it would find this
    module's handler on the root logger and leave the root alone.
    """
    if prefect_flows:
        import prefect.main  # noqa: F401  (Prefect's logging configuration, before ours)

    verbose = bool(getattr(args, "verbose", False))
    handler = CommandLogHandler(path, sys.stderr)
    setattr(args, RUN_LOG_ATTRIBUTE, handler)
    root = logging.getLogger()
    undo: list[tuple[Any, Any]] = []  # (remove, what it removes), undone in reverse order

    def attach(logger: logging.Logger, added: logging.Handler) -> None:
        logger.addHandler(added)
        undo.append((logger.removeHandler, added))

    attach(root, handler)
    terminal_on_root = False
    for logger in _loggers():
        terminals = [h for h in logger.handlers if _is_terminal(h)]
        if not terminals:
            continue
        terminal_on_root = terminal_on_root or logger is root
        if logger is not root and not logger.propagate:
            # uvicorn, prefect._internal: their records never reach the root.
            attach(logger, handler)
        if not verbose:
            for terminal in terminals:
                silenced = _Silenced()
                terminal.addFilter(silenced)
                undo.append((terminal.removeFilter, silenced))
    if verbose and not terminal_on_root:
        # Without Prefect the root logger has no handler and Python's last resort printed
        # warnings; the file handler now stops that, so the terminal gets a handler of its own.
        shown = logging.StreamHandler(sys.stderr)
        shown.setFormatter(LogFormatter())
        attach(root, shown)
    package = logging.getLogger("memoryquest")
    level = package.level
    if level == logging.NOTSET:
        package.setLevel(logging.INFO)  # its info lines in the file (and, verbose, on the terminal)
    showwarning = warnings.showwarning
    warnings.showwarning = _warning_to_log
    try:
        logging.getLogger("memoryquest.cli").info(
            "%s (pid %d)", shlex.join(["memoryquest", *sys.argv[1:]]), os.getpid()
        )
        yield handler
    except Exception as exc:
        if not handler.logged(exc):
            logging.getLogger("memoryquest.cli").error(
                "%s: %s", type(exc).__name__, one_line(str(exc)), exc_info=exc
            )
        raise
    finally:
        warnings.showwarning = showwarning
        package.setLevel(level)
        for remove, what in reversed(undo):
            remove(what)
        handler.close()


__all__ = [
    "LOG_DIR",
    "RUN_LOG",
    "CommandLogHandler",
    "add_verbose_option",
    "command_log",
    "log_dir_of_dataset",
]
