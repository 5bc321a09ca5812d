"""Entry point: discovers the subcommand modules in this package and dispatches.

A subcommand module defines ``register(subparsers, common)`` which adds its
parser(s) and sets ``func`` (taking the parsed args and returning an exit code).
"""

from __future__ import annotations

import argparse
import importlib
import pkgutil
import sys
from collections.abc import Sequence
from pathlib import Path

import memoryquest
import memoryquest.cli
from memoryquest.settings import Settings, load_settings, parse_assignments


def common_options() -> argparse.ArgumentParser:
    """Options every subcommand accepts: config file, overrides, output."""
    parent = argparse.ArgumentParser(add_help=False)
    parent.add_argument("--config", type=Path, help="TOML config file (lower precedence than env and flags)")
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
    return load_settings(args.config, overrides)


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
    except (ValueError, FileNotFoundError) as exc:
        print(f"memoryquest: error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    raise SystemExit(main())
