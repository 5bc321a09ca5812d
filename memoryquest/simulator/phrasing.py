"""Phrase banks for simulated conversations, composed from parts and filled from the persona.

A sentence is an opener, a body and a tail, each from its own bank (``data/phrasing.json``),
so the same sentence seldom comes back. The user's remarks are framed in time as a life
update is, so an update is one remark among many; the assistant's side comes from the
request's topic. All functions take a seeded ``random.Random`` and are pure otherwise.
"""

from __future__ import annotations

import random
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cache

from memoryquest.contracts import Affinity, Demographics, Domain
from memoryquest.simulator.grammar import (
    base_from_stem,
    clean_value,
    fix_articles,
    from_first_person,
    join_list,
    lower_first,
    lower_start,
    months,
    name_key,
    ordinal,
    plural,
    sentence,
    shift_person,
    upper_first,
    weekdays,
)
from memoryquest.simulator.needs.bridges import bridge
from memoryquest.simulator.schema import AttributeVoice, Kind, Partner, PhrasingTable
from memoryquest.simulator.tables import load


def table() -> PhrasingTable:
    """The phrase banks (``data/phrasing.json``)."""
    return load(PhrasingTable)


def pick(rng: random.Random, options: Sequence[str]) -> str:
    return options[rng.randrange(len(options))] if options else ""


def clock_time(rng: random.Random, part: str = "") -> str:
    ranges = {"morning": (7, 11), "afternoon": (12, 17), "evening": (17, 21), "night": (19, 23)}
    low, high = ranges.get(part.lower(), (8, 21))
    hour = rng.randint(low, high)
    minute = pick(rng, ("00", "15", "30", "45", "10", "40", "20", "50"))
    return f"{(hour % 12) or 12}:{minute} {'AM' if hour < 12 else 'PM'}"


def month_name(rng: random.Random) -> str:
    return pick(rng, months())


REMARK_BRIDGE_SHARE = 0.5
"""Remark consequences said as a life update's bridge clause (", which complicates cinema nights"):
the clause is how people tie any personal remark to their plans, never a sign of a life update."""
_TIMED = re.compile(
    r"\b(?:since|until|till|ago|after|before|every|each|on (?:Monday|Tuesday|Wednesday|Thursday|Friday|Saturday|Sunday)|in [A-Z][a-z]+|for the next|right up to|for a few|for most|now)\b"
)


@cache
def _dates() -> re.Pattern[str]:
    """Month and day names and numbers: what a remark's core is compared without."""
    return re.compile(r"\b(?:" + "|".join(months() + weekdays()) + r")\b|\d+(?::\d+)?")


@dataclass(frozen=True)
class Setting:
    """Where, on what and when the user is chatting."""

    location: str = ""
    device: str = ""
    time_of_day: str = ""
    environment: str = ""
    weekday: str = ""


