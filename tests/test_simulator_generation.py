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
from memoryquest.settings import GenerationSettings
from memoryquest.simulator import simulate
from memoryquest.simulator.persona_grounding import (
    LIFE_UPDATES,
    PersonaMaterial,
    affinity_statements,
    contains_verbatim,
    echo_update,
    fill_life_update,
    interaction_sentences,
    paraphrase_reference,
    reference_slots,
    shift_person,
    split_sentences,
    task_scenarios,
)
from memoryquest.stages.common import persona_variables, task_variables

try:
    from tests.generation_fixture import load_users
except ModuleNotFoundError:  # tests/ is not a package: pytest puts it on sys.path
    from generation_fixture import load_users


@pytest.fixture(scope="module")
def personas() -> list[Persona]:
    return load_users(*(f"user{i}" for i in range(30)))


@pytest.fixture(scope="module")
def user0(personas: list[Persona]) -> Persona:
    return personas[0]


def query_variables(persona: Persona, settings: GenerationSettings, proposed: list[str] | None = None) -> dict:
    variables = persona_variables(persona)
    variables.update(
        count=settings.candidates_per_user,
        references_min=settings.references_min,
        references_max=settings.references_max,
        query_date_start=settings.query_date_start.isoformat(),
        query_date_end=settings.query_date_end.isoformat(),
        reference_window_days=settings.reference_window_days,
        domains=[d.value for d in Domain],
        already_proposed=proposed or [],
    )
    return variables


def material(persona: Persona) -> PersonaMaterial:
    return PersonaMaterial(persona.demographics, persona.affinities, persona.interactions, persona.tasks)


# --------------------------------------------------------------------------- grounding helpers


def test_affinity_statements_speak_in_the_first_person_with_the_real_values(user0: Persona) -> None:
    alarm = affinity_statements(user0.affinities, Domain.ALARM)
    assert any("7:00 AM" in s for s in alarm)
    assert any("upbeat music" in s for s in alarm)
    books = " ".join(affinity_statements(user0.affinities, Domain.BOOKS))
    assert "Carl Sagan" in books and "Yuval Noah Harari" in books
    assert all(re.search(r"\b(I|My|my|I'm)\b", s) for s in alarm + affinity_statements(user0.affinities, Domain.BOOKS))


def test_interaction_summaries_move_into_first_and_second_person(user0: Persona) -> None:
    summary = material(user0).interaction(Domain.ALARM)
    first = interaction_sentences(summary, "first")
    second = interaction_sentences(summary, "second")
    assert "I prefer to set a recurring alarm for 7:00 AM on weekdays to ensure I wake up on time for work." in first
    assert "You prefer to set a recurring alarm for 7:00 AM on weekdays to ensure you wake up on time for work." in second
    for text in first + second:
        assert not re.search(r"\b(the user|he|she|his)\b", text, re.IGNORECASE), text
    assert shift_person("She appreciates her friends and sends her regards to them.", "first") is None  # 'them' is ambiguous
    assert shift_person("He is going on a trip and needs a quiet room.", "first") == "I am going on a trip and need a quiet room."


def test_task_scenarios_turn_intents_into_in_situ_requests(user0: Persona) -> None:
    scenarios = {s.task_id: s for s in task_scenarios(user0.tasks)}
    getaway = scenarios["MD-task-1"]
    assert getaway.core == "plan a weekend getaway"
    assert getaway.kind == TaskKind.MULTI_DOMAIN
    assert getaway.opening.startswith("I am planning an upcoming weekend getaway and need")
    assert getaway.situation_phrase() == "I'm on my laptop in Toronto, Canada this evening."


def test_every_life_update_paraphrase_conveys_without_repeating(personas: list[Persona]) -> None:
    """Exhaustive over all 30 sample personas: fillable templates never leave a slot or repeat the text."""
    rng = random.Random(7)
    date = dt.date(2024, 6, 14)
    filled = 0
    for persona in personas:
        mat = material(persona)
        for template in LIFE_UPDATES:
            update = fill_life_update(template, mat, date, rng)
            if update is None:
                continue
            filled += 1
            assert "{" not in update.text and "(" not in update.text, update.text
            assert reference_slots(update.text) == update.slots
            for _ in range(3):
                said = paraphrase_reference(update.text, rng)
                assert not contains_verbatim(said, update.text), (update.text, said)
                assert re.search(r"\b(I|my|me|I'm|I've)\b", said, re.IGNORECASE), said
    assert filled > 30 * 40


