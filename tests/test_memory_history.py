"""A short, hand-built history for user0 from the bundled PersonaLens profile.

The memory tests replay it. Every user statement is taken from user0's real
affinities, and one session conveys a reference (the nut allergy) in one
first-person sentence of a user turn, as the dialogue stage does.
"""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Sequence
from pathlib import Path

from memoryquest.contracts import (
    Affinity,
    Demographics,
    Domain,
    Interaction,
    Persona,
    PersonaSource,
    Role,
    Session,
    Turn,
)
from memoryquest.ids import make_id

PROFILE = (
    Path(__file__).resolve().parent.parent
    / "personas"
    / "personalens"
    / "profile"
    / "user0"
    / "profile.json"
)
QUERY_ID = make_id("query", "memory-tests", "user0")


def user0_profile() -> dict:
    return json.loads(PROFILE.read_text(encoding="utf-8"))


def user0_persona() -> Persona:
    profile = user0_profile()
    demographics = {
        k: v for k, v in profile["demographics"].items() if k in Demographics.model_fields
    }
    affinities = [
        Affinity(
            domain=Domain(domain), name=name, values=value if isinstance(value, list) else [value]
        )
        for domain, attributes in profile["affinities"].items()
        for name, value in attributes.items()
    ]
    return Persona(
        persona_id=make_id("persona", "personalens", "user0"),
        source=PersonaSource.PERSONALENS,
        source_user_id="user0",
        demographics=Demographics(**demographics),
        interests=[Domain(d) for d, flag in profile["interests"].items() if flag],
        affinities=affinities,
        interactions=[
            Interaction(domain=Domain(d), summary=s) for d, s in profile["interactions"].items()
        ],
        tasks=[],
    )


def make_session(
    persona: Persona,
    position: int,
    date: dt.date,
    domain: Domain,
    user_turns: Sequence[str],
    *,
    reference_turn: int | None = None,
    reference_key: str = "",
) -> Session:
    """User and assistant alternate; ``reference_turn`` indexes ``user_turns``."""
    turns: list[Turn] = []
    for text in user_turns:
        turns.append(Turn(role=Role.USER, content=text))
        turns.append(
            Turn(
                role=Role.ASSISTANT,
                content=f"Noted. Here is what I can do about {domain.value.lower()}.",
            )
        )
    session_id = make_id("session", persona.persona_id, date.isoformat(), position)
    reference_id = (
        make_id("reference", persona.persona_id, reference_key)
        if reference_turn is not None
        else None
    )
    return Session(
        session_id=session_id,
        persona_id=persona.persona_id,
        query_id=QUERY_ID,
        event_id=make_id("event", session_id),
        date=date,
        domain=domain,
        position=position,
        turns=turns,
        reference_id=reference_id,
        reference_turn_indices=[2 * reference_turn] if reference_turn is not None else [],
    )


def user0_history(persona: Persona) -> list[Session]:
    """Seven sessions over three weeks; the aisle-seat preference is stated twice (sessions 1 and 4)."""
    a = user0_profile()["affinities"]
    d = dt.date
    return [
        make_session(
            persona,
            0,
            d(2024, 3, 1),
            Domain.BOOKS,
            [
                "Can you suggest something new to read this weekend?",
                f"I love {a['Books']['Genre'][0]} and {a['Books']['Genre'][2]} books.",
                f"My favourite author is {a['Books']['Favourite Authors'][0]}. Thanks!",
            ],
        ),
        make_session(
            persona,
            1,
            d(2024, 3, 3),
            Domain.FLIGHTS,
            [
                "I need a flight from Toronto to Vancouver next month.",
                f"I prefer an {a['Flights']['Seat Preference']} seat on flights.",
                f"I usually fly {a['Flights']['Preferred Airline'][0]} when I can.",
            ],
        ),
        make_session(
            persona,
            2,
            d(2024, 3, 5),
            Domain.ALARM,
            [
                "Please set my weekday alarm.",
                f"I wake up at {a['Alarm']['Alarm Time Preference']} on {a['Alarm']['Alarm Recurring Preference']}.",
                f"I like {a['Alarm']['Alarm Sound Preference']} as my alarm sound.",
            ],
        ),
        make_session(
            persona,
            3,
            d(2024, 3, 10),
            Domain.RESTAURANTS,
            [
                "Could you find a place for dinner on Friday?",
                f"I have a {a['Restaurants']['Dietary Restrictions'][0]}, so I always check menus carefully.",
                f"I'm a big fan of {a['Restaurants']['Cuisine Preference'][0]} food.",
            ],
            reference_turn=1,
            reference_key="nut-allergy",
        ),
        make_session(
            persona,
            4,
            d(2024, 3, 12),
            Domain.FLIGHTS,
            [
                "Any updates on flights to Vancouver?",
                f"I prefer an {a['Flights']['Seat Preference']} seat on flights.",
            ],
        ),
        make_session(
            persona,
            5,
            d(2024, 3, 15),
            Domain.MUSIC,
            [
                f"I've been listening to {a['Music']['Favorite Artists'][0]} a lot lately.",
                f"My favourite band is {a['Music']['Favorite Bands'][0]}.",
            ],
        ),
        make_session(
            persona,
            6,
            d(2024, 3, 20),
            Domain.SPORTS,
            [
                f"I'm going to a {a['Sports']['Favorite Team'][0]} game next Saturday.",
                "Sounds good, thanks!",
            ],
        ),
    ]


def long_history(persona: Persona, sessions: int = 60) -> list[Session]:
    """Many sessions walking through user0's affinity values, every 7th conveying a reference.

    Values of one attribute come in neighbouring sessions (near-duplicates a few
    days apart, which consolidation may merge), and every 4th session repeats a
    statement from ten sessions earlier (an upsert).
    """
    statements: list[tuple[Domain, str]] = []
    for affinity in persona.affinities:
        for k, value in enumerate(affinity.values):
            name = affinity.name.lower()
            text = f"My {name} is {value}." if k % 2 == 0 else f"I prefer {value} for {name}."
            statements.append((affinity.domain, text))
    history: list[Session] = []
    day = dt.date(2024, 1, 1)
    for position in range(sessions):
        domain, first = statements[(2 * position) % len(statements)]
        _, second = statements[(2 * position + 1) % len(statements)]
        if position % 4 == 3 and position >= 10:
            _, second = statements[(2 * (position - 10)) % len(statements)]
        conveys = position % 7 == 3
        history.append(
            make_session(
                persona,
                position,
                day,
                domain,
                ["Can you help me with something?", first, second, "Thanks!"],
                reference_turn=1 if conveys else None,
                reference_key=f"long-{position}",
            )
        )
        day += dt.timedelta(days=(0, 1, 1, 2, 3)[position % 5])
    return history


# --------------------------------------------------------------------------- the history itself


def test_history_states_user0_real_affinities() -> None:
    persona = user0_persona()
    history = user0_history(persona)
    said = " ".join(t.content for s in history for t in s.turns if t.role is Role.USER)
    values = {v for affinity in persona.affinities for v in affinity.values}
    stated = sorted(v for v in values if v in said)
    assert len(stated) >= 10, stated
    assert "nut allergy" in said and "Carl Sagan" in said


def test_history_is_chronological_with_one_reference() -> None:
    history = user0_history(user0_persona())
    assert [s.position for s in history] == list(range(len(history)))
    assert [s.date for s in history] == sorted(s.date for s in history)
    with_reference = [s for s in history if s.reference_id]
    assert len(with_reference) == 1
    turn = with_reference[0].turns[with_reference[0].reference_turn_indices[0]]
    assert turn.role is Role.USER and "nut allergy" in turn.content