class Voice:
    """The user's personal remarks in one conversation, grounded in the persona and the setting."""

    def __init__(
        self,
        affinities: Sequence[Affinity],
        demographics: Demographics,
        domain: Domain,
        setting: Setting,
        *,
        avoid: Sequence[str] = (),
        emphasis: str = "",
    ) -> None:
        self.domain = domain
        self.setting = setting
        self.demographics = demographics
        self.avoid = [a.casefold() for a in avoid if len(a) > 2]
        self.attributes: list[tuple[AttributeVoice, list[str], float]] = []
        for affinity in affinities:
            values = _sayable(affinity, self.avoid) if affinity.domain == domain else []
            if not values:
                continue
            name = affinity.name.lower()
            voice = table().attributes.get(name_key(affinity.name)) or AttributeVoice(
                noun=name, says=(f"my {name} is {{v}}", f"for {name} I go with {{v1}}")
            )
            # Hidden conditioning: attributes the interaction summary dwells on come up more often.
            dwelt_on = emphasis and any(v.casefold() in emphasis.casefold() for v in values)
            weight = 2.0 if dwelt_on else 1.0
            self.attributes.append((voice, values, weight))
        self.said: set[str] = set()
        self.core = ""  # the last remark before it was shaped: what "said already" compares

    def _attribute(self, rng: random.Random) -> tuple[AttributeVoice, list[str]] | None:
        if not self.attributes:
            return None
        total = sum(w for _, _, w in self.attributes)
        point = rng.random() * total
        for voice, values, weight in self.attributes:
            point -= weight
            if point <= 0:
                return voice, values
        return self.attributes[-1][0], self.attributes[-1][1]

    def preference(self, rng: random.Random) -> str:
        chosen = self._attribute(rng)
        if chosen is None:
            return ""
        voice, values = chosen
        shuffled = list(values)
        rng.shuffle(shuffled)
        roll = rng.random()
        slots = {"v1": shuffled[0], "noun": voice.noun}
        if voice.plural and len(shuffled) >= 2 and roll < 0.2:
            frame, slots["v2"] = pick(rng, table().plural_frames), shuffled[1]
        elif voice.plural and voice.noun not in table().no_generic_frames and roll < 0.45:
            frame = pick(rng, table().preference_frames)
        else:
            subset = shuffled[: rng.randint(1, min(3, len(shuffled)))]
            frame, slots["v"] = pick(rng, voice.says), join_list(subset)
        body = expand(frame, rng, slots)
        return self._shaped(body, rng, anchor=0.3, extra=0.35)

    def news(self, rng: random.Random) -> str:
        """A small recent thing built on one affinity value (or, failing that, a preference)."""
        options = [(voice, values) for voice, values, _ in self.attributes if voice.news]
        if not options:
            return self.preference(rng)
        voice, values = options[rng.randrange(len(options))]
        body = pick(rng, voice.news).replace("{v1}", pick(rng, values))
        return self._shaped(body, rng, anchor=0.0, extra=0.15)

    def context(self, rng: random.Random) -> str:
        """Where / on what / when the user is, or how their days look — often with a time limit."""
        s = self.setting
        values: dict[str, str | Callable[[], str]] = {
            "until": self._until(rng),
            "device": s.device.lower(),
            "location": s.location,
            "part": s.time_of_day.lower(),
            "environment": s.environment.lower(),
            "weekday": s.weekday,
            "afternoon": lambda: clock_time(rng, "afternoon"),
        }
        remarks = table().setting_remarks.items()  # each part of the setting that is known
        options = [
            expand(t, rng, values) for part, said in remarks if getattr(s, part) for t in said
        ]
        if not options:
            return self.preference(rng)
        return self._shaped(pick(rng, options), rng, anchor=0.0, extra=0.1)

    def identity(self, rng: random.Random) -> str:
        d = self.demographics
        status = (d.employment_status or "").lower()
        bodies = table().identity_bodies.items()
        options = [body for key, said in bodies if key in status for body in said]
        options += table().age_bodies.get((d.age or "")[:5], ())
        if d.reside_country and d.reside_country.upper() != "N/A":
            options += [t.replace("{country}", d.reside_country) for t in table().country_bodies]
        options += table().partner_bodies[partner] if (partner := _partner(d)) else ()
        if not options:
            return self.context(rng)
        return self._shaped(pick(rng, options), rng, anchor=0.1, extra=0.4)

    def steady(self, rng: random.Random) -> str:
        """How the user's life is set up (work, company, getting around, money, screens), from the profile and
        setting only, so it never contradicts them; it touches the areas life updates do."""
        d, s = self.demographics, self.setting
        status = (d.employment_status or "").lower()
        day_a, day_b = rng.sample(weekdays()[:5], 2)
        work = next((said for key, said in table().work_routines.items() if key in status), ())
        options = [t.replace("{day_a}", day_a).replace("{day_b}", day_b) for t in work]
        options += table().partner_routines[partner] if (partner := _partner(d)) else ()
        if s.device:
            options += [t.replace("{device}", s.device.lower()) for t in table().device_routines]
        if s.location:
            city = s.location.split(",")[0]
            options += [t.replace("{city}", city) for t in table().city_routines]
        for voice, values, _ in self.attributes:
            value = pick(rng, values)
            options += [t.replace("{v1}", value) for t in table().steady.get(voice.noun, ())]
        if not options:
            return self.context(rng)
        body = (
            pick(rng, options)
            .replace("{time}", clock_time(rng, "evening"))
            .replace("{minutes}", str(rng.randint(10, 50)))
        )
        return self._shaped(body, rng, anchor=0.2, extra=0.4)

    def remark(self, rng: random.Random) -> str:
        """One personal remark of any kind, not repeated within the conversation when avoidable."""
        for _ in range(4):
            roll = rng.random()
            if roll < 0.32:
                text = self.preference(rng)
            elif roll < 0.47:
                text = self.news(rng)
            elif roll < 0.66:
                text = self.context(rng)
            elif roll < 0.92:
                text = self.steady(rng)
            else:
                text = self.identity(rng)
            key = self.core
            if text and key not in self.said and not _touches(text, self.avoid):
                self.said.add(key)
                return text
        return ""

    def _until(self, rng: random.Random) -> str:
        day = rng.randint(2, 28)
        values: dict[str, str | Callable[[], str]] = {
            "month": lambda: month_name(rng),
            "date": str(day),
            "nth": ordinal(day),
            "any_weekday": lambda: pick(rng, weekdays()),
        }
        return pick(rng, [expand(t, rng, values) for t in table().time_limits])

    def _shaped(self, body: str, rng: random.Random, *, anchor: float, extra: float) -> str:
        """The remark as a life update is said: core, then maybe a time anchor (when it has none) and a consequence."""
        self.core = _dates().sub("", body)
        body = fix_articles(fill_time(body, rng))
        body = re.sub(r"\b(seats?) \1\b", r"\1", body)
        if rng.random() < anchor and not _TIMED.search(body):
            frame = fill_time(pick(rng, table().time_frames), rng)
            body = f"{frame}, {lower_start(body)}" if rng.random() < 0.5 else f"{body} {frame}"
        if rng.random() < extra:
            if rng.random() < REMARK_BRIDGE_SHARE:
                body += bridge(self.domain, rng)
            else:
                then = table().consequences[rng.randrange(len(table().consequences))]
                body = f"{body}, {then}"
        return sentence(body)


