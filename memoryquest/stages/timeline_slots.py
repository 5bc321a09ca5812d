"""The timeline of one query as code plans it, before any prompt, from ids alone.

:func:`plan_slots` makes one slot per reference on the reference's own date and in its
domain, and as many filler slots as references (within ``events_min..events_max``, so half
of every timeline's slots carry a reference whatever its length), the filler on days near
the references' own (within the window the settings allow: from ``lead_days_max`` days
before the earliest reference to the day before the query) and in domains of the persona's
own tasks, which may be the references' domains too. Every slot gets
``news_per_event_min..max`` news items, and each reference a position among its slot's
news. Counts, order and positions come from hashes of ids, so none of them says which slot
is a reference.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from dataclasses import dataclass

from memoryquest.contracts import Domain, Persona, Query, Reference, TaskKind
from memoryquest.ids import draw, make_id
from memoryquest.settings import GenerationSettings


@dataclass(frozen=True)
class Slot:
    """One conversation as code plans it. ``reference`` and ``reference_position`` (where among
    the slot's news the reference goes) stay with code: the prompt shows the rest."""

    event_id: str
    date: dt.date
    domain: Domain
    news_count: int
    reference: Reference | None = None
    reference_position: int | None = None


def filler_domains(persona: Persona, query: Query) -> list[Domain]:
    """The domains of the persona's single-domain tasks (its affinities' when it has none) and of
    the query's references, so that no domain hosts references only; without the query's own:
    references are never in it, so filler there would mark itself."""
    tasks = [t.domains[0] for t in persona.tasks if t.kind == TaskKind.SINGLE_DOMAIN and t.domains]
    found = (set(tasks) or {a.domain for a in persona.affinities}) | {
        r.domain for r in query.references
    }
    found.discard(query.domain)
    return sorted(found or set(Domain) - {query.domain}, key=lambda d: d.value)


def filler_days(
    query: Query, references: Sequence[Reference], count: int, settings: GenerationSettings
) -> list[dt.date]:
    """``count`` filler days, each near a reference's day drawn from ids (within the mean gap
    between the references, either side), so filler days follow the references' own spread
    and a slot's index in its timeline does not set references apart; the lead days before
    the earliest reference hold filler no more often than any other stretch.

    Days stay in the window the settings allow (from ``lead_days_max`` days before the earliest
    reference to the day before the query) and off the references' days while others remain.
    """
    key = query.query_id
    dates = sorted(r.date for r in references)
    first_day = dates[0] - dt.timedelta(days=settings.lead_days_max)
    window = [first_day + dt.timedelta(days=n) for n in range((query.query_date - first_day).days)]
    taken = set(dates)
    free = [day for day in window if day not in taken] or window
    open_days = set(free)
    gap = (
        max(1, round((dates[-1] - dates[0]).days / (len(dates) - 1)))
        if len(dates) > 1
        else settings.lead_days_max
    )
    days: list[dt.date] = []
    for n in range(count):
        for attempt in range(64):
            near = dates[draw(key, "near", n, attempt) % len(dates)]
            shift = draw(key, "shift", n, attempt) % (2 * gap + 1) - gap
            day = near + dt.timedelta(days=shift)
            if day in open_days and day not in days:
                break
        else:  # a window too crowded for a near day: any free one, in an order drawn per query
            unused = [d for d in free if d not in days] or free
            day = min(unused, key=lambda d: draw(key, "day", d.isoformat()))
        days.append(day)
    return days


def plan_slots(persona: Persona, query: Query, settings: GenerationSettings) -> list[Slot]:
    """The timeline's slots in date order, each reference's among them, chosen from ids.

    Filler days are drawn near the references' days (:func:`filler_days`); filler domains go
    round the persona's domains in an order drawn per query; the number of news items is drawn
    per slot index and the reference's position per reference, so neither depends on which
    slot carries a reference.
    """
    key = query.query_id
    references = sorted(query.references, key=lambda r: r.reference_id)
    # One filler slot per reference (as far as the event bounds allow): the share of slots that
    # carry a reference is then the same at every timeline length, so a slot's index and the
    # number of slots after it, which together give the length, say nothing of which carry one.
    wanted = min(max(2 * len(references), settings.events_min), settings.events_max)
    count = max(wanted, len(references))
    days = filler_days(query, references, count - len(references), settings)
    domains = sorted(filler_domains(persona, query), key=lambda d: draw(key, "domain", d.value))
    planned: list[tuple[dt.date, Domain, Reference | None, int]] = [
        (r.date, r.domain, r, draw(key, "order", r.reference_id)) for r in references
    ]
    planned += [
        (day, domains[n % len(domains)], None, draw(key, "order", "filler", n))
        for n, day in enumerate(days)
    ]
    planned.sort(key=lambda p: (p[0], p[3]))
    spread_news = settings.news_per_event_max - settings.news_per_event_min + 1
    slots = []
    for index, (date, domain, reference, _) in enumerate(planned):
        news_count = settings.news_per_event_min + draw(key, "news", index) % spread_news
        position = (
            None
            if reference is None
            else draw(key, "position", reference.reference_id) % news_count
        )
        slots.append(
            Slot(
                event_id=make_id("event", key, index),
                date=date,
                domain=domain,
                news_count=news_count,
                reference=reference,
                reference_position=position,
            )
        )
    return slots
