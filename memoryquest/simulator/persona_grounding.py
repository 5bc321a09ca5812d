"""Turn a persona's real PersonaLens content into conversational material.

Shared by every simulated answer that has to sound like one specific user:

* :func:`affinity_statements` — first-person sentences from the affinities
  ("My favorite authors are Carl Sagan and Stephen Hawking.");
* :func:`task_scenarios` — the persona's tasks as in-situ requests, activities
  and situations;
* :func:`interaction_sentences` — sentences of the interaction summaries moved
  into the first person (the user speaking) or the second (the assistant
  speaking);
* :func:`identity_statements` — first-person sentences from the demographics;
* :func:`life_updates` / :func:`paraphrase_reference` — dated, atomic "things
  that changed" in a domain, built from the affinities, and a natural
  first-person way of saying each one that never repeats it word for word.

Everything is a pure function of its inputs plus a caller-provided
``random.Random``, so simulated answers stay reproducible.
"""

from __future__ import annotations

import datetime as dt
import functools
import random
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from memoryquest.contracts import Affinity, Demographics, Domain, Interaction, PersonaTask, TaskKind
from memoryquest.stages.common import contains_verbatim, normalise_text

# --------------------------------------------------------------------------- persona material


def _name_key(name: str) -> str:
    return re.sub(r"\s+", " ", name.replace("Favourite", "Favorite").replace("favourite", "favorite")).strip().casefold()


@dataclass
class PersonaMaterial:
    """The parts of a persona a simulated answer draws on, indexed for lookup."""

    demographics: Demographics
    affinities: list[Affinity]
    interactions: list[Interaction]
    tasks: list[PersonaTask]

    @classmethod
    def from_variables(cls, variables: dict[str, Any]) -> PersonaMaterial:
        """Rebuild from request variables (the JSON dumps a stage sent)."""
        return cls(
            demographics=Demographics.model_validate(variables.get("demographics") or {}),
            affinities=[Affinity.model_validate(a) for a in variables.get("affinities") or []],
            interactions=[Interaction.model_validate(i) for i in variables.get("interactions") or []],
            tasks=[PersonaTask.model_validate(t) for t in variables.get("tasks") or []],
        )

    def values(self, domain: Domain, name: str) -> list[str]:
        key = _name_key(name)
        for affinity in self.affinities:
            if affinity.domain == domain and _name_key(affinity.name) == key:
                return [v for v in affinity.values if v and v.strip() and v.strip().upper() != "N/A"]
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

    def tasks_in(self, domain: Domain, kind: TaskKind | None = None) -> list[PersonaTask]:
        return [t for t in self.tasks if domain in t.domains and (kind is None or t.kind == kind)]


def join_list(values: Sequence[str], conjunction: str = "and") -> str:
    items = [v for v in values if v]
    if not items:
        return ""
    if len(items) == 1:
        return items[0]
    return f"{', '.join(items[:-1])} {conjunction} {items[-1]}"


_VOWEL_SOUND = re.compile(r"\b([Aa]) (?=(?!one\b|one-|uni|use|usu|eu|ur)[AEIOUaeiou])")
_CONSONANT_SOUND = re.compile(r"\b([Aa])n (?=(?:one\b|one-|uni|use|usu|eu)|[^AEIOUaeiou\W\d])")


def fix_articles(text: str) -> str:
    """'a Intercape coach' -> 'an Intercape coach' (and the reverse), for filled-in templates."""
    text = _VOWEL_SOUND.sub(lambda m: m.group(1) + "n ", text)
    return _CONSONANT_SOUND.sub(lambda m: m.group(1) + " ", text)


def sentence(text: str) -> str:
    """Capitalised, single-spaced, ending in punctuation."""
    text = re.sub(r"\s+", " ", text).strip()
    if not text:
        return text
    text = text[0].upper() + text[1:]
    return text if text[-1] in ".!?" else text + "."


def lower_first(text: str) -> str:
    if len(text) > 1 and text[1].isupper():  # an acronym or a proper noun run ("IMAX", "UK")
        return text
    return text[:1].lower() + text[1:]


# --------------------------------------------------------------------------- affinity statements

