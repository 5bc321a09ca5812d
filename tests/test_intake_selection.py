"""PersonaSelection and the spelling rules behind intake."""

from __future__ import annotations

from pathlib import Path

import pytest

from memoryquest.contracts import Domain
from memoryquest.intake import (
    IntakeSourceError,
    PersonaSelection,
    canonical_affinity_name,
    check_selection,
    load_personas,
    natural_key,
)
from memoryquest.intake.normalise import decode_json, field_key, parse_domain

AVAILABLE = ["user10", "user2", "user0", "user1", "user11", "user3"]


def test_count_is_natural_order_not_lexicographic() -> None:
    assert PersonaSelection(count=4).pick(AVAILABLE) == (["user0", "user1", "user2", "user3"], [])
    assert sorted(AVAILABLE) != sorted(AVAILABLE, key=natural_key)


def test_range_is_start_inclusive_stop_exclusive() -> None:
    assert PersonaSelection(start=2, stop=5).pick(AVAILABLE) == (["user2", "user3", "user10"], [])
    assert PersonaSelection.parse(range_text="4:").pick(AVAILABLE) == (["user10", "user11"], [])
    assert PersonaSelection.parse(range_text=":2").pick(AVAILABLE) == (["user0", "user1"], [])


def test_user_ids_keep_their_order_and_report_unknown_ones() -> None:
    assert PersonaSelection(user_ids=["user11", "user7", "user0"]).pick(AVAILABLE) == (
        ["user11", "user0"],
        ["user7"],
    )


def test_everything_when_nothing_is_chosen() -> None:
    selection = PersonaSelection()
    assert selection.is_everything
    assert selection.pick(AVAILABLE)[0] == ["user0", "user1", "user2", "user3", "user10", "user11"]
    with pytest.raises(IntakeSourceError, match="cannot be listed"):
        selection.upstream_ids()


def test_upstream_ids_for_http() -> None:
    assert PersonaSelection(count=3).upstream_ids() == ["user0", "user1", "user2"]
    assert PersonaSelection(start=1498, stop=1500).upstream_ids() == ["user1498", "user1499"]
    assert PersonaSelection(user_ids=["user7"]).upstream_ids() == ["user7"]


def test_parse_from_command_line_text() -> None:
    assert PersonaSelection.parse(users="user0, user3,") == PersonaSelection(
        user_ids=("user0", "user3")
    )
    assert PersonaSelection.parse(count=5) == PersonaSelection(count=5)
    assert PersonaSelection.parse(range_text="0:10") == PersonaSelection(start=0, stop=10)
    assert PersonaSelection.parse() == PersonaSelection()


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        (
            {"user_ids": ["user0"], "start": 2},
            "by user ids (users) or by a range (range), not both",
        ),
        ({"user_ids": ["user0"], "stop": 5}, "not both"),
        ({"count": 0}, "count must be at least 1, got 0"),
        ({"user_ids": ["user0"], "count": 0}, "count must be at least 1, got 0"),
        ({"start": -1, "stop": 3}, "range start must not be negative"),
        ({"start": 0, "stop": -3}, "range stop must not be negative"),
        ({"start": 5, "stop": 5}, "range 5:5 is empty"),
        ({"start": 9, "stop": 5}, "range 9:5 is empty"),
        ({"user_ids": []}, "lists no user ids"),
        ({"user_ids": "user0"}, "not one string"),
        ({"user_ids": ["user1", "user1"]}, "given more than once: user1"),
    ],
)
def test_invalid_selections(kwargs: dict[str, object], message: str) -> None:
    with pytest.raises(ValueError, match=message.replace("(", r"\(").replace(")", r"\)")):
        PersonaSelection(**kwargs)  # type: ignore[arg-type]


def test_count_caps_user_ids_in_their_order() -> None:
    selection = PersonaSelection.parse(users="user11,user3,user0", count=2)
    assert selection == PersonaSelection(user_ids=("user11", "user3"))
    assert selection.pick(AVAILABLE) == (["user11", "user3"], [])
    assert PersonaSelection.parse(users="user3", count=5).user_ids == ("user3",)


def test_count_caps_a_range_from_its_start() -> None:
    assert PersonaSelection.parse(range_text="30:230", count=5) == PersonaSelection(
        start=30, stop=35
    )
    assert PersonaSelection.parse(range_text="30:32", count=5) == PersonaSelection(
        start=30, stop=32
    )
    assert PersonaSelection.parse(range_text="2:", count=2).pick(AVAILABLE) == (
        ["user2", "user3"],
        [],
    )
    assert PersonaSelection.parse(range_text="30:", count=3).upstream_ids() == [
        "user30",
        "user31",
        "user32",
    ]