def _touches(text: str, avoided: Sequence[str]) -> bool:
    lowered = text.casefold()
    return any(a in lowered or lowered in a for a in avoided)


def _sayable(affinity: Affinity, avoided: Sequence[str]) -> list[str]:
    """The affinity's values ready to say: known, cleaned, and touching no ``avoided`` one."""
    values = [v for v in affinity.values if v and v.strip() and v.strip().upper() != "N/A"]
    return [v for v in map(clean_value, values) if v and not _touches(v, avoided)]


def _partner(demographics: Demographics) -> Partner | None:
    """Married, single (never married), or neither said."""
    marital = (demographics.marital_status or "").lower()
    return "married" if marital == "married" else "single" if "never" in marital else None


_PIECE = re.compile(r"\[([^\[\]]*)\]|\{(\w+)\}")


def expand(template: str, rng: random.Random, values: Mapping[str, str | Callable[[], str]]) -> str:
    """``template`` with each ``[a|b]`` picked and each ``{name}`` of ``values`` filled, left to right.

    A value may be made when its slot is reached (a clock time); other slots stay for later.
    """

    def piece(match: re.Match[str]) -> str:
        if match.group(1) is not None:
            return expand(pick(rng, match.group(1).split("|")), rng, values)
        value = values.get(match.group(2), match.group(0))
        return value() if callable(value) else value

    return _PIECE.sub(piece, template)


