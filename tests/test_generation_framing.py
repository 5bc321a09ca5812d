"""The framing checks: frames of a sentence scored by meaning, not by a word list."""

from __future__ import annotations

import numpy as np
import pytest
from sklearn.linear_model import LogisticRegression
from sklearn.metrics import roc_auc_score
from sklearn.model_selection import StratifiedKFold, cross_val_predict

from memoryquest.generation.framing import (
    REGULARISATION,
    Framed,
    Marking,
    frames,
    load_frames,
    shared_framing_check,
    standing_frame,
    telling_frames,
)
from memoryquest.settings import GenerationSettings
from memoryquest.text import announcement, forward_cue, later_occasion

THRESHOLD = {
    Marking.ANNOUNCING: GenerationSettings().announcing_probability_max,
    Marking.POINTING: GenerationSettings().pointing_probability_max,
}

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
HELD_OUT_POINTING = [
    "that'll count for a lot later",
    "which I'd like you to remember later",
    "something that will matter soon",
    "it could be important on the next trip",
    "keep that for future chats",
    "so you know for the future",
    "for later reference",
    "that'll be handy when we plan",
    "which will influence my next pick",
    "remember it when I ask",
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
    # plans, times still to come and consequences for now: no pointer
    "which made the day",
    "so I walk to work now",
    "for the holidays in December",
    "I'm off to Rome in May",
    "which is why I'm tired",
    "so I'm cooking tonight",
    "when my friend arrives",
    "before the concert",
    "I'll try it tomorrow",
    "which took ages",
]
HELD_OUT = {Marking.ANNOUNCING: HELD_OUT_ANNOUNCING, Marking.POINTING: HELD_OUT_POINTING}


# News told with a pointer ahead in a clause of its own, and the same news told plainly:
# written for this test as whole sentences, after the frames file and before the models were
# scored on them.
HELD_OUT_POINTING_SENTENCES = [
    "I've been promoted to team lead, which I reckon will weigh on a lot of what I ask you about scheduling.",
    "My brother is staying with us till Easter; that's going to matter whenever we look at weekend plans.",
    "I gave up alcohol in the new year, and you'll want to remember that when we choose places to eat.",
    "We bought an electric car in March, so expect that to come into play once we plan longer drives.",
    "My son was diagnosed with coeliac disease, which will no doubt shape the restaurant ideas you give me later.",
    "I've started night classes on Wednesdays; it'll probably crop up when we sort out my week.",
    "My hearing aid needs replacing, which I imagine will count for something when we pick venues.",
    "We're down to one income for a while, and that will be front and centre in the plans we make next.",
    "I tore a ligament in my ankle, something I'll need you to factor into any outings you suggest from now on.",
    "My flat has no oven at the moment, so bear that in mind whenever I ask you for recipes again.",
]
HELD_OUT_PLAIN_SENTENCES = [
    "I've been promoted to team lead, which means longer meetings on most days.",
    "My brother is staying with us till Easter, and the kids love having him around.",
    "I gave up alcohol in the new year, and I've been sleeping much better since.",
    "We bought an electric car in March, so we charge it overnight in the driveway.",
    "My son was diagnosed with coeliac disease, so we've cleared the gluten out of the kitchen.",
    "I've started night classes on Wednesdays, and the teacher is brilliant.",
    "My hearing aid needs replacing, so conversations in busy rooms are hard right now.",
    "We're down to one income for a while, which has meant cutting a few subscriptions.",
    "I tore a ligament in my ankle and I'm on crutches for three weeks.",
    "My flat has no oven at the moment, so I've been living on salads and stir-fries.",
]


def test_the_held_out_frames_are_not_in_the_frames_file() -> None:
    frames_file = load_frames()
    written = {
        f for kind in Marking for f in [*frames_file.marking[kind], *frames_file.plain[kind]]
    }
    assert not {*HELD_OUT_ANNOUNCING, *HELD_OUT_POINTING, *HELD_OUT_PLAIN} & written


@pytest.mark.parametrize("kind", list(Marking))
def test_frames_file_separates_by_cross_validation(kind: Marking) -> None:
    """Fitted on four fifths of the file, each model ranks the fifth it did not see."""
    texts, labels = load_frames().labelled(kind)
    vectors = shared_framing_check().embedder.embed_sync(texts)
    folds = StratifiedKFold(5, shuffle=True, random_state=0)
    model = LogisticRegression(C=REGULARISATION, max_iter=5000)
    scores = cross_val_predict(model, vectors, labels, cv=folds, method="predict_proba")[:, 1]
    assert roc_auc_score(labels, scores) >= 0.95
    # The default threshold refuses about one or two plain frames in a hundred it did not see.
    plain_scores = scores[labels == 0]
    assert np.percentile(plain_scores, 97) <= THRESHOLD[kind] <= np.percentile(plain_scores, 99.5)


