"""The simulator's memory answers: statements from user turns, upsert by overlap, merging."""

from __future__ import annotations

import datetime as dt
import json
import random
import re

import pytest
from generation_fixture import load_users
from test_memory_history import user0_history, user0_persona

from memoryquest.contracts import Domain, FactType
from memoryquest.memory.consolidation import MergedFactAnswer
from memoryquest.memory.consolidation_contracts import ConsolidationInputs
from memoryquest.memory.extraction import (
    ExtractionAnswer,
    check_answer,
    numbered_sentences,
    session_views,
)
from memoryquest.memory.extraction_contracts import ExtractionInputs
from memoryquest.simulator import simulate
from memoryquest.simulator.grammar import as_fact
from memoryquest.simulator.memory import (
    UPDATE_JACCARD,
    classify,
    entities,
    extract_facts,
    facts_of_turn,
    is_request,
    jaccard,
    merge_facts,
    proper_names,
    statements,
)
from memoryquest.simulator.needs import World, distractor_update, infer_domains, say_update
from memoryquest.simulator.needs.bridges import split_bridge
from memoryquest.simulator.persona_grounding import PersonaMaterial
from memoryquest.text import content_stems


@pytest.mark.parametrize(
    ("said", "fact", "fact_type"),
    [
        ("I moved to Toronto last spring.", "Moved to Toronto last spring", "Event"),
        ("Last spring, I moved to Toronto.", "Moved to Toronto last spring", "Event"),
        (
            "My favourite author is Carl Sagan.",
            "User's favourite author is Carl Sagan",
            "Preference",
        ),
        (
            "I love science-fiction and history books.",
            "Loves science-fiction and history books",
            "Preference",
        ),
        (
            "I'm going to a Toronto Blue Jays game next Saturday.",
            "Is going to a Toronto Blue Jays game next Saturday",
            "Goal",
        ),
        (
            "I've been listening to Radiohead a lot lately.",
            "Has been listening to Radiohead a lot lately",
            "Activity",
        ),
        ("I'm a big fan of Japanese food.", "Is a big fan of Japanese food", "Interest"),
        (
            "I work as a nurse at a downtown clinic.",
            "Works as a nurse at a downtown clinic",
            "Identity",
        ),
        ("By the way, I sprained my wrist last week.", "Sprained their wrist last week", "Event"),
        (
            "My wife and I are going to Paris next week.",
            "User and their wife are going to Paris next week",
            "Goal",
        ),
        (
            "I usually fly Air Canada when I can.",
            "Usually flies Air Canada when they can",
            "Activity",
        ),
        # Sentences of the dialogue stage whose first-person subject is not first.
        (
            "Sunday mornings I play in a hockey league I just joined.",
            "Sunday mornings they play in a hockey league they just joined",
            "Activity",
        ),
        (
            "A friend and I have a standing Sunday-night rewatch of Inception.",
            "User and a friend have a standing Sunday-night rewatch of Inception",
            "Activity",
        ),
        (
            "Because of eye strain I only read ebooks at the moment.",
            "Because of eye strain they only read ebooks at the moment",
            "Activity",
        ),
        (
            "I keep an eye on Apple Inc. and Tesla Inc.. What do you think?",
            "Keeps an eye on Apple Inc. and Tesla Inc",
            "Activity",
        ),
    ],
)
def test_first_person_statements_become_third_person_facts(
    said: str, fact: str, fact_type: str
) -> None:
    (clause,) = statements(said)
    assert as_fact(clause) == fact
    assert classify(clause) == fact_type


@pytest.mark.parametrize(
    "said",
    [
        "Can you suggest something new to read?",
        "Please set my weekday alarm.",
        "I need you to book it for Friday.",
        "Sounds good, thanks!",
        "I think that works.",
        "I'm not sure about that.",
        "I like that idea.",
        "Thanks, that's exactly what I needed.",
        "Book me a table for two, please.",
        "Hello, I could use some help with sports today.",
        "My interactions with you are usually short.",
        "Sure, 9:15 AM is fine, set it and I'm done; thanks for the help.",
    ],
)
def test_questions_requests_and_small_talk_are_skipped(said: str) -> None:
    assert statements(said) == []


def test_a_trailing_request_is_cut_and_each_sentence_is_one_fact() -> None:
    said = "I injured my knee last month, so can you find something low-impact? I work full-time, so I prefer evening classes."
    assert [as_fact(c) for c in statements(said)] == [
        "Injured their knee last month",
        "Works full-time, so they prefer evening classes",
    ]


