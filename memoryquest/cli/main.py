"""Entry point: discovers the subcommand modules in this package and dispatches.

A subcommand module defines ``register(subparsers, common)`` which adds its
parser(s) and sets ``func`` (taking the parsed args and returning an exit code).

A mistake of the user's — a bad setting or config file, a missing input, an
output directory that cannot be written, a busy output directory, a refused
API key — is one line on stderr naming the file or setting, exit code 2,
no traceback. Every line printed here passes through the secret redactor.
"""

from __future__ import annotations

import argparse
import importlib
import pkgutil
import sys
from collections.abc import Sequence
from pathlib import Path

from pydantic import ValidationError

import memoryquest
import memoryquest.cli
from memoryquest.redaction import redact_text, register_secret
from memoryquest.settings import Settings, load_settings, parse_assignments

USER_ERROR = 2  # exit code for anything the user can fix
FAILURE = 1  # the run failed for another reason (an endpoint that kept failing, a full disk)


def common_options() -> argparse.ArgumentParser:
    """Options every subcommand accepts: config file, overrides, output."""
    parent = argparse.ArgumentParser(add_help=False)
    parent.add_argument(
        "--config", type=Path, help="TOML config file (lower precedence than env and flags)"
    )
    parent.add_argument(
        "--set",
        dest="assignments",
        action="append",
        default=[],
        metavar="SECTION.KEY=VALUE",
        help="override any setting, e.g. --set generation.gamma_max=0.25 (repeatable)",
    )
    return parent


def settings_from_args(args: argparse.Namespace, **named: object) -> Settings:
    """Settings with the file, the environment, --set and named flags applied in that order."""
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
    return settings


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
    return " ".join(redact_text(text).split())


def _error_line(exc: BaseException) -> tuple[str, int]:
    """The message and exit code for an exception that ends a command, or ("", 0) for a bug."""
    from memoryquest.llm.errors import LLMConfigurationError, LLMError
    from memoryquest.run_lock import RunLockedError

    if isinstance(exc, ValidationError):
        return describe_validation_error(exc), USER_ERROR
    if isinstance(exc, RunLockedError | LLMConfigurationError):
        return str(exc), USER_ERROR
    if isinstance(exc, LLMError):
        return str(exc), FAILURE
    if isinstance(exc, ValueError):
        return str(exc), USER_ERROR
    if isinstance(exc, OSError):
        where = f"{exc.filename}: " if exc.filename else ""
        code = (
            USER_ERROR
            if isinstance(
                exc, FileNotFoundError | PermissionError | IsADirectoryError | NotADirectoryError
            )
            else FAILURE
        )
        return f"{where}{exc.strerror or exc}", code
    return "", 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="memoryquest",
        description="Regenerate the MemoryQuest benchmark and check it with PGR.",
    )
    parser.add_argument("--version", action="version", version=memoryquest.__version__)
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND")
    common = common_options()
    for module in sorted(pkgutil.iter_modules(memoryquest.cli.__path__), key=lambda m: m.name):
        if module.name == "main":
            continue
        loaded = importlib.import_module(f"memoryquest.cli.{module.name}")
        register = getattr(loaded, "register", None)
        if register is not None:
            register(subparsers, common)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
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
        message, code = _error_line(exc)
        if not code:
            raise  # a bug: the traceback is what a maintainer needs
        print(f"memoryquest: error: {one_line(message)}", file=sys.stderr)
        return code


if __name__ == "__main__":
    raise SystemExit(main())