def test_foreign_references_get_a_first_person_paraphrase() -> None:
    rng = random.Random(1)
    for text in (
        "Switched to a 6:30 AM weekday alarm after starting a new shift in March",
        "Allergic to tree nuts since childhood",
        "Prefers quiet hotels",
        "I moved to Ottawa in May",
    ):
        said = paraphrase_reference(text, rng)
        assert not contains_verbatim(said, text), said
    echo = echo_update("plan a weekend getaway", Domain.HOTELS, rng)
    assert "plan a weekend getaway" in echo.text
    assert not contains_verbatim(paraphrase_reference(echo.text, rng), echo.text)


# --------------------------------------------------------------------------- query_generation


def test_simulated_queries_obey_the_candidate_rules(user0: Persona) -> None:
    settings = GenerationSettings()
    answer = json.loads(simulate("query_generation", query_variables(user0, settings), seed=0))
    candidates = answer["candidates"]
    assert len(candidates) == settings.candidates_per_user
    texts = [c["query"] for c in candidates]
    assert len(set(texts)) == len(texts)
    weekdays = {s.task_id: s.situation.get("Day of the Week") for s in task_scenarios(user0.tasks)}
    used_refs: set[str] = set()
    for c in candidates:
        query_date = dt.date.fromisoformat(c["query_date"])
        assert settings.query_date_start <= query_date <= settings.query_date_end
        assert settings.references_min <= len(c["references"]) <= settings.references_max
        domains = [r["domain"] for r in c["references"]]
        assert c["domain"] not in domains and len(set(domains)) == len(domains)
        dates = [dt.date.fromisoformat(r["date"]) for r in c["references"]]
        assert all(0 < (query_date - d).days <= settings.reference_window_days for d in dates)
        assert len(set(dates)) == len(dates)
        assert c["reasoning"].strip()
        for r in c["references"]:
            assert r["text"] not in used_refs  # no reference is reused across a persona's candidates
            used_refs.add(r["text"])
    # Queries are dated on the weekday of their task's situation.
    assert any(dt.date.fromisoformat(c["query_date"]).strftime("%A") in set(weekdays.values()) for c in candidates)


def test_simulated_queries_are_grounded_in_the_persona(user0: Persona) -> None:
    settings = GenerationSettings()
    candidates = json.loads(simulate("query_generation", query_variables(user0, settings), seed=0))["candidates"]
    cores = [s.core for s in task_scenarios(user0.tasks)]
    values = {v for a in user0.affinities for v in a.values if len(v) > 3}
    for c in candidates:
        # an in-situ request built on one of the persona's tasks, not a quiz question
        assert any(core in c["query"] for core in cores), c["query"]
        assert not c["query"].lower().startswith(("what is my", "what's my", "do i "))
    refs = [r["text"] for c in candidates for r in c["references"]]
    grounded = [t for t in refs if any(v in t for v in values)]
    assert len(grounded) / len(refs) > 0.5


def test_simulated_queries_are_deterministic_per_seed(user0: Persona) -> None:
    settings = GenerationSettings()
    variables = query_variables(user0, settings)
    assert simulate("query_generation", variables, seed=3) == simulate("query_generation", variables, seed=3)
    assert simulate("query_generation", variables, seed=3) != simulate("query_generation", variables, seed=4)


def test_a_re_ask_avoids_the_requests_already_proposed(user0: Persona) -> None:
    settings = GenerationSettings()
    first = json.loads(simulate("query_generation", query_variables(user0, settings), seed=0))["candidates"]
    proposed = [c["query"] for c in first]
    again = json.loads(simulate("query_generation", query_variables(user0, settings, proposed), seed=1))["candidates"]
    assert not set(proposed) & {c["query"] for c in again}


# --------------------------------------------------------------------------- timeline_synthesis


def timeline_variables(persona: Persona, candidate: dict, settings: GenerationSettings) -> dict:
    return {
        "query": {"query_id": "q_0000000000000000", "text": candidate["query"], "query_date": candidate["query_date"],
                  "domain": candidate["domain"], "reasoning": candidate["reasoning"]},
        "references": [dict(r, index=i) for i, r in enumerate(candidate["references"])],
        "demographics": persona.demographics.model_dump(mode="json"),
        "affinities": [a.model_dump(mode="json") for a in persona.affinities],
        "tasks": [task_variables(t) for t in persona.tasks if t.kind == TaskKind.SINGLE_DOMAIN],
        "events_min": settings.events_min,
        "events_max": settings.events_max,
        "lead_days_max": settings.lead_days_max,
    }