# First-person sentence per affinity attribute; {v} is the joined values, {v1} one value.
_AFFINITY_TEMPLATES: dict[str, tuple[str, ...]] = {
    "alarm time preference": ("I like my alarm set for {v}.", "I usually wake up at {v}."),
    "alarm sound preference": ("I prefer {v} as my alarm sound.", "My alarm plays {v}."),
    "alarm recurring preference": ("I have my alarm repeat on {v}.", "My alarm is set to recur on {v}."),
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
    "dietary restrictions": ("I have a dietary restriction: {v}.", "I need to be careful about {v}."),
    "ambiance preference": ("I like a {v} atmosphere.", "I prefer {v} places to eat."),
    "preferred service provider types": ("I prefer {v} providers.", "I go to {v} places for services."),
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
        templates = _AFFINITY_TEMPLATES.get(_name_key(affinity.name))
        if not templates:
            templates = (f"My {affinity.name.lower()} in {affinity.domain.value.lower()} is {{v}}.",)
        template = rng.choice(templates) if rng is not None else templates[0]
        out.append(template.format(v=join_list(values), v1=values[0]))
    return out


# --------------------------------------------------------------------------- person conversion

_ADVERBS = {
    "also", "often", "frequently", "usually", "typically", "generally", "always", "occasionally",
    "sometimes", "consistently", "particularly", "especially", "really", "still", "regularly",
    "then", "now", "even", "mostly", "primarily", "mainly", "increasingly", "recently", "later",
    "further", "actively", "greatly", "highly", "strongly", "clearly", "specifically", "first",
    "initially", "subsequently", "therefore", "never", "rarely", "seldom", "already", "just",
}
_IRREGULAR = {"has": "have", "does": "do", "goes": "go", "focuses": "focus"}
_NOT_VERBS = {"this", "is", "was", "as", "us", "his", "its", "always", "perhaps", "various", "previous"}
_OBJECT_FOLLOWERS = {
    "to", "with", "for", "of", "on", "in", "about", "and", "or", "that", "the", "a", "an", "up",
    "back", "when", "while", "if", "as", "at", "by", "from", "into", "through", "so", "but",
    "whenever", "based", "know", "updated", "informed",
}


def _base_form(word: str) -> str:
    lower = word.lower()
    if lower in _IRREGULAR:
        return _IRREGULAR[lower]
    if lower in _NOT_VERBS or not lower.endswith("s") or lower.endswith(("ss", "us", "is")):
        return word
    if re.search(r"[^aeiou]ies$", lower):
        return word[:-3] + "y"
    if lower.endswith(("ches", "shes", "sses", "xes", "zzes", "oes")):
        return word[:-2]
    return word[:-1]


def _agree(text: str, subject: str, be: str, was: str) -> str:
    """After ``subject`` (I / you), turn third-person verb forms into the matching form."""

    def fix(match: re.Match[str]) -> str:
        lead, adverbs, verb = match.group(1), match.group(2) or "", match.group(3)
        lower = verb.lower()
        if lower == "is":
            new = be
        elif lower == "was":
            new = was
        else:
            new = _base_form(verb)
        return f"{lead}{adverbs}{new}"

    adverb_group = r"((?:(?:" + "|".join(sorted(_ADVERBS)) + r")\s+)*)"
    pattern = re.compile(r"(\b" + subject + r"\s+)" + adverb_group + r"([A-Za-z]+)\b")
    return pattern.sub(fix, text)


_COORDINATED = re.compile(
    r"\b(I|you)\b([^.;:]*?\b(?:and|but|or)\s+)(has|is|needs|wants|requires|prefers|likes|seeks|enjoys|values|"
    r"appreciates|loves|uses|asks|expects|tends|hopes|plans|relies|finds|looks|shows|sends|provides|offers|"
    r"suggests|helps|makes|gives|keeps|takes|allows|ensures|adjusts|remembers|learns|tailors|notes|delivers|"
    r"recommends|responds|handles|understands|supports|tracks|reminds|would like)\b"
)


def _agree_coordinated(text: str) -> str:
    """'I am going on a trip and needs ...' -> '... and need ...'."""

    def fix(match: re.Match[str]) -> str:
        subject, middle, verb = match.group(1), match.group(2), match.group(3)
        if re.search(r"\b(he|she|it|who|which|that)\b", middle, re.IGNORECASE):
            return match.group(0)
        new = {"is": "am" if subject == "I" else "are"}.get(verb, _base_form(verb))
        return f"{subject}{middle}{new}"

    return _COORDINATED.sub(fix, text)


def _looks_like_subject(rest: str) -> bool:
    """Is the word after a pronoun / 'the user' a verb (so the pronoun is a subject)?"""
    words = re.findall(r"[A-Za-z']+", rest)
    for word in words[:3]:
        lower = word.lower()
        if lower in _ADVERBS:
            continue
        if lower in {"has", "is", "was", "had", "does", "did", "can", "could", "will", "would", "may", "might", "should", "must"}:
            return True
        return lower.endswith(("s", "ed")) and lower not in _NOT_VERBS
    return False


_AMBIGUOUS = re.compile(r"\b(they|them|their|theirs|themselves|they're|they've)\b", re.IGNORECASE)


def shift_person(text: str, person: str = "first", *, they_is_user: bool = False) -> str | None:
    """Move a third-person sentence about the user into the first or second person.

    ``person="first"``: the user speaks (I / my / me; the assistant becomes "you").
    ``person="second"``: the assistant speaks to the user (you / your; the
    assistant becomes "I"). Returns None when the sentence cannot be moved
    safely (a "they" that may not mean the user).
    """
    if not they_is_user and _AMBIGUOUS.search(text):
        return None
    user_subj, user_obj, user_poss, user_refl = ("I", "me", "my", "myself") if person == "first" else ("you", "you", "your", "yourself")
    asst_subj, asst_obj, asst_poss = ("you", "you", "your") if person == "first" else ("I", "me", "my")

    out = text
    out = re.sub(r"\bthe (?:virtual |AI |shopping |digital )?assistant's\b", asst_poss, out, flags=re.IGNORECASE)

    def assistant(match: re.Match[str]) -> str:
        return asst_subj if _looks_like_subject(out[match.end():]) else asst_obj

    out = re.sub(r"\bthe (?:virtual |AI |shopping |digital )?assistant\b", assistant, out, flags=re.IGNORECASE)
    out = re.sub(r"\bthe user's\b", user_poss, out, flags=re.IGNORECASE)

    def user(match: re.Match[str]) -> str:
        return user_subj if _looks_like_subject(out[match.end():]) else user_obj

    # Substitute one occurrence at a time so each decision sees the text after it.
    for pattern, handler in ((r"\bthe user\b", user),):
        while True:
            found = re.search(pattern, out, flags=re.IGNORECASE)
            if not found:
                break
            out = out[: found.start()] + handler(found) + out[found.end():]
    out = re.sub(r"\b(he|she)'s\b", "I'm" if person == "first" else "you're", out, flags=re.IGNORECASE)
    out = re.sub(r"\b(he|she)\b", user_subj, out, flags=re.IGNORECASE)
    out = re.sub(r"\bhis\b", user_poss, out, flags=re.IGNORECASE)
    out = re.sub(r"\bhim\b", user_obj, out, flags=re.IGNORECASE)
    out = re.sub(r"\b(himself|herself)\b", user_refl, out, flags=re.IGNORECASE)

    def her(match: re.Match[str]) -> str:
        following = re.match(r"\s*([A-Za-z']+)", out[match.end():])
        if following is None or following.group(1).lower() in _OBJECT_FOLLOWERS:
            return user_obj
        return user_poss

    while True:
        found = re.search(r"\bher\b", out, flags=re.IGNORECASE)
        if not found:
            break
        out = out[: found.start()] + her(found) + out[found.end():]
    if they_is_user:
        out = re.sub(r"\btheir\b", user_poss, out, flags=re.IGNORECASE)
        out = re.sub(r"\bthemselves\b", user_refl, out, flags=re.IGNORECASE)
        out = re.sub(r"\bthem\b", user_obj, out, flags=re.IGNORECASE)
        out = re.sub(r"\bthey're\b", "I'm" if person == "first" else "you're", out, flags=re.IGNORECASE)
        out = re.sub(r"\bthey\b", user_subj, out, flags=re.IGNORECASE)
    out = _agree(out, "I", "am", "was")
    out = _agree(out, "you", "are", "were")
    out = _agree_coordinated(out)
    out = re.sub(r"\bi\b", "I", out)
    return sentence(out)


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
    known = {k: v for k, v in d.model_dump().items() if v and str(v).strip().upper() not in {"N/A", "NA", ""}}
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
        out.append(f"My highest education is a {known['education'].lower().replace('university ', 'university ')}.")
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
    " by ", ", including", ", considering", ", incorporating", " based on", ", taking into account",
    " taking into account", " that match", " that align", " tailored to", ", while", " according to",
    ", prioritizing", " considering", " that fit", " that offer", " within your", " within the",
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


def task_scenarios(tasks: Iterable[PersonaTask]) -> list[TaskScenario]:
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
                activity=sentence(first) if first else sentence(f"Works on a {task.domains[0].value} task"),
                opening=opening or sentence(f"I need help with {intent_core(task.user_intent)}"),
                situation={s.name: s.value for s in task.situations},
            )
        )
    return out


