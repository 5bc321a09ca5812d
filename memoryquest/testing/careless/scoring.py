"""Scoring a run: an item is caught when its words are gone from the final dataset, and the
rejections that quote it name the gates that caught it.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

from memoryquest.dataset import GeneratedDataset
from memoryquest.testing.careless.faults import Fault, Injection, normalize

CATCH_TARGET = 0.95  # share of each fault's planted items the gates must keep out


def _strings(value: Any) -> Iterator[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for item in value.values():
            yield from _strings(item)
    elif isinstance(value, list):
        for item in value:
            yield from _strings(item)


def _session_texts(dataset: GeneratedDataset) -> dict[tuple[str, str, str], str]:
    """Each final session's text, by its event's (date, domain, description)."""
    events = {
        event.event_id: (event.date.isoformat(), event.domain.value, event.description)
        for timeline in dataset.timelines
        for event in timeline.events
    }
    texts: dict[tuple[str, str, str], list[str]] = {}
    for session in dataset.sessions:
        key = events.get(session.event_id)
        if key is not None:
            texts.setdefault(key, []).extend(turn.content for turn in session.turns)
    return {key: normalize(" \n ".join(parts)) for key, parts in texts.items()}


def _survives(injection: Injection, dataset: GeneratedDataset, sessions: dict[Any, str]) -> bool:
    """Whether the item's own words are in the final dataset where it was planted."""
    where = injection.location
    if injection.fault is Fault.ECHO:
        return any(
            injection.fragment in normalize(reference.text)
            for query in dataset.queries
            for reference in query.references
        )
    if injection.fault is Fault.INFERENCE:
        planted_in = set(where["session_ids"])
        return any(
            injection.fragment in normalize(info)
            for fact in dataset.facts
            if not planted_in or planted_in & set(fact.session_ids)
            for info in [fact.info, *(revision.info for revision in fact.revisions)]
        )
    key = (where["date"], where["domain"], where["description"])
    return injection.fragment in sessions.get(key, "")


_CASCADE = "dropped with its query"


def score(injections: Sequence[Injection], dataset: GeneratedDataset) -> None:
    """Mark each injection caught or not, and name the rejections that quote it."""
    sessions = _session_texts(dataset)
    rejections = []
    for rejected in dataset.rejected:
        try:
            payload = json.loads(rejected.payload_json)
        except ValueError:
            payload = rejected.payload_json
        text = normalize(" \n ".join(_strings(payload)))
        gate = f"{rejected.stage.value}: {rejected.reason.value}"
        if _CASCADE in rejected.detail:  # valid itself, but another part of its query failed
            gate += " (with its query)"
        rejections.append((gate, text))
    for injection in injections:
        injection.caught = not _survives(injection, dataset, sessions)
        planted = normalize(injection.planted)
        quoting = sorted({gate for gate, text in rejections if planted in text})
        if not quoting:
            quoting = sorted({gate for gate, text in rejections if injection.fragment in text})
        injection.caught_by = quoting


@dataclass(frozen=True)
class Catch:
    """One fault's row: what was planted, what was kept out, and by which gates."""

    fault: Fault
    injections: tuple[Injection, ...]
    dataset: GeneratedDataset = field(repr=False, compare=False)

    @property
    def injected(self) -> int:
        return len(self.injections)

    @property
    def caught(self) -> int:
        return sum(1 for i in self.injections if i.caught)

    @property
    def share(self) -> float:
        return self.caught / self.injected if self.injected else 0.0

    def by_gate(self) -> Counter[str]:
        """Caught items per gate that quoted them; 'regenerated' when none did."""
        counts: Counter[str] = Counter()
        for injection in self.injections:
            if injection.caught:
                counts.update(injection.caught_by or ["regenerated"])
        return counts

    def missed_wordings(self) -> Counter[str]:
        return Counter(i.wording_id for i in self.injections if not i.caught)
