"""The announcing check: frames of a sentence scored by meaning, not by a word list."""

from __future__ import annotations

import numpy as np
import pytest
from sklearn.linear_model import LogisticRegression
from sklearn.metrics import roc_auc_score
from sklearn.model_selection import StratifiedKFold, cross_val_predict

from memoryquest.generation.announcing import (
    REGULARISATION,
    frames,
    load_frames,
    shared_announcing_check,
    standing_frame,
    telling_frames,
)
from memoryquest.settings import GenerationSettings
from memoryquest.text import announcement

THRESHOLD = GenerationSettings().announcing_probability_max

# Written for this test, kept out of the frames file the model is fitted on (checked below).
HELD_OUT_ANNOUNCING = [
    "a development on my side",
    "this one's new",
    "fresh news from me",
    "an update you'll like",
    "thought this was worth passing on",
    "some recent news",
    "and here's the news",
    "I have an update",
    "a change worth telling you about",
    "something you might want to hear",
]
HELD_OUT_PLAIN = [
    "which was lovely",
    "after a long week",
    "on the train home",
    "because it was raining",
    "so I'm happy",
    "at my cousin's place",
    "with two friends",
    "as planned",
    "to save money",
    "around six",
]


def test_the_held_out_frames_are_not_in_the_frames_file() -> None:
    announcing, plain = load_frames()
    assert not {*HELD_OUT_ANNOUNCING, *HELD_OUT_PLAIN} & {*announcing, *plain}


def test_frames_file_separates_by_cross_validation() -> None:
    """Fitted on four fifths of the file, the model ranks the fifth it did not see."""
    announcing, plain = load_frames()
    check = shared_announcing_check()
    vectors = check.embedder.embed_sync([*announcing, *plain])
    labels = np.array([1] * len(announcing) + [0] * len(plain))
    folds = StratifiedKFold(5, shuffle=True, random_state=0)
    model = LogisticRegression(C=REGULARISATION, max_iter=5000)
    scores = cross_val_predict(model, vectors, labels, cv=folds, method="predict_proba")[:, 1]
    assert roc_auc_score(labels, scores) >= 0.95
    # The default threshold refuses about one or two plain frames in a hundred it did not see.
    plain_scores = scores[len(announcing) :]
    assert np.percentile(plain_scores, 97) <= THRESHOLD <= np.percentile(plain_scores, 99.5)


def test_held_out_frames_are_told_apart() -> None:
    check = shared_announcing_check()
    scores = check.model().probability(
        check.embedder.embed_sync([*HELD_OUT_ANNOUNCING, *HELD_OUT_PLAIN])
    )
    announcing, plain = scores[: len(HELD_OUT_ANNOUNCING)], scores[len(HELD_OUT_ANNOUNCING) :]
    assert (announcing > THRESHOLD).sum() >= 9, dict(
        zip(HELD_OUT_ANNOUNCING, announcing.round(2), strict=True)
    )
    assert (plain > THRESHOLD).sum() <= 1, dict(zip(HELD_OUT_PLAIN, plain.round(2), strict=True))
    assert announcing.min() > plain.max()


def test_most_held_out_announcing_frames_escape_the_word_rules() -> None:
    """What the model adds: the idioms and shapes of text.announcement miss most of these."""
    missed = [f for f in HELD_OUT_ANNOUNCING if announcement(f"{f}, I moved flats.") is None]
    assert len(missed) >= 5


@pytest.mark.parametrize(
    ("sentence", "expected"),
    [
        (
            "Some recent news: I moved to Porto in May.",
            ["Some recent news", "I moved to Porto in May"],
        ),
        (
            "I moved to Porto in May, which was lovely.",
            ["I moved to Porto in May", "which was lovely"],
        ),
        (
            "I moved to Porto in May (fresh news from me) and love the light.",
            ["I moved to Porto in May", "fresh news from me", "and love the light"],
        ),
        (  # a lead in several pieces: the one inside is scored too
            "So, anyway, fresh news from me: I moved to Porto in May.",
            ["anyway", "fresh news from me", "I moved to Porto in May"],
        ),
        ("Big news!", ["Big news"]),
        ("And one more thing: I moved.", ["I moved"]),  # function words alone say nothing
        ("I moved to Porto in May and started a new job at the harbour.", []),
    ],
)
def test_frames_are_the_short_pieces_of_a_sentence(sentence: str, expected: list[str]) -> None:
    assert frames(sentence) == expected


@pytest.mark.parametrize(
    ("sentence", "expected"),
    [
        ("Thought you would want to hear this.", "Thought you would want to hear this"),
        ("Big news!", "Big news"),
        ("What is that one about?", None),  # a question asks
        ("And so on.", None),  # function words alone say nothing
        ("I finally finished the long report for the council after three weeks of work.", None),
    ],
)
def test_a_short_statement_stands_as_a_frame_whole(sentence: str, expected: str | None) -> None:
    assert standing_frame(sentence) == expected


def test_the_telling_sentence_and_the_statements_beside_it_are_held_to_the_check() -> None:
    turn = (
        "Can you find me a quiet cafe near the station? Fresh news! "
        "I adopted a greyhound called Pixel, last week. Anyway, what time do they open?"
    )
    telling = "I adopted a greyhound called Pixel, last week."
    assert telling_frames(turn, "I adopted a rescue greyhound named Pixel.") == [
        ("I adopted a greyhound called Pixel", telling),
        ("last week", telling),
        ("Fresh news", "Fresh news!"),
    ]


async def test_the_first_announcing_sentence_is_named_by_key() -> None:
    check = shared_announcing_check()
    found = await check.first_announcing(
        {
            "plain": [("which was lovely", "I adopted a greyhound last week, which was lovely.")],
            "framed": [
                ("I started running again", "I started running again."),
                ("Thought this was worth passing on", "Thought this was worth passing on: ..."),
            ],
        },
        probability_max=THRESHOLD,
    )
    assert set(found) == {"framed"}
    assert found["framed"].frame == "Thought this was worth passing on"
    assert found["framed"].probability > THRESHOLD
    assert (
        await check.first_announcing(
            {"framed": [("Thought this was worth passing on", "Thought this ...: I moved.")]},
            probability_max=1.0,
        )
        == {}
    )
