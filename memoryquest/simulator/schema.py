"""The schema of every simulator data file: one :class:`Table` per file, listed in :data:`TABLES`.

Rows have named fields, patterns are compiled (a list of strings is one pattern in
pieces), and mappings indexed by every domain or kind of request must have them all.
"""

from __future__ import annotations

import re
from functools import cached_property
from typing import Annotated, Any, Literal, TypeVar, get_args

from pydantic import BeforeValidator, ValidationInfo, model_validator

from memoryquest.contracts import Domain
from memoryquest.simulator.tables import Row, Table, compiled, complete
from memoryquest.text import stem

T = TypeVar("T")
Phrases = tuple[str, ...]
Words = frozenset[str]
Regex = Annotated[re.Pattern[str], BeforeValidator(compiled())]
Caseless = Annotated[re.Pattern[str], BeforeValidator(compiled(re.IGNORECASE))]
Kind = Literal["settings", "booking", "recommend", "info", "message", "schedule", "plan", "shop"]
"""What a conversation's request asks of the assistant."""
ByDomain = Annotated[dict[Domain, T], complete(Domain)]
ByKind = Annotated[dict[Kind, T], complete(get_args(Kind))]


class Rewrite(Row):
    """A pattern and what replaces it."""

    pattern: Regex
    replacement: str


class CaselessRewrite(Row):
    pattern: Caseless
    replacement: str


class PersonWords(Row):
    """How the speaker is said in one grammatical person."""

    subj: str
    subj_be: str
    obj: str
    poss: str
    pron: str
    refl: str


class GrammarTable(Table):
    file = "grammar.json"
    months: Phrases
    weekdays: Phrases
    number_words: Phrases
    adverbs: Words  # may stand between a subject and its verb
    base_forms: dict[str, str]  # third-person singular -> base form, where the rule fails
    third_singulars: dict[str, str]  # base form -> third-person singular, where the rule fails
    not_verbs: Words  # end in -s without being a verb
    auxiliaries: Words  # after a pronoun, make it the subject
    modals: Words
    irregular_past: Words
    coordinated_verbs: Phrases  # "I ... and needs" -> "I ... and need"
    object_followers: Words  # "her" before these is an object, not a possessive
    common_starters: Words  # besides stopwords, opening words lowered after a lead-in
    generic_words: Phrases  # pattern pieces: descriptions, never brand or place names
    speaker_forms: tuple[Rewrite, ...]  # the speaker's first person, {subj} ... filled per person
    person_words: dict[Literal["first", "second", "third"], PersonWords]
    addressee_forms: tuple[Rewrite, ...]  # "you" of the assistant's words said by the user
    fact_starts: tuple[CaselessRewrite, ...]  # "I'm" -> "Is": a first-person clause as a fact
    fact_leads: tuple[CaselessRewrite, ...]  # "is" -> "I'm": a fact said in the first person


class BridgeTable(Table):
    file = "bridges.json"
    scenes: ByDomain[Phrases]  # kinds of plan a change in someone's life gets in the way of
    connectives: Phrases
    hedges: Phrases  # "" for none
    frames: Phrases  # what the update does to the {scene}


class Cues(Row):
    """Words pointing to a need: naming it outright, typical of it, merely leaning towards it."""

    strong: Phrases
    typical: Phrases = ()
    weak: Phrases = ()


class Need(Row):
    """One category of personal circumstance that can change how a plan works out.

    Simulated PGR asks ``probe`` about it for a plan step (``{step}``), one side
    (``facets``) at a time, and ``follow``s up a retrieved fact (``{focus}``).
    """

    key: str
    label: str
    probe: str
    facets: Phrases
    follow: str
    rationale: str
    cues: Cues

    @property
    def constraints(self) -> str:
        """The side of the need a probe asks about first."""
        return self.facets[0]

    @cached_property
    def weights(self) -> dict[str, int]:
        """Cue stems and their weight: 3 names the need outright, 2 is typical, 1 leans towards it."""
        out: dict[str, int] = {}
        for weight, words in ((1, self.cues.weak), (2, self.cues.typical), (3, self.cues.strong)):
            out.update((stem(word.casefold()), weight) for word in words)
        return out


class StepRow(Row):
    key: str
    phrase: str  # gerund phrase: "choosing the restaurant"
    needs: Phrases


class NeedsTable(Table):
    file = "needs.json"
    needs: tuple[Need, ...]  # in the order a plan usually meets them
    plans: ByDomain[tuple[StepRow, ...]]
    domain_cues: ByDomain[Caseless]

    @model_validator(mode="after")
    def _known_needs(self) -> NeedsTable:
        known = {need.key for need in self.needs}
        for domain, steps in self.plans.items():
            for step in steps:
                if unknown := set(step.needs) - known:
                    raise ValueError(f"plans.{domain}.{step.key}: unknown need {min(unknown)!r}")
        return self


