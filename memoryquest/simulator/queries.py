"""Simulated answer for ``query_generation``: in-situ requests and the references they depend on.

Requests come from the persona's own tasks, dated on their situation's weekday. Each
reference is one life update for a need bearing on the request's plan steps, so it is
relevant by construction; it is set in another of the persona's task domains and drawn
among the need's entries exactly as distractors are, echoes at most one of the request's
words, and its exclusive group is used once per user, so candidates never repeat or
contradict each other.
"""

from __future__ import annotations

import datetime as dt
import random
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from memoryquest.contracts import Domain, TaskKind
from memoryquest.simulator import simulates
from memoryquest.simulator.grammar import (
    clean_value,
    fix_articles,
    from_first_person,
    months,
    weekdays,
)
from memoryquest.simulator.needs import (
    BOUNDED_WINDOW_DAYS,
    REFERENCE_LEAD_DAYS_MIN,
    TIME_SLOTS,
    Generator,
    LifeUpdate,
    PlanStep,
    World,
    breadth,
    bridge_to_request,
    candidates,
    domain_needs,
    fill,
    need_categories,
    needs_of_request,
    request_needs,
    step_for,
    with_domain,
)
from memoryquest.simulator.persona_grounding import PersonaMaterial, TaskScenario, task_scenarios
from memoryquest.simulator.schema import QueriesTable
from memoryquest.simulator.tables import load
from memoryquest.stages.queries_contracts import QueryGenerationInputs
from memoryquest.text import normalise_text, shared_content_words

BREADTH_WEIGHT = 3.0
"""How strongly specific needs are preferred over broad ones (domains of breadth per unit of use)."""
GROUNDING_WEIGHT = 0.5
"""How strongly needs the persona can ground in its own affinities are preferred."""
SHARED_WORDS_MAX = 2
"""Never more content words in common with the request (the stage's own limit)."""


def _table() -> QueriesTable:
    return load(QueriesTable)


def planning_scenarios(scenarios: list[TaskScenario], rng: random.Random) -> list[TaskScenario]:
    """Multi-domain tasks first, then single-domain planning/booking tasks, each group shuffled."""
    multi = [s for s in scenarios if s.kind == TaskKind.MULTI_DOMAIN]
    single = [
        s
        for s in scenarios
        if s.kind == TaskKind.SINGLE_DOMAIN and s.core.startswith(_table().planning_verbs)
    ]
    rng.shuffle(multi)
    rng.shuffle(single)
    return multi + single or scenarios


def _weekday_on_or_after(date: dt.date, weekday_name: str | None) -> dt.date:
    if not weekday_name or weekday_name not in weekdays():
        return date
    return date + dt.timedelta(days=(weekdays().index(weekday_name) - date.weekday()) % 7)


def _when(query_date: dt.date, rng: random.Random) -> str:
    target = query_date + dt.timedelta(days=rng.randint(3, 24))
    saturday = target - dt.timedelta(days=target.weekday() - 5)
    names = {
        "weekday": weekdays()[target.weekday()],
        "date": f"{months()[target.month - 1]} {target.day}",
        "saturday": f"{months()[saturday.month - 1]} {saturday.day}",
    }
    weekend = target.weekday() >= 5
    templates = _table().weekend_dates if weekend else _table().weekday_dates
    return rng.choice([t.format(**names) for t in templates])


def _hook(material: PersonaMaterial, scenario: TaskScenario, rng: random.Random) -> str:
    options: list[str] = []
    for domain in scenario.domains:
        for hook in _table().hooks.get(domain, ()):
            value = clean_value(material.value(domain, hook.affinity, rng))
            if value:
                options.append(fix_articles(hook.template.format(v=value)))
    return rng.choice(options) if options else ""


def compose_query(
    material: PersonaMaterial, scenario: TaskScenario, query_date: dt.date, rng: random.Random
) -> str:
    """The request in the user's voice: the task, a date, maybe one detail, maybe a closing ask."""
    parts = [rng.choice(_table().openers).format(core=scenario.core, when=_when(query_date, rng))]
    if rng.random() < 0.6:
        parts.append(_hook(material, scenario, rng))
    parts.append(rng.choice(_table().closers))
    return " ".join(p for p in parts if p)


