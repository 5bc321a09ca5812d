"""What a news item's sentence says beyond the news item: where a generator's tell sits.

Every conversation is written from its event's news items, references and
filler alike, each said in one sentence of a user turn. A generator that
treats the reference differently adds something to its sentence — a clause
that points ahead ("which could shape how I plan the next few months"), an
aside that announces it — and adds it in ever new words, so word n-grams,
which need the same words twice, miss it. The added clause is found without
any word list: of the sentence's clauses, the one that shares the fewest
content words with the news item it says. Its sentence embedding (the local
embedder) carries what it means rather than its words, so a classifier across
users can learn "points ahead" from varied wordings, and each reference
clause is compared with the filler news items' clauses, worded by the same
stage.
"""

from __future__ import annotations

import re
from collections.abc import Sequence, Set
from dataclasses import dataclass

from memoryquest.contracts import Role, Session, Timeline
from memoryquest.text import content_stems, normalise_text, split_sentences, words

CLAUSE_BREAK = re.compile(r",\s+|\s+[—–-]+\s+|;\s+|:\s+|\(|\)")
"""Where a sentence's clauses meet: commas, dashes, semicolons, colons, brackets."""

MIN_CLAUSE_WORDS = 2
"""A shorter piece ("Oh", "Well") is a lead-in, not something said."""


@dataclass(frozen=True)
class NewsUnit:
    """One news item of a session's event, the user sentence that says it, and that sentence's
    clause the news item explains least."""

    persona_id: str
    session_id: str
    reference_id: str | None  # the standing reference the news item is, when it is one
    sentence: str
    clause: str


def _found_share(news: frozenset[str], sentence: str) -> float:
    """Share of the news item's content words that the sentence uses."""
    return len(news & content_stems(sentence)) / len(news) if news else 0.0


def said_sentence(news: str, sentences: Sequence[str]) -> str | None:
    """The sentence that says ``news``: the one using most of its content words (first on a tie);
    None when no sentence uses any."""
    stems = content_stems(news)
    best, share = None, 0.0
    for sentence in sentences:
        found = _found_share(stems, sentence)
        if found > share:
            best, share = sentence, found
    return best


def added_clause(sentence: str, news: str) -> str:
    """The clause of ``sentence`` that the news item explains least: the largest share of its
    content words absent from the news item (the longer clause on a tie; the sentence itself
    when it has one clause)."""
    stems = content_stems(news)
    clauses = [c.strip() for c in CLAUSE_BREAK.split(sentence)]
    said = [c for c in clauses if len(words(c)) >= MIN_CLAUSE_WORDS]
    if len(said) < 2:
        return sentence

    def novelty(clause: str) -> tuple[float, int]:
        own = content_stems(clause)
        new = len(own - stems) / len(own) if own else 0.0
        return new, len(words(clause))

    return max(said, key=novelty)


def news_units(
    sessions: Sequence[Session],
    timelines: Sequence[Timeline],
    reference_texts: dict[str, str],
    standing: Set[str],
) -> list[NewsUnit]:
    """Every news item of every session's event, as its user said it (items no sentence says are
    left out). ``reference_texts``: reference id -> text; ``standing``: the references of the
    dataset's queries (a withdrawn query's reference is an ordinary news item)."""
    events = {e.event_id: e for t in timelines for e in t.events}
    units: list[NewsUnit] = []
    for session in sorted(sessions, key=lambda s: (s.persona_id, s.position, s.session_id)):
        event = events.get(session.event_id)
        if event is None or not event.news:
            continue
        sentences = [
            s for t in session.turns if t.role is Role.USER for s in split_sentences(t.content)
        ]
        reference = session.reference_id if session.reference_id in standing else None
        stated = _reference_item(event.news, reference_texts.get(reference or ""))
        for number, news in enumerate(event.news):
            sentence = said_sentence(news, sentences)
            if sentence is None:
                continue
            units.append(
                NewsUnit(
                    session.persona_id,
                    session.session_id,
                    reference if number == stated else None,
                    sentence,
                    added_clause(sentence, news),
                )
            )
    return units


def _reference_item(news: Sequence[str], reference: str | None) -> int | None:
    """Which news item is the reference: the one word for word, else the one sharing most of
    its content words."""
    if reference is None:
        return None
    wanted = normalise_text(reference)
    for number, item in enumerate(news):
        if normalise_text(item) == wanted:
            return number
    stems = content_stems(reference)
    shares = [_found_share(stems, item) for item in news]
    best = max(range(len(news)), key=shares.__getitem__)
    return best if shares[best] > 0 else None