@pytest.mark.parametrize(
    ("said", "fact"),
    [
        (
            "Oh, also — I sprained my ankle, so keep that in mind when you plan.",
            "Sprained their ankle",
        ),
        (
            "Now that you ask, for context, I moved the weekday alarm to 6:00 AM.",
            "Moved the weekday alarm to 6:00 AM",
        ),
        (
            "Hmm, let me think — I was diagnosed with insomnia, so my bedtime is 10:30 sharp.",
            "Was diagnosed with insomnia, so their bedtime is 10:30 sharp",
        ),
        (
            "Since you ask, I see a physiotherapist each Monday about my stiff hip.",
            "Sees a physiotherapist each Monday about their stiff hip",
        ),
        (
            "My national ID card is lost and I'm on a temporary paper.",
            "User's national ID card is lost and they're on a temporary paper",
        ),
        ("I nearly always end up choosing Thai food.", "Nearly always ends up choosing Thai food"),
    ],
)
def test_lead_ins_and_asides_are_read_past(said: str, fact: str) -> None:
    (clause,) = statements(said)
    assert as_fact(clause) == fact


def test_facts_quote_their_sentence_exactly_and_are_never_joined() -> None:
    turn = "Sounds good, yes. By the way, my cousin is getting married on May 7; the whole family is going. I message people on WhatsApp. What times are there?"
    facts = facts_of_turn(turn, "Messaging")
    assert [quote for quote, *_ in facts] == [
        "By the way, my cousin is getting married on May 7; the whole family is going.",
        "I message people on WhatsApp.",
    ]
    assert all(quote in turn for quote, *_ in facts)
    assert all(";" not in info for _, info, _, _ in facts)


def test_the_opening_request_is_not_a_fact_but_what_follows_is() -> None:
    turn = "Hiya, could you help me find a restaurant for a special occasion? I keep to a vegetarian diet."
    assert [info for _, info, _, _ in facts_of_turn(turn, "Restaurants", opening=True)] == [
        "Keeps to a vegetarian diet"
    ]
    assert is_request("Hi again — quick one: I want to plan a trip.")
    assert not is_request("I keep to a vegetarian diet.")


@pytest.mark.parametrize(
    ("clause", "expected"),
    [
        ("I message people on WhatsApp I think", ["WhatsApp", "messaging"]),
        (
            "Last Saturday I watched the Toronto Blue Jays with Marta",
            ["Toronto Blue Jays", "Marta", "messaging"],
        ),
        # Friends make it a statement about companions, not the chat: no conversation domain.
        ("My friends and I chat on Telegram every Friday", ["Telegram", "friends"]),
    ],
)
def test_entities_are_names_and_topics_never_pronoun_fragments(
    clause: str, expected: list[str]
) -> None:
    found = entities(clause, "Messaging")
    assert found[: len(expected)] == expected
    assert not any(re.search(r"\b(?:I|I'm|My|Friday|Saturday)\b", e) for e in found), found


def test_names_in_a_list_are_separate_and_titles_keep_their_words() -> None:
    assert proper_names(
        "I follow Johnson & Johnson, Apple Inc and Microsoft Corporation closely"
    ) == [
        "Johnson & Johnson",
        "Apple Inc",
        "Microsoft Corporation",
    ]
    assert proper_names("My favourite books are The Handmaid's Tale, Beloved and Matilda") == [
        "The Handmaid's Tale",
        "Beloved",
        "Matilda",
    ]
    assert proper_names("I love Harry Potter and the Prisoner of Azkaban") == [
        "Harry Potter and the Prisoner of Azkaban"
    ]
    assert (
        as_fact("My favourite book is I Know Why the Caged Bird Sings")
        == "User's favourite book is I Know Why the Caged Bird Sings"
    )
    assert (
        as_fact("I watched Call Me by Your Name with my sister")
        == "Watched Call Me by Your Name with their sister"
    )


def test_topics_are_head_nouns_of_the_statement() -> None:
    found = entities("I keep an EpiPen on me now that celery gave me a bad reaction", "Restaurants")
    assert found == ["EpiPen", "reaction"]  # a diet constraint: not filed under the chat's domain
    assert entities("I went to some art exhibitions on Friday", "Events") == [
        "events",
        "exhibitions",
    ]
    found = entities("I'm stuck with a new flatmate who plays metal music late at night", "Music")
    assert "flatmate" in found and "plays" not in found


def test_entities_of_said_updates_come_from_the_update_not_its_bridge_or_chat() -> None:
    (persona,) = load_users("user3")
    world = World(
        PersonaMaterial(
            persona.demographics, persona.affinities, persona.interactions, persona.tasks
        )
    )
    checked = 0
    for seed in range(60):
        update = distractor_update(
            world,
            Domain.SHOPPING,
            dt.date(2024, 5, 1),
            random.Random(seed),
            set(),
            set(),
            bridge_domains=[Domain.MUSIC],
        )
        assert update is not None
        said = say_update(update.text, random.Random(seed))
        core, clause = split_bridge(said)
        if not clause:
            continue
        (statement_,) = statements(said)
        found = {w.casefold() for e in entities(statement_, "Shopping") for w in e.split()}
        bridge_only = {w.casefold() for w in clause.split()} - {w.casefold() for w in core.split()}
        assert not found & bridge_only, (said, found & bridge_only)
        if Domain.SHOPPING not in infer_domains(core):
            assert "shopping" not in found, said
        checked += 1
    assert checked >= 30


def _variables(existing: list[dict], sessions: list) -> dict:
    return {
        "existing_facts": existing,
        "sessions": session_views(sessions),
    }


