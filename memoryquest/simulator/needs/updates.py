"""The life-update bank: what can change in a user's life, per need category.

The bank is data (``data/updates.json``); each entry becomes a :class:`Generator` whose
slots read the persona through the readers below where it has something to say, and fall
back to word lists. Writing rules, checked by the tests: core sayings start with the
speaker and never repeat the stored core; detail and limit sayings hold no first-person
word; every text carries a cue of its own need and none stronger for another.
"""

from __future__ import annotations

import random
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import cache, partial

from memoryquest.contracts import Domain
from memoryquest.simulator.grammar import clean_value, is_proper, weekdays
from memoryquest.simulator.needs.model import need_scores
from memoryquest.simulator.needs.world import Fill, Grounded, Slot, World, money
from memoryquest.simulator.schema import AffinitySlot, Condition, Part, SlotSource, UpdatesTable
from memoryquest.simulator.tables import DataFileError, load


def _table() -> UpdatesTable:
    return load(UpdatesTable)


@dataclass(frozen=True)
class Generator:
    """One kind of life update: its need, its group (one per user: one allergy, one job change)
    and the conversations it would typically come up in. ``span_days`` bounds how far past the
    earliest allowed day a time-bounded update may run."""

    need: str
    group: str
    domains: tuple[Domain, ...]
    cores: tuple[Part, ...]
    extras: tuple[Part, ...] = ()
    limits: tuple[Part, ...] = ()
    slots: Mapping[str, Slot] = field(default_factory=dict)
    when: Condition | None = None
    span_days: tuple[int, int] = (5, 45)

    def usable(self, world: World) -> bool:
        return fits(self.when, world)

    def grounding(self, world: World) -> int:
        """How far the persona can ground it: 2 its own affinities, 1 its demographics or place, 0 nothing."""
        names = {n for part in self.cores + self.extras for n in part.slots()}
        if any(self.slots[n].profile for n in names if n in self.slots):
            return 2
        if self.when is not None or any(c.when is not None for c in self.cores):
            return 1
        return 1 if any(self.slots[n].persona for n in names if n in self.slots) else 0


def fits(condition: Condition | None, world: World) -> bool:
    """Whether the persona is what ``condition`` asks (None: anyone)."""
    if condition is None:
        return True
    c, people = condition, world.material.demographics
    diet = " ".join(world.values(Domain.RESTAURANTS, "Dietary Restrictions")).casefold()
    religion = (people.religion or "").casefold()
    flags = ("married", "separated", "family", "female", "in_eu")  # as the World has them
    return (
        (c.employment is None or world.employment in c.employment)
        and all(getattr(c, flag) in (None, getattr(world, flag)) for flag in flags)
        and (c.age_from is None or world.age_from >= c.age_from)
        and (c.age_below is None or world.age_from < c.age_below)
        and (c.diet is None or c.diet in diet)
        and not any(word in diet for word in c.diet_without)
        and (not c.religion or any(word in religion for word in c.religion))
        and (c.education is None or c.education in (people.education or "").casefold())
        and (c.abroad is None or bool(world.home_country_abroad) == c.abroad)
        and all(shared_value(world, n) in values for n, values in c.shared.items())
    )


def shared_value(world: World, name: str) -> str:
    """The persona's one value of a shared slot (the pet), whichever generator asks."""
    return world.rng("slot", name).choice(_table().shared[name])


def sport_cause(world: World, rng: random.Random) -> str | None:
    sports = [s.lower() for s in world.values(Domain.SPORTS, "Favorite Sports")]
    own = [f"playing {s}" for s in sports if s in _table().ball_sports]
    own += [s for s in sports if s in {"cycling", "boxing", "snowboarding", "skateboarding"}]
    if own and rng.random() < 0.7:
        return Grounded(rng.choice(own))
    return rng.choice(
        ("on an icy step", "stepping off a curb", "moving furniture", "on a hiking trail")
    )