# --------------------------------------------------------------------------- life updates (references)

MONTHS = ("January", "February", "March", "April", "May", "June", "July", "August", "September", "October", "November", "December")
WEEKDAYS = ("Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday")


@dataclass(frozen=True)
class LifeUpdateTemplate:
    """A dated thing that changed in one domain, and natural first-person ways to say it.

    ``text`` is the reference as stored (atomic, subject-less); each paraphrase
    says the same in the user's voice with different wording, so a conversation
    can convey it without pasting it.
    """

    domain: Domain
    text: str
    paraphrases: tuple[str, ...]
    impact: str  # what it constrains: schedule, budget, health, logistics, social, taste
    needs: tuple[str, ...] = ()  # affinity names whose values fill the slots

    def slots(self) -> list[str]:
        return re.findall(r"\{(\w+)\}", self.text)

    def pattern(self) -> re.Pattern[str]:
        return _template_pattern(self.text)


@functools.lru_cache(maxsize=1024)
def _template_pattern(text: str) -> re.Pattern[str]:
    """A regex matching ``text`` with its slots filled, capturing each slot."""
    regex = ""
    position = 0
    for match in re.finditer(r"\{(\w+)\}", text):
        literal = re.escape(text[position : match.start()])
        # fix_articles may have turned "a {slot}" into "an ...".
        regex += re.sub(r"(^|(?<=\\ ))a\\ $", r"\g<1>an?\\ ", literal)
        name = match.group(1)
        regex += f"(?P<{name}>.+?)" if f"(?P<{name}>" not in regex else f"(?P={name})"
        position = match.end()
    regex += re.escape(text[position:])
    return re.compile(regex + r"\.?$", re.IGNORECASE)


def _t(domain: Domain, impact: str, text: str, *paraphrases: str, needs: tuple[str, ...] = ()) -> LifeUpdateTemplate:
    return LifeUpdateTemplate(domain=domain, text=text, paraphrases=paraphrases, impact=impact, needs=needs)