@dataclass
class Ledger:
    """What one user's references have used so far, across all candidates of the answer."""

    groups: set[str] = field(default_factory=set)
    texts: set[str] = field(default_factory=set)
    needs: Counter[str] = field(default_factory=Counter)
    domains: Counter[Domain] = field(default_factory=Counter)


@dataclass(frozen=True)
class PlannedReference:
    update: LifeUpdate
    step: PlanStep


def _need_rank(need: str, grounding: int, primary: bool, rng: random.Random) -> float:
    """A need's place for a request before the user's use of it (lower first): needs of few domains
    (diet, sleep) say more about one request than needs of any plan (budget), so they come first, as
    do needs the persona grounds and needs of the request's own domain (``primary``)."""
    return (
        breadth(need) / BREADTH_WEIGHT + (2 - grounding) * GROUNDING_WEIGHT - primary + rng.random()
    )


def _ranked_needs(
    world: World, needs: list[str], primary: frozenset[str], ledger: Ledger, rng: random.Random
) -> list[str]:
    """Needs with generators left, by :func:`_need_rank` after the user's use of each so far."""

    def key(need: str) -> float:
        grounding = max(
            (g.grounding(world) for g in candidates(world, need, ledger.groups)), default=0
        )
        return ledger.needs[need] + _need_rank(need, grounding, need in primary, rng)

    usable = [n for n in needs if candidates(world, n, ledger.groups)]
    return sorted(usable, key=key)


def _day_offsets(count: int, high: int, rng: random.Random) -> list[int]:
    """``count`` distinct days before the request, from the minimum lead up to ``high`` (fewer when the range is short)."""
    days = list(range(REFERENCE_LEAD_DAYS_MIN, max(high, REFERENCE_LEAD_DAYS_MIN + 1) + 1))
    return rng.sample(days, min(count, len(days)))


def _domain_for(
    update: LifeUpdate, query_domain: Domain, taken: set[Domain], world: World, ledger: Ledger
) -> Domain | None:
    """A conversation domain for the update: one of the persona's task domains, neither the request's
    nor taken, the least used first (the update's own domains only when the persona has no other)."""
    hosted = sorted(world.task_domains(), key=lambda d: d.value)
    options = [d for d in hosted if d != query_domain and d not in taken]
    if not options:
        options = [d for d in update.domains if d != query_domain and d not in taken]
    if not options:
        return None
    return min(options, key=lambda d: (ledger.domains[d], d not in update.domains))


def plan_references(
    world: World,
    query_text: str,
    query_domain: Domain,
    query_date: dt.date,
    count: int,
    window: int,
    ledger: Ledger,
    rng: random.Random,
) -> list[PlannedReference]:
    """Up to ``count`` references, one per distinct need that bears on the request (see the module docstring)."""
    steps = needs_of_request(query_text, query_domain)
    planned: list[PlannedReference] = []
    taken_domains: set[Domain] = set()
    groups = set(ledger.groups)
    texts = set(ledger.texts)
    # Days are drawn first: a time-bounded update is said no more than BOUNDED_WINDOW_DAYS ahead.
    bounded_days = _day_offsets(count, min(window, BOUNDED_WINDOW_DAYS), rng)
    any_days = _day_offsets(count, window, rng)
    used_offsets: set[int] = set()
    primary = domain_needs(query_domain)
    for need in _ranked_needs(world, request_needs(steps), primary, ledger, rng):
        if len(planned) == count:
            break
        step = step_for(need, steps)
        if step is None:
            continue
        options = candidates(world, need, groups)
        rng.shuffle(options)
        best: tuple[bool, LifeUpdate, Domain, int] | None = None
        for generator in options:
            pool = bounded_days if generator.limits or _has_time_core(generator) else any_days
            free = [o for o in pool if o not in used_offsets]
            if not free:
                continue
            offset = free[0]
            date = query_date - dt.timedelta(days=offset)
            update = fill(generator, world, date, query_date, rng)
            if update is None or normalise_text(update.text) in texts:
                continue
            shared = len(shared_content_words(query_text, update.text))
            if shared > SHARED_WORDS_MAX:
                continue
            domain = _domain_for(update, query_domain, taken_domains, world, ledger)
            if domain is None:
                continue
            # No echo first; otherwise the first in the shuffled order (see the module docstring).
            rank = shared > 1
            if best is None or rank < best[0]:
                best = (rank, update, domain, offset)
        if best is None:
            continue
        _, update, domain, offset = best
        update = bridge_to_request(update, query_text, query_domain, rng)
        used_offsets.add(offset)
        taken_domains.add(domain)
        groups.add(update.group)
        texts.add(normalise_text(update.text))
        planned.append(PlannedReference(with_domain(update, domain), step))
    return planned


