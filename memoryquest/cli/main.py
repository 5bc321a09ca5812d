"""Entry point: the subcommand table, and one error line for every mistake of the user's.

Each subcommand lives in its own module here, which defines
``configure(parser)``: it adds the subcommand's arguments (or its actions) and
sets ``func`` (taking the parsed args and returning an exit code). Only the
module of the subcommand being run is imported, so ``memoryquest --help``
imports no subcommand, no Prefect, no pydantic and no matplotlib: the table
below is all it needs.

A mistake of the user's — a bad setting or config file, a missing input, an
output directory that cannot be written, a busy output directory, a refused
API key — is one line on stderr naming the file or setting, exit code 2,
no traceback. A failure that is not the user's — an endpoint that kept
failing (the line names its URL, the last HTTP status and the attempts), a
Prefect server that would not start, a full disk — is one line too, exit
code 1. A command that keeps a log (``generate``, ``pgr run``, ``publish``:
:mod:`memoryquest.cli.run_log`) names it at the end of the line: the
traceback is there (and on the terminal too with ``--verbose``). Every line
printed here passes through the secret redactor.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple

if TYPE_CHECKING:
    from pydantic import ValidationError

    from memoryquest.settings import Settings

USER_ERROR = 2  # exit code for anything the user can fix
FAILURE = 1  # the run failed for another reason (an endpoint that kept failing, a full disk)
SETTINGS_ATTRIBUTE = "effective_settings"  # settings_from_args notes them on the parsed arguments
RUN_LOG_ATTRIBUTE = (
    "run_log"  # where a command's log is noted on its parsed arguments (cli.run_log)
)


class Command(NamedTuple):
    module: str  # memoryquest.cli.<module>
    summary: str  # the line in `memoryquest --help`


COMMANDS: dict[str, Command] = {
    "audit": Command(
        "audit",
        "audit a dataset for shortcuts: detectable reference turns, leakage, repetition, bad ground truth",
    ),
    "config": Command("config", "inspect the effective configuration"),
    "estimate": Command(
        "estimate", "predict calls, tokens and cost of a run before spending anything"
    ),
    "explore": Command(
        "explore", "build (or find) the static HTML explorer of a dataset and print where it is"
    ),
    "generate": Command(
        "generate", "generate a MemoryQuest dataset (Prefect flow; offline simulator by default)"
    ),
    "personas": Command("personas", "list or show the personas a source provides"),
    "progress": Command(
        "progress",
        "show the progress of running generations (shards and Dask workers added up) as one line",
    ),
    "pgr": Command("pgr", "run the bundled Prospection-Guided Retrieval (PGR) runner"),
    "publish": Command(
        "publish",
        "publish a generated dataset as Hugging Face-style Parquet splits with a dataset card",
    ),
    "schemas": Command("schemas", "write or check the JSON Schemas of the published tables"),
    "validate": Command(
        "validate", "check a generated dataset against every invariant (exit 1 on any violation)"
    ),
}


def add_common_options(parser: argparse.ArgumentParser) -> None:
    """Options every subcommand that reads settings accepts: the config file and overrides."""
    parser.add_argument(
        "--config", type=Path, help="TOML config file (lower precedence than env and flags)"
    )
    parser.add_argument(
        "--set",
        dest="assignments",
        action="append",
        default=[],
        metavar="SECTION.KEY=VALUE",
        help="override any setting, e.g. --set generation.gamma_max=0.25 (repeatable)",
    )


def settings_from_args(args: argparse.Namespace, **named: object) -> Settings:
    """Settings with the file, the environment, --set and named flags applied in that order."""
    from memoryquest.redaction import register_secret
    from memoryquest.settings import load_settings, parse_assignments

    overrides = parse_assignments(args.assignments)
    for dotted, value in named.items():
        if value is None:
            continue
        node = overrides
        parts = dotted.split("__")
        for part in parts[:-1]:
            node = node.setdefault(part, {})
        node[parts[-1]] = value
    settings = load_settings(args.config, overrides)
    if settings.endpoint.api_key is not None:
        register_secret(settings.endpoint.api_key.get_secret_value())
    setattr(args, SETTINGS_ATTRIBUTE, settings)  # for the error line: the endpoint's URL
    return settings


def endpoint_of(settings: Settings) -> str | None:
    """The URL the chat requests of ``settings`` go to (None for the offline simulator)."""
    from memoryquest.llm.openai_backend import OPENAI_DEFAULT_URL
    from memoryquest.settings import Backend

    endpoint = settings.endpoint
    backend = endpoint.resolved_backend()
    if backend is Backend.SIMULATED:
        return None
    if backend is Backend.AZURE:
        return endpoint.azure_endpoint
    return endpoint.base_url or OPENAI_DEFAULT_URL


def describe_validation_error(exc: ValidationError, limit: int = 3) -> str:
    """Pydantic's multi-line report as one line: ``invalid setting a.b: message; ...``."""
    parts = []
    for error in exc.errors(include_url=False)[:limit]:
        where = ".".join(str(part) for part in error.get("loc", ()))
        message = str(error.get("msg", "invalid")).removeprefix("Value error, ")
        if error.get("type") not in (
            "value_error",
            "assertion_error",
            "missing",
            "extra_forbidden",
        ):
            shown = repr(error.get("input"))
            if len(shown) <= 60:
                message += f" (got {shown})"
        parts.append(f"{where}: {message}" if where else message)
    more = exc.error_count() - limit
    if more > 0:
        parts.append(f"and {more} more")
    noun = "setting" if exc.title == "Settings" or exc.title.endswith("Settings") else exc.title
    return f"invalid {noun} " + "; ".join(parts)


