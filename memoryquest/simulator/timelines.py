"""Simulated answer for ``timeline_synthesis``: the weeks before a query, as the persona lived them.

Reference events sit on their reference's date and domain, set inside one of
the persona's own single-domain tasks of that domain ("The user wants to review
their alarm settings ... In passing, the user shares an update: ..."). Filler
events are other tasks of the persona, from distinct domains that none of the
references touch, with the task's real situation (place, device, time of day).
The first event falls 1..lead_days_max days before the earliest reference; the
rest are spread over the days up to the eve of the query.
"""

from __future__ import annotations

import datetime as dt
import random
from typing import Any

from memoryquest.contracts import Domain, PersonaTask
from memoryquest.simulator import simulates
from memoryquest.simulator.persona_grounding import TaskScenario, task_scenarios

REFERENCE_MARKER = "In passing, the user shares an update:"


def _setting(scenario: TaskScenario) -> str:
    location = scenario.situation.get("Location", "")
    device = scenario.situation.get("Device", "").lower()
    time_of_day = scenario.situation.get("Time of Day", "").lower()
    bits = []
    if location:
        bits.append(f"in {location}")
    if device:
        bits.append(f"on their {device}")
    if time_of_day:
        bits.append(f"in the {time_of_day}")
    return f" Chatting {' '.join(bits)}." if bits else ""


def _activity(scenario: TaskScenario) -> str:
    return scenario.activity + _setting(scenario)


def _generic_activity(domain: Domain) -> str:
    return f"The user checks in with the assistant about {domain.value.lower()} plans."


def _free_days(start: dt.date, end: dt.date, taken: set[dt.date]) -> list[dt.date]:
    days = []
    day = start
    while day <= end:
        if day not in taken:
            days.append(day)
        day += dt.timedelta(days=1)
    return days


@simulates("timeline_synthesis")
def lay_out_timeline(variables: dict[str, Any], rng: random.Random) -> dict[str, Any]:
    query = variables["query"]
    query_date = dt.date.fromisoformat(query["query_date"])
    references = sorted(variables["references"], key=lambda r: (r["date"], r["index"]))
    events_min, events_max = int(variables["events_min"]), int(variables["events_max"])
    lead = int(variables["lead_days_max"])
    tasks = [PersonaTask.model_validate(t) for t in variables.get("tasks") or []]
    scenarios = task_scenarios(tasks)
    by_domain: dict[Domain, list[TaskScenario]] = {}
    for scenario in scenarios:
        by_domain.setdefault(scenario.primary_domain, []).append(scenario)

    n_refs = len(references)
    n_events = rng.randint(min(max(events_min, n_refs + 1), events_max), events_max)
    n_fill = max(n_events - n_refs, 0)

    events: list[dict[str, Any]] = []
    for ref in references:
        domain = Domain(ref["domain"])
        options = by_domain.get(domain, [])
        activity = _activity(rng.choice(options)) if options else _generic_activity(domain)
        text = ref["text"].strip().rstrip(".")
        events.append(
            {
                "date": ref["date"],
                "domain": domain.value,
                "description": f"{activity} {REFERENCE_MARKER} {text}.",
                "reference_index": ref["index"],
            }
        )

    if n_fill:
        reference_domains = {r["domain"] for r in references}
        filler_domains = [d for d in by_domain if d.value not in reference_domains]
        rng.shuffle(filler_domains)
        earliest = dt.date.fromisoformat(references[0]["date"]) if references else query_date - dt.timedelta(days=30)
        first = earliest - dt.timedelta(days=rng.randint(1, lead))
        taken = {dt.date.fromisoformat(r["date"]) for r in references} | {first}
        free = _free_days(first + dt.timedelta(days=1), query_date - dt.timedelta(days=1), taken)
        others = sorted(rng.sample(free, n_fill - 1)) if len(free) >= n_fill - 1 else sorted(rng.choices(free or [first], k=n_fill - 1))
        for position, date in enumerate([first, *others]):
            if filler_domains:
                domain = filler_domains[position % len(filler_domains)]
                activity = _activity(rng.choice(by_domain[domain]))
            else:
                domain = Domain(query["domain"])
                activity = _generic_activity(domain)
            events.append({"date": date.isoformat(), "domain": domain.value, "description": activity, "reference_index": None})

    events.sort(key=lambda e: (e["date"], e["reference_index"] is None))
    return {"events": events}
