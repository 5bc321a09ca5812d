"""Text utilities shared by the stages, the audit and the simulator.

One sentence splitter, one stop-word list and one stemmer (Snowball English,
from ``snowballstemmer``), so that "content words shared by a query and a
reference" means the same thing at generation, in ``validate`` and in the audit.
"""

from __future__ import annotations

import re
from functools import lru_cache

import snowballstemmer

STOPWORDS: frozenset[str] = frozenset(
    """
    a about above after again against all also am an and any are aren't as at be because been before
    being below between both but by can can't cannot could couldn't did didn't do does doesn't doing don't
    down during each few for from further get gets got had hadn't has hasn't have haven't having he he'd
    he'll he's her here here's hers herself him himself his how how's i i'd i'll i'm i've if in into is
    isn't it it's its itself just let's like me more most much must mustn't my myself no nor not now of
    off on once only or other ought our ours ourselves out over own please really same shan't she she'd
    she'll she's should shouldn't so some such than that that's the their theirs them themselves then
    there there's these they they'd they'll they're they've this those through to too under until up
    upon us very was wasn't we we'd we'll we're we've were weren't what what's when when's where where's
    which while who who's whom why why's will with won't would wouldn't you you'd you'll you're you've
    your yours yourself yourselves one two three four five six seven eight nine ten user user's
    can help want need like would could maybe thing things lot bit
    """.split()  # noqa: SIM905 - a word list reads better as text
)
"""English function words, plus words every request or statement uses ("help", "want", "user")."""

_WORD = re.compile(r"[a-z0-9]+(?:'[a-z]+)?")
_SENTENCE_BREAK = re.compile(r"(?<=[.!?])[\"')\]]*\s+(?=[\"'(\[]?[A-Z0-9])")
_STEMMER = snowballstemmer.stemmer("english")


# A sentence that announces itself marks what it carries: a reader (or a classifier) finds the
# reference without reading for meaning. Real models reach for these when told a detail matters.
ANNOUNCEMENTS = re.compile(
    r"\b(?:by the way|btw|just so you know|i should mention|i should say|i wanted to mention|"
    r"worth mentioning|for context|for the record|fyi|side note|before i forget|heads[- ]up|"
    r"incidentally|oh,? and another thing)\b",
    re.IGNORECASE,
)
# A sentence that points ahead tells the reader it will matter later: foreshadowing.
FORWARD_CUES = re.compile(
    r"\b(?:keep (?:that |this |it )?in mind|worth remembering|for future reference|"
    r"(?:will|'ll|might|may) (?:matter|come in handy|be (?:important|relevant|useful))|"
    r"down the (?:line|road)|when the time comes|(?:for|matters? for) (?:my|our) upcoming|"
    r"remember (?:that|this) (?:for|when)|which (?:will )?matters? (?:for|when))\b",
    re.IGNORECASE,
)


def words(text: str) -> list[str]:
    """Lower-cased word tokens (letters, digits, inner apostrophes)."""
    return _WORD.findall(text.casefold().replace("\u2019", "'"))


@lru_cache(maxsize=65_536)
def stem(word: str) -> str:
    return str(_STEMMER.stemWord(word))


def content_words(text: str) -> list[str]:
    """Stems of the words that carry meaning, in order (stop-words and 1-letter tokens dropped)."""
    return [stem(w) for w in words(text) if w not in STOPWORDS and len(w) > 1 and not w.isdigit()]


@lru_cache(maxsize=65_536)
def content_stems(text: str) -> frozenset[str]:
    """The :func:`content_words` of ``text`` as a set, memoised: facts are compared again and again."""
    return frozenset(content_words(text))


def shared_content_words(left: str, right: str) -> set[str]:
    """Stems of the content words two texts have in common."""
    return set(content_words(left)) & set(content_words(right))


def normalise_text(text: str) -> str:
    """Case-, space- and end-punctuation-insensitive form for verbatim checks."""
    return re.sub(r"\s+", " ", text).strip().strip(".!?").casefold()


def contains_verbatim(haystack: str, needle: str) -> bool:
    """Does ``haystack`` contain ``needle`` word for word (ignoring case, spacing, final stop)?"""
    needle_norm = normalise_text(needle)
    return bool(needle_norm) and needle_norm in normalise_text(haystack)


def split_sentences(text: str) -> list[str]:
    """Sentences of ``text`` (split after . ! ? before a capital or digit)."""
    return [s.strip() for s in _SENTENCE_BREAK.split(text.strip()) if s.strip()]


def sentence_spans(text: str) -> list[tuple[int, int]]:
    """Character spans ``(start, end)`` of the sentences of ``text``, in order."""
    spans: list[tuple[int, int]] = []
    position = 0
    for sentence in split_sentences(text):
        start = text.find(sentence, position)
        if start < 0:  # cannot happen for a split of the same text; keep going defensively
            continue
        spans.append((start, start + len(sentence)))
        position = start + len(sentence)
    return spans


_LEAD_IN = re.compile(r"^[^:.!?]{1,60}:\s+(?=\S)")


def without_lead_in(sentence: str) -> str:
    """The sentence after a short framing lead-in ending in a colon ("The user mentions: ...").

    The frame says how something is told, not what: left in, it costs tokens and
    pulls every framed sentence's vector the same way.
    """
    return _LEAD_IN.sub("", sentence, count=1)


def ngrams(tokens: list[str], n: int) -> list[tuple[str, ...]]:
    return [tuple(tokens[i : i + n]) for i in range(len(tokens) - n + 1)]
