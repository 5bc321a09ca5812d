"""Bridge clauses: what an update gets in the way of, said alike by references and distractors."""

from __future__ import annotations

import datetime as dt
import json
import random
from collections import Counter
from typing import Any

import pytest

from memoryquest.contracts import Domain, Persona, Query, Reference
from memoryquest.settings import GenerationSettings
from memoryquest.simulator import simulate
from memoryquest.simulator.needs import (
    REFERENCE_LEAD_DAYS_MIN,
    LifeUpdate,
    World,
    distractor_update,
    domain_needs,
    fill,
    generators,
    groups_of,
    need_scores,
    parse_update,
    say_update,
)
from memoryquest.simulator.needs.bridges import (
    bridge,
    bridged_domain,
    joiners,
    split_bridge,
)
from memoryquest.simulator.persona_grounding import PersonaMaterial
from memoryquest.simulator.phrasing import Setting, Voice
from memoryquest.simulator.schema import BridgeTable
from memoryquest.simulator.tables import load
from memoryquest.stages.queries import generation_request
from memoryquest.stages.timelines import timeline_request
from memoryquest.text import shared_content_words

try:
    from tests.generation_fixture import load_users
except ModuleNotFoundError:  # tests/ is not a package: pytest puts it on sys.path
    from generation_fixture import load_users

SAID_ON = dt.date(2024, 5, 1)
HOLDS_ON = dt.date(2024, 6, 1)


@pytest.fixture(scope="module")
def personas() -> list[Persona]:
    return load_users("user0", "user3", "user7")


def as_query(persona: Persona, candidate: dict, number: int = 0) -> Query:
    """A simulated candidate as the query the stage keeps."""
    return Query(
        query_id=f"q_{number:016x}",
        persona_id=persona.persona_id,
        query_date=candidate["query_date"],
        text=candidate["query"],
        reasoning=candidate["reasoning"],
        domain=candidate["domain"],
        references=[
            Reference(
                reference_id=f"r_{i:016x}",
                date=r["date"],
                text=r["text"],
                domain=r["domain"],
                cosine=0.0,
            )
            for i, r in enumerate(candidate["references"])
        ],
        gamma=0.0,
        embedder="none",
        rank=0,
    )


def timeline_variables(persona: Persona, candidate: dict, candidates: list[dict]) -> dict:
    """The stage's own timeline request for a simulated candidate, among the user's candidates."""
    queries = [as_query(persona, c, n) for n, c in enumerate(candidates)]
    return timeline_request(
        persona, as_query(persona, candidate), GenerationSettings(), 0, queries
    ).variables


def _material(persona: Persona) -> PersonaMaterial:
    return PersonaMaterial(
        persona.demographics, persona.affinities, persona.interactions, persona.tasks
    )


def test_a_bridged_update_reads_as_its_core_and_is_said_with_its_bridge(
    personas: list[Persona],
) -> None:
    world = World(_material(personas[0]))
    rng = random.Random(0)
    checked = 0
    for generator in generators():
        update = fill(generator, world, SAID_ON, HOLDS_ON, rng)
        if update is None:
            continue
        clause = bridge(Domain.MUSIC, rng)
        bridged = update.text + clause
        assert split_bridge(bridged) == (update.text, clause)
        assert need_scores(bridged) == need_scores(update.text)
        parsed = parse_update(bridged)
        assert parsed is not None and parsed.generator.group == update.group
        said = say_update(bridged, rng)
        core, said_bridge = split_bridge(said.rstrip("."))
        assert said_bridge, said
        assert any(scene in said_bridge for scene in load(BridgeTable).scenes[Domain.MUSIC]), said
        checked += 1
    assert checked > 100


def test_a_text_without_a_bridge_is_left_whole() -> None:
    text = "Sprained an ankle playing football and is off running for a month"
    assert split_bridge(text) == (text, "")


def test_an_unacceptable_bridge_is_not_used() -> None:
    assert bridge(Domain.MOVIES, random.Random(1), lambda clause: False) == ""


def test_reference_bridges_point_at_the_request_without_its_words(
    personas: list[Persona],
) -> None:
    settings = GenerationSettings()
    bridged = total = 0
    for persona in personas:
        variables = generation_request(persona, settings, 0, []).variables
        for candidate in json.loads(simulate("query_generation", variables, seed=0))["candidates"]:
            for ref in candidate["references"]:
                total += 1
                core, clause = split_bridge(ref["text"])
                if not clause:
                    continue
                bridged += 1
                scenes = load(BridgeTable).scenes[Domain(candidate["domain"])]
                assert any(scene in clause for scene in scenes), (candidate["domain"], clause)
                assert len(shared_content_words(candidate["query"], ref["text"])) == len(
                    shared_content_words(candidate["query"], core)
                ), (candidate["query"], ref["text"])
    assert total > 100
    assert bridged / total > 0.75