D = Domain
LIFE_UPDATES: tuple[LifeUpdateTemplate, ...] = (
    # Alarm
    _t(D.ALARM, "schedule", "Moved the weekday alarm from {alarm_time} to {earlier_time} after starting an early shift",
       "Since my early shift started, my weekday alarm goes off at {earlier_time} instead of {alarm_time}.",
       "I start work earlier now, so I wake at {earlier_time} on weekdays rather than {alarm_time}.",
       needs=("Alarm Time Preference",)),
    _t(D.ALARM, "health", "Sleeps through the {alarm_sound} alarm and now sets two back to back",
       "I keep sleeping through my {alarm_sound} alarm, so I set two of them one after the other now.",
       "My {alarm_sound} alarm doesn't wake me anymore, which is why I've started setting a second one right after it.",
       needs=("Alarm Sound Preference",)),
    _t(D.ALARM, "schedule", "Turned off all weekend alarms to catch up on sleep until {month_next}",
       "Until {month_next} I've switched off every weekend alarm so I can catch up on sleep.",
       "I'm letting myself sleep in on weekends until {month_next}, no alarms at all."),
    # Books
    _t(D.BOOKS, "social", "Joined a book club that meets on the first {weekday} evening of each month",
       "I'm part of a book club now; we get together the first {weekday} evening every month.",
       "On the first {weekday} of the month I have my book club in the evening."),
    _t(D.BOOKS, "social", "Promised to lend a copy of {book} to a coworker",
       "A coworker is borrowing my copy of {book} — I told them they could have it.",
       "I said I'd lend {book} to someone at work.", needs=("Favorite Books",)),
    _t(D.BOOKS, "health", "Switched to {format} books only after developing eye strain",
       "My eyes have been strained, so I've been sticking to {format} reading.",
       "Because of eye strain I only read {format} books at the moment.", needs=("Reading Format",)),
    _t(D.BOOKS, "taste", "Is halfway through {series} and wants no spoilers",
       "I'm in the middle of {series}, so please no spoilers.",
       "Please don't spoil {series} for me — I'm only halfway.", needs=("Favorite Book Series",)),
    # Buses
    _t(D.BUSES, "logistics", "Got stuck on a {bus_company} coach delayed by five hours",
       "I spent five extra hours on a late {bus_company} coach recently.",
       "My last {bus_company} ride ran five hours late and I was stuck on board.", needs=("Preferred Bus Company",)),
    _t(D.BUSES, "budget", "Bought a ten-ride {bus_company} pass that expires at the end of {month_next}",
       "I've got a {bus_company} ten-ride pass, and it runs out once {month_next} ends.",
       "There's a ten-trip {bus_company} pass in my wallet that's only good through {month_next}.",
       needs=("Preferred Bus Company",)),
    _t(D.BUSES, "health", "Gets motion sick on long rides unless seated by the {seat}",
       "Unless I have a {seat} seat, long rides make me feel sick.",
       "Long trips give me motion sickness if I'm not in a {seat} seat.", needs=("Seat Preference",)),
    # Calendar
    _t(D.CALENDAR, "schedule", "Added recurring {event_type} every other {weekday} evening",
       "Every second {weekday} evening is now taken up by {event_type} on my schedule.",
       "From now on my calendar has {event_type} every other {weekday} night.", needs=("Event Type Preference",)),
    _t(D.CALENDAR, "schedule", "Blocked the last week of {month_next} for a family visit",
       "My family is coming to stay during the last week of {month_next}, so that week is off limits.",
       "I've kept the final week of {month_next} free because family is visiting."),
    _t(D.CALENDAR, "schedule", "Missed two appointments and now wants reminders {notification}",
       "I forgot two appointments recently, so please remind me {notification}.",
       "After missing a couple of appointments I need my reminders {notification}.", needs=("Notification Preference",)),
    # Events
    _t(D.EVENTS, "social", "Prefers {group_size} outings after a crowded festival felt overwhelming",
       "A packed festival overwhelmed me, so I stick to {group_size} outings now.",
       "Ever since a festival crowd got too much for me I only do {group_size} outings.",
       needs=("Group Size Preference",)),
    _t(D.EVENTS, "budget", "Spent this season's entertainment budget on tickets for {event_type}",
       "I've already used up this season's fun money on {event_type}.",
       "Tickets for {event_type} took my whole entertainment budget for the season.", needs=("Event Type Preference",)),
    _t(D.EVENTS, "schedule", "Volunteers at community {event_type} every {weekday}",
       "I help out at {event_type} in my community each {weekday}.",
       "Each {weekday} I volunteer at local {event_type}.", needs=("Event Type Preference",)),
    # Finance
    _t(D.FINANCE, "budget", "Capped monthly spending at ${amount} after a dip in {company} shares",
       "My {company} shares dropped, so I've limited myself to ${amount} a month.",
       "After the {company} slump I set myself a ${amount} monthly spending limit.", needs=("Financial Company",)),
    _t(D.FINANCE, "budget", "Is saving for a down payment and cut discretionary spending by a third",
       "I'm putting money aside for a down payment, so I've trimmed my fun spending by about a third.",
       "To save for a down payment I've reduced what I spend on extras by a third."),
    _t(D.FINANCE, "schedule", "Has quarterly earnings calls for {company} every {weekday} morning this month",
       "This month I'm on {company} earnings calls each {weekday} morning.",
       "Every {weekday} morning this month I listen in on the {company} earnings call.",
       needs=("Financial Company",)),
    # Flights
    _t(D.FLIGHTS, "budget", "Has a stack of {airline} miles that expire in {month_next}",
       "I've got plenty of {airline} miles and they run out in {month_next}.",
       "My {airline} miles lapse in {month_next}, and there are quite a few of them.", needs=("Preferred Airline",)),
    _t(D.FLIGHTS, "logistics", "Was bumped from an overbooked {airline} flight and got a travel voucher",
       "{airline} bumped me off a full flight, but I came away with a travel voucher.",
       "I got a voucher after {airline} overbooked and bumped me.", needs=("Preferred Airline",)),
    _t(D.FLIGHTS, "health", "Avoids red-eye flights after a rough overnight trip; books only {departure} departures",
       "After one awful overnight flight I only book {departure} departures.",
       "No more red-eyes for me — {departure} flights only since that rough night.",
       needs=("Departure Time Preference",)),
    # Games
    _t(D.GAMES, "schedule", "Committed to a weekly online raid night in {game} on {weekday}s",
       "Every {weekday} night I'm online for a raid in {game}; my team counts on me.",
       "I promised my team I'd be on for {game} raids each {weekday}.", needs=("Preferred Game Name",)),
    _t(D.GAMES, "health", "Cut gaming sessions to weekends to protect sleep",
       "I only play on weekends now because late sessions were ruining my sleep.",
       "To sleep better I've kept my gaming to Saturdays and Sundays."),
    _t(D.GAMES, "budget", "Pre-ordered a new {platform} game arriving around the {day_ordinal}",
       "I have a {platform} pre-order that should land around the {day_ordinal}.",
       "I put in a pre-order for a {platform} title; it arrives about the {day_ordinal}.", needs=("Gaming Platforms",)),
    # Hotels
    _t(D.HOTELS, "budget", "Reached elite status with {chain_brand} that includes free late checkout",
       "I hit elite status with {chain_brand}, so late checkout is free for me.",
       "My {chain_brand} elite tier gets me late checkout at no charge.", needs=("Hotel Chains Preference",)),
    _t(D.HOTELS, "health", "Had a noisy stay at a {chain} hotel and now asks for high floors",
       "My last {chain} stay was so loud that I always request a high floor now.",
       "I ask for an upper floor these days — the last {chain} place was too noisy.",
       needs=("Hotel Chains Preference",)),
    # Media
    _t(D.MEDIA, "social", "Rewatches {media} with a friend every Sunday night",
       "A friend and I have a standing Sunday-night rewatch of {media}.",
       "On Sunday nights my friend comes over and we rewatch {media}.", needs=("Favorite Media",)),
    _t(D.MEDIA, "budget", "Cancelled the {platform} subscription to save money",
       "I dropped {platform} to cut costs.",
       "To save a bit I ended my {platform} subscription.", needs=("Viewing Platform Preference",)),
    # Messaging
    _t(D.MESSAGING, "social", "Promised {contact} on {app} to host the next get-together",
       "I told my {contact} over {app} that the next get-together is at my place.",
       "On {app} I offered to host my {contact} next time.", needs=("Frequent Contact", "Preferred Messaging Apps")),
    _t(D.MESSAGING, "schedule", "Mutes all work chats after 7 PM to keep evenings free",
       "From 7 PM on, my work chats are muted so my evenings stay mine.",
       "I silence every work conversation after seven in the evening."),
    _t(D.MESSAGING, "social", "Started a {app} group with {contact} to plan outings",
       "I set up a group on {app} with my {contact} for planning outings.",
       "My {contact} and I now have a group on {app} just for making plans.",
       needs=("Frequent Contact", "Preferred Messaging Apps")),
    # Movies
    _t(D.MOVIES, "budget", "Got a cinema membership with two free {theater} tickets a month",
       "My cinema membership gives me two {theater} tickets free every month.",
       "Each month I get a pair of free {theater} tickets through my membership.", needs=("Theater Type Preference",)),
    _t(D.MOVIES, "health", "Needs {seat_type} seating at the cinema because of back pain",
       "My back has been bad, so I need a {seat_type} seat when I go to the movies.",
       "Back pain means I can only manage a {seat_type} seat at the cinema.", needs=("Seat Type Preference",)),
    # Music
    _t(D.MUSIC, "budget", "Switched to a shared {platform} family plan with a sibling",
       "My sibling and I split a {platform} family plan now.",
       "I'm on a shared {platform} family subscription with my sibling these days.", needs=("Platform Preference",)),
    _t(D.MUSIC, "schedule", "Takes guitar lessons every {weekday} evening and practises {artist} songs",
       "I have guitar lessons on {weekday} evenings, and I've been practising {artist} songs.",
       "On {weekday} nights I'm at guitar class working through {artist} tracks.", needs=("Favorite Artists",)),
    _t(D.MUSIC, "health", "Has ringing ears since a loud concert and must avoid loud venues for a while",
       "Since a very loud concert my ears keep ringing, so I have to stay away from loud places for now.",
       "My ears haven't stopped ringing after a loud gig, and I've been told to avoid noisy venues."),
    # Rental Cars
    _t(D.RENTAL_CARS, "logistics", "Driving licence lapsed and the renewal is still pending",
       "My driver's license expired and the new one hasn't arrived yet.",
       "I can't drive legally until my renewed license shows up — the old one ran out."),
    _t(D.RENTAL_CARS, "budget", "Paid a damage fee on a rented {brand} and now always adds full coverage",
       "I got charged for damage on a {brand} rental, so I always take full coverage now.",
       "Ever since a damage charge on a rented {brand} I buy the full insurance.", needs=("Preferred Car Brand",)),
    _t(D.RENTAL_CARS, "budget", "Joined the {rental_company} loyalty program for free upgrades",
       "I signed up for {rental_company}'s loyalty scheme to get free upgrades.",
       "I'm in the {rental_company} loyalty program now, which gets me upgrades.", needs=("Preferred Rental Company",)),
    # Restaurants
    _t(D.RESTAURANTS, "health", "Had a bad reaction at a {cuisine} restaurant and must avoid cross-contamination",
       "I reacted badly to a meal at a {cuisine} place, so any cross-contamination is a real problem for me.",
       "After getting sick from a {cuisine} dinner I have to be strict about cross-contact in kitchens.",
       needs=("Cuisine Preference",)),
    _t(D.RESTAURANTS, "health", "Started a month-long plant-based challenge",
       "I'm eating only plant-based food for a month as a challenge.",
       "This month I'm on a plant-based challenge, so no meat or dairy for me."),
    _t(D.RESTAURANTS, "budget", "Limits eating out to one {price} dinner a week",
       "I've cut dining out down to a single {price} meal each week.",
       "Only one {price} restaurant meal a week for me now.", needs=("Price Range",)),
    # Services
    _t(D.SERVICES, "health", "Has physiotherapy every {weekday} evening for a sprained ankle",
       "I sprained my ankle and I'm in physio every {weekday} evening.",
       "My ankle is sprained, so {weekday} evenings are for physiotherapy."),
    _t(D.SERVICES, "health", "Had dental surgery and can only eat soft food for two weeks",
       "After my dental surgery I'm on soft food for two weeks.",
       "My dentist put me on soft foods for a fortnight after the operation."),
    _t(D.SERVICES, "schedule", "Moved haircut appointments to {weekday} {appointment_time}s near home",
       "My haircuts are now on {weekday} {appointment_time}s close to home.",
       "I switched my hair appointments to {weekday} {appointment_time}s near where I live.",
       needs=("Appointment Time Preference",)),
    # Shopping
    _t(D.SHOPPING, "budget", "Returned a faulty {brand} purchase and is waiting for a refund",
       "I sent back a broken {brand} item and the refund still hasn't come through.",
       "I'm still out of pocket on a faulty {brand} return.", needs=("Brand Preference",)),
    _t(D.SHOPPING, "budget", "Set a strict {price_pref} budget until the end of {month_next}",
       "Until {month_next} is over I'm sticking to a tight {price_pref} budget.",
       "Through {month_next} my spending has to stay {price_pref}.", needs=("Price Range Preference",)),
    _t(D.SHOPPING, "logistics", "Has a {category} order arriving around the {day_ordinal}",
       "Something I ordered in {category} should be delivered about the {day_ordinal}.",
       "I'm expecting a {category} delivery around the {day_ordinal}.", needs=("Preferred Product Category",)),
    # Sports
    _t(D.SPORTS, "schedule", "Bought a season pass to watch {team} play live",
       "I've got season tickets, so I'm at every home match of {team}.",
       "I paid for a full season of {team} games in person.", needs=("Favorite Team",)),
    _t(D.SPORTS, "schedule", "Joined a weekend {sport} league with games on Sunday mornings",
       "Sunday mornings I play in a {sport} league I just joined.",
       "I signed up for a {sport} league; our games are on Sunday mornings.", needs=("Favorite Sports",)),
    _t(D.SPORTS, "health", "Sprained a wrist playing {sport} and is in a brace for a month",
       "I hurt my wrist at {sport} and I'm wearing a brace for the next month.",
       "My wrist is in a brace for a month after a {sport} injury.", needs=("Favorite Sports",)),
    # Train
    _t(D.TRAIN, "schedule", "Commutes by train to a new office twice a week",
       "Twice a week I now take the train into our new office.",
       "Our office moved, so two days a week I go in by train."),
    _t(D.TRAIN, "budget", "Bought a {train_class} rail pass valid until the end of {month_next}",
       "I have a {train_class} rail pass that's good through the end of {month_next}.",
       "My {train_class} train pass covers me until {month_next} finishes.", needs=("Preferred Train Class",)),
    # Travel
    _t(D.TRAVEL, "logistics", "Passport expires in {month_next} and the renewal is pending",
       "My passport runs out in {month_next} and I'm still waiting on the new one.",
       "I applied to renew my passport; the current one is only valid until {month_next}."),
    _t(D.TRAVEL, "budget", "Used most vacation days on a trip to {destination}",
       "My trip to {destination} ate up most of my vacation days.",
       "I don't have many days off left after going to {destination}.", needs=("Frequent Travel Destination",)),
    _t(D.TRAVEL, "social", "Now travels as a couple, so plans are for two",
       "These days I travel with my partner, so everything is for two people.",
       "My partner comes along on my trips now — I plan for two."),
)