Employment = Literal["full", "part", "student", "seeking", "retired", "home", "other"]


class Condition(Row):
    """What a persona must be for a generator or a wording to fit it: every field given holds."""

    employment: frozenset[Employment] | None = None
    married: bool | None = None
    separated: bool | None = None
    family: bool | None = None
    female: bool | None = None
    age_from: int | None = None  # the age band starts at this or later
    age_below: int | None = None  # ... and before this
    diet: str | None = None  # the dietary restrictions mention this
    diet_without: Phrases = ()  # ... and none of these
    religion: Phrases = ()  # the religion mentions one of these
    education: str | None = None
    abroad: bool | None = None  # lives outside the country of birth
    in_eu: bool | None = None
    shared: dict[str, Phrases] = {}  # the persona's shared slot value is one of these


class Part(Row):
    """Stored wording (third person, no subject) and the first-person ways of saying it."""

    text: str
    sayings: Phrases
    when: Condition | None = None

    def slots(self) -> list[str]:
        return re.findall(r"\{(\w+)\}", self.text)


def _named_part(value: Any, info: ValidationInfo) -> Any:
    """A part given by name is one of the file's ``parts``."""
    if not isinstance(value, str):
        return value
    parts = info.context.get("parts", {}) if isinstance(info.context, dict) else {}
    if value not in parts:
        raise ValueError(f"no part named {value!r}")
    return parts[value]


Parts = tuple[Annotated[Part, BeforeValidator(_named_part)], ...]


class AffinitySlot(Row):
    domain: Domain
    name: str
    proper: bool = False  # brand or place names only
    lower: bool = False  # lower-cased unless a name
    exclude: Caseless | None = None


class SlotSource(Row):
    """Where a slot's value comes from: one of a word list, the persona or a reader of it."""

    pick: Phrases = ()
    shared: bool = False  # one value per persona across generators, from the file's ``shared``
    amount: tuple[int, ...] = ()  # euros, said in the persona's currency
    weekday: int | None = None  # the persona's n-th weekday of a seeded order
    affinity: AffinitySlot | None = None
    persona: str | None = None  # a reader of the persona (see needs.updates)
    profile: str | None = None  # ... of its own affinities
    either: str | None = None  # ... most of the time, else a word of ``fallback``
    fallback: Phrases = ()

    @model_validator(mode="after")
    def _one_source(self) -> SlotSource:
        given = [name for name in self.model_fields_set if name != "fallback"]
        if len(given) != 1:
            raise ValueError(f"one source expected, got {sorted(given) or 'none'}")
        if self.either and not self.fallback:
            raise ValueError("'either' needs a 'fallback'")
        return self


TIME_SLOTS = frozenset({"until", "span", "month"})
"""Slots filled from the dates: a last day ("May 20", "the 20th"), a duration ("six weeks"), a month's end."""


class GeneratorRow(Row):
    """One kind of life update; see :class:`memoryquest.simulator.needs.updates.Generator`."""

    need: str
    group: str
    domains: tuple[Domain, ...]
    cores: Parts
    extras: Parts = ()
    limits: Parts = ()
    slots: dict[str, SlotSource] = {}
    when: Condition | None = None
    span_days: tuple[int, int] = (5, 45)

    @model_validator(mode="after")
    def _sourced(self) -> GeneratorRow:
        used = {n for part in self.cores + self.extras + self.limits for n in part.slots()}
        if missing := used - TIME_SLOTS - set(self.slots):
            raise ValueError(f"no source for slot {min(missing)!r}")
        return self


class UpdatesTable(Table):
    file = "updates.json"
    parts: dict[str, Part]  # named parts the generators share
    shared: dict[str, Phrases]
    generators: tuple[GeneratorRow, ...]
    need_extras: dict[str, Parts]  # consequences that fit every generator of a need
    wording: tuple[Rewrite, ...]  # stored-text variants: a phrase becomes "[a|b]"
    without_generic: Words  # groups the need's consequences do not fit
    ball_sports: Words  # a player is hurt "playing" one of these


class SayingsTable(Table):
    file = "sayings.json"
    openers: Phrases
    swaps: tuple[CaselessRewrite, ...]  # light rewording of a text the bank did not write


class Currency(Row):
    prefix: str = ""
    suffix: str = ""
    rate: float  # per euro


class WorldTable(Table):
    file = "world.json"
    eu_countries: Words
    currencies: dict[str, Currency]


class Hook(Row):
    affinity: str
    template: str  # {v}: the affinity's value