def test_timeline_distractors_avoid_the_users_other_references(personas: list[Persona]) -> None:
    persona = personas[0]
    settings = GenerationSettings()
    variables = generation_request(persona, settings, 0, []).variables
    candidates = json.loads(simulate("query_generation", variables, seed=0))["candidates"]
    others = [r["text"] for c in candidates[1:] for r in c["references"]]
    first = candidates[0]
    timeline = timeline_variables(persona, first, candidates)
    events = json.loads(simulate("timeline_synthesis", timeline, seed=0))["events"]
    said = [u for e in events for u in e["news"]]
    refs = {r["text"] for r in first["references"]}
    distractors = [u for u in said if u not in refs]
    assert len(distractors) >= 10
    assert not groups_of(distractors) & groups_of(others)


def test_distractors_bridge_about_as_often_as_references(personas: list[Persona]) -> None:
    material = _material(personas[1])
    bridged = total = 0
    for seed in range(200):
        update = distractor_update(
            World(material),
            list(Domain)[seed % len(Domain)],
            SAID_ON,
            random.Random(seed),
            set(),
            set(),
        )
        if update is None:
            continue
        total += 1
        bridged += bool(split_bridge(update.text)[1])
    assert total > 150
    assert 0.75 <= bridged / total <= 0.97


def test_distractors_bridge_to_the_scenes_of_the_users_other_requests(
    personas: list[Persona],
) -> None:
    persona = personas[1]
    variables = generation_request(persona, GenerationSettings(), 0, []).variables
    candidates = json.loads(simulate("query_generation", variables, seed=0))["candidates"]
    first, rest = candidates[0], candidates[1:]
    others = [r["text"] for c in rest for r in c["references"]]
    planned = {bridged_domain(t) for t in others} - {None, Domain(first["domain"])}
    refs = {r["text"] for r in first["references"]}
    pointed = []
    for seed in range(5):
        timeline = timeline_variables(persona, first, candidates)
        events = json.loads(simulate("timeline_synthesis", timeline, seed=seed))["events"]
        said = [u for e in events for u in e["news"]]
        pointed += [bridged_domain(u) for u in said if u not in refs and split_bridge(u)[1]]
    assert len(pointed) >= 30
    assert sum(d in planned for d in pointed) / len(pointed) >= 0.6
    assert sum(d == Domain(first["domain"]) for d in pointed) / len(pointed) <= 0.1


def test_distractors_are_chosen_as_references_of_a_phantom_request(
    personas: list[Persona],
) -> None:
    """A distractor takes a need of one of the user's request domains, any of its entries, and bridges there."""
    material = _material(personas[0])
    world = World(material)
    phantom = Domain.RESTAURANTS
    bearing = domain_needs(phantom)
    needs: list[str] = []
    pointed: list[Domain | None] = []
    below_best = 0
    for seed in range(60):
        update = distractor_update(
            World(material), Domain.SHOPPING, SAID_ON, random.Random(seed), set(), set(), [phantom]
        )
        assert update is not None and update.domain == Domain.SHOPPING
        needs.append(update.need)
        if split_bridge(update.text)[1]:
            pointed.append(bridged_domain(update.text))
        # any entry of the need, as for a reference: not always the best-grounded one
        best = max(
            g.grounding(world) for g in generators() if g.need == update.need and g.usable(world)
        )
        below_best += parse_update(update.text).generator.grounding(world) < best  # type: ignore[union-attr]
    assert sum(n in bearing for n in needs) / len(needs) >= 0.9
    assert below_best >= 10
    assert pointed and all(d == phantom for d in pointed)
    # spread over the needs, as a user's references are: no few needs keep coming back
    counts = Counter(needs)
    assert len(counts) >= 4 and counts.most_common(1)[0][1] / len(needs) <= 0.4


def _shopping_distractor(
    world: World, seed: int, phantom: Domain, **options: Any
) -> LifeUpdate | None:
    """A distractor said in a Shopping chat on SAID_ON that pretends to matter for a request in ``phantom``."""
    return distractor_update(
        world, Domain.SHOPPING, SAID_ON, random.Random(seed), set(), set(), [phantom], **options
    )


def test_distractor_needs_follow_the_users_references(personas: list[Persona]) -> None:
    """Distractors use each need as often as the user's references do, not evenly."""
    world = World(_material(personas[0]))
    bearing = domain_needs(Domain.RESTAURANTS)
    usable = sorted({g.need for g in generators() if g.usable(world) and g.need in bearing})
    common, rare = usable[0], usable[1]
    needs = []
    for seed in range(80):
        update = _shopping_distractor(
            world, seed, Domain.RESTAURANTS, reference_needs=[common] * 3 + [rare]
        )
        assert update is not None
        needs.append(update.need)
    counts = Counter(needs)
    assert (counts[common] + counts[rare]) / len(needs) >= 0.9  # needs no reference uses come last
    assert counts[common] > 1.8 * counts[rare] > 0


