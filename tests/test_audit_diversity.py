"""distinct-n and repeated-sentence share on inputs small enough to count by hand."""

from __future__ import annotations

import pytest

from memoryquest.audit.diversity import (
    SAMPLE_WORDS,
    distinct_n,
    diversity,
    repeated_sentence_share,
    word_sample,
)
from memoryquest.text import words


def test_distinct_n_counts_within_each_text() -> None:
    assert distinct_n(["a b a b"], 1) == pytest.approx(2 / 4)
    assert distinct_n(["a b a b"], 2) == pytest.approx(2 / 3)  # ab, ba, ab
    assert distinct_n(["a b", "c d"], 2) == pytest.approx(1.0)  # no bigram spans two texts
    assert distinct_n(["A, b!", "a B"], 2) == pytest.approx(1 / 2)  # tokens are lower-cased words
    assert distinct_n([], 1) == 0.0 and distinct_n(["one"], 2) == 0.0


def test_repeated_sentence_share_counts_occurrences_of_frequent_sentences() -> None:
    texts = ["Good to know. I will note it."] * 4 + ["GOOD  to know. Anything else?"]
    # "good to know." x5, "i will note it." x4, "anything else?" x1 -> 5 of 10 occurrences
    assert repeated_sentence_share(texts, 5) == pytest.approx(5 / 10)
    assert repeated_sentence_share(texts, 4) == pytest.approx(9 / 10)
    assert repeated_sentence_share([], 5) == 0.0


def test_diversity_summarises_one_role() -> None:
    result = diversity("assistant", ["Noted. Sure thing."] * 6 + ["Something new here."], 5)
    assert result.role == "assistant" and result.turns == 7 and result.sentences == 13
    assert result.repeated_sentence_share == pytest.approx(12 / 13)
    assert [(r.sentence, r.count) for r in result.most_repeated] == [
        ("noted.", 6),
        ("sure thing.", 6),
    ]
    assert result.distinct_1 == pytest.approx(6 / 21)  # 6 distinct of 6 x 3 + 3 words


def test_distinct_2_is_also_measured_on_a_fixed_size_sample() -> None:
    small = [f"turn {i} says something plain" for i in range(50)]
    result = diversity("user", small * 3000, 5)
    # the whole corpus repeats itself, the sample is cut at SAMPLE_WORDS words of whole turns
    assert SAMPLE_WORDS <= result.sample_words < SAMPLE_WORDS + 10
    assert result.distinct_2_sample == distinct_n(
        [" ".join(t) for t in word_sample([words(x) for x in small * 3000], SAMPLE_WORDS)], 2
    )
    assert result.distinct_2_sample > result.distinct_2
    tiny = diversity("user", small, 5)
    assert tiny.sample_words == sum(len(words(x)) for x in small)
    assert tiny.distinct_2_sample == tiny.distinct_2