@pytest.mark.parametrize("kind", list(Marking))
def test_held_out_frames_are_told_apart(kind: Marking) -> None:
    check = shared_framing_check()
    marking = HELD_OUT[kind]
    scores = check.models()[kind].probability(
        check.embedder.embed_sync([*marking, *HELD_OUT_PLAIN])
    )
    marked, plain = scores[: len(marking)], scores[len(marking) :]
    assert (marked > THRESHOLD[kind]).sum() >= 9, dict(zip(marking, marked.round(2), strict=True))
    assert (plain > THRESHOLD[kind]).sum() <= 1, dict(
        zip(HELD_OUT_PLAIN, plain.round(2), strict=True)
    )
    assert marked.min() > plain.max()


@pytest.mark.parametrize("kind", list(Marking))
def test_the_models_catch_held_out_frames_the_word_rules_miss(kind: Marking) -> None:
    """What the models add: the idioms and shapes of :mod:`memoryquest.text` miss some of
    these, and the model of their kind scores every one of those above its threshold."""
    if kind is Marking.ANNOUNCING:
        missed = [f for f in HELD_OUT_ANNOUNCING if announcement(f"{f}, I moved flats.") is None]
    else:
        missed = [
            f
            for f in HELD_OUT_POINTING
            if forward_cue(f"I moved flats, {f}.") is None
            and later_occasion(f"I moved flats, {f}.") is None
        ]
    assert len(missed) >= 3
    check = shared_framing_check()
    scores = check.models()[kind].probability(check.embedder.embed_sync(missed))
    assert (scores > THRESHOLD[kind]).all(), dict(zip(missed, scores.round(2), strict=True))


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
        "I adopted a greyhound called Pixel, last week. Anyway, what time do they open? "
        "It was a long trip home from the shelter, but she slept on my lap the whole way."
    )
    telling = "I adopted a greyhound called Pixel, last week."
    framed = telling_frames(turn, "I adopted a rescue greyhound named Pixel.")
    by_marking = {
        kind: [(f.frame, f.sentence) for f in framed if f.marking is kind] for kind in Marking
    }
    assert by_marking[Marking.ANNOUNCING] == [
        ("I adopted a greyhound called Pixel", telling),
        ("last week", telling),
        ("Fresh news", "Fresh news!"),
    ]
    # Pointing ahead takes a clause that looks past the moment of speaking: none of these does.
    assert by_marking[Marking.POINTING] == []
    telling = "I adopted a greyhound called Pixel last week, which will change our walks for good."
    beside = "She sleeps on the sofa, and I suspect she will come up again when we plan holidays."
    question = "Will she be all right in a car?"
    turn = f"{question} {telling} {beside} She is the calmest dog I have ever met."
    framed = telling_frames(turn, "I adopted a rescue greyhound named Pixel.")
    assert [(f.frame, f.sentence) for f in framed if f.marking is Marking.POINTING] == [
        ("which will change our walks for good", telling),
        ("and I suspect she will come up again when we plan holidays", beside),
    ]


async def test_the_strongest_marked_frame_is_named_by_key_with_its_marking() -> None:
    check = shared_framing_check()
    told = "I adopted a greyhound last week."
    found = await check.strongest_marked(
        {
            "plain": [Framed(Marking.ANNOUNCING, "which was lovely", told)],
            "announced": [
                Framed(Marking.ANNOUNCING, "I started running again", told),
                Framed(Marking.ANNOUNCING, "Thought this was worth passing on", told),
            ],
            "pointing": [Framed(Marking.POINTING, "so you know for the future", told)],
        },
        THRESHOLD,
    )
    assert set(found) == {"announced", "pointing"}
    assert found["announced"].frame == "Thought this was worth passing on"
    assert found["announced"].marking is Marking.ANNOUNCING
    assert found["announced"].probability > THRESHOLD[Marking.ANNOUNCING]
    assert found["pointing"].marking is Marking.POINTING
    # a marking without a limit is not scored, and a limit of 1 lets everything by
    pointing = {"pointing": [Framed(Marking.POINTING, "so you know for the future", told)]}
    assert await check.strongest_marked(pointing, {Marking.ANNOUNCING: 0.6}) == {}
    assert await check.strongest_marked(pointing, {Marking.POINTING: 1.0}) == {}


async def test_held_out_sentences_pointing_ahead_are_caught_beyond_the_word_rules() -> None:
    """Whole news sentences, not frames: of those that point ahead in words the rules of
    :mod:`memoryquest.text` miss, the pointing model finds most; of the same news told
    plainly, none (measured: 3 of the 5 the rules miss, and 0 of 10 plain)."""

    def word_rules(sentence: str) -> bool:
        return any(
            rule(sentence) is not None for rule in (forward_cue, later_occasion, announcement)
        )

    missed = [s for s in HELD_OUT_POINTING_SENTENCES if not word_rules(s)]
    assert len(missed) >= 3
    assert not any(word_rules(s) for s in HELD_OUT_PLAIN_SENTENCES)
    pointing_only = {Marking.POINTING: THRESHOLD[Marking.POINTING]}

    async def flagged(sentences: list[str]) -> list[str]:
        by_sentence = {s: telling_frames(s, s.split(",")[0]) for s in sentences}
        found = await shared_framing_check().strongest_marked(by_sentence, pointing_only)
        return [s for s in sentences if s in found]

    assert len(await flagged(missed)) * 2 > len(missed)
    assert await flagged(HELD_OUT_PLAIN_SENTENCES) == []