def test_simulated_timelines_place_each_reference_once_and_ground_the_filler(personas: list[Persona]) -> None:
    settings = GenerationSettings()
    for persona in personas[:4]:
        candidates = json.loads(simulate("query_generation", query_variables(persona, settings), seed=0))["candidates"]
        descriptions = {split_sentences(t.description)[0] for t in persona.tasks}
        for candidate in candidates[:6]:
            events = json.loads(simulate("timeline_synthesis", timeline_variables(persona, candidate, settings)))["events"]
            assert settings.events_min <= len(events) <= settings.events_max
            dates = [e["date"] for e in events]
            assert dates == sorted(dates)
            query_date = candidate["query_date"]
            assert dates[-1] < query_date
            carried = sorted(e["reference_index"] for e in events if e["reference_index"] is not None)
            assert carried == list(range(len(candidate["references"])))
            earliest = dt.date.fromisoformat(min(r["date"] for r in candidate["references"]))
            assert 0 <= (earliest - dt.date.fromisoformat(dates[0])).days <= settings.lead_days_max
            ref_domains = {r["domain"] for r in candidate["references"]}
            for e in events:
                if e["reference_index"] is None:
                    assert e["domain"] not in ref_domains
                    # filler is one of the persona's own tasks, in its real situation
                    assert e["description"].split(" Chatting ")[0] in descriptions, e["description"]


# --------------------------------------------------------------------------- dialogue_expansion


def dialogue_variables(persona: Persona, domain: Domain, description: str, reference: dict | None) -> dict:
    return {
        "event": {"date": "2024-05-10", "weekday": "Friday", "domain": domain.value,
                  "kind": "reference" if reference else "filler", "description": description},
        "reference": reference,
        "demographics": persona.demographics.model_dump(mode="json"),
        "interaction_summary": material(persona).interaction(domain),
        "affinities": [a.model_dump(mode="json") for a in persona.affinities if a.domain == domain],
        "situations": [],
        "turns_min": 5,
        "turns_max": 30,
    }


def test_simulated_dialogue_conveys_the_reference_in_the_reported_user_turn(user0: Persona) -> None:
    reference = {"text": "Moved the weekday alarm from 7:00 AM to 6:30 AM after starting an early shift",
                 "date": "2024-05-10", "domain": "Alarm"}
    description = ("The user wants to review and potentially modify their existing alarm settings. Chatting in "
                   "Toronto, Canada on their smartphone in the morning. In passing, the user shares an update: "
                   f"{reference['text']}.")
    answer = json.loads(simulate("dialogue_expansion", dialogue_variables(user0, Domain.ALARM, description, reference)))
    turns = answer["turns"]
    assert [t["role"] for t in turns] == ["user", "assistant"] * (len(turns) // 2)
    assert turns[0]["content"].count("I want to review and potentially modify my existing alarm settings.") == 1
    (index,) = answer["reference_turn_indices"]
    assert turns[index]["role"] == "user"
    assert "6:30 AM" in turns[index]["content"]
    assert all(not contains_verbatim(t["content"], reference["text"]) for t in turns)
    # the profile's 7:00 AM preference would contradict the update, so the session avoids restating it elsewhere
    others = [t["content"] for i, t in enumerate(turns) if i != index]
    assert not any("7:00 AM" in text for text in others)


def test_simulated_dialogues_sound_like_the_persona(user0: Persona) -> None:
    description = "The user wants to find new book recommendations tailored to their preferred genres and favorite authors."
    lengths = []
    mentions = 0
    for seed in range(40):
        answer = json.loads(simulate("dialogue_expansion", dialogue_variables(user0, Domain.BOOKS, description, None), seed=seed))
        turns = answer["turns"]
        lengths.append(len(turns))
        assert answer["reference_turn_indices"] == []
        user_text = " ".join(t["content"] for t in turns if t["role"] == "user")
        assert re.search(r"\bI (?:mostly|love|really|read|like|usually|pick|have|prefer|am|'m)\b|\bMy\b", user_text), user_text
        all_text = " ".join(t["content"] for t in turns)
        mentions += any(v in all_text for v in ("Carl Sagan", "Stephen Hawking", "Yuval Noah Harari", "science-fiction"))
    assert min(lengths) >= 5 and max(lengths) <= 30
    assert 10 <= sum(lengths) / len(lengths) <= 15  # about six exchanges, as in the paper
    assert len(set(lengths)) >= 4
    assert mentions >= 35