def fill_time(text: str, rng: random.Random) -> str:
    """Fill the time slots a remark may carry: {month}, {season}, {day} (a weekday)."""
    return (
        text.replace("{month}", month_name(rng))
        .replace("{season}", pick(rng, ("spring", "summer", "fall", "winter")))
        .replace("{day}", pick(rng, weekdays()))
    )


def with_lead(remark: str, lead: str) -> str:
    if not lead:
        return remark
    return f"{lead} {lower_start(remark)}"


@dataclass(frozen=True)
class Topic:
    """What the conversation is about."""

    domain: Domain
    kind: Kind
    thing: str  # what is being worked on: "the alarm", "a bus ticket"
    request: str  # first person, lower-case start, no final stop: "disable my regular alarm"
    background: str = ""  # first-person circumstance from the task: "I'm going on a trip"
    options: tuple[str, ...] = field(default_factory=tuple)

    @property
    def request_to_user(self) -> str:
        """The request as the assistant words it back: "share your current location"."""
        return from_first_person(self.request, "second")


_VERB_CUT = re.compile(
    r"\b(?:based on|taking into account|considering|that (?:match|align|fit|offer)|tailored to|according to|"
    r"within (?:their|your|my)|while (?:still|also)|prioritizing|including)\b|[,(]|\s\(e\.g\."
)


def _trim(text: str) -> str:
    cut = _VERB_CUT.search(text)
    if cut and cut.start() > 12:
        text = text[: cut.start()]
        # what a cut leaves of a relative clause: "companies I am (considering ...)"
        text = re.sub(r"\s+(?:that |which |who )?(?:I|you)(?: am| are|'m|'re)?\s*$", "", text)
    return text.strip(" ,.")


def parse_topic(activity: str, domain: Domain) -> Topic:
    """The request's topic from a timeline activity ("The user needs to book a bus ticket ...")."""
    first = activity.split(". ")[0].strip().rstrip(".")
    moved = shift_person(first, "first", they_is_user=True) or ""
    moved = moved.rstrip(".")
    request, background = "", ""
    match = re.search(r"\b(?:need|want|would like|hope|plan)s? to (.+)$", moved)
    if match:
        request = match.group(1)
        head = moved[: match.start()].strip()
        head = re.sub(r"\s*(?:and|but)$", "", head).strip()
        if head and not re.fullmatch(r"I(?: am|'m)?", head):
            background = head
    else:
        for pattern, verb in (
            (r"\bI am (?:looking|searching) (?:for|to) (.+)$", "find"),
            (r"\bI am seeking (.+)$", "find"),
            (r"\bI am planning (.+)$", "plan"),
            (r"\bI am interested in (.+)$", ""),
            (r"\bI am exploring (.+)$", "explore"),
            (r"\bI am creating (.+)$", "create"),
            (r"\bI am an? [^,]+? seeking (.+)$", "find"),
        ):
            found = re.search(pattern, moved)
            if found:
                body = found.group(1)
                if verb == "find" and pattern.endswith("to (.+)$"):
                    request = body
                elif verb:
                    request = f"{verb} {body}"
                else:
                    request = re.sub(
                        r"^(\w+?)ing\b(?: and (\w+?)ing\b)?",
                        lambda m: (
                            base_from_stem(m.group(1))
                            + (f" and {base_from_stem(m.group(2))}" if m.group(2) else "")
                        ),
                        body,
                    )
                break
    request = _trim(re.sub(r"\s+and (?:need|want)s? .*$", "", request)) if request else ""
    if not request:
        request = f"sort out some {domain.value.lower()} plans"
    kind: Kind = "recommend"
    thing, options = domain.value.lower(), table().options.get(domain, ())
    for row in table().topics:
        if row.domain == domain and row.pattern.search(activity):
            kind, thing, options = row.kind, row.thing, row.options or options
            break
    return Topic(
        domain=domain,
        kind=kind,
        thing=thing,
        request=request,
        background=background,
        options=options,
    )


