"""Simulated answer for ``query_generation``: in-situ requests grounded in the persona.

Queries come from the persona's own tasks (multi-domain first, then the
single-domain ones that are planning or booking requests), dated on the weekday
of the task's situation, and anchored with one of the persona's affinities
("I'm thinking Rome."). References are dated life updates from OTHER domains,
filled from the persona's affinities (see
:mod:`memoryquest.simulator.persona_grounding`). Most are far from the request
in meaning; some candidates deliberately lean on the request's own neighbouring
domains, as a real model often does, so the γ filter has something to reject.
"""

from __future__ import annotations

import datetime as dt
import random
import re
from typing import Any

from memoryquest.contracts import Domain, TaskKind
from memoryquest.simulator import simulates
from memoryquest.simulator.persona_grounding import LIFE_UPDATES as _LIFE_UPDATES
from memoryquest.simulator.persona_grounding import (
    MONTHS,
    WEEKDAYS,
    LifeUpdate,
    PersonaMaterial,
    TaskScenario,
    clean_value,
    echo_update,
    fill_life_update,
    normalise_text,
    task_scenarios,
)

_PLANNING_VERBS = ("plan", "book", "organize", "organise", "arrange", "schedule", "set up", "purchase", "block off", "find and book", "reschedule")

_OPENERS = (
    "Can you help me {core} {when}?",
    "Could you help me {core} {when}?",
    "I'd like to {core} {when} — can you put a plan together?",
    "Help me {core} {when}, please.",
    "I need to {core} {when}. Where should I start?",
    "I want to {core} {when}. What would you suggest?",
)
_CLOSERS = (
    "",
    "Keep it realistic for me.",
    "Tell me what to sort out first.",
    "What should I line up?",
    "I'd like a concrete plan.",
    "Walk me through it.",
)

# One persona-specific detail a user would drop into a request in this domain.
_HOOKS: dict[Domain, tuple[tuple[str, str], ...]] = {
    Domain.TRAVEL: (("Frequent Travel Destination", "I'm thinking {v}."), ("Preferred Destination Types", "Something {v} would be ideal.")),
    Domain.RESTAURANTS: (("Cuisine Preference", "{v} food would be ideal."),),
    Domain.MUSIC: (("Favorite Bands", "I'd love some {v} in there."), ("Preferred Genres", "Something with a {v} vibe.")),
    Domain.BOOKS: (("Favorite Books", "I'd like to tie it in with {v}."), ("Genre", "Ideally with a {v} angle.")),
    Domain.SPORTS: (("Favorite Team", "It should work around the {v} schedule."), ("Favorite Sports", "Some {v} should be part of it.")),
    Domain.MOVIES: (("Preferred Genres", "A {v} film would be ideal."), ("Theater Type Preference", "I'd prefer {v} if we go out.")),
    Domain.MEDIA: (("Favorite Media", "Maybe something like {v}."), ("Viewing Platform Preference", "We'd watch on {v}.")),
    Domain.EVENTS: (("Event Type Preference", "Some {v} would be a great fit."),),
    Domain.GAMES: (("Preferred Game Name", "{v} should be part of it."), ("Gaming Platforms", "We'd play on {v}.")),
    Domain.HOTELS: (("Hotel Chains Preference", "A {v} would be my pick for the stay."),),
    Domain.FLIGHTS: (("Preferred Airline", "I'd rather fly {v}."),),
    Domain.RENTAL_CARS: (("Car Type Preference", "I'd want a {v} car."),),
    Domain.TRAIN: (("Preferred Train Class", "I'd go by train in {v}."),),
    Domain.CALENDAR: (("Event Type Preference", "It needs to fit around my {v}."),),
    Domain.MESSAGING: (("Preferred Messaging Apps", "I'll coordinate everyone on {v}."),),
    Domain.FINANCE: (("Financial Company", "I'm especially watching {v}."),),
    Domain.SHOPPING: (("Brand Preference", "I'm eyeing {v}."),),
    Domain.SERVICES: (("Appointment Time Preference", "An {v} slot would suit me."),),
    Domain.ALARM: (("Alarm Sound Preference", "I'll want {v} to wake up to."),),
    Domain.BUSES: (("Preferred Bus Company", "I could take {v}."),),
}

# Share of candidates given one on-topic reference (what a generator does when it
# stays on topic); with all-MiniLM-L6-v2 about half of those end above gamma 0.3.
ECHO_SHARE = 0.35

