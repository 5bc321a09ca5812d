"""Simulated answer for ``session_review``: a literal reader of one conversation.

It reads what the real reviewer is given, the turns as said and the user's earlier turns,
sentence by sentence, and flags three things by their form:

* **announces**: a sentence that opens with a short aside (a few words before a comma,
  colon or dash) whose words talk about the telling itself: noting, mentioning, knowing,
  whether it matters or helps, not forgetting ("If it helps, ...", "Quick note: ...").
  An aside that answers the assistant ("now that you mention it") is not one.
* **points_ahead**: a sentence that asks or promises to keep a detail in mind, or that
  puts a word of later time ("later", "coming up", "next time", "in future") beside a
  word of use or relevance (matter, useful, know, remember, ...), or says the detail
  will matter, help or come in handy.
* **retells**: a user sentence that shares at least four content words, and most of its
  own, with one user sentence of an earlier conversation.

What it cannot see: meaning. A forward pointer or an aside worded outside these forms
("It'll probably figure in when I book", "Not that it's a big deal, but ...") passes, and
so does a retelling in other words; a sentence that happens to fit a form is flagged even
when a person would let it stand. It never sees which sentence carries a reference (its
inputs hold none), so it flags references and filler alike, and flags nothing by a
random draw: the same conversation always gets the same review.
"""

from __future__ import annotations

import random
import re

from memoryquest.simulator import simulates
from memoryquest.stages.review_contracts import (
    FlaggedSentence,
    ReviewFlag,
    SessionReview,
    SessionReviewInputs,
)
from memoryquest.text import content_stems, split_sentences, words

ASIDE_WORDS_MAX = 6
"""An opening aside is at most this many words before its comma, colon or dash."""
_ASIDE = re.compile(r"^(?P<aside>[^,:;—–.!?]{1,60}?)\s*(?:,|:|—|–|\s-\s)")
# Words by which a speaker talks about their own telling or its weight.
_TELLING = frozenset(
    [
        "note",
        "noting",
        "mention",
        "mentioning",
        "mentioned",
        "know",
        "knowing",
        "aware",
        "matters",
        "matter",
        "helps",
        "record",
        "context",
        "forget",
        "forgetting",
        "heads",
        "update",
        "fyi",
        "btw",
        "flag",
        "flagging",
        "aside",
        "relevant",
        "worth",
        "remind",
    ]
)
_REPLYING = re.compile(r"\byou (?:ask|asked|mention|mentioned)\b", re.IGNORECASE)

# A detail (it, that, this) kept or remembered for later, or said to matter later on.
_HELD_FOR_LATER = re.compile(
    r"\b(?:keep|keeping|bear|bearing|hold|holding)\s+(?:it|that|this|those|these)\s+in mind\b"
    r"|\b(?:remember|save|note|file|store)\s+(?:it|that|this)\b[^.?!]{0,25}?"
    r"\bfor (?:later|next time|the future|when)\b"
    r"|\b(?:will|'ll|might|may|could|going to|bound to)\s+(?:\w+\s+)?"
    r"(?:matter|come in handy|be (?:useful|relevant|important|handy|key))\b",
    re.IGNORECASE,
)
_LATER = re.compile(
    r"\b(?:later(?: on)?|coming up|upcoming|next time|in (?:the )?future|down the (?:road|line)|"
    r"further on|when the time comes)\b",
    re.IGNORECASE,
)
# Words of weight or memory: beside a word of later time, the sentence says a detail will count.
_WEIGHT = frozenset(
    [
        "matter",
        "matters",
        "mattering",
        "relevant",
        "important",
        "useful",
        "handy",
        "remember",
        "remembering",
        "count",
        "counts",
    ]
)

RETOLD_SHARED_MIN = 4
"""Content words a user sentence must share with an earlier one to count as retold."""
RETOLD_SHARE_MIN = 0.6
"""... and that share of its own content words at least."""


def announces(sentence: str) -> str | None:
    """The opening aside that frames the sentence as worth noting, or None."""
    match = _ASIDE.match(sentence)
    if match is None:
        return None
    aside = match.group("aside")
    tokens = words(aside)
    if not tokens or len(tokens) > ASIDE_WORDS_MAX or _REPLYING.search(aside):
        return None
    return aside if _TELLING & set(tokens) else None


def points_ahead(sentence: str) -> str | None:
    """The words that tie the sentence to a later use, or None."""
    held = _HELD_FOR_LATER.search(sentence)
    if held is not None:
        return held.group(0)
    later = _LATER.search(sentence)
    if later is not None and _WEIGHT & set(words(sentence)):
        return later.group(0)
    return None


def retold(sentence: str, earlier: list[tuple[str, frozenset[str]]]) -> str | None:
    """The earlier user sentence this one tells again, or None."""
    own = content_stems(sentence)
    if len(own) < RETOLD_SHARED_MIN:
        return None
    for text, stems in earlier:
        shared = own & stems
        if len(shared) >= RETOLD_SHARED_MIN and len(shared) >= RETOLD_SHARE_MIN * len(own):
            return text
    return None


@simulates(SessionReviewInputs)
def review_session(inputs: SessionReviewInputs, rng: random.Random) -> SessionReview:
    earlier = [
        (f"{turn['date']}: {sentence}", content_stems(sentence))
        for turn in inputs.earlier
        for sentence in split_sentences(turn["text"])
    ]
    flagged: list[FlaggedSentence] = []
    for turn in inputs.turns:
        user = turn["role"] == "user"
        for sentence in split_sentences(turn["text"]):
            if (cue := points_ahead(sentence)) is not None:
                reason = f"ties what is said to later use ({cue!r})"
                kind = ReviewFlag.POINTS_AHEAD
            elif user and (aside := announces(sentence)) is not None:
                reason = f"opens with an aside about the telling ({aside!r})"
                kind = ReviewFlag.ANNOUNCES
            elif user and (before := retold(sentence, earlier)) is not None:
                reason = f"tells again what was said on {before}"
                kind = ReviewFlag.RETELLS
            else:
                continue
            flagged.append(
                FlaggedSentence(
                    turn_index=turn["index"], sentence=sentence, reason=reason, kind=kind
                )
            )
    return SessionReview(flagged=flagged)