def allergen(world: World, rng: random.Random) -> str:
    restrictions = " ".join(world.values(Domain.RESTAURANTS, "Dietary Restrictions")).casefold()
    if "nut" in restrictions:
        return Grounded(
            rng.choice(("tree nuts", "cashews", "pistachios", "walnuts", "hazelnuts", "peanuts"))
        )
    return rng.choice(
        ("shellfish", "sesame", "kiwi fruit", "peanuts", "tree nuts", "mustard seed", "celery")
    )


def concert(world: World, rng: random.Random) -> str | None:
    names = world.values(Domain.MUSIC, "Favorite Artists")
    names = [v for v in names + world.values(Domain.MUSIC, "Favorite Bands") if len(v) < 28]
    return f"a {rng.choice(names)} concert" if names else None


def screenings(world: World, rng: random.Random) -> str | None:
    kinds = world.values(Domain.MOVIES, "Theater Type Preference")
    kinds = [v for v in kinds if v in {"IMAX", "3D"}]
    return f"{rng.choice(kinds)} screenings" if kinds else None


def crush(world: World, rng: random.Random) -> str | None:
    teams = [clean_value(v) for v in world.values(Domain.SPORTS, "Favorite Team")]
    teams = [t for t in teams if len(t) < 28 and " " in t]
    return f"getting caught in a crush at a {rng.choice(teams)} match" if teams else None


def heatstroke(world: World, rng: random.Random) -> str | None:
    places = world.values(Domain.TRAVEL, "Frequent Travel Destination")
    places = [v for v in places if v[:1].isupper()]
    return f"a heatstroke on a trip to {rng.choice(places)}" if places else None


def destination(world: World, rng: random.Random) -> str | None:
    # A place whose name reads like a need ("Kruger National Park": parking) would blur the update's need.
    places = world.values(Domain.TRAVEL, "Frequent Travel Destination")
    places = [v for v in places if v[:1].isupper() and not need_scores(v)]
    return rng.choice(places) if places else None


def cuisine_takeaway(world: World, rng: random.Random) -> str | None:
    cuisines = world.values(Domain.RESTAURANTS, "Cuisine Preference")
    cuisines = [v for v in cuisines if v[:1].isupper() and len(v) < 20]
    return f"a {rng.choice(cuisines)} takeaway" if cuisines else None


def earlier_wake(world: World, rng: random.Random) -> str | None:
    times = world.values(Domain.ALARM, "Alarm Time Preference")
    if not times:
        return None
    hour, minute = times[0].split()[0].split(":")
    total = int(hour) * 60 + int(minute) - rng.choice((45, 60, 75, 90))
    return Grounded(f"{total // 60}:{total % 60:02d} AM")


def visa_kind(world: World, rng: random.Random) -> str:
    if world.in_eu:
        return rng.choice(("a US visa", "a UK visa", "an Australian visa"))
    return (
        rng.choice(("a Schengen visa", "a UK visa", "a US visa"))
        if world.country != "United States"
        else "a Schengen visa"
    )


def crowd(world: World, rng: random.Random) -> str:
    """Who a challenge is done with."""
    if world.employment == "student":
        return "classmates"
    return "coworkers" if world.employment in {"full", "part"} else "friends"


def commute_spot(world: World, rng: random.Random) -> str:
    if world.employment == "student":
        return "the library"
    return rng.choice(("the office", "the gym", "the station"))


READERS: dict[str, Fill] = {
    "city": lambda world, rng: world.city or None,
    "country": lambda world, rng: world.country or None,
    "homeland": lambda world, rng: world.home_country_abroad or None,
    "sport_cause": sport_cause,
    "allergen": allergen,
    "concert": concert,
    "screenings": screenings,
    "crush": crush,
    "heatstroke": heatstroke,
    "destination": destination,
    "cuisine_takeaway": cuisine_takeaway,
    "earlier_wake": earlier_wake,
    "visa_kind": visa_kind,
    "crowd": crowd,
    "commute_spot": commute_spot,
}
"""The readers a slot of ``updates.json`` names (``persona``, ``profile``, ``either``)."""


