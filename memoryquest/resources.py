"""Where the shipped data folders live: in the wheel, or at the source-tree root."""

from __future__ import annotations

from pathlib import Path

_PACKAGE = Path(__file__).resolve().parent


def data_dir(name: str) -> Path:
    """``prompts``, ``schemas`` or ``personas``, wherever this install keeps them."""
    installed = _PACKAGE / "_data" / name
    if installed.is_dir():
        return installed
    source_tree = _PACKAGE.parent / name
    if source_tree.is_dir():
        return source_tree
    raise FileNotFoundError(f"memoryquest data folder {name!r} is missing from this install")
