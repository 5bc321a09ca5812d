"""``memoryquest config show``: the effective configuration, secrets masked."""

from __future__ import annotations

import argparse
import json
from typing import Any

from memoryquest.cli.main import settings_from_args


def register(subparsers: Any, common: argparse.ArgumentParser) -> None:
    config = subparsers.add_parser("config", help="inspect the effective configuration")
    actions = config.add_subparsers(dest="action", metavar="ACTION", required=True)
    show = actions.add_parser("show", parents=[common], help="print the effective configuration (secrets masked)")
    show.set_defaults(func=_show)


def _show(args: argparse.Namespace) -> int:
    settings = settings_from_args(args)
    print(json.dumps(settings.masked(), indent=2))
    return 0
