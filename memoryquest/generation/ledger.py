"""What a user has already told the assistant, by date: the dialogue stage's memory of itself.

Sessions are written one event at a time. Without a ledger a model writing a
later session does not know what the user said in earlier ones: a free
self-disclosure can contradict a fact that still holds, and news is told
twice. The ledger of an event holds the sentences the user actually said
their references with in earlier sessions, still in force on its date (with
the date they end), and what the user's latest earlier conversations were
about. The dialogue prompt shows it; :func:`contradiction` checks a written
session against it.

What was said is known only once it is written, so a user's conversations are
written in waves (:class:`SaidLedger`): the events of all the user's timelines,
in date order, are cut into ``generation.ledger_waves`` bands of dates, and a
band is written once every earlier band is settled. A ledger shows what the
earlier bands said, never the plan: the drafted reference is not what the
history holds.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from functools import lru_cache

import numpy as np

from memoryquest.contracts import Query, Role, Session, Timeline, TimelineEvent
from memoryquest.text import clauses, content_stems, split_sentences

# How much of the ledger a prompt shows: the latest references in force, the latest earlier events.
SHOWN_FACTS = 6
SHOWN_EVENTS = 2
# A sentence restates a fact when it says this many of the fact's content words (stemmed),
# and at least this share of them.
RESTATED_WORDS = 3
RESTATED_SHARE = 0.6
# A clause of a fact is held to the same rule when it has at least this many content words.
RESTATED_CLAUSE_WORDS = 5
# A clause that opens (after a conjunction and up to two words) with a pronoun pointing back
# comments on the clause before it rather than stating a fact.
_COMMENT = re.compile(
    r"^(?:(?:and|so|but|or)\s+)?(?:[\w'-]+\s+){0,2}?(?:which|that|this|it|these|those)\b",
    re.IGNORECASE,
)
NEGATION = re.compile(
    r"\b(?:not|never|no|none|nothing|nobody|no longer|n't|cannot|stopped|quit|gave up)\b|n't\b",
    re.IGNORECASE,
)


@dataclass(frozen=True)
class LedgerFact:
    """A sentence the user said on ``said_on`` to tell a reference, in force until ``until``
    (None: open-ended)."""

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


def said_sentence(session: Session) -> str | None:
    """The sentence a session tells its reference with (None: filler, or not settled yet)."""
    if session.reference_id is None or not session.reference_spans:
        return None
    span = session.reference_spans[0]
    return session.turns[span.turn_index].content[span.start : span.end]


def ledger_for(
    date: dt.date,
    queries: Sequence[Query],
    timelines: Sequence[Timeline],
    sessions: Iterable[Session] = (),
) -> Ledger:
    """The ledger of an event on ``date``: the sentence each reference of ``queries`` was said
    with in ``sessions`` before ``date``, while in force on ``date``, and every event of
    ``timelines`` before ``date``, oldest first. A reference not yet said is not in it."""
    until = {r.reference_id: r.valid_until for q in queries for r in q.references}
    facts = sorted(
        (
            LedgerFact(s.date, text, until.get(s.reference_id or ""))
            for s in sessions
            if s.date < date and (text := said_sentence(s)) is not None
        ),
        key=lambda f: (f.said_on, f.text),
    )
    in_force = tuple(f for f in facts if f.until is None or f.until >= date)
    earlier = sorted(
        {(e.date, e.description) for t in timelines for e in t.events if e.date < date}
    )
    return Ledger(in_force, tuple(earlier))


def date_bands(dates: Iterable[dt.date], waves: int) -> list[dt.date]:
    """The first date of each of at most ``waves`` bands that cut ``dates`` (with repeats) into
    runs of about equal size; a date never straddles two bands."""
    ordered = sorted(dates)
    starts: list[dt.date] = []
    for band in range(waves):
        if not ordered:
            break
        date = ordered[min(len(ordered) - 1, band * len(ordered) // waves)]
        if not starts or date > starts[-1]:
            starts.append(date)
    return starts


class SaidLedger:
    """What one user has said so far, across all their queries, as their conversations are written.

    Each query's dialogues are written band by band (:meth:`band_of`); before a
    band, :meth:`ready` waits until every event of every earlier band is
    settled (:meth:`settle`), so the ledger of an event (:meth:`ledger_on`)
    holds every sentence said before its band. The kept sessions are what
    :func:`~memoryquest.stages.dialogues.expand_dialogues` checks a new session
    against for restated references.
    """

    def __init__(self, queries: Sequence[Query], timelines: Sequence[Timeline], waves: int) -> None:
        self.queries = list(queries)
        self.timelines = list(timelines)
        events = [e for t in timelines for e in t.events]
        self._starts = date_bands((e.date for e in events), max(1, waves))
        self._open = [0] * len(self._starts)
        for event in events:
            self._open[self.band_of(event)] += 1
        self._settled_bands = [asyncio.Event() for _ in self._starts]
        self._settled_ids: set[str] = set()
        self._sessions: dict[str, Session] = {}
        self._withdrawn: dict[str, int] = {}  # query id: the band it was dropped in
        # The sentences already embedded, by text: the user's queries check the same sessions.
        self.vectors: dict[str, np.ndarray] = {}
        self._release()

    @classmethod
    def of(cls, query: Query, timeline: Timeline, waves: int) -> SaidLedger:
        """The ledger of a query written alone, as if it were the user's only one."""
        return cls([query], [timeline], waves)

    @property
    def bands(self) -> int:
        return len(self._starts)

    def band_of(self, event: TimelineEvent) -> int:
        """The band an event is written in."""
        return self.band_of_date(event.date)

    def band_of_date(self, date: dt.date) -> int:
        """The band of a date (0 for one before the first)."""
        return max(0, sum(1 for start in self._starts if start <= date) - 1)

    async def ready(self, band: int) -> None:
        """Wait until every event of the bands before ``band`` is settled."""
        for earlier in self._settled_bands[:band]:
            await earlier.wait()

    async def finished(self) -> None:
        """Wait until every event is settled."""
        await self.ready(len(self._settled_bands))

    def ledger_on(self, event: TimelineEvent) -> Ledger:
        """The ledger ``event`` is written with: what the bands before its own said (the same
        whatever order the queries' conversations come back in)."""
        return ledger_for(event.date, self.queries, self.timelines, self.said_before(event))

    def said_before(self, event: TimelineEvent) -> list[Session]:
        """The kept sessions of the bands before ``event``'s, of every query still standing when
        that band began, in date order."""
        band = self.band_of(event)
        start = self._starts[band] if self._starts else event.date
        return sorted(
            (
                s
                for s in self._sessions.values()
                if s.date < start and self._withdrawn.get(s.query_id, band) >= band
            ),
            key=lambda s: (s.date, s.session_id),
        )

    def sessions(self) -> list[Session]:
        """Every session kept, of every query not dropped, in date order (complete once
        :meth:`finished`)."""
        return sorted(
            (s for s in self._sessions.values() if s.query_id not in self._withdrawn),
            key=lambda s: (s.date, s.session_id),
        )

    def settle(self, events: Sequence[TimelineEvent], sessions: Sequence[Session] = ()) -> None:
        """``events`` are done: ``sessions`` (theirs, if they were written) are kept."""
        for session in sessions:
            self._sessions[session.session_id] = session
        for event in events:
            if event.event_id not in self._settled_ids:
                self._settled_ids.add(event.event_id)
                self._open[self.band_of(event)] -= 1
        self._release()

    def withdraw(self, query_id: str, band: int) -> None:
        """A query was dropped while writing ``band``: its sessions leave the history, so the
        ledgers of the later bands do not show them (those of ``band`` already did, whichever
        query finished first, so they still do)."""
        self._withdrawn.setdefault(query_id, band)

    def _release(self) -> None:
        for band, event in enumerate(self._settled_bands):
            if self._open[band] <= 0:
                event.set()


