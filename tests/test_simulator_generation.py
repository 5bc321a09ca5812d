"""The simulator's answers for query, timeline and dialogue generation, on real personas.

These call the simulator directly (no client, no embedder) with the variables a
stage sends, and check that each answer satisfies the rules of SPEC §2 on its
own and is recognisably built from the persona's PersonaLens content.
"""

from __future__ import annotations

import datetime as dt
import json
import random
import re

import pytest

from memoryquest.contracts import Domain, Persona, TaskKind
from memoryquest.generation.common import persona_variables
from memoryquest.settings import GenerationSettings
from memoryquest.simulator import simulate
from memoryquest.simulator.grammar import shift_person
from memoryquest.simulator.persona_grounding import (
    PersonaMaterial,
    split_sentences,
    task_scenarios,
)
from memoryquest.stages.news_form import news_form_problem
from memoryquest.text import contains_verbatim, shared_content_words

try:
    from tests.generation_fixture import interaction_sentences, load_users, simulated_timeline
except ModuleNotFoundError:  # tests/ is not a package: pytest puts it on sys.path
    from generation_fixture import interaction_sentences, load_users, simulated_timeline


@pytest.fixture(scope="module")
def personas() -> list[Persona]:
    return load_users(*(f"user{i}" for i in range(30)))


@pytest.fixture(scope="module")
def user0(personas: list[Persona]) -> Persona:
    return personas[0]


def query_variables(
    persona: Persona, settings: GenerationSettings, proposed: list[str] | None = None
) -> dict:
    variables = persona_variables(persona)
    variables.update(
        count=settings.candidates_per_user,
        references_min=settings.references_min,
        references_max=settings.references_max,
        query_date_start=settings.query_date_start.isoformat(),
        query_date_end=settings.query_date_end.isoformat(),
        reference_window_days=settings.reference_window_days,
        news_words_min=settings.news_words_min,
        news_words_max=settings.news_words_max,
        domains=[d.value for d in Domain],
        already_proposed=proposed or [],
    )
    return variables


def material(persona: Persona) -> PersonaMaterial:
    return PersonaMaterial(
        persona.demographics, persona.affinities, persona.interactions, persona.tasks
    )


# --------------------------------------------------------------------------- grounding helpers


def test_interaction_summaries_move_into_first_and_second_person(user0: Persona) -> None:
    summary = material(user0).interaction(Domain.ALARM)
    first = interaction_sentences(summary, "first")
    second = interaction_sentences(summary, "second")
    assert (
        "I prefer to set a recurring alarm for 7:00 AM on weekdays to ensure I wake up on time for work."
        in first
    )
    assert (
        "You prefer to set a recurring alarm for 7:00 AM on weekdays to ensure you wake up on time for work."
        in second
    )
    for text in first + second:
        assert not re.search(r"\b(the user|he|she|his)\b", text, re.IGNORECASE), text
    assert (
        shift_person("She appreciates her friends and sends her regards to them.", "first") is None
    )  # 'them' is ambiguous
    assert (
        shift_person("He is going on a trip and needs a quiet room.", "first")
        == "I am going on a trip and need a quiet room."
    )


def test_task_scenarios_turn_intents_into_in_situ_requests(user0: Persona) -> None:
    scenarios = {s.task_id: s for s in task_scenarios(user0.tasks)}
    getaway = scenarios["MD-task-1"]
    assert getaway.core == "plan a weekend getaway"
    assert getaway.kind == TaskKind.MULTI_DOMAIN
    assert getaway.opening.startswith("I am planning an upcoming weekend getaway and need")


# --------------------------------------------------------------------------- query_generation
# Requests and their references are tested in test_simulator_queries.py.


# --------------------------------------------------------------------------- timeline_synthesis


def test_simulated_timelines_write_every_slot_alike_and_ground_it_in_the_persona(
    personas: list[Persona],
) -> None:
    settings = GenerationSettings()
    written = 0
    for persona in personas[:4]:
        candidates = json.loads(
            simulate("query_generation", query_variables(persona, settings), seed=0)
        )["candidates"]
        descriptions = {split_sentences(t.description)[0] for t in persona.tasks}
        task_domains = {t.domains[0] for t in persona.tasks if t.kind == TaskKind.SINGLE_DOMAIN}
        for candidate in candidates[:6]:
            refs = [r["text"] for r in candidate["references"]]
            answered = simulated_timeline(persona, candidate, settings)
            assert [event["slot"] for _, event in answered] == list(range(len(answered)))
            for slot, event in answered:
                assert len(event["news"]) == slot.news_count
                for item in event["news"]:
                    written += 1
                    assert news_form_problem(item, settings) is None, item
                    assert not any(contains_verbatim(item, r) for r in refs)
                if slot.domain in task_domains:
                    # one of the persona's own tasks, in its real situation, whatever the slot carries
                    assert event["description"].split(" Chatting ")[0] in descriptions
    assert written > 100