def test_range_is_half_open_like_a_slice() -> None:
    ordered = sorted(AVAILABLE, key=natural_key)
    for text, (start, stop) in {"1:4": (1, 4), "3:": (3, None), ":2": (0, 2)}.items():
        assert PersonaSelection.parse(range_text=text).pick(AVAILABLE)[0] == ordered[start:stop]
    # past the end like a slice, as long as something is left
    assert PersonaSelection.parse(range_text="4:100").pick(AVAILABLE)[0] == ["user10", "user11"]
    assert PersonaSelection.parse(range_text="30:230").upstream_ids() == [
        f"user{i}" for i in range(30, 230)
    ]


def test_a_range_past_the_source_selects_nothing_and_says_so() -> None:
    with pytest.raises(IntakeSourceError) as caught:
        PersonaSelection.parse(range_text="30:230").pick(AVAILABLE)
    assert str(caught.value) == "range 30:230 selects no persona: the source has 6 (range 0:6)"
    with pytest.raises(IntakeSourceError, match="range 6: selects no persona"):
        PersonaSelection.parse(range_text="6:").pick(AVAILABLE)


def test_flow_parameters_spell_users_as_a_list_or_as_the_command_line_does() -> None:
    assert PersonaSelection.parse(users=["user0", "user3"]) == PersonaSelection.parse(
        users="user0,user3"
    )


@pytest.mark.parametrize("text", ["10", "a:b", "1:x", "1:2:3", "", "30-230"])
def test_invalid_range_text(text: str) -> None:
    with pytest.raises(ValueError, match="range must look like START:STOP"):
        PersonaSelection.parse(range_text=text)


@pytest.mark.parametrize(
    ("raw", "canonical"),
    [
        ("Favourite Authors", "Favorite Authors"),
        ("Favorite Authors", "Favorite Authors"),
        ("  favourite   books ", "favorite books"),
        ("FAVOURITE TEAM", "FAVORITE TEAM"),
        ("Least Favourites", "Least Favorites"),
        ("Genre", "Genre"),
    ],
)
def test_canonical_affinity_name(raw: str, canonical: str) -> None:
    assert canonical_affinity_name(raw) == canonical


def test_field_key_and_domain_spellings() -> None:
    assert field_key(" Relevant_Domains ") == field_key("relevant  domains") == "relevant domains"
    assert parse_domain("rental cars") is Domain.RENTAL_CARS
    assert parse_domain("Rental_Cars") is Domain.RENTAL_CARS
    assert parse_domain(" MUSIC ") is Domain.MUSIC
    assert parse_domain("Cooking") is None


def test_decode_json_messages() -> None:
    assert decode_json(b'{"a": 1}') == ({"a": 1}, None)
    assert decode_json(b"\xef\xbb\xbf[1]") == ([1], None)
    assert decode_json(b"[1,]")[1] == "invalid JSON: Expecting value (line 1, column 4)"
    assert decode_json(b'["\xc3"]')[1] == "not valid UTF-8 (byte 0xc3 at offset 2)"
    assert decode_json(b"[" * 100_000 + b"]" * 100_000)[1] == "invalid JSON: nested too deeply"


def test_check_selection_finds_a_range_past_the_source_without_loading_it(
    personalens_sample_dir: Path, custom_personas_example: Path
) -> None:
    check_selection(personalens_sample_dir, PersonaSelection.parse(range_text="29:"))
    with pytest.raises(IntakeSourceError, match="range 30: selects no persona"):
        check_selection(personalens_sample_dir, PersonaSelection.parse(range_text="30:"))
    with pytest.raises(IntakeSourceError, match="cannot be listed"):
        check_selection("http://127.0.0.1:9/data", PersonaSelection.parse(range_text="30:"))
    check_selection("http://127.0.0.1:9/data", PersonaSelection.parse(range_text="30:", count=2))
    # A custom file's ids are known once it is read: loading checks it.
    check_selection(custom_personas_example, PersonaSelection.parse(range_text="5:"))
    with pytest.raises(IntakeSourceError, match="range 5: selects no persona: the source has 2"):
        load_personas(custom_personas_example, PersonaSelection.parse(range_text="5:"))
