"""The arguments several subcommands share, declared once, and the checks of what they name.

One spelling per flag: the dataset a command reads is its first positional
argument (``DATASET_DIR``), where it writes is ``--output``, users are
``--users user0,user3`` (with ``--range START:STOP`` and ``--count N`` where a
command picks personas from a source: :func:`add_selection_options`). Earlier spellings (``--to``, ``--out``,
``--dataset``) are still accepted but not shown.

Each check raises a ValueError whose message is one line naming the path or
flag; :func:`memoryquest.cli.main.main` prints it (exit code 2). Commands run
the checks before any work, so a typo does not cost a run.
"""

from __future__ import annotations

import argparse
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from memoryquest.dataset import GeneratedDataset
    from memoryquest.intake import PersonaSelection

GENERATED_MARKER = "queries.jsonl"  # every generated dataset has it


class Arguments(Protocol):
    """A parser or an argument group (a mutually exclusive one, say)."""

    def add_argument(self, *args: Any, **kwargs: Any) -> argparse.Action: ...


def add_dataset_argument(
    parser: argparse.ArgumentParser, help: str, *, old: str | None = None
) -> None:
    """``DATASET_DIR``; ``old``: an earlier option spelling, still accepted (see :func:`dataset_dir`)."""
    parser.add_argument(
        "dataset_dir", type=Path, metavar="DATASET_DIR", nargs="?" if old else None, help=help
    )
    if old:
        parser.add_argument(old, type=Path, dest="dataset_dir_option", help=argparse.SUPPRESS)


def dataset_dir(args: argparse.Namespace) -> Path:
    """The dataset directory, however it was given (exactly once)."""
    given = [p for p in (args.dataset_dir, getattr(args, "dataset_dir_option", None)) if p]
    if len(given) != 1:
        raise ValueError("give the dataset directory once, as the first argument (DATASET_DIR)")
    return Path(given[0])


def add_output_option(
    parser: argparse.ArgumentParser, help: str, *, old: Sequence[str] = ()
) -> None:
    """``--output``; ``old``: earlier spellings, still accepted, not shown."""
    parser.add_argument("--output", type=Path, help=help)
    for flag in old:
        parser.add_argument(flag, type=Path, dest="output", help=argparse.SUPPRESS)


def add_users_option(parser: Arguments, help: str = "") -> None:
    """``--users user0,user3``; split by :meth:`memoryquest.intake.PersonaSelection.parse`."""
    parser.add_argument(
        "--users",
        metavar="USER,USER",
        help="comma-separated user ids, e.g. user0,user3" + (f" ({help})" if help else ""),
    )


def add_selection_options(parser: Arguments) -> None:
    """``--users``, ``--range`` and ``--count``: which personas of a source a command takes.

    ``--users`` and ``--range`` choose (one of them), ``--count`` caps: alone the
    first N, after ``--users`` or ``--range`` the first N of those. Read them back
    with :func:`selection_from_args`; the generation flow's parameters ``users``,
    ``range`` and ``count`` mean the same.
    """
    add_users_option(parser)
    parser.add_argument(
        "--range",
        dest="range_text",
        metavar="START:STOP",
        help="users at positions START to STOP-1 in natural order (user0, user1, ..., user10), "
        "half-open like a Python slice: 30:230 is 200 users, 30: runs to the end",
    )
    parser.add_argument(
        "--count",
        type=int,
        metavar="N",
        help="at most N users: the first N in natural order, or the first N of --users/--range",
    )


def selection_from_args(args: argparse.Namespace) -> PersonaSelection:
    """The selection of :func:`add_selection_options`; a bad one is a one-line ValueError."""
    from memoryquest.intake import PersonaSelection

    return PersonaSelection.parse(users=args.users, count=args.count, range_text=args.range_text)


def prepare_output_dir(output: Path) -> Path:
    """Create ``output`` if needed and prove it writable."""
    if output.exists() and not output.is_dir():
        raise ValueError(f"output {output} exists and is not a directory")
    try:
        output.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise ValueError(
            f"cannot create output directory {output}: {exc.strerror or exc}"
        ) from None
    try:  # os.access is not enough: it says yes to root on a read-only file system
        with tempfile.TemporaryFile(dir=output, prefix=".memoryquest-write-check-"):
            pass
    except OSError as exc:
        raise ValueError(
            f"output directory {output} is not writable: {exc.strerror or exc}"
        ) from None
    return output


def check_output_target(output: Path, *, directory: bool) -> None:
    """A directory (``directory``) or file that the command will write whole: it is not the
    other kind already, and the directory it goes in can be created and written."""
    if directory and output.exists() and not output.is_dir():
        raise ValueError(f"output {output} exists and is not a directory")
    if not directory and output.is_dir():
        raise ValueError(f"output {output} is a directory; give a file name")
    prepare_output_dir(output.absolute().parent)


def load_generated(path: Path) -> GeneratedDataset:
    """The dataset ``memoryquest generate`` wrote into ``path`` (``OUTPUT/dataset``)."""
    from memoryquest.dataset import GeneratedDataset

    if path.is_dir() and (path / GENERATED_MARKER).is_file():
        return GeneratedDataset.load(path)
    if path.is_dir() and any(path.glob("**/*.parquet")):
        raise ValueError(
            f"{path} looks like a published Parquet dataset; this command reads the generated "
            "dataset directory (the output of `memoryquest generate`)"
        )
    hint = f" (did you mean {path / 'dataset'}?)" if (path / "dataset").is_dir() else ""
    raise ValueError(f"{path} is not a dataset directory (no {GENERATED_MARKER}){hint}")
