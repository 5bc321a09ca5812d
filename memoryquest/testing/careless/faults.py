"""The faults the careless model plants, the corpus of their wordings, and the record of one
planted item.
"""

from __future__ import annotations

import json
import string
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path
from typing import Any

CORPUS_FILE = Path(__file__).parent.parent / "data" / "careless_faults.json"


class Fault(StrEnum):
    FORESHADOW = "foreshadow"  # a news sentence points ahead to a later plan
    ANNOUNCE = "announce"  # a news sentence is flagged as news
    ECHO = "echo"  # a drafted reference repeats the request's words
    INFERENCE = "inference"  # an extracted fact adds what the user did not say
    CONTRADICTION = "contradiction"  # a conversation contradicts what the user said earlier
    MARKDOWN = "markdown"  # the assistant answers with document formatting


# Placeholders that stand for the text the fault is written into; the rest of a wording is
# the fault itself, and what must be gone from the dataset for the item to count as caught.
CARRIERS = frozenset({"said", "said_lc", "reference", "reference_lc", "info", "turn"})
PLACEHOLDERS: dict[Fault, frozenset[str]] = {
    Fault.FORESHADOW: frozenset({"said", "said_lc"}),
    Fault.ANNOUNCE: frozenset({"said", "said_lc"}),
    Fault.ECHO: frozenset({"reference", "reference_lc", "echo", "query_bare"}),
    Fault.INFERENCE: frozenset({"info"}),
    Fault.CONTRADICTION: frozenset({"fact", "changed"}),
    Fault.MARKDOWN: frozenset({"turn"}),
}


@dataclass(frozen=True)
class Wording:
    """One way of making a fault: a template over the placeholders of its fault."""

    id: str
    template: str

    @property
    def fields(self) -> frozenset[str]:
        return frozenset(
            name for _, name, _, _ in string.Formatter().parse(self.template) if name is not None
        )

    def fill(self, **values: str) -> str:
        return self.template.format(**values)

    def fragment(self, **values: str) -> str:
        """The fault's own text as planted: the longest stretch between carriers, trimmed."""
        pieces = self.template.format(**{**values, **{c: "\0" for c in CARRIERS}}).split("\0")
        return normalize(max(pieces, key=lambda p: len(p.strip()))).rstrip(" .")


Corpus = Mapping[Fault, Sequence[Wording]]


def load_corpus(path: Path = CORPUS_FILE) -> dict[Fault, tuple[Wording, ...]]:
    data = json.loads(path.read_text(encoding="utf-8"))
    return {
        Fault(name): tuple(Wording(w["id"], w["template"]) for w in kind["wordings"])
        for name, kind in data["faults"].items()
    }


def normalize(text: str) -> str:
    return " ".join(text.split())


@dataclass
class Injection:
    """One planted item: the fault, its wording, where it went, and what became of it."""

    injection_id: str
    fault: Fault
    wording_id: str
    location: dict[str, Any]  # the query, session or fact it was planted in
    planted: str  # the rewritten text (turn, reference or fact) as the model answered it
    fragment: str  # the fault's own words, as they would read in the dataset
    caught: bool | None = None  # None until the run is scored
    caught_by: list[str] = field(default_factory=list)  # "stage: reason" of rejections quoting it
