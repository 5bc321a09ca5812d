"""Text helpers the stages share: lead-ins and cues."""

from __future__ import annotations

import pytest

from memoryquest.text import (
    ANNOUNCEMENTS,
    FORWARD_CUES,
    without_lead_in,
)


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
