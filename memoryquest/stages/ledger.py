"""What a user has already told the assistant, by date: the dialogue stage's memory of itself.

Sessions are written one event at a time. Without a ledger a model writing a
later session does not know what the user said in earlier ones: a free
self-disclosure can contradict a reference that still holds, and news is
announced twice. The ledger of an event holds the user's references said
before it and still in force on its date (with the date they end), and what
the user's latest earlier conversations were about. The dialogue prompt shows
it; :func:`contradiction` checks a written session against it.
"""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Sequence
from dataclasses import dataclass

from memoryquest.contracts import Query, Role, Session, Timeline
from memoryquest.text import content_stems, split_sentences

# How much of the ledger a prompt shows: the latest references in force, the latest earlier events.
SHOWN_FACTS = 6
SHOWN_EVENTS = 2
# A sentence restates a fact when it says this many of the fact's content words (stemmed),
# and at least this share of them.
RESTATED_WORDS = 3
RESTATED_SHARE = 0.6
NEGATION = re.compile(
    r"\b(?:not|never|no|none|nothing|nobody|no longer|n't|cannot|stopped|quit|gave up)\b|n't\b",
    re.IGNORECASE,
)


@dataclass(frozen=True)
class LedgerFact:
    """A reference the user said on ``said_on``, in force until ``until`` (None: open-ended)."""

    said_on: dt.date
    text: str
    until: dt.date | None


@dataclass(frozen=True)
class Ledger:
    """An event's ledger: the facts in force on its date, and the latest earlier events."""

    facts: tuple[LedgerFact, ...]
    earlier: tuple[tuple[dt.date, str], ...]  # (date, what that conversation was about)

    def shown(self) -> list[str]:
        """The prompt's lines, oldest first: the latest facts in force, then the latest events."""
        facts = [
            (f.said_on, f"{f.text}" + (f" (until {f.until.isoformat()})" if f.until else ""))
            for f in self.facts[-SHOWN_FACTS:]
        ]
        events = [(date, f"talked about: {about}") for date, about in self.earlier[-SHOWN_EVENTS:]]
        return [f"{date.isoformat()}: {said}" for date, said in sorted(facts + events)]


NO_LEDGER = Ledger((), ())
"""The ledger of a user's first conversation."""


def ledger_for(date: dt.date, queries: Sequence[Query], timelines: Sequence[Timeline]) -> Ledger:
    """The ledger of an event on ``date``: every reference of ``queries`` said earlier and in
    force on ``date``, and every event of ``timelines`` before ``date``, oldest first."""
    facts = sorted(
        (
            LedgerFact(r.date, r.text, r.valid_until)
            for q in queries
            for r in q.references
            if r.date < date and (r.valid_until is None or r.valid_until >= date)
        ),
        key=lambda f: (f.said_on, f.text),
    )
    earlier = sorted(
        {(e.date, e.description) for t in timelines for e in t.events if e.date < date}
    )
    return Ledger(tuple(facts), tuple(earlier))


def restates(sentence: str, fact: str) -> bool:
    """Does ``sentence`` say ``fact`` again: at least ``RESTATED_WORDS`` of its content words
    (stemmed), and at least ``RESTATED_SHARE`` of them?"""
    stated = content_stems(fact)
    shared = content_stems(sentence) & stated
    return len(shared) >= max(RESTATED_WORDS, RESTATED_SHARE * len(stated))


def contradiction(session: Session, ledger: Ledger) -> str | None:
    """A user sentence that restates a fact in force with the opposite polarity, or None.

    A pure rule: the sentence says at least ``RESTATED_WORDS`` of the fact's
    content words and ``RESTATED_SHARE`` of them, and one of the two is negated where the other is not ("I
    stopped running" against "I run every morning"). It catches the blunt
    contradictions a model writes when it forgets what the user said; subtler
    ones are what the ledger in the prompt is for.
    """
    for turn in session.turns:
        if turn.role is not Role.USER:
            continue
        for sentence in split_sentences(turn.content):
            negated = NEGATION.search(sentence) is not None
            for fact in ledger.facts:
                if restates(sentence, fact.text) and negated != (
                    NEGATION.search(fact.text) is not None
                ):
                    return (
                        f"{sentence!r} contradicts what the user said on {fact.said_on} and "
                        f"still holds: {fact.text!r}"
                    )
    return None


__all__ = ["NO_LEDGER", "Ledger", "LedgerFact", "contradiction", "ledger_for", "restates"]
