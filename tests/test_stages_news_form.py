"""The one news form: a real reference passes, and each way out of the form is refused with its reason."""

from __future__ import annotations

import pytest

from memoryquest.settings import GenerationSettings
from memoryquest.stages.news_form import news_form_problem, normalise_news

SETTINGS = GenerationSettings()
# Written by the query prompt's examples and the offline simulator's bank, unchanged.
IN_FORM = [
    "Moved the weekday alarm to 6:30 AM after starting an early shift",
    "Has a stack of airline miles that expire in June",
    "Sees a physiotherapist every Monday for a stiff hip that is likely to run for a few months",
    "Drafted a will with a lawyer after the house sale",
    "Starts at 6 a.m. on weekdays after Dr. Lee changed the medication",
    "Flew back from the US with a sprained wrist",
    "Started lessons with coach J. Alvarez at the local pool",  # an initial ends no statement
    "3 weeks into a new job at the hospital",  # a digit may start it
]


@pytest.mark.parametrize("text", IN_FORM)
def test_statements_in_the_form_pass(text: str) -> None:
    assert news_form_problem(text, SETTINGS) is None
    assert (
        news_form_problem(f" {text}. ", SETTINGS) is None
    )  # spacing and a full stop are normalised


@pytest.mark.parametrize(
    ("mutate", "words"),
    [
        (lambda t: "I " + t[0].lower() + t[1:], "first or second person ('I')"),
        (lambda t: t + " with my sister", "first or second person ('my')"),
        (lambda t: t + ", as you suggested", "first or second person ('you')"),
        (lambda t: "The user " + t[0].lower() + t[1:], "names its subject"),
        (lambda t: "She " + t[0].lower() + t[1:], "names its subject"),
        (lambda t: "Her " + t[0].lower() + t[1:], "names its subject"),
        (lambda t: t + " and will keep at it", "stated as a plan ('will')"),
        (lambda t: t + " and she'll keep at it", "stated as a plan"),
        (lambda t: t + "?", "not a plain statement"),
        (lambda t: t + ". Feels better already", "more than one statement"),
        (lambda t: t + "! Feels better already", "more than one statement"),
        (lambda t: t[0].lower() + t[1:], "does not start with a capital"),
        (lambda t: " ".join(t.split()[:3]), "3 words; the band is"),
        (lambda t: " ".join([t] * 5), "words; the band is"),
        (lambda t: "   ", "empty"),
    ],
)
@pytest.mark.parametrize("text", IN_FORM[:2])
def test_each_way_out_of_the_form_is_refused_with_its_reason(text: str, mutate, words: str) -> None:
    problem = news_form_problem(mutate(text), SETTINGS)
    assert problem is not None and words in problem, problem


def test_the_band_is_a_setting_that_holds_both_its_ends() -> None:
    text = IN_FORM[0]
    count = len(text.split())
    narrow = SETTINGS.model_copy(update={"news_words_max": count - 1})
    assert f"{count} words; the band is {SETTINGS.news_words_min}-{count - 1}" == news_form_problem(
        text, narrow
    )
    exact = SETTINGS.model_copy(update={"news_words_min": count, "news_words_max": count})
    assert news_form_problem(text, exact) is None
    above = SETTINGS.model_copy(update={"news_words_min": count + 1})
    assert news_form_problem(text, above) == (
        f"{count} words; the band is {count + 1}-{SETTINGS.news_words_max}"
    )


def test_normalising_keeps_the_words() -> None:
    assert normalise_news("  Got   a second cat. ") == "Got a second cat"
    assert normalise_news("Left at 6 a.m.") == "Left at 6 a.m."