# Updates about the very thing a request is about: what a generator produces when it
# stays on topic. Filled with the request's own core ("plan a weekend getaway"), so
# they sit close to it in meaning and usually push gamma over the threshold.
ECHO_UPDATES: tuple[LifeUpdateTemplate, ...] = tuple(
    _t(D.CALENDAR, "taste", text, *paraphrases)  # the domain is replaced when filled
    for text, *paraphrases in (
        ("Tried to {core} last {season} but had to cancel at the last minute",
         "Last {season} my attempt to {core} fell through at the last minute.",
         "I had to call it off the last time I wanted to {core}, back in the {season}."),
        ("Asked friends for tips on how to {core} and got mixed advice",
         "My friends gave me conflicting tips when I asked how to {core}.",
         "I asked around about how to {core}; everyone told me something different."),
        ("Wants to {core} better than last time",
         "Last time I tried to {core} it didn't go great, and I'd like to do better.",
         "I'm hoping this attempt to {core} goes better than the previous one."),
    )
)


def echo_update(core: str, domain: Domain, rng: random.Random) -> LifeUpdate:
    """An on-topic update about ``core`` (see ECHO_UPDATES), labelled with ``domain``."""
    template = rng.choice(ECHO_UPDATES)
    template = LifeUpdateTemplate(
        domain=domain, text=template.text, paraphrases=template.paraphrases, impact=template.impact
    )
    slots = {"core": core, "season": rng.choice(("spring", "summer", "fall", "winter"))}
    return LifeUpdate(template=template, text=fix_articles(template.text.format(**slots)), slots=slots)


