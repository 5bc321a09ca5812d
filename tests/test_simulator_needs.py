"""The needs model and the life-update bank, exercised on the 30 bundled PersonaLens personas.

The bank is finite and hand-written, so these tests are exhaustive: every
generator, for every persona, with and without its optional detail.
"""

from __future__ import annotations

import datetime as dt
import itertools
import random
import re

import pytest

from memoryquest.contracts import Domain, Persona
from memoryquest.generation.common import contains_verbatim, normalise_text
from memoryquest.simulator.needs import (
    LifeUpdate,
    World,
    classify_need,
    distractor_update,
    domain_plans,
    fill,
    generators,
    groups_of,
    infer_domains,
    need_categories,
    needs_of_request,
    parse_update,
    request_needs,
    say_update,
)
from memoryquest.simulator.needs.bank import TIME_SLOTS, occurrence_on
from memoryquest.simulator.persona_grounding import PersonaMaterial
from memoryquest.simulator.relevance import stated_end

try:
    from tests.generation_fixture import load_users
except ModuleNotFoundError:  # tests/ is not a package: pytest puts it on sys.path
    from generation_fixture import load_users

SAID_ON = dt.date(2024, 5, 1)
HOLDS_ON = dt.date(2024, 6, 1)
FIRST_PERSON_START = re.compile(
    r"^(?:(?:By the way|Oh, and|Also|Actually|For context|Side note:|One more thing:)[, ]\s*)?(?:I|I'm|I've|I'd|My|my)\b"
)


@pytest.fixture(scope="module")
def personas() -> list[Persona]:
    return load_users(*(f"user{i}" for i in range(30)))


def world_of(persona: Persona) -> World:
    return World(
        PersonaMaterial(
            persona.demographics, persona.affinities, persona.interactions, persona.tasks
        )
    )


@pytest.fixture(scope="module")
def every_update(personas: list[Persona]) -> list[tuple[Persona, LifeUpdate]]:
    """Every generator filled for every persona, with and without its detail part."""
    out = []
    rng = random.Random(11)
    for persona in personas:
        world = world_of(persona)
        for generator in generators():
            for detail in (True, False):
                update = fill(generator, world, SAID_ON, HOLDS_ON, rng, with_detail=detail)
                if update is not None:
                    out.append((persona, update))
    return out


# --------------------------------------------------------------------------- the needs model


def test_every_domain_has_plan_steps_over_known_needs() -> None:
    assert set(domain_plans()) == set(Domain)
    used = set()
    for domain, steps in domain_plans().items():
        assert len(steps) >= 2, domain
        needs = request_needs(list(steps))
        assert len(needs) >= 4, domain  # enough for 3-5 references of different needs
        assert set(needs) <= set(need_categories())
        used |= set(needs)
    assert used == set(need_categories())  # no need category is dead


def test_a_request_implies_the_steps_of_its_wording() -> None:
    dinner = needs_of_request("Can you book a table for dinner on Friday, June 7?")
    assert dinner[0].domain == Domain.RESTAURANTS and "diet" in request_needs(dinner)
    flight = request_needs(needs_of_request("Find me a flight to Rome for the week of May 12"))
    assert "documents" in flight and "diet" not in flight
    assert infer_domains("Organize a music-themed evening with concert tickets and a playlist") == [
        Domain.MUSIC,
        Domain.EVENTS,
    ]
    # With the domain known, one passing word of another domain does not widen the plan ...
    alarm = needs_of_request("Set up my morning routine with alarms and a playlist", Domain.ALARM)
    assert {s.domain for s in alarm} == {Domain.ALARM}
    # ... but a domain the request names twice does.
    widened = needs_of_request(
        "Set up my alarms with a music playlist of wake-up songs", Domain.ALARM
    )
    assert {s.domain for s in widened} == {Domain.ALARM, Domain.MUSIC}
    assert {s.domain for s in needs_of_request("Sort it out, please.")} == {Domain.CALENDAR}


def test_a_statement_needs_a_real_cue_to_have_a_need() -> None:
    assert classify_need("Was told by an allergist to cut out tree nuts") == "diet"
    assert classify_need("Tore a knee ligament playing football") == "health"
    assert classify_need("Passport is at the embassy for renewal") == "documents"
    assert classify_need("Likes solo outings best") is None
    assert classify_need("Enjoys science fiction") is None


# --------------------------------------------------------------------------- the bank


def test_every_persona_can_fill_well_over_a_hundred_exclusive_groups(
    personas: list[Persona],
) -> None:
    for persona in personas:
        world = world_of(persona)
        groups = {g.group for g in generators() if g.usable(world)}
        assert len(groups) >= 100, persona.source_user_id


