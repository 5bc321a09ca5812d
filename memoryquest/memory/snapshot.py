"""The memory store as it stood on a given date.

A fact is visible on ``as_of`` when it already existed (its first revision is
dated on or before ``as_of``) and had not yet been merged away (``retired_on``
is after ``as_of``). Its visible content is the latest revision dated on or
before ``as_of`` — so nothing learnt from a later session can leak into the
memory a query is answered from.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass

from memoryquest.contracts import Fact, FactType


@dataclass(frozen=True)
class MemoryItem:
    fid: str
    info: str
    type: FactType
    date: dt.date
    related_entities: tuple[str, ...]
    session_ids: tuple[str, ...]
    source_reference_ids: tuple[str, ...]


def memory_as_of(facts: list[Fact], as_of: dt.date) -> list[MemoryItem]:
    """Visible facts on ``as_of``, in a stable order (by fid)."""
    visible: list[MemoryItem] = []
    for fact in facts:
        if fact.retired_on is not None and fact.retired_on <= as_of:
            continue
        revisions = [r for r in fact.revisions if r.valid_from <= as_of]
        if not revisions:
            continue
        latest = revisions[-1]  # revisions are appended in date order; the last of a day wins
        visible.append(
            MemoryItem(
                fid=fact.fid,
                info=latest.info,
                type=latest.type,
                date=latest.valid_from,
                related_entities=tuple(latest.related_entities),
                session_ids=tuple(latest.session_ids),
                source_reference_ids=tuple(latest.source_reference_ids),
            )
        )
    visible.sort(key=lambda item: item.fid)
    return visible