class Options:
    """Concrete proposals for a topic, filled from the affinities; never one that restates an avoided value."""

    def __init__(
        self, topic: Topic, affinities: Sequence[Affinity], avoid: Sequence[str], device: str = ""
    ) -> None:
        self.topic = topic
        self.device = device.lower() or "phone"
        self.named = ""  # the last generated title or venue a proposal named
        avoided = [a.casefold() for a in avoid if len(a) > 2]
        self.values = {
            name_key(a.name): values
            for a in affinities
            if a.domain == topic.domain and (values := _sayable(a, avoided))
        }
        self.used: list[str] = []
        self.fixed: dict[str, str] = {}
        self.taken: dict[str, list[str]] = {}  # templates used so far, per bank

    def constant(self, name: str, make: Callable[[], str]) -> str:
        """A value that stays the same for the whole conversation (the friend's name, the venue)."""
        if name not in self.fixed:
            self.fixed[name] = make()
        return self.fixed[name]

    def value(self, name: str, rng: random.Random) -> str:
        return pick(rng, self.values.get(name_key(name), []))

    def any_value(self, rng: random.Random) -> str:
        """A favourite of the topic's domain — an author, a team, a brand (a generic word when there is none)."""
        lists = sorted(
            k for k in self.values if (v := table().attributes.get(k)) is not None and v.plural
        )
        if not lists:
            return pick(rng, table().generic_values)
        return pick(rng, self.values[pick(rng, lists)])

    def fill(self, template: str, rng: random.Random) -> str | None:
        text = template
        for name in re.findall(r"\{([^}]+)\}", template):
            value = self._slot(name, rng)
            if not value:
                return None
            text = text.replace("{" + name + "}", value, 1)
        return fix_articles(text)

    def _slot(self, name: str, rng: random.Random) -> str:
        t = table()
        if name in t.slot_words:
            return pick(rng, t.slot_words[name])
        generated: dict[str, Callable[[], str]] = {
            "time": lambda: clock_time(rng),
            "price": lambda: f"${rng.randint(*t.prices.get(self.topic.domain, (12, 240)))}",
            "rating": lambda: f"{rng.randint(40, 49) / 10:.1f}",
            "day": lambda: pick(rng, weekdays()),
            "weekday": lambda: pick(rng, weekdays()),
            "date": lambda: f"{month_name(rng)} {rng.randint(2, 28)}",
            "title": lambda: self._named(title(rng)),
            "venue": lambda: self._named(
                self.constant("venue", lambda: venue(self.topic.domain, rng))
            ),
            "name": lambda: self.constant("name", lambda: pick(rng, t.first_names)),
            "count": lambda: str(rng.randint(2, 9)),
            "month": lambda: month_name(rng),
            "day_phrase": lambda: pick(rng, [f"on {d}" for d in weekdays()] + [*t.day_phrases]),
            "on_day": lambda: pick(rng, [expand(m, rng, generated) for m in t.day_mentions]),
            "value": lambda: self.any_value(rng),
            "device": lambda: self.device,
            "days": lambda: str(rng.randint(3, 9)),
        }
        if name in generated:
            return generated[name]()
        return self.value(name, rng)

    def propose(self, rng: random.Random) -> str:
        own, generic = list(self.topic.options), list(table().generic_options[self.topic.kind])
        rng.shuffle(own)
        rng.shuffle(generic)
        templates = own + generic if rng.random() < 0.85 else generic + own
        fallback = ""
        for template in templates:
            filled = self.fill(template, rng)
            if filled is None:
                continue
            if filled not in self.used:
                self.used.append(filled)
                return filled
            fallback = filled
        if fallback:
            return fallback
        return f"{pick(rng, ('a couple of', 'two or three', 'a few'))} options for {self.topic.thing} that match what you usually go for"

    def fresh(self, bank: str, templates: Sequence[str], rng: random.Random) -> str:
        """A template of ``templates`` not used yet in this conversation (any, once all were used)."""
        used = self.taken.setdefault(bank, [])
        chosen = pick(rng, [t for t in templates if t not in used] or list(templates))
        used.append(chosen)
        return chosen

    def _named(self, name: str) -> str:
        self.named = name
        return name

    def short(self, rng: random.Random) -> str:
        """A short way to point at the latest proposal ("The Quiet Harbor", "that one")."""
        if self.named and rng.random() < 0.7:
            return self.named
        return pick(rng, table().pointers)


