"""Simulated answer for ``timeline_synthesis``: the weeks before a query, as the persona lived them.

Reference events sit on their reference's date inside one of the persona's tasks of that
domain; filler events are other tasks. Every event's news also carries distractors, drawn
as references of the user's other requests would be, so a reference is one piece of
personal news among many.
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
from memoryquest.text import shared_content_words

FILLER_EVENT_DISTRACTORS = (0, 0, 0, 3, 4, 4, 3, 2)
"""Weights of 0..7 distractor updates on a filler event (when the persona can ground them).

Nearly every user turn carries some piece of personal news (a conversation has
three exchanges at least), so a turn that carries a reference is one of many
such turns, not the odd one out."""
REFERENCE_EVENT_DISTRACTORS = (0, 0, 3, 4, 3, 2)
"""Weights of 0..5 distractor updates next to the reference on a reference event (two at least, so
its three or more exchanges each have some news)."""
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


def _free_days(start: dt.date, end: dt.date, taken: set[dt.date]) -> list[dt.date]:
    days = (start + dt.timedelta(days=n) for n in range((end - start).days + 1))
    return [day for day in days if day not in taken]


@simulates(TimelineInputs)
def lay_out_timeline(inputs: TimelineInputs, rng: random.Random) -> dict[str, Any]:
    query = inputs.query
    query_date = dt.date.fromisoformat(query["query_date"])
    references = sorted(inputs.references, key=lambda r: (r["date"], r["index"]))
    events_min, events_max = int(inputs.events_min), int(inputs.events_max)
    lead = int(inputs.lead_days_max)
    tasks = [TaskBrief.model_validate(t) for t in inputs.tasks or []]
    scenarios = task_scenarios(tasks)
    by_domain: dict[Domain, list[TaskScenario]] = {}
    for scenario in scenarios:
        by_domain.setdefault(scenario.primary_domain, []).append(scenario)

    n_refs = len(references)
    n_events = rng.randint(min(max(events_min, n_refs + 1), events_max), events_max)
    n_fill = max(n_events - n_refs, 0)

    material = PersonaMaterial.from_variables(inputs.model_dump())
    world = World(material)
    reference_texts = [str(r["text"]) for r in references]
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

    def distractor(domain: Domain, date: dt.date) -> str | None:
        """A minor update: about no reference's need, sharing almost no words with a reference."""
        for _ in range(3):
            update = distractor_update(
                world,
                domain,
                date,
                rng,
                avoid_needs=set(avoid_needs),
                avoid_texts=set(avoid_texts),
                bridge_domains=bridge_domains,
                reference_needs=reference_needs,
                phantom_requests=phantom_requests,
            )
            if update is None:
                return None
            limit = DISTRACTOR_SHARED_WORDS_MAX
            if all(len(shared_content_words(update.text, r)) <= limit for r in reference_texts):
                return str(update.text)
            avoid_texts.add(update.text)
        return None

    def distractors(domain: Domain, date: dt.date, weights: tuple[int, ...]) -> list[str]:
        found: list[str] = []
        for _ in range(rng.choices(range(len(weights)), weights=weights)[0]):
            if (update := distractor(domain, date)) is None:
                break
            avoid_texts.add(update)
            found.append(update)
        return found

    events: list[dict[str, Any]] = []
    for ref in references:
        domain = Domain(ref["domain"])
        options = by_domain.get(domain, [])
        activity = _activity(rng.choice(options)) if options else _generic_activity(domain)
        date = dt.date.fromisoformat(ref["date"])
        updates = [
            ref["text"].strip().rstrip("."),
            *distractors(domain, date, REFERENCE_EVENT_DISTRACTORS),
        ]
        rng.shuffle(updates)
        events.append(
            {
                "date": ref["date"],
                "domain": domain.value,
                "description": activity,
                "reference_index": ref["index"],
                "news": updates,
            }
        )

    if n_fill:
        reference_domains = {r["domain"] for r in references}
        filler_domains = [d for d in by_domain if d.value not in reference_domains]
        rng.shuffle(filler_domains)
        month_before = query_date - dt.timedelta(days=30)
        earliest = dt.date.fromisoformat(references[0]["date"]) if references else month_before
        first = earliest - dt.timedelta(days=rng.randint(1, lead))
        taken = {dt.date.fromisoformat(r["date"]) for r in references} | {first}
        free = _free_days(first + dt.timedelta(days=1), query_date - dt.timedelta(days=1), taken)
        others = (
            sorted(rng.sample(free, n_fill - 1))
            if len(free) >= n_fill - 1
            else sorted(rng.choices(free or [first], k=n_fill - 1))
        )
        for position, date in enumerate([first, *others]):
            if filler_domains:
                domain = filler_domains[position % len(filler_domains)]
                activity = _activity(rng.choice(by_domain[domain]))
            else:
                domain = Domain(query["domain"])
                activity = _generic_activity(domain)
            updates = distractors(domain, date, FILLER_EVENT_DISTRACTORS)
            events.append(
                {
                    "date": date.isoformat(),
                    "domain": domain.value,
                    "description": activity,
                    "reference_index": None,
                    "news": updates,
                }
            )

    events.sort(key=lambda e: (e["date"], e["reference_index"] is None))
    return {"events": events}
