"""Turn a persona's real PersonaLens content into conversational material.

Shared by every simulated answer that has to sound like one specific user:

* :class:`PersonaMaterial` — the persona's demographics, affinities,
  interaction summaries and tasks, indexed for lookup;
* :func:`affinity_statements` — first-person sentences from the affinities
  ("My favorite authors are Carl Sagan and Stephen Hawking.");
* :func:`task_scenarios` — the persona's tasks as in-situ requests, activities
  and situations;
* :func:`interaction_sentences` — sentences of the interaction summaries moved
  into the first person (the user speaking) or the second (the assistant
  speaking);
* :func:`identity_statements` — first-person sentences from the demographics.

Grammar helpers (articles, lists, person shifting) live in
:mod:`memoryquest.simulator.grammar` and are re-exported here; life updates
live in :mod:`memoryquest.simulator.needs`.

Everything is a pure function of its inputs plus a caller-provided
``random.Random``, so simulated answers stay reproducible.
"""

from __future__ import annotations

import functools
import random
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from memoryquest.contracts import Affinity, Demographics, Domain, Interaction, TaskBrief, TaskKind
from memoryquest.simulator.grammar import (
    MONTHS,
    WEEKDAYS,
    clean_value,
    fix_articles,
    join_list,
    lower_first,
    name_key,
    sentence,
    shift_person,
)
from memoryquest.text import contains_verbatim, normalise_text

# --------------------------------------------------------------------------- persona material


@dataclass
class PersonaMaterial:
    """The parts of a persona a simulated answer draws on, indexed for lookup."""

    demographics: Demographics
    affinities: list[Affinity]
    interactions: list[Interaction]
    tasks: list[TaskBrief]

    @classmethod
    def from_variables(cls, variables: dict[str, Any]) -> PersonaMaterial:
        """Rebuild from request variables (the JSON dumps a stage sent)."""
        return cls(
            demographics=Demographics.model_validate(variables.get("demographics") or {}),
            affinities=[Affinity.model_validate(a) for a in variables.get("affinities") or []],
            interactions=[
                Interaction.model_validate(i) for i in variables.get("interactions") or []
            ],
            tasks=[TaskBrief.model_validate(t) for t in variables.get("tasks") or []],
        )

    def values(self, domain: Domain, name: str) -> list[str]:
        key = name_key(name)
        for affinity in self.affinities:
            if affinity.domain == domain and name_key(affinity.name) == key:
                return [
                    v for v in affinity.values if v and v.strip() and v.strip().upper() != "N/A"
                ]
        return []

    def value(self, domain: Domain, name: str, rng: random.Random, default: str = "") -> str:
        found = self.values(domain, name)
        return rng.choice(found) if found else default

    def domains(self) -> list[Domain]:
        """Domains the persona has affinities in, in Domain order."""
        present = {a.domain for a in self.affinities}
        return [d for d in Domain if d in present]

    def interaction(self, domain: Domain) -> str | None:
        for item in self.interactions:
            if item.domain == domain:
                return item.summary
        return None

    def tasks_in(self, domain: Domain, kind: TaskKind | None = None) -> list[TaskBrief]:
        return [t for t in self.tasks if domain in t.domains and (kind is None or t.kind == kind)]


# --------------------------------------------------------------------------- affinity statements