def one_line(text: str) -> str:
    """Redacted, with any line breaks folded (an error line must stay one line)."""
    from memoryquest.redaction import redact_text

    return " ".join(redact_text(text).split())


def _outage_line(exc: BaseException, settings: Settings | None) -> str:
    """An endpoint that kept failing, in one line naming its URL, the last HTTP status and the attempts.

    The client's message names the attempts (``gave up after N attempts``,
    ``N consecutive requests``) and the last error (``HTTP 503: ...``); the
    URL is put first when the message does not say it already.
    """
    from memoryquest.llm.errors import LLMTransportError
    from memoryquest.redaction import redact_url

    message = str(exc)
    if isinstance(exc, LLMTransportError) and f"{exc.attempts} attempt" not in message:
        message += f" ({exc.attempts} attempt{'s' if exc.attempts != 1 else ''})"
    endpoint = endpoint_of(settings) if settings is not None else None
    if endpoint and endpoint not in message and redact_url(endpoint) not in message:
        message = f"{endpoint}: {message}"
    return message


def _error_line(exc: BaseException, settings: Settings | None = None) -> tuple[str, int]:
    """The message and exit code for an exception that ends a command, or ("", 0) for a bug.

    ``settings``: the command's, for the URL of an endpoint that kept failing.
    """
    from pydantic import ValidationError

    from memoryquest.llm.errors import (
        CircuitOpenError,
        LLMConfigurationError,
        LLMError,
        LLMTransportError,
    )
    from memoryquest.orchestration.output_lock import RunLockedError
    from memoryquest.orchestration.prefect_defaults import PrefectServerError
    from memoryquest.pgr.outcomes import PGRError

    if isinstance(exc, ValidationError):
        return describe_validation_error(exc), USER_ERROR
    if isinstance(exc, RunLockedError | LLMConfigurationError):
        return str(exc), USER_ERROR
    if isinstance(exc, LLMTransportError | CircuitOpenError):
        return _outage_line(exc, settings), FAILURE
    if isinstance(exc, LLMError | PGRError | PrefectServerError):
        return str(exc), FAILURE
    if isinstance(exc, ValueError):
        return str(exc), USER_ERROR
    if isinstance(exc, OSError):
        where = f"{exc.filename}: " if exc.filename else ""
        code = (
            USER_ERROR
            if isinstance(
                exc,
                FileNotFoundError
                | FileExistsError
                | PermissionError
                | IsADirectoryError
                | NotADirectoryError,
            )
            else FAILURE
        )
        return f"{where}{exc.strerror or exc}", code
    return "", 0


class _Version(argparse.Action):
    """``--version``, reading the installed version only when asked (it costs an import)."""

    def __init__(
        self, option_strings: Sequence[str], dest: str = argparse.SUPPRESS, **kwargs: Any
    ) -> None:
        super().__init__(option_strings, dest=dest, default=argparse.SUPPRESS, nargs=0, **kwargs)

    def __call__(self, parser: argparse.ArgumentParser, *_: object) -> None:
        import memoryquest

        parser.exit(message=f"{memoryquest.__version__}\n")


def _chosen(argv: Sequence[str]) -> str | None:
    """The subcommand named in ``argv`` (the top level has no option taking a value)."""
    return next((arg for arg in argv if not arg.startswith("-")), None)


def build_parser(argv: Sequence[str] = ()) -> argparse.ArgumentParser:
    """The parser, with the subcommand named in ``argv`` (if any) configured in full."""
    parser = argparse.ArgumentParser(
        prog="memoryquest",
        description="Regenerate the MemoryQuest benchmark and check it with PGR.",
    )
    parser.add_argument("--version", action=_Version, help="show the version and exit")
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND")
    chosen = _chosen(argv)
    for name, command in COMMANDS.items():
        sub = subparsers.add_parser(name, help=command.summary, description=command.summary)
        if name == chosen:
            importlib.import_module(f"memoryquest.cli.{command.module}").configure(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    parser = build_parser(argv)
    args = parser.parse_args(argv)
    args.argv = argv  # the command line as given, for the records a command writes
    func = getattr(args, "func", None)
    if func is None:
        parser.print_help()
        return 0 if args.command is None else 2
    try:
        return int(func(args) or 0)
    except KeyboardInterrupt:
        print("memoryquest: interrupted", file=sys.stderr)
        return 130
    except Exception as exc:
        message, code = _error_line(exc, getattr(args, SETTINGS_ATTRIBUTE, None))
        if not code:
            raise  # a bug: the traceback is what a maintainer needs
        log = getattr(
            args, RUN_LOG_ATTRIBUTE, None
        )  # where the traceback is, if the command had a log
        if log is not None and log.written:
            message += f" (log: {log.path})"
        print(f"memoryquest: error: {one_line(message)}", file=sys.stderr)
        return code


if __name__ == "__main__":
    raise SystemExit(main())