class QueriesTable(Table):
    file = "queries.json"
    intent_cuts: Phrases  # where a task's intent stops being the request's core
    planning_verbs: Phrases
    openers: Phrases
    closers: Phrases
    weekday_dates: Phrases  # when a request is for: {weekday}, {date}
    weekend_dates: Phrases  # ... on a weekend: {saturday} its first day
    hooks: dict[Domain, tuple[Hook, ...]]  # one persona detail a user drops into a request


class FactType(Row):
    type: str
    pattern: Caseless


class MemoryTable(Table):
    file = "memory.json"
    discourse_markers: Phrases  # pattern pieces, each a way to open a sentence
    interjections: Phrases
    imperatives: Phrases
    small_talk: Phrases
    request_openers: Phrases
    fact_types: tuple[FactType, ...]  # the first that matches; else Activity
    name_joiners: Words
    not_entities: Words
    not_topics: Words
    phrase_breaks: Words  # words a noun phrase never runs through


class AttributeVoice(Row):
    """How a user talks about one affinity attribute."""

    noun: str  # "alarm sound": "my usual {noun}", "for {noun}"
    says: Phrases  # first person; {v} = all values joined, {v1} = one value
    news: Phrases = ()  # small recent things built on one value {v1}
    plural: bool = False  # values are a list of favourites ("my favorite authors")


class TopicRow(Row):
    """A kind of request: the first row whose pattern the activity matches gives its topic."""

    domain: Domain
    pattern: Caseless
    kind: Kind
    thing: str  # "the alarm", "a bus ticket"
    options: Phrases = ()  # else the domain's


Partner = Literal["married", "single"]
ByPartner = Annotated[dict[Partner, Phrases], complete(get_args(Partner))]
SettingPart = Literal["device", "location", "time_of_day", "environment", "weekday"]


class PhrasingTable(Table):
    file = "phrasing.json"
    prices: dict[Domain, tuple[int, int]]
    attributes: dict[str, AttributeVoice]
    steady: dict[str, Phrases]  # standing arrangements, by the attribute's noun
    work_routines: dict[str, Phrases]  # the first the employment status mentions; {day_a} {day_b}
    partner_routines: ByPartner
    device_routines: Phrases  # {device}
    city_routines: Phrases  # {city}
    setting_remarks: dict[SettingPart, Phrases]  # in the order said; {until}: a time limit
    time_limits: Phrases  # {month} {date} {nth} {any_weekday}
    time_frames: Phrases
    consequences: Phrases  # what a remark means for the request: ", so I plan around it"
    preference_frames: Phrases
    no_generic_frames: Words
    plural_frames: Phrases
    identity_bodies: dict[str, Phrases]
    age_bodies: dict[str, Phrases]
    country_bodies: Phrases  # {country}
    partner_bodies: ByPartner
    volunteered: Phrases  # lead-ins of a personal remark
    answers: Phrases  # ... answering a personal question
    background_frames: Phrases  # {b}: the circumstance the request comes from
    topics: tuple[TopicRow, ...]
    options: dict[Domain, Phrases]
    generic_options: ByKind[Phrases]
    slot_words: dict[str, Phrases]  # a proposal's {place}, {part}, {sound} ... words
    day_mentions: Phrases  # an {on_day}: {weekday} and {time} drawn where they stand
    day_phrases: Phrases  # besides "on <weekday>"
    pointers: Phrases  # at the latest proposal
    first_names: Phrases
    adjectives: Phrases
    nouns: Phrases
    titles: Phrases  # a work's: {a} an adjective, {n} {m} nouns, {ns} {ms} their plurals, {name}
    venues: Phrases  # {kind} of venue, {name} {adjective} {noun} drawn where they stand
    venue_kinds: dict[Domain, Phrases]
    proposal_frames: Phrases
    taste_domains: frozenset[Domain]  # favourites are works, artists and genres
    taste_reasons: Phrases
    preference_reasons: Phrases
    generic_values: Phrases  # a favourite when the persona has none in the domain
    commercial_details: Phrases
    work_details: Phrases  # a work's: no opening times or distances
    details: dict[Kind, Phrases]  # else commercial (work in a taste domain)
    ack_openers: Phrases
    ack_bodies: Phrases
    lead_words: Phrases
    assistant_openers: Phrases
    personal_questions: Phrases
    question_leads: Phrases
    question_when: Phrases
    question_spans: Phrases
    topic_questions: ByKind[Phrases]
    user_openings: Phrases
    open_when: Phrases
    greetings: Phrases
    reactions: Phrases
    yes: Phrases
    no: Phrases
    answer_tails: Phrases
    follow_ups: ByKind[Phrases]
    user_closings: ByKind[Phrases]
    closing_tails: Phrases
    assistant_closings: ByKind[Phrases]
    assistant_tails: Phrases


TABLES: tuple[type[Table], ...] = tuple(Table.__subclasses__())
"""Every data file, by its schema (each defined above)."""
