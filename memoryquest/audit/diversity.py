"""Lexical diversity of the dialogues: templated text shows up as few distinct n-grams and repeated sentences."""

from __future__ import annotations

import random
import re
from collections import Counter
from collections.abc import Sequence

from pydantic import BaseModel, Field

from memoryquest.text import split_sentences, words

_SPACES = re.compile(r"\s+")
TOP_REPEATED = 5
SAMPLE_WORDS = 105_000
"""Distinct-n falls as a corpus grows, so it is also given on a sample of this many words of whole
turns: the size at which the simulator and LoCoMo were first compared."""


class RepeatedSentence(BaseModel):
    sentence: str
    count: int


class Diversity(BaseModel):
    role: str
    turns: int
    distinct_1: float
    distinct_2: float
    distinct_3: float
    sample_words: int = Field(
        description="Words in the seeded sample of whole turns that distinct_2_sample is measured on."
    )
    distinct_2_sample: float = Field(
        description="Distinct-2 on that sample: comparable across datasets of different sizes."
    )
    sentences: int
    repeated_sentence_share: float = Field(
        description="Share of sentence occurrences whose (lower-cased) sentence occurs at least repeated_sentence_min times."
    )
    most_repeated: list[RepeatedSentence]


def _distinct(tokenised: Sequence[list[str]], n: int) -> float:
    seen: set[tuple[str, ...]] = set()
    total = 0
    for tokens in tokenised:
        total += max(0, len(tokens) - n + 1)
        seen.update(zip(*(tokens[k:] for k in range(n)), strict=False))  # the n-grams, built in C
    return len(seen) / total if total else 0.0


def distinct_n(texts: Sequence[str], n: int) -> float:
    """Distinct word n-grams / all word n-grams, n-grams taken within each text; 0 when there are none."""
    return _distinct([words(text) for text in texts], n)


def normalise_sentence(sentence: str) -> str:
    return _SPACES.sub(" ", sentence.casefold()).strip()


def sentence_counts(texts: Sequence[str]) -> Counter[str]:
    return Counter(normalise_sentence(s) for text in texts for s in split_sentences(text))


def repeated_sentence_share(texts: Sequence[str], min_count: int) -> float:
    """Share of sentence occurrences that belong to a sentence occurring ``min_count`` times or more."""
    counts = sentence_counts(texts)
    total = sum(counts.values())
    return sum(c for c in counts.values() if c >= min_count) / total if total else 0.0


def word_sample(tokenised: Sequence[list[str]], words: int, seed: int = 0) -> list[list[str]]:
    """Whole turns in a seeded random order until ``words`` words are taken (all of them when fewer)."""
    order = list(range(len(tokenised)))
    random.Random(seed).shuffle(order)
    taken: list[list[str]] = []
    total = 0
    for index in order:
        if total >= words:
            break
        taken.append(tokenised[index])
        total += len(tokenised[index])
    return taken


def diversity(role: str, texts: Sequence[str], repeated_min: int) -> Diversity:
    counts = sentence_counts(texts)
    total = sum(counts.values())
    repeated = sum(c for c in counts.values() if c >= repeated_min)
    tokenised = [words(text) for text in texts]
    sample = word_sample(tokenised, SAMPLE_WORDS)
    return Diversity(
        role=role,
        turns=len(texts),
        distinct_1=_distinct(tokenised, 1),
        distinct_2=_distinct(tokenised, 2),
        distinct_3=_distinct(tokenised, 3),
        sample_words=sum(len(t) for t in sample),
        distinct_2_sample=_distinct(sample, 2),
        sentences=total,
        repeated_sentence_share=repeated / total if total else 0.0,
        most_repeated=[
            RepeatedSentence(sentence=s, count=c)
            for s, c in sorted(counts.items(), key=lambda item: (-item[1], item[0]))[:TOP_REPEATED]
            if c >= repeated_min
        ],
    )