@dataclass(frozen=True)
class LifeUpdate:
    template: LifeUpdateTemplate
    text: str
    slots: dict[str, str]

    @property
    def domain(self) -> Domain:
        return self.template.domain


def _ordinal(day: int) -> str:
    suffix = "th" if 11 <= day % 100 <= 13 else {1: "st", 2: "nd", 3: "rd"}.get(day % 10, "th")
    return f"{day}{suffix}"


_SLOT_AFFINITY: dict[str, str] = {
    "alarm_sound": "Alarm Sound Preference",
    "book": "Favorite Books",
    "format": "Reading Format",
    "series": "Favorite Book Series",
    "bus_company": "Preferred Bus Company",
    "seat": "Seat Preference",
    "event_type": "Event Type Preference",
    "notification": "Notification Preference",
    "group_size": "Group Size Preference",
    "company": "Financial Company",
    "airline": "Preferred Airline",
    "departure": "Departure Time Preference",
    "game": "Preferred Game Name",
    "platform": "",  # per domain, below
    "chain": "Hotel Chains Preference",
    "chain_brand": "Hotel Chains Preference",
    "location_pref": "Location Preference",
    "media": "Favorite Media",
    "contact": "Frequent Contact",
    "app": "Preferred Messaging Apps",
    "theater": "Theater Type Preference",
    "seat_type": "Seat Type Preference",
    "artist": "Favorite Artists",
    "brand": "",  # per domain, below
    "rental_company": "Preferred Rental Company",
    "cuisine": "Cuisine Preference",
    "price": "Price Range",
    "frequency": "Service Frequency Preference",
    "appointment_time": "Appointment Time Preference",
    "price_pref": "Price Range Preference",
    "category": "Preferred Product Category",
    "team": "Favorite Team",
    "sport": "Favorite Sports",
    "train_class": "Preferred Train Class",
    "destination": "Frequent Travel Destination",
}
_DOMAIN_SLOT_AFFINITY: dict[tuple[Domain, str], str] = {
    (D.GAMES, "platform"): "Gaming Platforms",
    (D.MEDIA, "platform"): "Viewing Platform Preference",
    (D.MUSIC, "platform"): "Platform Preference",
    (D.RENTAL_CARS, "brand"): "Preferred Car Brand",
    (D.SHOPPING, "brand"): "Brand Preference",
}


