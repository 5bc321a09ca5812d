"""Text helpers the stages share: lead-ins and cues."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from memoryquest.text import (
    ANNOUNCEMENTS,
    FORWARD_CUES,
    announcement,
    clauses,
    contains_verbatim,
    content_words,
    document_formatting,
    forward_cue,
    later_occasion,
    looks_ahead,
    sentence_spans,
    split_sentences,
    without_lead_in,
)

try:
    from tests.generation_fixture import generated
except ImportError:  # tests/ is not a package: pytest puts it on sys.path
    from generation_fixture import generated


@pytest.mark.parametrize(
    ("sentence", "content"),
    [
        (
            "In passing, the user shares an update: Rent went up by $110 a month.",
            "Rent went up by $110 a month.",
        ),
        ("The user mentions: they broke a wrist.", "they broke a wrist."),
        # Not a frame: a time, no colon, or a colon after a whole clause of content.
        ("Wakes at 6:45 AM on weekdays.", "Wakes at 6:45 AM on weekdays."),
        ("Rent went up by $110 a month.", "Rent went up by $110 a month."),
        (
            "The boiler broke and there is no hot water at home until the landlord finds a plumber: it is cold.",
            "The boiler broke and there is no hot water at home until the landlord finds a plumber: it is cold.",
        ),
    ],
)
def test_a_short_framing_lead_in_is_left_out(sentence: str, content: str) -> None:
    assert without_lead_in(sentence) == content


@pytest.mark.parametrize(
    ("sentence", "announced", "points_ahead"),
    [
        ("By the way, my knee is still healing.", True, False),
        ("Just so you know, I moved to Leeds in May.", True, False),
        ("FYI the car is in the garage until Friday.", True, False),
        ("Side note: I'm off dairy now.", True, False),
        ("Keep that in mind for my trip.", False, True),
        ("The voucher will come in handy, I think.", False, True),
        ("That may matter down the line.", False, True),
        ("My knee is still healing after the fall in March.", False, False),
        ("I keep my mind open about hotels.", False, False),
        ("The fyigram app is new.", False, False),
    ],
)
def test_announcing_and_pointing_ahead_are_told_apart_from_plain_statements(
    sentence: str, announced: bool, points_ahead: bool
) -> None:
    assert (ANNOUNCEMENTS.search(sentence) is not None) is announced
    assert (FORWARD_CUES.search(sentence) is not None) is points_ahead


# Development examples written for the shape detectors (not taken from any corpus of faults, and
# not the wordings of the idiom lists): each says its thing in a form the idioms do not list.
ANNOUNCING = [
    "On a separate note, my sister is moving in with us.",
    "Unrelated, but I finally got my braces off.",
    "Quick update: the landlord raised the rent.",
    "Totally different topic — I adopted a rescue greyhound.",
    "Speaking of dogs, mine just turned ten.",
    "I figured I'd mention that I'm allergic to shellfish.",
    "Thought you should know I don't drive anymore.",
    "Let me just flag that my budget is tight this year.",
    "Big news: we're expecting twins.",
    "Not sure if it matters, but I'm left-handed.",
    "Random thought: I've never actually seen snow.",
    "One more thing, the cat needs a sitter.",
]
POINTING_AHEAD = [
    "It'll probably matter when I book the cabin.",
    "That might affect what I pick for dinner next month.",
    "Which could come into play once I plan the summer trip.",
    "This is relevant for my next trip to Lisbon.",
    "Something to think about when I choose a gym.",
    "Worth noting for when we head to the coast.",
    "That will be a factor when I look for a new place.",
    "All of this should shape my choice of seats.",
    "Knowing that could factor into where we stay.",
    "Good to know for next time.",
    "Bear that in mind if I ask about restaurants.",
]
PLAIN = [
    "I'll book the ferry next week.",
    "Next time I go, I'm bringing a better camera.",
    "Well, the hotel was fine, but the breakfast was cold.",
    "Also, I picked up a new hobby: pottery.",
    "Actually, I prefer window seats.",
    "Honestly, the museum was a bit overrated.",
    "Thanks, that's really helpful.",
    "Good to know, thanks.",
    "If you like quiet places, the north beach is a good choice.",
    "Yesterday, I went to the farmers market with my cousin.",
    "That depends on what you want to spend.",
    "You might want to check the opening hours first.",
    "I'd say the second hotel is better value.",
    "It doesn't matter much to me which airline it is.",
    "When I travel, I always pack light.",
    "Let me know if you want more options.",
    "I can tell you more about the neighbourhood if you like.",
    "The thing is, my knee still hurts.",
    "It's worth noting that the gallery is closed on Mondays.",
]


@pytest.mark.parametrize("sentence", ANNOUNCING)
def test_the_shapes_of_announcing_are_found_beyond_the_idioms(sentence: str) -> None:
    assert ANNOUNCEMENTS.search(sentence) is None  # the idiom list alone misses it
    assert announcement(sentence) is not None


@pytest.mark.parametrize("sentence", POINTING_AHEAD)
def test_the_shapes_of_pointing_ahead_are_found_beyond_the_idioms(sentence: str) -> None:
    assert FORWARD_CUES.search(sentence) is None
    assert forward_cue(sentence) is not None


@pytest.mark.parametrize("sentence", PLAIN)
def test_plain_sentences_neither_announce_nor_point_ahead(sentence: str) -> None:
    """Plans for later, interjections, advice and thanks are ordinary prose."""
    assert announcement(sentence) is None and forward_cue(sentence) is None


def test_ordinary_prose_is_hardly_ever_refused() -> None:
    """The persona sample's own prose (profiles, interaction summaries, tasks): written by people
    and models describing users, not telling news, so almost none of it announces or points
    ahead. Measured: 1 of 8,192 sentences (an old idiom, "for future reference")."""
    root = Path(__file__).resolve().parent.parent / "personas" / "personalens"
    sentences: set[str] = set()
    for path in sorted(root.glob("profile/*/*.json")) + sorted(root.glob("task/*/task.jsonl")):
        lines = path.read_text().splitlines() if path.suffix == ".jsonl" else [path.read_text()]
        for line in filter(str.strip, lines):
            for text in _strings(json.loads(line)):
                if len(text.split()) >= 4:
                    sentences.update(split_sentences(text))
    flagged = [s for s in sentences if announcement(s) or forward_cue(s)]
    assert len(sentences) > 5000
    assert len(flagged) <= 0.001 * len(sentences), flagged


def _strings(value: object) -> list[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        value = list(value.values())
    if isinstance(value, list):
        return [text for item in value for text in _strings(item)]
    return []


# --------------------------------------------------------------------------- document formatting

FORMATTED = {
    "heading": "## Plan for Friday\nWe leave at nine.",
    "heading underline": "Plan for Friday\n===============\nWe leave at nine.",
    "thematic break": "We leave at nine.\n\n* * *\n\nDinner after.",
    "block quote": "> You said you prefer trains.\nSo I booked one.",
    "bullet list": "Options:\n+ the 9:10 train\n+ the 10:40 bus",
    "numbered list": "1) book the table\n2) call Sam",
    "lettered list": "a. book the table\nb. call Sam",
    "code fence": "~~~\nbooking ref 42\n~~~",
    "table": "Day | Slot\n--- | ---\nFri | 9:10",
    "strong emphasis": "That is __really__ the best slot.",
    "emphasis": "That is *really* the best slot, or _maybe_ not.",
    "strikethrough": "The ~~Friday~~ Saturday slot.",
    "code span": "Use the code `SPRING24` at checkout.",
    "link": "Here it is: [the venue](https://example.org/venue).",
}


@pytest.mark.parametrize("construct", sorted(FORMATTED))
def test_each_markdown_construct_is_found(construct: str) -> None:
    assert document_formatting(FORMATTED[construct]) is not None


def test_plain_chat_is_not_formatting() -> None:
    """Real generated turns, and plain sentences with the characters the constructs use, use none."""
    turns = [t.content for s in generated().dataset.sessions for t in s.turns]
    flagged = [t for t in turns if document_formatting(t)]
    assert len(turns) > 1000 and not flagged, flagged[:3]
    prose = [
        "It's 5 - 7 minutes away; 3*4 = 12 seats.",
        "My user_name is jo_smith and the file is notes_2024.txt.",
        "Costs $12-$15 each, or 2 for $25 (a deal).",
        "I'd say a) it is cheap and that's it.",
    ]
    assert [p for p in prose if document_formatting(p)] == []


def test_clauses_split_at_the_punctuation_that_sets_a_clause_off() -> None:
    text = "My bike was stolen, so I walk; it takes longer (a lot) \u2014 fine. Next - then: done!"
    assert clauses(text) == [
        "My bike was stolen",
        "so I walk",
        "it takes longer",
        "a lot",
        "fine.",
        "Next",
        "then",
        "done!",
    ]
    assert clauses("well-known, self-made") == ["well-known", "self-made"]
    assert clauses("I owe R4,000, due at 9:30 PM") == ["I owe R4,000", "due at 9:30 PM"]


# The user's own later occasion, tied to what was just told: written for this test, in shapes
# (a pronoun pointing back beside a time of the user's to come, or a short frame naming one).
LATER_OCCASION = [
    "My sister keeps the spare key, and that could be useful once we sort the holiday lets.",
    "This is the reason I'll be picking a ground-floor flat.",
    "Ahead of the marathon next spring, my physio has me on two runs a week.",
    "I drive an old hatchback; it decides a lot when I look at roof boxes.",
]


@pytest.mark.parametrize("sentence", LATER_OCCASION)
def test_a_told_thing_tied_to_the_users_later_occasion_is_found(sentence: str) -> None:
    assert later_occasion(sentence) is not None


@pytest.mark.parametrize(
    "sentence",
    [
        *PLAIN,
        # news with a date to come, its "it" the clause's own object (the simulator said this)
        "I sent my passport off and don't have it until May 25 ahead of a trip to Rome.",
    ],
)
def test_plain_sentences_tie_nothing_to_a_later_occasion(sentence: str) -> None:
    """A plan ("I'll book the ferry next week"), a habit ("When I travel, I pack light") or a
    reply is not a pointer: nothing told is pointed back at."""
    assert later_occasion(sentence) is None


@pytest.mark.parametrize(
    ("sentence", "frame"),
    [
        ("Ahead of Christmas, my sister moved in with us.", "Ahead of Christmas"),
        (
            "Ahead of the big family reunion we are all planning, my sister moved in.",
            "Ahead of the big family reunion we are all planning",
        ),
        ("Next month, my sister moves in with us.", None),  # a date, not a frame: 2 words
        ("Ahead of the big family reunion we are all still planning, my sister moved in.", None),
    ],
)
def test_an_opening_frame_naming_a_time_to_come_runs_3_to_10_words(
    sentence: str, frame: str | None
) -> None:
    """Shorter is a date the news happens on; longer is news of its own, not a frame for it."""
    assert later_occasion(sentence) == frame


@pytest.mark.parametrize(
    ("sentence", "lead"),
    [
        ("Update: my sister moved in.", "Update"),
        ("A totally random one, my sister moved in.", "A totally random one"),
        ("Oh and one more little update, my sister moved in.", "Oh and one more little update"),
        ("Oh and just one more little update, my sister moved in.", None),  # 7 words: a clause
        ("Oh well, my sister moved in.", None),  # no word about the talk
        ("Update on the garden: the tomatoes died.", None),  # a content word: a topic, not talk
    ],
)
def test_a_detached_lead_announces_when_it_is_up_to_6_words_about_the_talk(
    sentence: str, lead: str | None
) -> None:
    assert ANNOUNCEMENTS.search(sentence) is None
    assert announcement(sentence) == lead


def test_a_verbatim_repeat_ignores_case_spacing_and_the_final_stop_only() -> None:
    said = "Oh, and MY bike was   stolen last week!"
    assert contains_verbatim(said, "my bike was stolen last week.")
    assert not contains_verbatim(said, "my bike was taken last week")
    assert not contains_verbatim(said, " . ")  # nothing left to repeat


def test_content_words_are_the_stems_of_words_that_carry_meaning() -> None:
    assert content_words("I have 2 cats, a TV and a dog, x.") == ["cat", "tv", "dog"]


def test_sentence_spans_cut_the_text_at_each_sentence_in_order() -> None:
    text = "Yes. Yes.  It rained! Fine?"
    spans = sentence_spans(text)
    assert spans == [(0, 4), (5, 9), (11, 21), (22, 27)]  # a repeated sentence gets its own span
    assert [text[start:end] for start, end in spans] == split_sentences(text)


def test_ordinary_prose_hardly_ever_ties_to_a_later_occasion() -> None:
    root = Path(__file__).resolve().parent.parent / "personas" / "personalens"
    sentences: set[str] = set()
    for path in sorted(root.glob("profile/*/*.json")) + sorted(root.glob("task/*/task.jsonl")):
        lines = path.read_text().splitlines() if path.suffix == ".jsonl" else [path.read_text()]
        for line in filter(str.strip, lines):
            for text in _strings(json.loads(line)):
                if len(text.split()) >= 4:
                    sentences.update(split_sentences(text))
    flagged = [s for s in sentences if later_occasion(s)]
    assert len(flagged) <= 0.01 * len(sentences), (len(flagged), flagged[:20])  # measured: 39


@pytest.mark.parametrize(
    ("clause", "ahead"),
    [
        ("which I think will be a big deal", True),
        ("and that\u2019ll come up again", True),
        ("so I'm going to need a quieter room", True),
        ("for when we sort out the summer", True),
        ("which might be tight", True),  # a modal is enough to be scored; the model decides
        ("something for next spring", True),
        ("so it stays on file for the future", True),
        ("which affects my weekends", False),
        ("so we cycle everywhere now", False),
        ("and the landlord raised the rent in March", False),
        ("go ahead and book it", False),  # "go ahead" is no time to come
        ("hang on to that one", False),
    ],
)
def test_a_clause_looks_ahead_by_its_grammar_words(clause: str, ahead: bool) -> None:
    assert looks_ahead(clause) is ahead