def restates(sentence: str, fact: str, *, by_clause: bool = False) -> bool:
    """Does ``sentence`` say ``fact`` again: at least ``RESTATED_WORDS`` of its content words
    (stemmed), and at least ``RESTATED_SHARE`` of them? With ``by_clause``, as many of one of
    its :func:`told_clauses` is enough.
    """
    stated = [fact, *(told_clauses(fact) if by_clause else ())]
    return any(restating([sentence], told)[0] for told in stated)


def restating(sentences: Sequence[str], fact: str) -> list[bool]:
    """For each of ``sentences``, whether it says ``fact`` again by its content words (the rule
    of :func:`restates`, without clauses): the fact's words and threshold worked out once."""
    words = content_stems(fact)
    needed = max(RESTATED_WORDS, RESTATED_SHARE * len(words))
    return [len(content_stems(sentence) & words) >= needed for sentence in sentences]


def told_clauses(fact: str) -> list[str]:
    """The clauses of ``fact`` that state something of their own: at least
    ``RESTATED_CLAUSE_WORDS`` content words, and not a comment on what came before (opened by
    a pronoun that points back: "which ...", "and that ...", "a change that ...").

    A fact is often told with a consequence or an aside ("..., which leaves money tight");
    retelling its main clause alone tells the fact again, though it says few of the words
    the whole sentence has.
    """
    return list(_told_clauses(fact))


@lru_cache(maxsize=65_536)
def _told_clauses(fact: str) -> tuple[str, ...]:
    # Every check of a new conversation asks again for the clauses of the same earlier sentences.
    return tuple(
        clause
        for clause in clauses(fact)
        if not _COMMENT.match(clause) and len(content_stems(clause)) >= RESTATED_CLAUSE_WORDS
    )


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
                if restates(sentence, fact.text, by_clause=True) and negated != (
                    NEGATION.search(fact.text) is not None
                ):
                    return (
                        f"{sentence!r} contradicts what the user said on {fact.said_on} and "
                        f"still holds: {fact.text!r}"
                    )
    return None


__all__ = [
    "NO_LEDGER",
    "Ledger",
    "LedgerFact",
    "SaidLedger",
    "contradiction",
    "date_bands",
    "ledger_for",
    "restates",
    "said_sentence",
    "told_clauses",
]