def test_extraction_answer_fits_the_response_model_and_the_batch() -> None:
    history = user0_history(user0_persona())
    batch = history[:3]
    answer = ExtractionAnswer.model_validate_json(
        simulate("memory_extraction", _variables([], batch))
    )
    changes, problems = check_answer(answer, batch, set())
    assert problems == []
    assert len(changes) == len(answer.facts) >= 6
    assert all(f.fid == f"NEW_{i + 1}" for i, f in enumerate(answer.facts))
    infos = [f.info for f in answer.facts]
    assert "User's favourite author is Carl Sagan" in infos
    assert "Prefers an aisle seat on flights" in infos
    # Every fact cites the user sentence it was read from.
    numbered = numbered_sentences(batch)
    sessions = {s.session_id: s for s in batch}
    aisle = next(f for f in answer.facts if f.info == "Prefers an aisle seat on flights")
    (ref,) = [numbered[n] for n in aisle.sentences]
    assert "aisle seat" in sessions[ref.session_id].turns[ref.turn].content[ref.start : ref.end]


def test_a_repeated_statement_updates_the_existing_fact() -> None:
    history = user0_history(user0_persona())
    existing = [
        {
            "fid": "f_00000000000000aa",
            "info": "Prefers an aisle seat on flights",
            "type": "Preference",
            "related_entities": ["flights", "aisle"],
        },
    ]
    answer = extract_facts(
        ExtractionInputs.model_validate(_variables(existing, [history[4]])), random.Random(0)
    )
    updates = [f for f in answer["facts"] if not f["fid"].startswith("NEW_")]
    assert len(updates) == 1
    assert updates[0]["fid"] == "f_00000000000000aa"
    (cited,) = updates[0]["sentences"]
    ref = numbered_sentences([history[4]])[cited]
    assert ref.turn == 2
    assert history[4].turns[2].content[ref.start : ref.end].startswith("I prefer an aisle seat on")
    assert not any("aisle" in f["info"] for f in answer["facts"] if f["fid"].startswith("NEW_"))


def test_update_threshold_is_token_jaccard() -> None:
    same = jaccard(
        content_stems("Prefers an aisle seat on flights"),
        content_stems("Prefer aisle seats on flights"),
    )
    different = jaccard(
        content_stems("Prefers an aisle seat on flights"),
        content_stems("Prefers a window seat on buses"),
    )
    assert same >= UPDATE_JACCARD > different


def test_extraction_is_deterministic() -> None:
    history = user0_history(user0_persona())
    variables = _variables([], history)
    assert simulate("memory_extraction", variables, seed=1) == simulate(
        "memory_extraction", variables, seed=1
    )


def test_consolidation_keeps_one_atomic_statement_sums_frequency_and_keeps_a_member_type() -> None:
    facts = [
        {
            "fid": "f_0000000000000001",
            "info": "Loves science-fiction books",
            "type": "Preference",
            "frequency": 2,
            "related_entities": ["books", "science-fiction"],
            "updated_on": "2024-04-01",
        },
        {
            "fid": "f_0000000000000002",
            "info": "Enjoys reading sci-fi novels by Carl Sagan",
            "type": "Preference",
            "frequency": 1,
            "related_entities": ["Carl Sagan", "books", "WhatsApp I"],
            "updated_on": "2024-04-03",
        },
        {
            "fid": "f_0000000000000003",
            "info": "Loves science-fiction books",
            "type": "Interest",
            "frequency": 1,
            "related_entities": ["Books"],
            "updated_on": "2024-04-03",
        },
    ]
    merged = MergedFactAnswer.model_validate_json(
        simulate("memory_consolidation", {"facts": facts})
    )
    assert (
        merged.info == "Enjoys reading sci-fi novels by Carl Sagan"
    )  # the most informative member, as it was
    assert merged.type is FactType.PREFERENCE
    assert merged.frequency == 4
    assert merged.related_entities == ["Carl Sagan", "books", "WhatsApp", "science-fiction"]
    assert json.loads(simulate("memory_consolidation", {"facts": facts}))["frequency"] == 4
    with pytest.raises(ValueError, match="at least one fact"):
        merge_facts(ConsolidationInputs(facts=[]), random.Random(0))


def test_merging_an_older_joined_fact_keeps_one_clause() -> None:
    def fact(n: int, info: str) -> dict:
        return {
            "fid": f"f_{n:016x}",
            "info": info,
            "type": "Activity",
            "frequency": 1,
            "related_entities": [],
            "updated_on": "2024-04-01",
        }

    facts = [
        fact(
            1,
            "Is on their laptop in Toronto this Thursday evening; is on their laptop in Toronto this morning",
        ),
        fact(2, "Is on their laptop in Toronto this morning"),
        fact(3, "Is on their phone in Calgary"),
    ]
    info = merge_facts(ConsolidationInputs.model_validate({"facts": facts}), random.Random(0))[
        "info"
    ]
    assert info == "Is on their laptop in Toronto this Thursday evening"
    assert ";" not in info