def test_every_update_reads_as_its_own_need_and_parses_back(
    every_update: list[tuple[Persona, LifeUpdate]],
) -> None:
    assert len(every_update) > 30 * 200
    for _, update in every_update:
        assert "{" not in update.text and "[" not in update.text, update.text
        assert update.text[0].isupper() and not update.text.endswith("."), update.text
        assert classify_need(update.text) == update.need, update.text
        parsed = parse_update(update.text)
        assert parsed is not None and parsed.generator.group == update.group, update.text
        assert groups_of([update.text]) == {update.group}


def test_sayings_convey_in_the_first_person_never_verbatim(
    every_update: list[tuple[Persona, LifeUpdate]],
) -> None:
    rng = random.Random(3)
    for _, update in every_update:
        for said in [say_update(update.text, rng) for _ in range(3)]:
            assert not contains_verbatim(said, update.text), (update.text, said)
            assert FIRST_PERSON_START.match(said) or re.match(
                r"^[A-Z][^,]{2,44}, (?:I|my)\b", said
            ), said
            # the memory extractor skips statements that address the assistant
            assert not re.search(r"\b(?:you|your)\b", said, re.IGNORECASE), said
            assert "{" not in said and said.endswith("."), said
    update = every_update[0][1]
    assert len({say_update(update.text, rng) for _ in range(6)}) >= 2  # several ways of saying it


def test_time_bounded_updates_hold_on_the_day_asked_and_say_when_they_end(
    every_update: list[tuple[Persona, LifeUpdate]],
) -> None:
    bounded = [u for _, u in every_update if u.valid_until is not None]
    assert len(bounded) > 30 * 40
    for update in bounded:
        assert update.valid_until is not None
        assert update.valid_until >= HOLDS_ON and update.valid_until > update.date, update
        # The judge reads the same last day back from the wording alone.
        assert stated_end(update.text, update.date) == update.valid_until, update.text
    unbounded = [u for _, u in every_update if u.valid_until is None]
    assert all(stated_end(u.text, u.date) is None for u in unbounded)


def test_one_persona_has_one_version_of_each_group(personas: list[Persona]) -> None:
    """Content is seeded by persona and group: whichever call asks, the allergy, car, job are the same."""
    for persona in personas[:6]:
        world = world_of(persona)
        for generator in generators():
            first = fill(generator, world, SAID_ON, HOLDS_ON, random.Random(1))
            second = fill(
                generator, world, SAID_ON + dt.timedelta(days=9), HOLDS_ON, random.Random(2)
            )
            if first is None or generator.limits or first.valid_until is not None:
                continue
            assert second is not None and first.text == second.text, generator.group


def test_updates_are_grounded_in_the_persona(personas: list[Persona]) -> None:
    user0 = world_of(personas[0])  # Toronto, nut allergy, works full-time, Air Canada, Spotify
    texts = {g.group: fill(g, user0, SAID_ON, HOLDS_ON, random.Random(0)) for g in generators()}
    assert any(
        n in texts["food_allergy"].text
        for n in ("nuts", "cashews", "pistachios", "walnuts", "peanuts")
    )  # type: ignore[union-attr]
    assert "$" in texts["rent"].text  # type: ignore[union-attr]  # Canadian dollars
    airline = texts["airline"].text  # type: ignore[union-attr]
    assert any(a in airline for a in ("Air Canada", "United Airlines", "Delta Airlines"))
    assert texts["tuition"] is None  # not a student
    grounded = [u for u in texts.values() if u is not None and u.grounding > 0]
    assert len(grounded) >= 40


def test_foreign_texts_get_a_first_person_saying() -> None:
    rng = random.Random(1)
    for text in (
        "Switched to a 6:30 AM weekday alarm after starting a new shift in March",
        "Allergic to tree nuts since childhood",
        "Prefers quiet hotels",
        "Sister and her two kids are staying over until the 20th",
        "The user sold their car in May",
    ):
        said = say_update(text, rng)
        assert not contains_verbatim(said, text), said
        assert re.search(r"\b(?:I|my|I'm)\b", said), said


# --------------------------------------------------------------------------- distractors