# First-person sentence per affinity attribute; {v} is the joined values, {v1} one value.
_AFFINITY_TEMPLATES: dict[str, tuple[str, ...]] = {
    "alarm time preference": ("I like my alarm set for {v}.", "I usually wake up at {v}."),
    "alarm sound preference": ("I prefer {v} as my alarm sound.", "My alarm plays {v}."),
    "alarm recurring preference": (
        "I have my alarm repeat on {v}.",
        "My alarm is set to recur on {v}.",
    ),
    "genre": ("I mostly read {v}.", "My favorite book genres are {v}."),
    "favorite authors": ("My favorite authors are {v}.", "I love books by {v}."),
    "favorite books": ("Some of my favorite books are {v}.", "I really enjoyed {v}."),
    "favorite book series": ("My favorite book series is {v}.", "I'm a big fan of the {v} series."),
    "reading format": ("I read in {v} format.", "I like reading {v} books."),
    "reading time preference": ("I usually read in the {v}.", "My reading time is mostly the {v}."),
    "reading frequency": ("I read {v}.", "I pick up a book {v}."),
    "preferred bus company": ("I usually travel with {v}.", "My go-to bus companies are {v}."),
    "travel frequency": ("I take the bus {v}.", "I ride the bus {v}."),
    "seat preference": ("I always ask for a {v} seat.", "I prefer a {v} seat."),
    "departure time preference": ("I like to leave in the {v}.", "I prefer {v} departures."),
    "event type preference": ("I mostly go to {v}.", "I'm into {v}."),
    "notification preference": ("I like reminders {v}.", "I want my notifications {v}."),
    "timezone": ("My time zone is {v}.", "I'm on {v} time."),
    "price range": ("My budget is usually {v}.", "I tend to spend {v}."),
    "group size preference": ("I prefer going in a {v}.", "I like {v} outings best."),
    "seating preference": ("I usually pick {v} seating.", "I prefer {v} seating."),
    "days of week preference": ("I'm usually free on {v}.", "I like to go out on {v}."),
    "preferred sectors": ("I follow the {v} sectors.", "I invest mostly in {v}."),
    "news sources": ("I get my market news from {v}.", "I rely on {v} for financial news."),
    "financial company": ("I keep an eye on {v}.", "I follow {v} closely."),
    "preferred airline": ("I prefer flying with {v}.", "My preferred airlines are {v}."),
    "seat class preference": ("I usually fly {v}.", "I book {v} when I can."),
    "layover preference": ("I prefer {v} flights.", "I go for {v} connections."),
    "preferred game genres": ("I mostly play {v} games.", "My favorite game genres are {v}."),
    "gaming platforms": ("I game on {v}.", "I play on {v}."),
    "multiplayer preference": ("I like {v} games.", "I enjoy {v} modes."),
    "gaming frequency": ("I game {v}.", "My gaming routine is {v}."),
    "preferred game name": ("I love playing {v}.", "Some of my favorite games are {v}."),
    "hotel chains preference": ("I usually stay at {v} hotels.", "My preferred hotels are {v}."),
    "amenity preference": ("I look for {v}.", "I want {v} where I stay."),
    "location preference": ("I prefer places {v}.", "I like to be {v}."),
    "star rating preference": ("I book {v} hotels.", "I stick to {v} places."),
    "room type preference": ("I usually book a {v} room.", "I prefer a {v}."),
    "preferred genres": ("I enjoy {v}.", "My favorite genres are {v}."),
    "favorite actors and directors": ("I'm a fan of {v}.", "I follow the work of {v}."),
    "favorite media": ("Some of my favorites are {v}.", "I loved {v}."),
    "viewing platform preference": ("I watch on {v}.", "I stream on {v}."),
    "preferred messaging apps": ("I message people on {v}.", "I mostly use {v} to chat."),
    "communication style": ("I prefer {v} messages.", "I communicate mostly by {v}."),
    "frequent contact": ("I mostly message my {v}.", "I chat a lot with my {v}."),
    "preferred communication style": ("I keep my messages {v}.", "My tone is usually {v}."),
    "theater type preference": ("I like watching films in {v}.", "I prefer {v} screenings."),
    "viewing time preference": ("I go to the movies in the {v}.", "I watch films in the {v}."),
    "seat type preference": ("I like {v} seats at the cinema.", "I pick {v} seats."),
    "favorite artists": ("I listen to {v} a lot.", "My favorite artists are {v}."),
    "favorite bands": ("I love {v}.", "My favorite bands are {v}."),
    "favorite albums": ("I keep coming back to {v}.", "My favorite albums are {v}."),
    "platform preference": ("I stream music on {v}.", "I listen on {v}."),
    "preferred audio quality": ("I care about {v} audio.", "I like my music in {v} quality."),
    "playlist preference": ("I often play {v}.", "My playlists include {v}."),
    "car type preference": ("I rent {v} cars.", "I prefer a {v} when I rent."),
    "preferred rental company": ("I rent from {v}.", "My usual rental companies are {v}."),
    "preferred car brand": ("I like driving {v}.", "My preferred car brands are {v}."),
    "rental duration preference": ("I usually rent for {v}.", "My rentals tend to last {v}."),
    "additional feature preference": ("I want {v} in a rental car.", "I always add {v}."),
    "preferred fuel type": ("I prefer {v} cars.", "I go for {v} vehicles."),
    "cuisine preference": ("I love {v} food.", "My favorite cuisines are {v}."),
    "dietary restrictions": (
        "I have a dietary restriction: {v}.",
        "I need to be careful about {v}.",
    ),
    "ambiance preference": ("I like a {v} atmosphere.", "I prefer {v} places to eat."),
    "preferred service provider types": (
        "I prefer {v} providers.",
        "I go to {v} places for services.",
    ),
    "appointment time preference": ("I book appointments in the {v}.", "I like {v} appointments."),
    "service frequency preference": ("I book services {v}.", "I go {v}."),
    "service provider gender preference": ("For service providers my gender preference is {v}.",),
    "preferred product category": ("I mostly shop for {v}.", "I buy a lot of {v}."),
    "price range preference": ("I usually shop {v}.", "My budget is {v}."),
    "brand preference": ("I like {v}.", "My favorite brands are {v}."),
    "favorite sports": ("I love {v}.", "My favorite sports are {v}."),
    "favorite team": ("I support the {v}.", "I'm a fan of the {v}."),
    "viewing preference": ("I like watching sports {v}.", "I prefer to watch games {v}."),
    "preferred train class": ("I travel {v} on trains.", "I book {v} tickets."),
    "travel time preference": ("I prefer to travel in the {v}.", "I like {v} trains."),
    "preferred seat type": ("I take an {v} seat on trains.", "I prefer an {v} seat."),
    "preferred destination types": ("I love {v} destinations.", "I travel for {v} experiences."),
    "duration preference": ("My trips usually last {v}.", "I like trips of {v}."),
    "frequent travel destination": ("I often travel to {v}.", "I keep going back to {v}."),
    "travel season preference": ("I like to travel in {v}.", "My favorite travel seasons are {v}."),
}


