"""Open whatever the user points a reading command at (``audit``, ``explore``, ``pgr``): a
generated dataset directory or a published one, told apart the same way by all.

It lives with the commands, not in ``audit/``: reading a published dataset needs
:mod:`memoryquest.publish`, which runs the audit before it publishes."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Literal

from memoryquest.dataset import MANIFEST_FILE, DatasetError, GeneratedDataset

DatasetKind = Literal["generated", "published"]
GENERATED_MARKER = "queries.jsonl"  # every generated dataset has it


def _is_published(path: Path) -> bool:
    """A manifest with its ``publish`` section (what :func:`load_published` reads) beside ``data/``."""
    manifest = path / MANIFEST_FILE
    if not manifest.is_file() or not (path / "data").is_dir():
        return False
    try:
        return isinstance(json.loads(manifest.read_text(encoding="utf-8")).get("publish"), dict)
    except (OSError, ValueError, AttributeError):
        return False


def dataset_kind(path: Path) -> DatasetKind:
    """Whether ``path`` holds a generated or a published dataset.

    Raises :class:`~memoryquest.dataset.DatasetError` (a ``ValueError``) with a
    one-line message when it is neither, pointing at a dataset one level down.
    """
    if not path.exists():
        raise DatasetError(f"{path} does not exist")
    if not path.is_dir():
        raise DatasetError(f"{path} is not a directory")
    if (path / GENERATED_MARKER).is_file():
        return "generated"
    if _is_published(path):
        return "published"
    hint = ""
    for child in ("dataset", "published"):
        if (path / child).is_dir():
            hint = f" (did you mean {path / child}?)"
            break
    raise DatasetError(
        f"{path} is not a dataset: expected {GENERATED_MARKER} (generated) or {MANIFEST_FILE} "
        f"with a 'publish' section and data/ (published){hint}"
    )


def load_dataset(path: Path) -> GeneratedDataset:
    """A generated dataset (``queries.jsonl`` ...) or a published one (``manifest.json`` + ``data/``)."""
    path = Path(path)
    if dataset_kind(path) == "generated":
        return GeneratedDataset.load(path)
    from memoryquest.publish import load_published

    return load_published(path)