def _earlier(alarm_time: str, minutes: int) -> str | None:
    match = re.match(r"^\s*(\d{1,2}):(\d{2})\s*([AaPp][Mm])\s*$", alarm_time)
    if not match:
        return None
    hour, minute, half = int(match.group(1)), int(match.group(2)), match.group(3).upper()
    total = (hour % 12 + (12 if half == "PM" else 0)) * 60 + minute - minutes
    total %= 24 * 60
    hour24, minute = divmod(total, 60)
    half = "AM" if hour24 < 12 else "PM"
    return f"{(hour24 % 12) or 12}:{minute:02d} {half}"


_PROPER_SLOTS = {"company", "chain_brand", "bus_company", "airline", "rental_company", "team"}
_LOWER_SLOTS = {"event_type", "category", "contact", "seat_type"}
_GENERIC_WORDS = re.compile(r"\b(startups?|brands?|compan(?:y|ies)|corporations?|firms?|businesses)\b", re.IGNORECASE)


def _is_proper(value: str) -> bool:
    """A brand or company name rather than a description ('Apple Inc.' yes, 'Local tech startups' no)."""
    if _GENERIC_WORDS.search(value):
        return False
    words = [w for w in re.findall(r"[A-Za-z][A-Za-z.'&-]*", value) if w.lower() not in {"and", "of", "the", "&"}]
    return bool(words) and all(w[0].isupper() for w in words)


def clean_value(value: str, slot: str = "") -> str:
    """A value ready to drop into a sentence: no parenthetical notes, no trailing stop."""
    value = re.sub(r"\s*\([^)]*\)", "", value)
    value = re.sub(r"\s+", " ", value).strip().rstrip(".").rstrip(",")
    if slot == "seat_type":
        value = re.sub(r"\s+seats?$", "", value, flags=re.IGNORECASE)
    if slot in _LOWER_SLOTS and not _is_proper(value):
        value = value.lower()
    return value


