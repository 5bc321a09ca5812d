"""Simulated answer for ``timeline_synthesis``: the weeks before a query, as the persona lived them.

Every slot, whatever code will put in it, becomes one of the persona's tasks of the slot's
domain, and its news are distractors drawn as references of the user's other requests would
be, as many as the slot asks for; so a reference code puts among them is one piece of
personal news among many, in the same form. The simulator knows which statements are this
query's (to keep its news off their needs), never which slot carries one.
"""

from __future__ import annotations

import datetime as dt
import random
from typing import Any

from memoryquest.contracts import Domain, TaskBrief, parse_domain
from memoryquest.simulator import simulates
from memoryquest.simulator.needs import World, classify_need, distractor_update, parse_update
from memoryquest.simulator.needs.bridges import bridged_domain
from memoryquest.simulator.persona_grounding import PersonaMaterial, TaskScenario, task_scenarios
from memoryquest.simulator.queries import compose_query, planning_scenarios
from memoryquest.stages.timelines_contracts import TimelineInputs
from memoryquest.text import normalise_text, shared_content_words

DISTRACTOR_ATTEMPTS = 6
"""Draws per news item before the slot is left short (the stage then asks again)."""
DISTRACTOR_SHARED_WORDS_MAX = 1
"""A distractor may share at most this many content words with any reference of the query."""


def _setting(scenario: TaskScenario) -> str:
    situation = scenario.situation
    where = {"in": situation.get("Location", ""), "on their": situation.get("Device", "").lower()}
    where["in the"] = situation.get("Time of Day", "").lower()
    bits = [f"{lead} {value}" for lead, value in where.items() if value]
    return f" Chatting {' '.join(bits)}." if bits else ""


def _activity(scenario: TaskScenario) -> str:
    return scenario.activity + _setting(scenario)


def _generic_activity(domain: Domain) -> str:
    return f"The user checks in with the assistant about {domain.value.lower()} plans."


@simulates(TimelineInputs)
def lay_out_timeline(inputs: TimelineInputs, rng: random.Random) -> dict[str, Any]:
    query = inputs.query
    query_date = dt.date.fromisoformat(query["query_date"])
    tasks = [TaskBrief.model_validate(t) for t in inputs.tasks or []]
    scenarios = task_scenarios(tasks)
    by_domain: dict[Domain, list[TaskScenario]] = {}
    for scenario in scenarios:
        by_domain.setdefault(scenario.primary_domain, []).append(scenario)

    material = PersonaMaterial.from_variables(inputs.model_dump())
    world = World(material)
    reference_texts = [str(t) for t in inputs.own_references]
    avoid_needs = {need for need in (classify_need(t) for t in reference_texts) if need}
    # Every request's references and every request are given, this one's too: leave them out.
    own = set(reference_texts)
    user_references = [str(t) for t in inputs.user_references or [] if str(t) not in own]
    user_requests = [r for r in inputs.user_requests or [] if str(r["text"]) != query["text"]]
    avoid_texts = set(reference_texts) | set(user_references)
    # Distractors bridge to the scenes the user's other references bridge to, never this request's.
    bridge_domains = [
        d for d in map(bridged_domain, user_references) if d and d.value != query["domain"]
    ]
    # Distractors use each need as often as the user's references do, and bridge to requests
    # worded as the user's own requests are.
    reference_needs = [
        parsed.generator.need for parsed in map(parse_update, user_references) if parsed
    ]
    # The user's other requests themselves, when given: a reference's bridge skips the scenes its
    # own request names, so a distractor's must skip the scenes of a request the user made.
    phantom_requests: dict[Domain, list[str]] = {}
    for other in user_requests:
        domain = parse_domain(str(other["domain"]))
        if domain is not None and domain in bridge_domains:
            phantom_requests.setdefault(domain, []).append(str(other["text"]))
    if not user_requests:  # else requests worded as the user's requests are
        for scenario in planning_scenarios(scenarios, rng):
            if scenario.primary_domain in bridge_domains:
                phantom_requests.setdefault(scenario.primary_domain, []).append(
                    compose_query(material, scenario, query_date, rng)
                )
    words_min, words_max = int(inputs.news_words_min), int(inputs.news_words_max)

    statements = set(avoid_texts)  # the user's: their groups stay off limits

    def distractor(domain: Domain, date: dt.date, avoid: set[str]) -> str | None:
        """A minor update: about no reference's need, of no group behind ``avoid``, sharing almost
        no words with a reference, within the news length band, not said before."""
        for _ in range(DISTRACTOR_ATTEMPTS):
            update = distractor_update(
                world,
                domain,
                date,
                rng,
                avoid_needs=set(avoid_needs),
                avoid_texts=set(avoid),
                bridge_domains=bridge_domains,
                reference_needs=reference_needs,
                phantom_requests=phantom_requests,
            )
            if update is None:
                return None
            text = str(update.text).strip().rstrip(".")
            limit = DISTRACTOR_SHARED_WORDS_MAX
            fresh = normalise_text(text) not in {normalise_text(t) for t in avoid_texts}
            if (
                fresh
                and words_min <= len(text.split()) <= words_max
                and all(len(shared_content_words(text, r)) <= limit for r in reference_texts)
            ):
                return text
            avoid = avoid | {update.text}
        return None

    events: list[dict[str, Any]] = []
    for slot in inputs.slots:
        domain = Domain(slot["domain"])
        date = dt.date.fromisoformat(slot["date"])
        options = by_domain.get(domain, [])
        activity = _activity(rng.choice(options)) if options else _generic_activity(domain)
        news: list[str] = []
        for _ in range(int(slot["news"])):
            # Groups this timeline has used once come back when the fresh ones run out (a
            # timeline asks for more news than the bank has groups the user has not used).
            update = distractor(domain, date, avoid_texts) or distractor(domain, date, statements)
            if update is None:
                break
            avoid_texts.add(update)
            news.append(update)
        events.append({"slot": slot["slot"], "description": activity, "news": news})
    return {"events": events}
