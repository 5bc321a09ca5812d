"""``memoryquest schemas write|check``: the published JSON Schemas, regenerated from the contracts."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path


def configure(parser: argparse.ArgumentParser) -> None:
    parser.description = (
        "JSON Schemas of every published table, the run manifest and the custom persona "
        "format, generated from the pydantic contracts."
    )
    actions = parser.add_subparsers(dest="action", metavar="ACTION", required=True)
    write = actions.add_parser("write", help="(re)generate <table>.schema.json files")
    _add_directory_option(write, "target directory")
    write.set_defaults(func=_write)
    check = actions.add_parser("check", help="fail when the schema files differ from the contracts")
    _add_directory_option(check, "directory to check")
    check.set_defaults(func=_check)


def _add_directory_option(action: argparse.ArgumentParser, role: str) -> None:
    """``--directory``, the schema files' folder: the same option, and default, for both actions."""
    action.add_argument(
        "--directory", type=Path, default=Path("schemas"), help=f"{role} (default: schemas)"
    )


def _write(args: argparse.Namespace) -> int:
    from memoryquest.cli.inputs import prepare_output_dir
    from memoryquest.schema_export import export_schemas

    for path in export_schemas(prepare_output_dir(args.directory)):
        print(path)
    return 0


def _check(args: argparse.Namespace) -> int:
    from memoryquest.schema_export import schema_drift

    problems = schema_drift(args.directory)
    for problem in problems:
        print(problem, file=sys.stderr)
    if problems:
        print(
            f"run `memoryquest schemas write --directory {args.directory}` to regenerate",
            file=sys.stderr,
        )
        return 1
    print(f"{args.directory}: schemas match the contracts")
    return 0