def _reader(name: str, where: str) -> Fill:
    if name not in READERS:
        raise DataFileError(f"{UpdatesTable.file}: {where}: no reader named {name!r}")
    return READERS[name]


def _slot(name: str, source: SlotSource, where: str) -> Slot:
    """A slot's source as the file gives it: an affinity, an amount, a weekday, a word list or a reader."""
    if source.affinity is not None:
        return Slot(partial(_affinity_value, source.affinity), persona=True, profile=True)
    if source.amount:
        return Slot(lambda world, rng: money(world, rng.choice(source.amount)), persona=True)
    if source.weekday is not None:
        return Slot(partial(_weekday, source.weekday), persona=True)
    if source.shared:
        return Slot(lambda world, rng: rng.choice(_table().shared[name]), shared=True)
    if source.pick:
        return Slot(lambda world, rng: rng.choice(source.pick))
    read = _reader(source.persona or source.profile or source.either or "", where)
    if source.persona:
        return Slot(read, persona=True)
    if source.profile:
        return Slot(partial(_grounded, read), persona=True, profile=True)
    return Slot(partial(_either, read, source.fallback), persona=True, mixed=True, profile=True)


def _weekday(index: int, world: World, rng: random.Random) -> str:
    """The persona's ``index``-th weekday of a seeded order: commitments never share a day."""
    order = list(weekdays()[:5])
    world.rng("weekdays").shuffle(order)
    return order[index % len(order)]


def _affinity_value(spec: AffinitySlot, world: World, rng: random.Random) -> str | None:
    """A value of one of the persona's affinities (``proper``: brand or place names only)."""
    options = [clean_value(v) for v in world.values(spec.domain, spec.name)]
    if spec.proper:
        options = [v for v in options if is_proper(v)]
    if spec.exclude:
        options = [v for v in options if not spec.exclude.search(v)]
    # A value that says "you" would read as addressed to the assistant once said in the first person.
    options = [v for v in options if v and len(v) <= 32 and not _YOU.search(v)]
    if not options:
        return None
    value = rng.choice(options)
    return value.lower() if spec.lower and not is_proper(value) else value


def _grounded(read: Fill, world: World, rng: random.Random) -> str | None:
    return Grounded(value) if (value := read(world, rng)) else None


def _either(read: Fill, fallback: tuple[str, ...], world: World, rng: random.Random) -> str:
    """The persona's own value most of the time when it has one, else a word of ``fallback``."""
    value = read(world, rng)
    return Grounded(value) if value and rng.random() < 0.8 else rng.choice(fallback)


_YOU = re.compile(r"\byou\b", re.IGNORECASE)


def _vary(text: str) -> str:
    """Apply the file's wording variants outside slots and existing alternations."""
    pieces = re.split(r"(\{\w+\}|\[[^\]]*\])", text)
    for rule in _table().wording:
        for index in range(0, len(pieces), 2):  # even pieces are plain wording
            if rule.pattern.pattern.startswith("^") and index != 0:
                continue
            changed = rule.pattern.sub(rule.replacement, pieces[index], count=1)
            if changed != pieces[index]:
                pieces[index] = changed
                pieces = re.split(r"(\{\w+\}|\[[^\]]*\])", "".join(pieces))
                break
    return "".join(pieces)


def _varied(parts: tuple[Part, ...]) -> tuple[Part, ...]:
    return tuple(part.model_copy(update={"text": _vary(part.text)}) for part in parts)


@cache
def generators() -> tuple[Generator, ...]:
    """The bank: every generator with its need's generic consequences and wording variants."""
    table = _table()
    out = []
    for index, row in enumerate(table.generators):
        generic = () if row.group in table.without_generic else table.need_extras.get(row.need, ())
        where = f"generators[{index}].slots"  # for an error naming the entry
        slots = {name: _slot(name, s, f"{where}.{name}") for name, s in row.slots.items()}
        cores, extras = _varied(row.cores), _varied(row.extras + generic)
        out.append(Generator(**(dict(row) | {"cores": cores, "extras": extras, "slots": slots})))
    return tuple(out)