def fill_life_update(
    template: LifeUpdateTemplate, material: PersonaMaterial, date: dt.date, rng: random.Random
) -> LifeUpdate | None:
    """The template with every slot filled from the persona (None when the persona lacks one)."""
    slots: dict[str, str] = {}
    for name in template.slots():
        if name in slots:
            continue
        value: str | None
        if name == "month_next":
            value = MONTHS[(date.month + rng.randint(0, 1)) % 12]
        elif name == "weekday":
            value = rng.choice(WEEKDAYS)
        elif name == "day_ordinal":
            value = _ordinal(rng.randint(2, 28))
        elif name == "amount":
            value = str(rng.choice((300, 400, 500, 600, 800)))
        elif name in {"alarm_time", "earlier_time"}:
            base = material.value(template.domain, "Alarm Time Preference", rng)
            earlier = _earlier(base, rng.choice((30, 45, 60))) if base else None
            if not base or not earlier:
                return None
            slots["alarm_time"], slots["earlier_time"] = base, earlier
            continue
        else:
            affinity = _DOMAIN_SLOT_AFFINITY.get((template.domain, name)) or _SLOT_AFFINITY.get(name, "")
            options = material.values(template.domain, affinity) if affinity else []
            if name in _PROPER_SLOTS or (template.domain, name) == (D.SHOPPING, "brand"):
                options = [v for v in options if _is_proper(v)]
            value = rng.choice(options) if options else None
        if not value:
            return None
        slots[name] = clean_value(value, name)
    text = fix_articles(template.text.format(**slots))
    return LifeUpdate(template=template, text=text, slots=slots)


def life_updates(material: PersonaMaterial, domain: Domain, date: dt.date, rng: random.Random) -> list[LifeUpdate]:
    """Every life update of ``domain`` this persona can ground, in a shuffled order."""
    templates = [t for t in LIFE_UPDATES if t.domain == domain]
    rng.shuffle(templates)
    out = []
    for template in templates:
        filled = fill_life_update(template, material, date, rng)
        if filled is not None:
            out.append(filled)
    return out


def reference_slots(text: str) -> dict[str, str]:
    """The persona values a life-update reference was filled with ({} when it is not one of ours)."""
    for template in LIFE_UPDATES + ECHO_UPDATES:
        match = template.pattern().match(text.strip())
        if match is not None:
            return {k: v for k, v in match.groupdict().items() if v}
    return {}


def paraphrase_reference(text: str, rng: random.Random) -> str:
    """A first-person sentence conveying ``text`` without repeating it word for word."""
    for template in LIFE_UPDATES + ECHO_UPDATES:
        match = template.pattern().match(text.strip())
        if match is None:
            continue
        slots = {k: v for k, v in match.groupdict().items()}
        options = list(template.paraphrases)
        rng.shuffle(options)
        for option in options:
            try:
                said = fix_articles(option.format(**slots))
            except KeyError:
                continue
            if not contains_verbatim(said, text):
                return sentence(said)
    return _generic_paraphrase(text, rng)


_CLAUSE = re.compile(r"^(?P<main>.+?)\s+(?P<clause>(?:after|since|because|until|when|before|so that|while)\s.+)$")
_IRREGULAR_PAST = {"got", "took", "bought", "made", "had", "was", "set", "cut", "put", "went", "began", "paid", "hurt", "left", "lost", "met", "sold", "spent", "told", "won", "wrote", "ran"}


def _voice(main: str) -> str:
    """'Switched to X' -> 'I switched to X'; 'Prefers X' -> 'I prefer X'; 'Allergic to X' -> "I'm allergic to X"."""
    words = main.split()
    if not words:
        return main
    first = words[0]
    lower = first.lower()
    rest = " ".join(words[1:])
    if lower in {"i", "my", "i'm", "i've", "i'd"}:
        return main
    if lower == "is":
        return f"I'm {rest}"
    if lower == "has":
        return f"I have {rest}"
    if lower.endswith("ed") or lower in _IRREGULAR_PAST:
        return f"I {lower} {rest}"
    if lower.endswith("s") and not lower.endswith("ss"):
        return f"I {_base_form(lower)} {rest}"
    return f"I'm {lower_first(main)}"


def _generic_paraphrase(text: str, rng: random.Random) -> str:
    """Fallback for references the simulator did not write itself: re-voice and reorder."""
    body = text.strip().rstrip(".")
    clause_match = _CLAUSE.match(body)
    main, clause = (clause_match.group("main"), clause_match.group("clause")) if clause_match else (body, "")
    voiced = _voice(main).strip()
    if clause:
        said = f"{clause[0].upper()}{clause[1:]}, {lower_first(voiced) if not voiced.startswith('I') else voiced}"
    else:
        opener = rng.choice(("Just so you know,", "For context,", "One thing to keep in mind:", "Worth mentioning:"))
        said = f"{opener} {voiced}"
    said = sentence(said)
    if contains_verbatim(said, text):
        words = said.split()
        at = next((i for i, w in enumerate(words) if w == "I"), 0) + 1
        said = " ".join(words[:at] + ["actually"] + words[at:])
    return said


__all__ = [
    "LIFE_UPDATES",
    "LifeUpdate",
    "LifeUpdateTemplate",
    "PersonaMaterial",
    "TaskScenario",
    "affinity_statements",
    "clean_value",
    "contains_verbatim",
    "echo_update",
    "fill_life_update",
    "identity_statements",
    "intent_core",
    "interaction_sentences",
    "join_list",
    "life_updates",
    "normalise_text",
    "paraphrase_reference",
    "reference_slots",
    "sentence",
    "shift_person",
    "split_sentences",
    "task_scenarios",
]