def affinity_statements(
    affinities: Iterable[Affinity], domain: Domain | None = None, rng: random.Random | None = None
) -> list[str]:
    """One first-person sentence per affinity (of ``domain`` if given)."""
    out: list[str] = []
    for affinity in affinities:
        if domain is not None and affinity.domain != domain:
            continue
        values = [v for v in affinity.values if v and v.strip() and v.strip().upper() != "N/A"]
        if not values:
            continue
        templates = _AFFINITY_TEMPLATES.get(name_key(affinity.name))
        if not templates:
            templates = (
                f"My {affinity.name.lower()} in {affinity.domain.value.lower()} is {{v}}.",
            )
        template = rng.choice(templates) if rng is not None else templates[0]
        out.append(template.format(v=join_list(values), v1=values[0]))
    return out


_SENTENCE_SPLIT = re.compile(r"(?<=[.!?])\s+(?=[A-Z])")
_BOILERPLATE = re.compile(
    r"year[- ]old|years old|aged \d|interacts? with the|engages? with the|native speaker|"
    r"working professional from|from (?:the )?[A-Z][a-z]+ (?:with|working)",
    re.IGNORECASE,
)


def split_sentences(text: str) -> list[str]:
    return [s.strip() for s in _SENTENCE_SPLIT.split(re.sub(r"\s+", " ", text)) if s.strip()]


def interaction_sentences(summary: str | None, person: str = "first") -> list[str]:
    """Sentences of an interaction summary that can be said by (first) or to (second) the user."""
    if not summary:
        return []
    return list(_interaction_sentences(summary, person))


@functools.lru_cache(maxsize=4096)
def _interaction_sentences(summary: str, person: str) -> tuple[str, ...]:
    out: list[str] = []
    for raw in split_sentences(summary):
        if _BOILERPLATE.search(raw) or not 40 <= len(raw) <= 260:
            continue
        if not re.search(r"\b(the user|he|she|his|her)\b", raw, re.IGNORECASE):
            continue
        moved = shift_person(raw, person)
        if moved is None or re.search(r"\buser\b", moved, re.IGNORECASE):
            continue
        out.append(moved)
    return tuple(out)


def identity_statements(demographics: Demographics) -> list[str]:
    """First-person sentences from the demographics (skips unknown values)."""
    d = demographics
    out: list[str] = []
    known = {
        k: v
        for k, v in d.model_dump().items()
        if v and str(v).strip().upper() not in {"N/A", "NA", ""}
    }
    if "age" in known:
        out.append(f"I'm {known['age'].replace('years old', 'years old').strip()}.")
    employment = known.get("employment_status", "")
    if employment:
        lowered = employment.lower()
        if lowered.startswith("working"):
            out.append(f"I'm {lowered}.")
        elif lowered in {"student", "retired", "unemployed", "self-employed", "homemaker"}:
            out.append(f"I'm {'a ' if lowered in {'student', 'homemaker'} else ''}{lowered}.")
        else:
            out.append(f"My employment status: {lowered}.")
    if "education" in known:
        out.append(
            f"My highest education is a {known['education'].lower().replace('university ', 'university ')}."
        )
    if "reside_country" in known:
        out.append(f"I live in {known['reside_country']}.")
    if "birth_country" in known and known.get("birth_country") != known.get("reside_country"):
        out.append(f"I was born in {known['birth_country']}.")
    if "marital_status" in known:
        status = known["marital_status"].lower()
        if status in {"married", "divorced", "widowed", "separated"}:
            out.append(f"I'm {status}.")
        elif "never" in status:
            out.append("I've never been married.")
    if "religion" in known:
        out.append(f"My religion is {known['religion']}.")
    return out