_IMPACT = {
    "schedule": "when the user is actually free",
    "budget": "how much the user can spend",
    "health": "what the user can physically do or eat",
    "logistics": "how the user can get around",
    "social": "who is involved and what was promised",
    "taste": "what the user will enjoy",
}


_TRIPS = {"logistics", "budget", "schedule", "health", "social"}
_OUTINGS = {"schedule", "budget", "health", "social", "taste"}
_ROUTINES = {"schedule", "health", "social", "taste"}
# What kind of life update a request in each domain actually depends on.
_RELEVANT_IMPACTS: dict[Domain, set[str]] = {
    **{d: _TRIPS for d in (Domain.TRAVEL, Domain.FLIGHTS, Domain.HOTELS, Domain.RENTAL_CARS, Domain.TRAIN, Domain.BUSES)},
    **{d: _OUTINGS for d in (Domain.EVENTS, Domain.MOVIES, Domain.MUSIC, Domain.MEDIA, Domain.SPORTS, Domain.GAMES, Domain.RESTAURANTS)},
    **{d: {"budget", "schedule"} for d in (Domain.FINANCE, Domain.SHOPPING)},
    **{d: _ROUTINES for d in (Domain.CALENDAR, Domain.ALARM, Domain.MESSAGING, Domain.SERVICES, Domain.BOOKS)},
}


def _third_person(text: str) -> str:
    for pattern, repl in ((r"\bmy\b", "their"), (r"\bmyself\b", "themselves"), (r"\bI'm\b", "they're"), (r"\bI\b", "they"), (r"\bme\b", "them")):
        text = re.sub(pattern, repl, text)
    return text


def planning_scenarios(scenarios: list[TaskScenario], rng: random.Random) -> list[TaskScenario]:
    """Multi-domain tasks first, then single-domain planning/booking tasks, each group shuffled."""
    multi = [s for s in scenarios if s.kind == TaskKind.MULTI_DOMAIN]
    single = [s for s in scenarios if s.kind == TaskKind.SINGLE_DOMAIN and s.core.startswith(_PLANNING_VERBS)]
    rng.shuffle(multi)
    rng.shuffle(single)
    ordered = multi + single
    return ordered or scenarios


def _weekday_on_or_after(date: dt.date, weekday_name: str | None) -> dt.date:
    if not weekday_name or weekday_name not in WEEKDAYS:
        return date
    return date + dt.timedelta(days=(WEEKDAYS.index(weekday_name) - date.weekday()) % 7)


def _when(query_date: dt.date, rng: random.Random) -> str:
    target = query_date + dt.timedelta(days=rng.randint(3, 24))
    month_day = f"{MONTHS[target.month - 1]} {target.day}"
    if target.weekday() >= 5:
        saturday = target - dt.timedelta(days=target.weekday() - 5)
        return rng.choice((f"for the weekend of {MONTHS[saturday.month - 1]} {saturday.day}", f"for {WEEKDAYS[target.weekday()]}, {month_day}"))
    return rng.choice((f"for {WEEKDAYS[target.weekday()]}, {month_day}", f"around {month_day}", f"for the week of {month_day}"))


def _hook(material: PersonaMaterial, scenario: TaskScenario, rng: random.Random) -> str:
    options: list[str] = []
    for domain in scenario.domains:
        for affinity, template in _HOOKS.get(domain, ()):
            value = clean_value(material.value(domain, affinity, rng))
            if value:
                options.append(template.format(v=value))
    return rng.choice(options) if options else ""


def compose_query(material: PersonaMaterial, scenario: TaskScenario, query_date: dt.date, rng: random.Random) -> str:
    opener = rng.choice(_OPENERS).format(core=scenario.core, when=_when(query_date, rng))
    parts = [opener]
    if rng.random() < 0.8:
        parts.append(_hook(material, scenario, rng))
    parts.append(rng.choice(_CLOSERS))
    return " ".join(p for p in parts if p)


def _reference_dates(query_date: dt.date, count: int, window: int, rng: random.Random) -> list[dt.date]:
    window = max(window, count + 3)
    offsets = rng.sample(range(3, window + 1), count)
    return sorted(query_date - dt.timedelta(days=o) for o in offsets)