def _has_time_core(generator: Generator) -> bool:
    return any(TIME_SLOTS & set(core.slots()) for core in generator.cores)


def _reasoning(scenario: TaskScenario, query_date: dt.date, planned: list[PlannedReference]) -> str:
    needs = need_categories()
    reasons = "; ".join(f"{needs[p.update.need].label} ({p.step.phrase})" for p in planned)
    core = from_first_person(scenario.core, "third")
    return (
        f"On {query_date.isoformat()} the user asks to {core}. The request names none of it, "
        f"but a helpful plan depends on things said in other conversations — {reasons}. "
        "Each of those came up in a different domain, so the request's own words would not find it."
    )


def _candidate(
    scenario: TaskScenario, text: str, query_date: dt.date, planned: list[PlannedReference]
) -> dict[str, Any]:
    ordered = sorted(planned, key=lambda p: p.update.date)
    return {
        "query": text,
        "query_date": query_date.isoformat(),
        "reasoning": _reasoning(scenario, query_date, planned),
        "domain": scenario.primary_domain.value,
        "references": [
            {
                "text": p.update.text,
                "date": p.update.date.isoformat(),
                "domain": p.update.domain.value,
                "rationale": need_categories()[p.update.need].rationale.format(step=p.step.phrase),
                "valid_until": p.update.valid_until.isoformat() if p.update.valid_until else None,
            }
            for p in ordered
        ],
    }


def _reference_count(low: int, high: int, rng: random.Random) -> int:
    """Three or four most of the time, five now and then (the bank is finite per user)."""
    weights = [5 if n == low else 4 if n == low + 1 else 1 for n in range(low, high + 1)]
    return rng.choices(range(low, high + 1), weights=weights)[0]


@simulates(QueryGenerationInputs)
def propose_queries(inputs: QueryGenerationInputs, rng: random.Random) -> dict[str, Any]:
    material = PersonaMaterial.from_variables(inputs.model_dump())
    world = World(material)
    count = int(inputs.count)
    refs_min, refs_max = int(inputs.references_min), int(inputs.references_max)
    start = dt.date.fromisoformat(inputs.query_date_start)
    end = dt.date.fromisoformat(inputs.query_date_end)
    window = int(inputs.reference_window_days)
    already = {normalise_text(t) for t in inputs.already_proposed or []}

    scenarios = planning_scenarios(task_scenarios(material.tasks), rng)
    if not scenarios:
        return {"candidates": []}
    span = max((end - start).days - 6, 1)
    ledger = Ledger()
    candidates_out: list[dict[str, Any]] = []
    attempts = 0
    while len(candidates_out) < count and attempts < count * 2:
        scenario = scenarios[attempts % len(scenarios)]
        attempts += 1
        # Stratified over the window so a persona's queries spread across the year.
        slot = len(candidates_out)
        offset = int((slot + rng.random()) * span / count)
        day = start + dt.timedelta(days=offset)
        query_date = _weekday_on_or_after(day, scenario.situation.get("Day of the Week"))
        if query_date > end:
            query_date -= dt.timedelta(days=7)
        text = compose_query(material, scenario, query_date, rng)
        for _ in range(4):
            if normalise_text(text) not in already:
                break
            text = compose_query(material, scenario, query_date, rng)
        if normalise_text(text) in already:
            continue
        wanted = _reference_count(refs_min, refs_max, rng)
        domain = scenario.primary_domain
        planned = plan_references(world, text, domain, query_date, wanted, window, ledger, rng)
        if len(planned) < refs_min:
            continue
        already.add(normalise_text(text))
        for item in planned:
            ledger.groups.add(item.update.group)
            ledger.texts.add(normalise_text(item.update.text))
            ledger.needs[item.update.need] += 1
            ledger.domains[item.update.domain] += 1
        candidates_out.append(_candidate(scenario, text, query_date, planned))
    return {"candidates": candidates_out}