def test_distractors_come_from_the_same_bank_and_avoid_what_they_must(
    personas: list[Persona],
) -> None:
    persona = personas[3]
    material = PersonaMaterial(
        persona.demographics, persona.affinities, persona.interactions, persona.tasks
    )
    world = world_of(persona)
    references = [
        fill(g, world, SAID_ON, HOLDS_ON, random.Random(0))
        for g in generators()
        if g.need in {"diet", "pets"}
    ]
    avoid_texts = {u.text for u in references if u is not None}
    seen = set()
    said_elsewhere = 0
    for seed in range(40):
        domain = list(Domain)[seed % len(Domain)]
        update = distractor_update(
            World(material),
            domain,
            SAID_ON,
            random.Random(seed),
            {"budget", "schedule"},
            avoid_texts,
        )
        if update is None:
            continue
        seen.add(update.text)
        assert update.domain == domain
        # said wherever the user is chatting, as a reference is, not only where it typically comes up
        said_elsewhere += domain not in update.domains
        assert update.need not in {"budget", "schedule"}
        assert update.group not in groups_of(avoid_texts)
        assert normalise_text(update.text) not in {normalise_text(t) for t in avoid_texts}
        assert update.valid_until is None or update.valid_until >= SAID_ON + dt.timedelta(days=7)
        assert parse_update(update.text) is not None  # the dialogue can say it with say_update
    assert len(seen) >= 25
    assert said_elsewhere >= 10
    # deterministic for a seed
    again = distractor_update(
        World(material), Domain.SHOPPING, SAID_ON, random.Random(5), set(), set()
    )
    assert again == distractor_update(
        World(material), Domain.SHOPPING, SAID_ON, random.Random(5), set(), set()
    )
    # nothing left to give
    assert (
        distractor_update(
            World(material),
            Domain.SHOPPING,
            SAID_ON,
            random.Random(5),
            set(need_categories()),
            set(),
        )
        is None
    )


def test_every_mention_of_a_distractor_spell_names_the_same_last_day_and_details(
    personas: list[Persona],
) -> None:
    """A voucher said to expire on September 7 in one chat does not expire on November 4 in the next."""
    world = world_of(personas[3])
    spells: dict[tuple[str, int], set[tuple[object, ...]]] = {}
    for day in range(240):
        date = SAID_ON + dt.timedelta(days=day)
        update = distractor_update(world, Domain.SHOPPING, date, random.Random(day), set(), set())
        assert update is not None
        generator = next(g for g in generators() if g.group == update.group)
        if update.valid_until is None or "until" not in dict(update.slots):
            continue  # a duration ("for the next six weeks") is said from the day it is said
        # the last day said is the last day of one of the persona's spells of the situation
        spell = occurrence_on(world, generator, update.valid_until)
        assert spell.ends == update.valid_until
        details = tuple(sorted((k, v) for k, v in update.slots if k not in TIME_SLOTS))
        spells.setdefault((update.group, spell.index), set()).add(details)
    assert len(spells) >= 10
    assert sum(len(seen) for seen in spells.values()) == len(spells), spells
    # a later spell is a new occurrence, with details of its own
    by_group: dict[str, set[tuple[object, ...]]] = {}
    for (group, _), seen in spells.items():
        by_group.setdefault(group, set()).update(seen)
    assert any(len(details) > 1 for details in by_group.values())


def _wordings(template: str) -> list[str]:
    """Every way the ``[a|b]`` alternations of a template can resolve."""
    options = [
        m.group(1).split("|") for m in re.finditer(r"\[([^\[\]{}]*\|[^\[\]{}]*)\]", template)
    ]
    pieces = re.split(r"\[[^\[\]{}]*\|[^\[\]{}]*\]", template)
    out = []
    for choice in itertools.product(*options):
        text = pieces[0]
        for option, piece in zip(choice, pieces[1:], strict=True):
            text += option + piece
        out.append(text)
    return out


def test_every_combination_of_parts_and_wordings_reads_as_its_need(personas: list[Persona]) -> None:
    """Not just the combinations the 30 personas happen to draw: all of them, with one persona's slot values."""
    rng = random.Random(2)
    checked = 0
    for generator in generators():
        slots: dict[str, str] = {"until": "May 20", "span": "six weeks", "month": "July"}
        for name, source in generator.slots.items():  # a value from the first persona that has one
            for persona in personas:
                value = source.fill(world_of(persona), rng)
                if value:
                    slots[name] = value
                    break
        for core in generator.cores:
            for extra in (None, *generator.extras):
                for limit in (None, *generator.limits):
                    parts = (
                        [core.text]
                        + ([limit.text] if limit else [])
                        + ([extra.text] if extra else [])
                    )
                    for wording in _wordings(" ".join(parts)):
                        try:
                            text = wording.format(**slots)
                        except (
                            KeyError
                        ):  # a slot this persona set cannot fill; other personas cover it
                            continue
                        checked += 1
                        assert classify_need(text) == generator.need, (generator.group, text)
    assert checked > 2_000
