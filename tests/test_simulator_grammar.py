"""The article fix the simulator applies to filled-in templates."""

from __future__ import annotations

import pytest

from memoryquest.simulator.grammar import fix_articles, plural, sentence, shift_person


@pytest.mark.parametrize(
    ("text", "fixed"),
    [
        ("An morning slot would suit me.", "A morning slot would suit me."),
        ("I'd want a acoustic set.", "I'd want an acoustic set."),
        (
            "you could go with a urban exploration itinerary",
            "you could go with an urban exploration itinerary",
        ),
        ("a urgent repair", "an urgent repair"),
        ("a Intercape coach", "an Intercape coach"),
    ],
)
def test_the_article_follows_the_sound_of_the_next_word(text: str, fixed: str) -> None:
    assert fix_articles(text) == fixed


@pytest.mark.parametrize(
    "text",
    [
        "a useful tip",
        "a one-way ticket",
        "a university friend",
        "a urologist",
        "a European tour",
        "an hour",
    ],
)
def test_words_that_start_with_a_consonant_sound_keep_a(text: str) -> None:
    assert fix_articles(text) == text


def test_a_composed_sentence_gets_its_articles_fixed() -> None:
    assert sentence("we could try a  urban walk") == "We could try an urban walk."


@pytest.mark.parametrize(
    ("noun", "many"),
    [
        ("Fox", "Foxes"),
        ("Ferry", "Ferries"),
        ("Compass", "Compasses"),
        ("Field", "Fields"),
        ("Day", "Days"),
    ],
)
def test_plural_follows_the_spelling_of_the_noun(noun: str, many: str) -> None:
    assert plural(noun) == many


@pytest.mark.parametrize(
    ("person", "said"),
    [
        ("first", "I say I was late and I am tired."),
        ("second", "You say you were late and you are tired."),
    ],
)
def test_they_said_of_the_user_takes_the_verb_of_the_new_person(person: str, said: str) -> None:
    assert (
        shift_person("The user says they were late and they are tired", person, they_is_user=True)
        == said
    )
