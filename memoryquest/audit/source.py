"""Open whatever the user points the audit at: a generated dataset directory or a published one."""

from __future__ import annotations

from pathlib import Path

from memoryquest.dataset import MANIFEST_FILE, DatasetError, GeneratedDataset


def load_dataset(path: Path) -> GeneratedDataset:
    """A generated dataset (``queries.jsonl`` ...) or a published one (``manifest.json`` + ``data/``).

    Raises :class:`~memoryquest.dataset.DatasetError` (a ``ValueError``) with a
    one-line message when ``path`` is neither.
    """
    path = Path(path)
    if not path.exists():
        raise DatasetError(f"{path} does not exist")
    if not path.is_dir():
        raise DatasetError(f"{path} is not a directory")
    if (path / "queries.jsonl").is_file():
        return GeneratedDataset.load(path)
    if (path / MANIFEST_FILE).is_file() and (path / "data").is_dir():
        from memoryquest.publish import load_published

        return load_published(path)
    hint = ""
    for child in ("dataset", "published"):
        if (path / child).is_dir():
            hint = f" (did you mean {path / child}?)"
            break
    raise DatasetError(
        f"{path} is not a dataset: expected queries.jsonl (generated) or manifest.json and data/ (published){hint}"
    )