# --------------------------------------------------------------------------- task scenarios

_INTENT_CUTS = (
    " by ",
    ", including",
    ", considering",
    ", incorporating",
    " based on",
    ", taking into account",
    " taking into account",
    " that match",
    " that align",
    " tailored to",
    ", while",
    " according to",
    ", prioritizing",
    " considering",
    " that fit",
    " that offer",
    " within your",
    " within the",
)


def _second_to_first(text: str) -> str:
    text = re.sub(r"\byour\b", "my", text)
    text = re.sub(r"\bYour\b", "My", text)
    text = re.sub(r"\byou're\b", "I'm", text)
    text = re.sub(r"\byou've\b", "I've", text)
    text = re.sub(r"\byou'd\b", "I'd", text)
    text = re.sub(r"\byourself\b", "myself", text)
    text = re.sub(r"\byou (?=[a-z]+\b)", "I ", text)
    return re.sub(r"\byou\b", "me", text)


@dataclass(frozen=True)
class TaskScenario:
    """One persona task, phrased the ways a dialogue or a query needs it."""

    task_id: str
    kind: TaskKind
    domains: tuple[Domain, ...]
    core: str  # "plan a weekend getaway" (first person, lower-case, no final stop)
    activity: str  # third person: "The user needs to set a new alarm ..."
    opening: str  # first person: "I need to set a new alarm ..."
    situation: dict[str, str] = field(default_factory=dict)

    @property
    def primary_domain(self) -> Domain:
        return self.domains[0]

    def situation_phrase(self) -> str:
        """'I'm on my laptop in Toronto, Canada this Friday evening.' (whatever is known)."""
        device = self.situation.get("Device", "").lower()
        location = self.situation.get("Location", "")
        time_of_day = self.situation.get("Time of Day", "").lower()
        parts = []
        if device:
            parts.append(f"on my {device}")
        if location:
            parts.append(f"in {location}")
        if time_of_day:
            parts.append(f"this {time_of_day}")
        return sentence("I'm " + " ".join(parts)) if parts else ""


def intent_core(intent: str) -> str:
    """'Plan a weekend getaway by finding ...' -> 'plan a weekend getaway'."""
    text = intent.strip().rstrip(".")
    cut = len(text)
    for marker in _INTENT_CUTS:
        position = text.find(marker)
        if 12 <= position < cut:
            cut = position
    text = text[:cut].strip().rstrip(",")
    text = re.sub(r"\[[^\]]*\]", "an upcoming occasion", text)
    # The request supplies its own date; drop the intent's relative one.
    text = re.sub(r"\s+(?:for tomorrow|for the next day|this weekend|for this weekend)$", "", text)
    return lower_first(_second_to_first(text))


def task_scenarios(tasks: Iterable[TaskBrief]) -> list[TaskScenario]:
    out: list[TaskScenario] = []
    for task in tasks:
        if not task.domains:
            continue
        first = split_sentences(task.description)[0] if task.description.strip() else ""
        opening = shift_person(first, "first", they_is_user=True) if first else None
        out.append(
            TaskScenario(
                task_id=task.task_id,
                kind=task.kind,
                domains=tuple(task.domains),
                core=intent_core(task.user_intent or task.description),
                activity=sentence(first)
                if first
                else sentence(f"Works on a {task.domains[0].value} task"),
                opening=opening or sentence(f"I need help with {intent_core(task.user_intent)}"),
                situation={s.name: s.value for s in task.situations},
            )
        )
    return out


__all__ = [
    "MONTHS",
    "WEEKDAYS",
    "PersonaMaterial",
    "TaskScenario",
    "affinity_statements",
    "clean_value",
    "contains_verbatim",
    "fix_articles",
    "identity_statements",
    "intent_core",
    "interaction_sentences",
    "join_list",
    "lower_first",
    "normalise_text",
    "sentence",
    "shift_person",
    "split_sentences",
    "task_scenarios",
]
