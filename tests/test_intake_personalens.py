"""PersonaLens intake from a local directory: the bundled sample, mapped to Persona rows."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from memoryquest.contracts import Domain, Persona, PersonaSource, TaskKind
from memoryquest.ids import make_id
from memoryquest.intake import IntakeSourceError, PersonaSelection, load_personas


@pytest.fixture(scope="module")
def sample_personas(personalens_sample_dir: Path) -> list[Persona]:
    result = load_personas(personalens_sample_dir)
    assert result.errors == []
    return result.personas


def affinity(persona: Persona, domain: Domain, name: str) -> list[str]:
    matches = [a.values for a in persona.affinities if a.domain is domain and a.name == name]
    assert len(matches) == 1, f"{domain.value}/{name}: {len(matches)} matches"
    return matches[0]


def test_all_thirty_sample_users_load_in_natural_order(sample_personas: list[Persona]) -> None:
    assert [p.source_user_id for p in sample_personas] == [f"user{i}" for i in range(30)]
    assert len({p.persona_id for p in sample_personas}) == 30
    for persona in sample_personas:
        assert persona.source is PersonaSource.PERSONALENS
        assert persona.persona_id == make_id("persona", "personalens", persona.source_user_id)
        assert persona.affinities and persona.interactions and persona.tasks


def test_user0_demographics_and_interests(sample_personas: list[Persona]) -> None:
    user0 = sample_personas[0]
    assert user0.demographics.age == "35-44 years old"
    assert user0.demographics.gender == "Male"
    assert user0.demographics.employment_status == "Working full-time"
    assert user0.demographics.education == "University Bachelors Degree"
    assert user0.demographics.reside_country == "Canada"
    assert user0.demographics.birth_country == "Canada"
    # user0 marks Buses, Games and Sports with 0
    assert Domain.BUSES not in user0.interests and Domain.GAMES not in user0.interests
    assert user0.interests[:3] == [Domain.ALARM, Domain.BOOKS, Domain.CALENDAR]
    assert len(user0.interests) == 17


def test_favourite_is_spelt_favorite_everywhere(sample_personas: list[Persona]) -> None:
    user0 = sample_personas[0]
    # upstream Books says "Favourite Authors", Music says "Favorite Artists"
    assert affinity(user0, Domain.BOOKS, "Favorite Authors") == [
        "Carl Sagan",
        "Stephen Hawking",
        "Yuval Noah Harari",
    ]
    assert affinity(user0, Domain.MEDIA, "Favorite Actors and Directors")
    assert affinity(user0, Domain.MUSIC, "Favorite Artists")
    for persona in sample_personas:
        names = {a.name for a in persona.affinities} | {
            t for task in persona.tasks for t in task.affinity_types
        }
        assert not [n for n in names if "favourite" in n.lower()], persona.source_user_id


def test_single_string_values_become_one_element_lists(sample_personas: list[Persona]) -> None:
    user0 = sample_personas[0]
    assert affinity(user0, Domain.ALARM, "Alarm Time Preference") == ["7:00 AM"]
    assert affinity(user0, Domain.BOOKS, "Genre") == ["science-fiction", "non-fiction", "history"]


def test_domains_follow_the_domain_enum_order(sample_personas: list[Persona]) -> None:
    order = list(Domain)
    for persona in sample_personas:
        for domains in (
            [a.domain for a in persona.affinities],
            [i.domain for i in persona.interactions],
            persona.interests,
        ):
            positions = [order.index(d) for d in domains]
            assert positions == sorted(positions)
    assert [i.domain for i in sample_personas[0].interactions] == order


def test_tasks_single_then_multi_domain_by_task_number(sample_personas: list[Persona]) -> None:
    user0 = sample_personas[0]
    kinds = [t.kind for t in user0.tasks]
    single = kinds.count(TaskKind.SINGLE_DOMAIN)
    assert kinds == [TaskKind.SINGLE_DOMAIN] * single + [TaskKind.MULTI_DOMAIN] * (
        len(kinds) - single
    )
    assert single == 73  # "Task 1" .. "Task 73" in tasks.json
    first, tenth = user0.tasks[0], user0.tasks[9]
    assert first.task_id == "SD-Alarm-task-1"  # "Task 1", not "Task 10"
    assert tenth.task_id == "SD-Calendar-task-1"  # "Task 10" comes after "Task 9"
    assert first.domains == [Domain.ALARM]
    assert first.affinity_types == [
        "Alarm Time Preference",
        "Alarm Sound Preference",
        "Alarm Recurring Preference",
    ]
    assert [(s.name, s.value) for s in first.situations][:2] == [
        ("Location", "Toronto, Canada"),
        ("Device", "Smartphone"),
    ]
    multi = user0.tasks[single]
    assert multi.task_id == "MD-task-1"
    assert multi.domains == [Domain.EVENTS, Domain.RESTAURANTS, Domain.HOTELS, Domain.TRAVEL]


def test_interaction_summary_text_is_kept(sample_personas: list[Persona]) -> None:
    alarm = sample_personas[0].interactions[0]
    assert alarm.domain is Domain.ALARM
    assert alarm.summary.startswith("The user, a 35-44 year old single male from Canada")


def test_loading_twice_gives_identical_rows(personalens_sample_dir: Path) -> None:
    selection = PersonaSelection(user_ids=["user3", "user11"])
    first = load_personas(personalens_sample_dir, selection)
    second = load_personas(str(personalens_sample_dir), selection)
    assert [p.model_dump_json() for p in first.personas] == [
        p.model_dump_json() for p in second.personas
    ]
    assert [p.source_user_id for p in first.personas] == ["user3", "user11"]


def test_personas_round_trip_through_json(sample_personas: list[Persona]) -> None:
    for persona in sample_personas[:3]:
        assert Persona.model_validate_json(persona.model_dump_json()) == persona


@pytest.mark.parametrize(
    ("selection", "expected"),
    [
        (PersonaSelection(count=3), ["user0", "user1", "user2"]),
        (PersonaSelection(count=12), [f"user{i}" for i in range(12)]),
        (PersonaSelection(start=9, stop=12), ["user9", "user10", "user11"]),
        (PersonaSelection(start=28), ["user28", "user29"]),
        (PersonaSelection(start=28, stop=99), ["user28", "user29"]),
        (PersonaSelection(user_ids=["user20", "user2"]), ["user20", "user2"]),
    ],
)
def test_selection_on_a_local_source(
    personalens_sample_dir: Path, selection: PersonaSelection, expected: list[str]
) -> None:
    result = load_personas(personalens_sample_dir, selection)
    assert result.errors == []
    assert [p.source_user_id for p in result.personas] == expected


def test_unknown_user_id_is_a_clear_error_and_the_rest_load(personalens_sample_dir: Path) -> None:
    result = load_personas(personalens_sample_dir, PersonaSelection(user_ids=["user1", "user404"]))
    assert [p.source_user_id for p in result.personas] == ["user1"]
    assert len(result.errors) == 1
    error = result.errors[0]
    assert error.file == str(personalens_sample_dir / "profile" / "user404")
    assert error.field is None
    assert "unknown user id 'user404'" in error.message


def test_tolerant_spellings_of_keys_and_domains(
    tmp_path: Path, personalens_sample_dir: Path
) -> None:
    """Key case, spacing and underscores vary in hand-edited files; the mapping does not."""
    import json

    root = tmp_path / "data"
    shutil.copytree(personalens_sample_dir / "profile" / "user0", root / "profile" / "user0")
    tasks_file = root / "profile" / "user0" / "tasks.json"
    tasks = json.loads(tasks_file.read_text(encoding="utf-8"))
    task = tasks["Task 1"]
    tasks["Task 1"] = {
        " relevant_domains ": ["alarm"],
        "task description": task["Task Description"],
        "USER INTENT": task["User Intent"],
        "Task  Goal": task["Task Goal"],
        "Relevant Affinity Types": ["Favourite Alarm Sound"],
        "Task ID": task["task_id"],
        "situations": task["situations"],
    }
    tasks_file.write_text(json.dumps(tasks), encoding="utf-8")
    profile_file = root / "profile" / "user0" / "profile.json"
    profile = json.loads(profile_file.read_text(encoding="utf-8"))
    profile["affinities"]["rental cars"] = profile["affinities"].pop("Rental Cars")
    profile["affinities"]["Books"]["Favorite  Authors"] = ["Ursula K. Le Guin", "Carl Sagan"]
    profile_file.write_text(json.dumps(profile), encoding="utf-8")

    result = load_personas(root)
    assert result.errors == []
    persona = result.personas[0]
    first = persona.tasks[0]
    assert first.task_id == "SD-Alarm-task-1"
    assert first.domains == [Domain.ALARM]
    assert first.affinity_types == ["Favorite Alarm Sound"]
    # "Favourite Authors" and "Favorite  Authors" are one attribute; values merged without repeats
    assert affinity(persona, Domain.BOOKS, "Favorite Authors") == [
        "Carl Sagan",
        "Stephen Hawking",
        "Yuval Noah Harari",
        "Ursula K. Le Guin",
    ]
    assert Domain.RENTAL_CARS in {a.domain for a in persona.affinities}


def test_a_missing_source_is_a_source_error(tmp_path: Path) -> None:
    with pytest.raises(IntakeSourceError, match="is not a directory"):
        load_personas(tmp_path / "nowhere")
    (tmp_path / "empty").mkdir()
    with pytest.raises(IntakeSourceError, match="has no profile/ directory"):
        load_personas(tmp_path / "empty")


def test_listing_skips_hidden_entries_and_reports_unsafe_directory_names(
    tmp_path: Path, personalens_sample_dir: Path
) -> None:
    root = tmp_path / "data"
    shutil.copytree(personalens_sample_dir / "profile" / "user0", root / "profile" / "user0")
    (root / "profile" / ".cache").mkdir()
    (root / "profile" / "notes.txt").write_text("not a user", encoding="utf-8")
    (root / "profile" / "user 1").mkdir()
    result = load_personas(root)
    assert [p.source_user_id for p in result.personas] == ["user0"]
    assert len(result.errors) == 1
    assert result.errors[0].file == str(root / "profile" / "user 1")
    assert "may only contain letters" in result.errors[0].message