def _pick_updates(
    material: PersonaMaterial,
    scenario: TaskScenario,
    query_domain: Domain,
    query_date: dt.date,
    count: int,
    used: set[str],
    rng: random.Random,
) -> list[LifeUpdate]:
    """``count`` life updates from distinct domains other than the query's, unused by this persona."""
    available = [d for d in material.domains() if d != query_domain]
    near = [d for d in available if d in scenario.domains]
    far = [d for d in available if d not in scenario.domains]
    rng.shuffle(near)
    rng.shuffle(far)
    wanted = _RELEVANT_IMPACTS.get(query_domain, set(_IMPACT))
    # Domains that can say something this kind of request depends on come first.
    far.sort(key=lambda d: not any(t.domain == d and t.impact in wanted for t in _LIFE_UPDATES))
    # Like a real model, sometimes reach for the request's own neighbourhood.
    lean = rng.random() < 0.35 and near
    wanted_near = min(len(near), rng.randint(1, 2)) if lean else 0
    order = near[:wanted_near] + far + near[wanted_near:]
    chosen: list[LifeUpdate] = []
    if order and rng.random() < ECHO_SHARE:
        chosen.append(echo_update(scenario.core, order[0], rng))
        order = order[1:]
    for domain in order:
        if len(chosen) == count:
            break
        templates = [t for t in _LIFE_UPDATES if t.domain == domain]
        rng.shuffle(templates)
        templates.sort(key=lambda t: t.impact not in wanted)  # stable: relevant first, shuffled within
        for template in templates:
            filled = fill_life_update(template, material, query_date, rng)
            if filled is not None and normalise_text(filled.text) not in used:
                chosen.append(filled)
                break
    return chosen


def _reasoning(scenario: TaskScenario, query_date: dt.date, updates: list[LifeUpdate]) -> str:
    reasons = "; ".join(f"{u.domain.value}: {_IMPACT.get(u.template.impact, 'the situation')}" for u in updates)
    return (
        f"On {query_date.isoformat()} the user asks to {_third_person(scenario.core)}. The request itself names none of it, "
        f"but a helpful plan has to respect things said earlier in other conversations — {reasons}. "
        "Each reference comes from a different domain, so a search on the request's wording alone would miss it."
    )


@simulates("query_generation")
def propose_queries(variables: dict[str, Any], rng: random.Random) -> dict[str, Any]:
    material = PersonaMaterial.from_variables(variables)
    count = int(variables["count"])
    refs_min, refs_max = int(variables["references_min"]), int(variables["references_max"])
    start = dt.date.fromisoformat(variables["query_date_start"])
    end = dt.date.fromisoformat(variables["query_date_end"])
    window = int(variables["reference_window_days"])
    already = {normalise_text(t) for t in variables.get("already_proposed") or []}

    scenarios = planning_scenarios(task_scenarios(material.tasks), rng)
    if not scenarios:
        return {"candidates": []}
    span = max((end - start).days - 6, 1)
    used: set[str] = set()
    candidates: list[dict[str, Any]] = []
    for index in range(count):
        scenario = scenarios[index % len(scenarios)]
        query_domain = scenario.primary_domain
        # Stratified over the window so a persona's queries spread across the year.
        offset = int((index + rng.random()) * span / count)
        query_date = _weekday_on_or_after(start + dt.timedelta(days=offset), scenario.situation.get("Day of the Week"))
        if query_date > end:
            query_date -= dt.timedelta(days=7)
        text = compose_query(material, scenario, query_date, rng)
        for _ in range(3):
            if normalise_text(text) not in already:
                break
            text = compose_query(material, scenario, query_date, rng)
        already.add(normalise_text(text))
        n_refs = rng.randint(refs_min, refs_max)
        updates = _pick_updates(material, scenario, query_domain, query_date, n_refs, used, rng)
        if len(updates) < refs_min:
            continue
        used.update(normalise_text(u.text) for u in updates)
        dates = _reference_dates(query_date, len(updates), window, rng)
        rng.shuffle(updates)
        candidates.append(
            {
                "query": text,
                "query_date": query_date.isoformat(),
                "reasoning": _reasoning(scenario, query_date, updates),
                "domain": query_domain.value,
                "references": [
                    {"text": update.text, "date": date.isoformat(), "domain": update.domain.value}
                    for update, date in zip(updates, dates, strict=True)
                ],
            }
        )
    return {"candidates": candidates}
