"""The card's Hugging Face YAML front matter: licence, tags, size category and one config
per non-empty table, naming the files of each split."""

from __future__ import annotations

import json
from collections.abc import Mapping

from memoryquest.publish.card.inputs import CardInputs
from memoryquest.publish.splits import SPLITS

PRETTY_NAME = "MemoryQuest (regenerated)"
DEFAULT_CONFIG = "queries"


def _q(text: str) -> str:
    """A YAML double-quoted scalar (JSON strings are valid YAML)."""
    return json.dumps(text, ensure_ascii=False)


def _size_category(rows: int) -> str:
    for limit, label in (
        (1_000, "n<1K"),
        (10_000, "1K<n<10K"),
        (100_000, "10K<n<100K"),
        (1_000_000, "100K<n<1M"),
    ):
        if rows < limit:
            return label
    return "1M<n<10M"


def data_files(row_counts: Mapping[str, Mapping[str, int]]) -> dict[str, list[tuple[str, str]]]:
    """config -> [(split, path glob)] for every non-empty split (empty configs are left out)."""
    layout: dict[str, list[tuple[str, str]]] = {}
    for config, counts in row_counts.items():
        splits = [
            (split, f"data/{config}/{split}-*") for split in SPLITS if counts.get(split, 0) > 0
        ]
        if splits:
            layout[config] = splits
    return layout


def front_matter(inputs: CardInputs) -> str:
    layout = data_files(inputs.row_counts)
    default = DEFAULT_CONFIG if DEFAULT_CONFIG in layout else next(iter(layout), None)
    tags = [
        "long-term-memory",
        "personalization",
        "retrieval",
        "multi-session",
        "dialogue",
        "synthetic",
    ]
    if inputs.manifest.simulated:
        tags.append("simulated")
    lines = [
        "---",
        f"pretty_name: {_q(PRETTY_NAME)}",
        "license: cc-by-nc-4.0",
        "language:",
        "- en",
        "task_categories:",
        "- question-answering",
        "- text-retrieval",
        "tags:",
        *[f"- {tag}" for tag in tags],
        "size_categories:",
        f"- {_q(_size_category(inputs.statistics.queries))}",
        "configs:",
    ]
    for config, splits in layout.items():
        lines.append(f"- config_name: {config}")
        if config == default:
            lines.append("  default: true")
        lines.append("  data_files:")
        for split, path in splits:
            lines.append(f"  - split: {split}")
            lines.append(f"    path: {_q(path)}")
    lines.append("---")
    return "\n".join(lines) + "\n"