# --------------------------------------------------------------------------- dialogue_expansion


def dialogue_variables(persona: Persona, domain: Domain, description: str, news: list[str]) -> dict:
    return {
        "event": {
            "date": "2024-05-10",
            "weekday": "Friday",
            "domain": domain.value,
            "description": description,
        },
        "news": news,
        "demographics": persona.demographics.model_dump(mode="json"),
        "interaction_summary": material(persona).interaction(domain),
        "affinities": [a.model_dump(mode="json") for a in persona.affinities if a.domain == domain],
        "situations": [],
        "turns_min": 5,
        "turns_max": 30,
    }


def test_simulated_dialogue_conveys_the_reference_in_the_reported_user_turn(user0: Persona) -> None:
    from memoryquest.simulator.needs import World, distractor_update

    update = distractor_update(
        World(material(user0)), Domain.ALARM, dt.date(2024, 5, 10), random.Random(3), set(), set()
    )
    assert update is not None
    reference = {"text": update.text, "date": "2024-05-10", "domain": "Alarm"}
    description = (
        "The user wants to review and potentially modify their existing alarm settings. Chatting in "
        "Toronto, Canada on their smartphone in the morning. In passing, the user shares an update: "
        f"{reference['text']}."
    )
    answer = json.loads(
        simulate(
            "dialogue_expansion",
            dialogue_variables(user0, Domain.ALARM, description, [reference["text"]]),
        )
    )
    turns = answer["turns"]
    assert len(turns) % 2 == 0 and all(isinstance(t, str) and t for t in turns)
    assert "review and potentially modify my existing alarm settings" in turns[0]
    ((news_index, said),) = [(n["news_index"], n["turn_index"]) for n in answer["news_said"]]
    assert news_index == 0 and said % 2 == 0  # a user turn
    sentences = split_sentences(turns[said])
    assert any(len(shared_content_words(s, update.text)) >= 2 for s in sentences), sentences
    assert all(not contains_verbatim(t, reference["text"]) for t in turns)


def test_a_dialogue_never_restates_a_profile_value_its_update_changes(user0: Persona) -> None:
    reference = {
        "text": "Moved the weekday alarm from 7:00 AM to 6:30 AM after starting an early shift",
        "date": "2024-05-10",
        "domain": "Alarm",
    }
    description = (
        "The user wants to review and potentially modify their existing alarm settings. "
        f"In passing, the user shares an update: {reference['text']}."
    )
    for seed in range(10):
        answer = json.loads(
            simulate(
                "dialogue_expansion",
                dialogue_variables(user0, Domain.ALARM, description, [reference["text"]]),
                seed=seed,
            )
        )
        ((index,),) = [(n["turn_index"],) for n in answer["news_said"]]
        others = [t for i, t in enumerate(answer["turns"]) if i != index]
        assert not any("7:00 AM" in text for text in others)


def test_simulated_dialogues_sound_like_the_persona(user0: Persona) -> None:
    description = "The user wants to find new book recommendations tailored to their preferred genres and favorite authors."
    lengths = []
    mentions = 0
    for seed in range(40):
        answer = json.loads(
            simulate(
                "dialogue_expansion",
                dialogue_variables(user0, Domain.BOOKS, description, []),
                seed=seed,
            )
        )
        turns = answer["turns"]
        lengths.append(len(turns))
        assert answer["news_said"] == []
        user_text = " ".join(turns[0::2])
        assert re.search(r"\b(?:I|I'm|I've|my|My)\b", user_text), user_text
        all_text = " ".join(turns)
        mentions += any(
            v in all_text
            for v in (
                "Carl Sagan",
                "Stephen Hawking",
                "Yuval Noah Harari",
                "science-fiction",
                "The Martian",
            )
        )
    assert min(lengths) >= 5 and max(lengths) <= 30
    assert set(lengths) == {6}  # no news to tell: a short chat of three exchanges
    assert mentions >= 32  # four in five chats name something the persona likes
