"""A persona seen as the place its life updates happen, and where an update's slot values come from.

:class:`World` derives what the bank needs (employment, family, city, currency) and hands
out random generators seeded by the persona alone, so a choice made for one user is the
same in every call.
"""

from __future__ import annotations

import hashlib
import json
import random
import re
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from functools import cached_property

from memoryquest.contracts import Domain, TaskKind
from memoryquest.simulator.persona_grounding import PersonaMaterial
from memoryquest.simulator.schema import Currency, WorldTable
from memoryquest.simulator.tables import load


class World:
    """A persona seen as the place its life updates happen: derived facts and seeded choices."""

    def __init__(self, material: PersonaMaterial) -> None:
        self.material = material
        payload = json.dumps(
            [
                material.demographics.model_dump(mode="json"),
                [a.model_dump(mode="json") for a in material.affinities],
            ],
            sort_keys=True,
        )
        self.key = hashlib.sha256(payload.encode()).hexdigest()[:24]

    def rng(self, *parts: object) -> random.Random:
        """A generator seeded by the persona and ``parts`` only: the same choice in every call."""
        digest = hashlib.sha256("|".join([self.key, *map(str, parts)]).encode()).hexdigest()
        return random.Random(int(digest[:16], 16))

    def values(self, domain: Domain, name: str) -> list[str]:
        return self.material.values(domain, name)

    @cached_property
    def employment(self) -> str:
        """full, part, student, seeking, retired, home or other."""
        status = (self.material.demographics.employment_status or "").casefold()
        for word, kind in (
            ("full-time", "full"),
            ("part-time", "part"),
            ("student", "student"),
            ("unemployed", "seeking"),
            ("retired", "retired"),
            ("homemaker", "home"),
        ):
            if word in status:
                return kind
        return "other"

    @cached_property
    def married(self) -> bool:
        return (self.material.demographics.marital_status or "").casefold() == "married"

    @cached_property
    def separated(self) -> bool:
        status = (self.material.demographics.marital_status or "").casefold()
        return "divorced" in status or "separated" in status

    @cached_property
    def female(self) -> bool:
        return (self.material.demographics.gender or "").casefold() == "female"

    @cached_property
    def age_from(self) -> int:
        match = re.match(r"\s*(\d+)", self.material.demographics.age or "")
        return int(match.group(1)) if match else 30

    @cached_property
    def country(self) -> str:
        return (self.material.demographics.reside_country or "").strip()

    @cached_property
    def home_country_abroad(self) -> str:
        """The birth country when the persona lives elsewhere, else ''."""
        born = (self.material.demographics.birth_country or "").strip()
        if born and born.upper() != "N/A" and self.country and born != self.country:
            return born
        return ""

    @cached_property
    def city(self) -> str:
        places = Counter(
            s.value.split(",")[0].strip()
            for task in self.material.tasks
            for s in task.situations
            if s.name == "Location" and s.value.strip()
        )
        return places.most_common(1)[0][0] if places else ""

    @cached_property
    def in_eu(self) -> bool:
        return self.country in load(WorldTable).eu_countries

    @cached_property
    def family(self) -> bool:
        """Whether the profile gives grounds for children in the household."""
        travel = " ".join(self.values(Domain.TRAVEL, "Group Size Preference")).casefold()
        return (
            self.employment == "home"
            or "family" in travel
            or (self.married and self.age_from >= 25)
        )

    def task_domains(self) -> set[Domain]:
        """Domains in which the persona has single-domain tasks (a timeline can host a chat there)."""
        return {
            d for t in self.material.tasks if t.kind == TaskKind.SINGLE_DOMAIN for d in t.domains
        }


def money(world: World, base: float) -> str:
    """``base`` (in euros) in the persona's currency, rounded to a figure a person would say."""
    currency = load(WorldTable).currencies.get(world.country, Currency(prefix="€", rate=1.0))
    value = base * currency.rate
    step = 10 if value < 300 else 50 if value < 2000 else 500
    rounded = max(step, int(round(value / step)) * step)
    return f"{currency.prefix}{rounded:,}{currency.suffix}"


class Grounded(str):
    """A slot value read from the persona's profile (as opposed to a word list)."""


Fill = Callable[[World, random.Random], "str | None"]


@dataclass(frozen=True)
class Slot:
    """Where a slot's value comes from. ``persona`` marks values read from the profile."""

    fill: Fill
    persona: bool = False
    shared: bool = False  # one value per persona across generators (the pet's name)
    mixed: bool = False  # the persona's value when it has one, else a word (Grounded says which)
    profile: bool = False  # read from the persona's own affinities, not its demographics