def test_a_distractor_need_bears_on_the_domain_its_bridge_names(personas: list[Persona]) -> None:
    """Even when the user's references use needs of other domains: no air miles for the morning alarm."""
    world = World(_material(personas[0]))
    elsewhere = sorted(
        {g.need for g in generators() if g.usable(world)} - domain_needs(Domain.RESTAURANTS)
    )
    bridged = 0
    for seed in range(60):
        update = _shopping_distractor(
            world, seed, Domain.RESTAURANTS, reference_needs=elsewhere * 3 + ["diet"]
        )
        assert update is not None
        assert update.need in domain_needs(Domain.RESTAURANTS), update.text
        bridged += bridged_domain(update.text) == Domain.RESTAURANTS
    assert bridged >= 40


def test_time_bounded_distractors_last_as_long_as_references_do(personas: list[Persona]) -> None:
    """A distractor's time limit lies as far ahead as a reference's request may be, not a week."""
    world = World(_material(personas[0]))
    ahead = []
    for seed in range(120):
        update = _shopping_distractor(world, seed, Domain.TRAVEL)
        if update is not None and update.valid_until is not None:
            ahead.append((update.valid_until - SAID_ON).days)
    assert len(ahead) >= 10
    assert min(ahead) >= REFERENCE_LEAD_DAYS_MIN
    assert max(ahead) > 21  # the old horizon was a week


def test_distractor_bridges_avoid_the_words_of_their_phantom_request(
    personas: list[Persona],
) -> None:
    """The scenes a request's own words rule out for its references are ruled out for distractors too."""
    world = World(_material(personas[0]))
    request = "Could you help me find new books and a book club for the reading list?"
    bridged = 0
    for seed in range(80):
        update = _shopping_distractor(
            world, seed, Domain.BOOKS, phantom_requests={Domain.BOOKS: [request]}
        )
        assert update is not None
        core, clause = split_bridge(update.text)
        if clause:
            bridged += 1
            assert bridged_domain(update.text) == Domain.BOOKS
            added = shared_content_words(request, update.text) - shared_content_words(request, core)
            assert not added, (update.text, added)
    assert bridged >= 20


def test_bridges_are_composed_from_connectives_hedges_and_frames() -> None:
    """No handful of joiners dominates the text, and every composition reads back to its core."""
    table = load(BridgeTable)
    assert len(joiners()) >= 150 and len(table.frames) >= 50
    assert all(len(scenes) >= 12 for scenes in table.scenes.values())
    core = "My car is at the garage"
    for joiner in joiners():
        for frame in table.frames[::7]:
            clause = f"{joiner} {frame.format(scene='cinema nights')}"
            assert split_bridge(core + clause + ".") == (core, clause), clause
            assert bridged_domain(core + clause) is Domain.MOVIES
    rng = random.Random(0)
    clauses = [split_bridge(core + bridge(Domain.MUSIC, rng))[1] for _ in range(400)]
    used = Counter(max((j for j in joiners() if c.startswith(j + " ")), key=len) for c in clauses)
    assert used.most_common(1)[0][1] / len(clauses) < 0.04


def test_plain_remarks_bridge_to_the_conversation_as_updates_do(personas: list[Persona]) -> None:
    """A bridge clause is how any remark can end, so it never singles out a life update."""
    persona = personas[0]
    domain = persona.affinities[0].domain
    voice = Voice(persona.affinities, persona.demographics, domain, Setting(location="Lisbon"))
    rng = random.Random(1)
    remarks = [r for r in (voice.remark(rng) for _ in range(400)) if r]
    bridged = [r for r in remarks if split_bridge(r)[1]]
    assert 0.05 <= len(bridged) / len(remarks) <= 0.4
    assert all(bridged_domain(r) is domain for r in bridged)


def test_distractor_bridges_avoid_the_words_of_a_real_request_of_their_domain(
    personas: list[Persona],
) -> None:
    """Given the user's other requests, a distractor pretends to matter for one of them, so its
    bridge skips that request's words exactly as a reference's bridge skips its own request's."""
    persona = personas[1]
    variables = generation_request(persona, GenerationSettings(), 0, []).variables
    candidates = json.loads(simulate("query_generation", variables, seed=0))["candidates"]
    first, rest = candidates[0], candidates[1:]
    requests = [as_query(persona, c, n) for n, c in enumerate(rest, 1)]
    refs = {r["text"] for r in first["references"]}
    checked = 0
    for seed in range(5):
        timeline = timeline_variables(persona, first, candidates)
        events = json.loads(simulate("timeline_synthesis", timeline, seed=seed))["events"]
        for update in (u for e in events for u in e["news"]):
            core, clause = split_bridge(update)
            domain = bridged_domain(update)
            if update in refs or not clause or domain is None:
                continue
            own = [q.text for q in requests if q.domain == domain]
            assert own, (update, domain)
            checked += 1
            assert any(
                not shared_content_words(text, update) - shared_content_words(text, core)
                for text in own
            ), (update, own)
    assert checked >= 30