def _made_up(rng: random.Random) -> dict[str, str | Callable[[], str]]:
    """Slots of a made-up name, each drawn where the template has it."""
    t = table()
    return {
        "name": lambda: pick(rng, t.first_names),
        "adjective": lambda: pick(rng, t.adjectives),
        "noun": lambda: pick(rng, t.nouns),
    }


def title(rng: random.Random) -> str:
    """A made-up title of a work ("The Quiet Harbor")."""
    a, n, m = pick(rng, table().adjectives), pick(rng, table().nouns), pick(rng, table().nouns)
    words = {"a": a, "n": n, "m": m, "ns": plural(n), "ms": plural(m), **_made_up(rng)}
    return pick(rng, [expand(t, rng, words) for t in table().titles])


def venue(domain: Domain, rng: random.Random) -> str:
    """A made-up venue of the domain ("the Golden Fox Bistro")."""
    kind = pick(rng, table().venue_kinds.get(domain, ("Place", "Spot", "House")))
    words = {"kind": kind, **_made_up(rng)}
    return pick(rng, [expand(t, rng, words) for t in table().venues])


def fill_slots(template: str, options: Options, rng: random.Random, **known: str) -> str:
    """Fill ``{...}`` slots from ``known``, then the topic's options (affinities and random details)."""
    text = template
    for name in re.findall(r"\{([^}]+)\}", template):
        value = known.get(name)
        if value is None:
            value = options._slot(name, rng) or pick(rng, ("that", "it"))
        text = text.replace("{" + name + "}", value, 1)
    return fix_articles(text)


def _join_clause(first: str, second: str, rng: random.Random) -> str:
    """Two short pieces as one sentence: "Not bad — what times are there?"."""
    first = first.rstrip(" .!,")
    return f"{first}{pick(rng, (' — ', ', ', ' — ', '; '))}{lower_start(second)}"


def _greeted(text: str, rng: random.Random) -> str:
    """The opening with a greeting in front, in the same sentence ("Hi, can you help me ...?")."""
    if rng.random() < 0.35:
        return sentence(text)
    return sentence(f"{pick(rng, table().greetings)}{pick(rng, (', ', ' — '))}{text}")


def opening_request(topic: Topic, options: Options, rng: random.Random) -> str:
    text = pick(rng, table().user_openings).replace("{request}", topic.request)
    text = text.replace("{when}", fill_slots(pick(rng, table().open_when), options, rng))
    return _greeted(text, rng)


def background_sentence(topic: Topic, rng: random.Random) -> str:
    if not topic.background:
        return ""
    frame = pick(rng, table().background_frames)
    body = topic.background if frame.startswith("{b}") else lower_start(topic.background)
    return sentence(frame.format(b=body))


def reaction(topic: Topic, options: Options, rng: random.Random) -> str:
    return fill_slots(
        pick(rng, table().reactions), options, rng, short=options.short(rng), thing=topic.thing
    )


def answer_topic_question(options: Options, rng: random.Random) -> str:
    if rng.random() < 0.35:
        return sentence(pick(rng, table().no))
    head = pick(rng, table().yes)
    tail = fill_slots(pick(rng, table().answer_tails), options, rng)
    return sentence(f"{head}, {tail}" if tail else head)


def follow_up(topic: Topic, options: Options, rng: random.Random, lead: str = "") -> str:
    question = fill_slots(
        options.fresh("follow_up", table().follow_ups[topic.kind], rng),
        options,
        rng,
        short=options.short(rng),
    )
    return sentence(_join_clause(lead, question, rng)) if lead else question


