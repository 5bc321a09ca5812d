"""``memoryquest config show``: the effective configuration, secrets masked."""

from __future__ import annotations

import argparse
import json

from memoryquest.cli.main import add_common_options, settings_from_args


def configure(parser: argparse.ArgumentParser) -> None:
    actions = parser.add_subparsers(dest="action", metavar="ACTION", required=True)
    show = actions.add_parser("show", help="print the effective configuration (secrets masked)")
    add_common_options(show)
    show.set_defaults(func=_show)


def _show(args: argparse.Namespace) -> int:
    settings = settings_from_args(args)
    print(json.dumps(settings.masked(), indent=2))
    return 0