def user_closing(topic: Topic, options: Options, rng: random.Random, lead: str = "") -> str:
    """The user's last sentence: a closing for the request, with the reaction before it and thanks after it."""
    text = fill_slots(
        pick(rng, table().user_closings[topic.kind]), options, rng, short=options.short(rng)
    )
    tail = pick(rng, table().closing_tails)
    if tail:
        text = f"{text}{pick(rng, (' — ', ', ', '; '))}{lower_first(tail)}"
    return sentence(_join_clause(lead, text, rng)) if lead else sentence(text)


def assistant_opener(topic: Topic, rng: random.Random) -> str:
    return pick(rng, table().assistant_openers).format(
        thing=topic.thing, request=topic.request_to_user
    )


def acknowledgement(topic: Topic, rng: random.Random) -> str:
    """A reply to a personal remark of any kind: it never depends on what the remark was."""
    opener = pick(rng, table().ack_openers)
    if rng.random() < 0.35:
        return opener
    body = pick(rng, table().ack_bodies).format(thing=topic.thing)
    return f"{opener} — {body}" if rng.random() < 0.4 else f"{opener}, {body}"


def proposal(topic: Topic, options: Options, rng: random.Random, lead: str = "") -> str:
    """One proposal sentence; ``lead`` (an opener or an acknowledgement) joins it as one sentence or stands alone."""
    option = options.propose(rng)
    frame = pick(rng, table().proposal_frames)
    text = frame.replace("{thing}", topic.thing).replace("{o}", option)
    if text.startswith(option):
        text = upper_first(option) + text[len(option) :]
    if not lead:
        return sentence(text)
    joined = text if text.startswith(("I ", "I'", option[:12])) else lower_first(text)
    return sentence(f"{lead.rstrip(' .!,')}{pick(rng, (' — ', ', ', ' — '))}{joined}")


def reason(topic: Topic, options: Options, rng: random.Random) -> str:
    """Why the proposal suits the user, by one of their favourites (nothing when they have none here)."""
    value, t = options.any_value(rng), table()
    if value in t.generic_values:
        return ""
    reasons = t.taste_reasons if topic.domain in t.taste_domains else t.preference_reasons
    return fill_slots(options.fresh("reason", reasons, rng), options, rng, value=value)


def detail(topic: Topic, options: Options, rng: random.Random) -> str:
    details = table().details.get(topic.kind)
    if details is None:  # a commercial request; a work has no opening times or distances
        taste = topic.domain in table().taste_domains
        details = table().work_details if taste else table().commercial_details
    return sentence(fill_slots(pick(rng, details), options, rng))


def topic_question(topic: Topic, options: Options, rng: random.Random) -> str:
    return fill_slots(pick(rng, table().topic_questions[topic.kind]), options, rng)


def personal_question(options: Options, rng: random.Random) -> str:
    lead = pick(rng, table().question_leads)
    text = pick(rng, table().personal_questions).format(
        lead=lead,
        lead_lower=lead.lower(),
        when=pick(rng, table().question_when),
        span=pick(rng, table().question_spans),
    )
    return sentence(fill_slots(text, options, rng))


def assistant_closing(topic: Topic, options: Options, rng: random.Random, lead: str = "") -> str:
    """The assistant's last sentence: the request done, a friendly tail after it, the lead before it."""
    thing_cap = upper_first(topic.thing)
    text = fill_slots(
        pick(rng, table().assistant_closings[topic.kind]),
        options,
        rng,
        short=options.short(rng),
        thing=topic.thing,
        thing_cap=thing_cap,
    )
    text = text.rstrip(".")
    tail = fill_slots(pick(rng, table().assistant_tails), options, rng)
    if tail:
        text = f"{text}{pick(rng, (' — ', '; '))}{lower_first(tail)}"
    if not lead:
        return sentence(text)
    # Every closing opens on an ordinary word ("Happy exploring", "Added to ..."), never a name.
    if not re.match(r"I\b|I'", text):
        text = lower_first(text)
    return sentence(_join_clause(lead, text, rng))
