"""Life updates: how a generator of the bank becomes one dated, persona-grounded statement, and back.

Content choices (which core, which allergen) are seeded by the persona and the group, not
the call, so one user has one allergy in every stage; only a time limit's wording follows
the caller's ``rng``. A distractor is one :class:`Occurrence` of its situation, so every
mention of a spell names the same last day. Each generator compiles to one regular
expression, so a stored text is read back into its parts (:func:`parse_update`).
"""

from __future__ import annotations

import datetime as dt
import random
import re
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from functools import lru_cache

from memoryquest.contracts import Domain
from memoryquest.simulator.grammar import (
    fix_articles,
    lower_first,
    number_word,
    ordinal,
    upper_first,
)
from memoryquest.simulator.grammar import months as month_names
from memoryquest.simulator.needs.bridges import BRIDGE_SHARE, bridge, split_bridge
from memoryquest.simulator.needs.model import domain_needs
from memoryquest.simulator.needs.updates import Generator, fits, generators
from memoryquest.simulator.needs.world import Grounded, World
from memoryquest.simulator.schema import TIME_SLOTS, Part
from memoryquest.text import normalise_text, shared_content_words

REFERENCE_LEAD_DAYS_MIN = 3
"""A reference is dated at least this many days before its request."""
BOUNDED_WINDOW_DAYS = 45
"""A time-bounded reference is dated at most this many days before its request."""
PROFILE_FIRST = 0.7
"""Share of personas for whom a generator's wordings that read their own affinities come first."""

OCCURRENCE_EPOCH = dt.date(2000, 1, 3)
"""Day zero of the occurrences of time-bounded situations (any fixed day does)."""


@dataclass(frozen=True)
class LifeUpdate:
    """One dated statement about the user, as a reference or a distractor carries it."""

    text: str
    need: str
    group: str
    domain: Domain  # the conversation it comes up in
    domains: tuple[Domain, ...]  # every domain it could come up in
    date: dt.date
    valid_until: dt.date | None
    grounding: int  # 2: the persona's own affinities; 1: its demographics or place; 0: neither
    slots: tuple[tuple[str, str], ...] = ()


def join_parts(pieces: Iterable[str]) -> str:
    out = ""
    for piece in pieces:
        piece = piece.strip()
        if not piece:
            continue
        out = piece if not out else out + (piece if piece[0] in ",;" else " " + piece)
    return out


def month_end(day: dt.date) -> dt.date:
    following = dt.date(day.year + day.month // 12, day.month % 12 + 1, 1)
    return following - dt.timedelta(days=1)


def _time_slots(
    names: set[str],
    date: dt.date,
    not_before: dt.date,
    span_days: tuple[int, int],
    rng: random.Random,
    ends: dt.date | None = None,
) -> tuple[dict[str, str], dt.date] | None:
    """Fill the time slots so the update still holds on ``not_before`` (and lasts a week at least).

    With ``ends`` the last day is given (None when it comes too soon); else it is drawn.
    """
    earliest = max(not_before, date + dt.timedelta(days=7))
    if ends is not None and ends < earliest:
        return None
    target = ends or earliest + dt.timedelta(days=rng.randint(*span_days))
    if "span" in names:
        days = (target - date).days + 1
        if days <= 12 * 7:
            weeks = -(-days // 7)
            valid = date + dt.timedelta(days=7 * weeks - 1)
            return {"span": f"{number_word(weeks)} weeks" if weeks > 1 else "week"}, valid
        months = min(-(-days // 30), 12)
        valid = date + dt.timedelta(days=30 * months - 1)
        return {"span": f"{number_word(months)} months"}, valid
    if "month" in names:
        valid = month_end(target)
        return {"month": month_names()[valid.month - 1]}, valid
    if (target.year, target.month) == (date.year, date.month) and rng.random() < 0.5:
        return {"until": f"the {ordinal(target.day)}"}, target
    return {"until": f"{month_names()[target.month - 1]} {target.day}"}, target


def time_bounded(generator: Generator) -> bool:
    """Does every update of ``generator`` expire (a time limit, or a date in every core)?"""
    return bool(generator.limits) or all(TIME_SLOTS & set(core.slots()) for core in generator.cores)


@dataclass(frozen=True)
class Occurrence:
    """One spell of a time-bounded situation in a persona's life: its number and its last day."""

    index: int
    ends: dt.date


def occurrence_on(world: World, generator: Generator, date: dt.date) -> Occurrence:
    """The spell of ``generator``'s situation under way on ``date`` for this persona.

    Spells follow one another at a length fixed by the persona and the group alone, so two mentions
    of the same spell name the same last day.
    """
    seeded = world.rng("occurrences", generator.group)
    length = seeded.randint(7 + generator.span_days[0], 7 + generator.span_days[1])
    offset = seeded.randrange(length)
    index = ((date - OCCURRENCE_EPOCH).days - offset) // length
    ends = OCCURRENCE_EPOCH + dt.timedelta(days=offset + (index + 1) * length - 1)
    return Occurrence(index, ends)


def fill(
    generator: Generator,
    world: World,
    date: dt.date,
    not_before: dt.date,
    rng: random.Random,
    *,
    with_detail: bool | None = None,
    occurrence: Occurrence | None = None,
) -> LifeUpdate | None:
    """The generator made concrete for this persona, said on ``date`` and still true on ``not_before``.

    ``with_detail`` forces or suppresses the optional detail (None: the persona's seeded choice); with
    an ``occurrence`` the update ends on its last day and a time-bounded one has that spell's details.
    """
    if not generator.usable(world):
        return None
    spell: tuple[object, ...] = ()
    if occurrence is not None and time_bounded(generator):
        spell = ("occurrence", occurrence.index)
    content = world.rng("group", generator.group, *spell)
    cores = [c for c in generator.cores if fits(c.when, world)]
    content.shuffle(cores)
    if content.random() < PROFILE_FIRST:  # mostly a wording that uses the persona's own affinities
        cores.sort(
            key=lambda c: (
                not any(generator.slots[n].profile for n in c.slots() if n in generator.slots)
            )
        )
    extras = [e for e in generator.extras if fits(e.when, world)]
    extra_choice = content.choice(extras) if extras and content.random() < 0.6 else None
    if with_detail is not None:
        extra_choice = (content.choice(extras) if extras else None) if with_detail else None
    for core in cores:
        chosen = [core]
        if generator.limits and not TIME_SLOTS & set(core.slots()):
            chosen.append(rng.choice(generator.limits))
        if extra_choice:
            chosen.append(extra_choice)
        slots: dict[str, str] = {}
        names: list[str] = []
        for part in chosen:
            names.extend(n for n in part.slots() if n not in names)
        ok = True
        for name in names:
            if name in TIME_SLOTS:
                continue
            source = generator.slots.get(name)
            if source is None:
                raise KeyError(f"generator {generator.group!r} has no source for slot {name!r}")
            seed = ("slot", name) if source.shared else ("group", generator.group, name, *spell)
            value = source.fill(world, world.rng(*seed))
            if not value:
                ok = False
                break
            slots[name] = value
        if not ok:
            continue
        valid_until: dt.date | None = None
        time_names = {n for n in names if n in TIME_SLOTS}
        if time_names:
            ends = occurrence.ends if occurrence is not None else None
            timed = _time_slots(time_names, date, not_before, generator.span_days, rng, ends)
            if timed is None:
                continue
            extra_slots, valid_until = timed
            slots.update(extra_slots)
        wording = world.rng("wording", generator.group, *spell)
        text = fix_articles(
            join_parts(_choose_wording(part.text, wording).format(**slots) for part in chosen)
        )
        text = upper_first(text)
        sources = [(generator.slots[n], slots.get(n)) for n in names if n in generator.slots]
        from_profile = any(
            isinstance(v, Grounded) or (src.profile and not src.mixed) for src, v in sources
        )
        from_persona = any(src.persona and not src.mixed for src, _ in sources)
        conditioned = generator.when is not None or core.when is not None
        return LifeUpdate(
            text=text,
            need=generator.need,
            group=generator.group,
            domain=generator.domains[0],
            domains=generator.domains,
            date=date,
            valid_until=valid_until,
            grounding=2 if from_profile else 1 if from_persona or conditioned else 0,
            slots=tuple(sorted(slots.items())),
        )
    return None


def _choose_wording(text: str, rng: random.Random) -> str:
    """Resolve every ``[a|b|c]`` of a template to one option."""
    return _ALTERNATION.sub(lambda m: rng.choice(m.group(1).split("|")), text)


def with_domain(update: LifeUpdate, domain: Domain) -> LifeUpdate:
    return replace(update, domain=domain)


@dataclass(frozen=True)
class Parsed:
    generator: Generator
    core: Part
    extra: Part | None
    limit: Part | None
    slots: dict[str, str]
    bridge: str = ""


_SLOT = re.compile(r"\{(\w+)\}")
_ALTERNATION = re.compile(r"\[([^\[\]{}]*\|[^\[\]{}]*)\]")


def _literal_regex(text: str) -> str:
    """A literal stretch of a template as a regex: ``[a|b]`` becomes an alternation."""
    out = ""
    position = 0
    for match in _ALTERNATION.finditer(text):
        out += re.escape(text[position : match.start()])
        out += "(?:" + "|".join(re.escape(option) for option in match.group(1).split("|")) + ")"
        position = match.end()
    return out + re.escape(text[position:])


def _part_regex(part: Part, prefix: str) -> tuple[str, dict[str, str]]:
    """``part.text`` as a regex with one named group per slot occurrence (group name -> slot name)."""
    regex = ""
    names: dict[str, str] = {}
    position = 0
    for index, match in enumerate(_SLOT.finditer(part.text)):
        literal = _literal_regex(part.text[position : match.start()])
        # fix_articles may have turned "a {slot}" into "an ..." or the reverse.
        literal = re.sub(r"(^|(?<=\\ )|(?<=\s))an?\\ $", r"\g<1>an?\\ ", literal)
        group = f"{prefix}_{index}"
        names[group] = match.group(1)
        regex += literal + f"(?P<{group}>.+?)"
        position = match.end()
    regex += _literal_regex(part.text[position:])
    return regex, names


@dataclass(frozen=True)
class _Compiled:
    generator: Generator
    pattern: re.Pattern[str]
    parts: dict[str, tuple[str, int]]  # part group -> (kind, index)
    slots: dict[str, str]  # slot group -> slot name


def _compile(generator: Generator, gindex: int) -> _Compiled:
    parts: dict[str, tuple[str, int]] = {}
    slots: dict[str, str] = {}

    def alternatives(kind: str, items: tuple[Part, ...]) -> str:
        alts = []
        for index, part in enumerate(items):
            name = f"g{gindex}{kind}{index}"
            body, names = _part_regex(part, name + "s")
            parts[name] = (kind, index)
            slots.update(names)
            alts.append(f"(?P<{name}>{body})")
        return "|".join(alts)

    regex = f"(?:{alternatives('c', generator.cores)})"
    if generator.limits:
        regex += rf"(?:\s*(?:{alternatives('l', generator.limits)}))?"
    if generator.extras:
        regex += rf"(?:\s*(?:{alternatives('e', generator.extras)}))?"
    return _Compiled(generator, re.compile(regex + r"\.?", re.IGNORECASE), parts, slots)


@lru_cache(maxsize=1)
def _compiled() -> tuple[_Compiled, ...]:
    return tuple(_compile(g, i) for i, g in enumerate(generators()))


@lru_cache(maxsize=16_384)
def parse_update(text: str) -> Parsed | None:
    """The generator, parts and slot values behind a bank text (None for any other text)."""
    cleaned, bridge_clause = split_bridge(" ".join(text.split()).strip())
    for compiled in _compiled():
        match = compiled.pattern.fullmatch(cleaned)
        if match is None:
            continue
        chosen: dict[str, Part] = {}
        generator = compiled.generator
        for group, (kind, index) in compiled.parts.items():
            if match.group(group) is not None:
                items = {"c": generator.cores, "e": generator.extras, "l": generator.limits}[kind]
                chosen[kind] = items[index]
        values: dict[str, str] = {}
        for group, name in compiled.slots.items():
            value = match.group(group)
            if value is not None and name not in values:
                if match.start(group) == 0:
                    value = lower_first(value)
                values[name] = value
        extra, limit = chosen.get("e"), chosen.get("l")
        return Parsed(generator, chosen["c"], extra, limit, values, bridge_clause)
    return None


@lru_cache(maxsize=16)
def _variants(world: World) -> list[Generator]:
    """One generator per group for this persona (a group may have several, e.g. cores that take no limit).

    Cached per world (held for one simulated answer): a timeline asks for it once per distractor.
    """
    by_group: dict[str, list[Generator]] = {}
    for generator in generators():
        if generator.usable(world):
            by_group.setdefault(generator.group, []).append(generator)
    return [
        options[world.rng("variant", group).randrange(len(options))]
        for group, options in by_group.items()
    ]


def candidates(world: World, need: str, used_groups: set[str]) -> list[Generator]:
    """Generators of ``need`` this persona can use and has not used yet."""
    return [g for g in _variants(world) if g.need == need and g.group not in used_groups]


def groups_of(texts: Iterable[str]) -> set[str]:
    """The exclusive groups behind bank texts (other texts contribute nothing)."""
    out: set[str] = set()
    for text in texts:
        parsed = parse_update(text)
        if parsed is not None:
            out.add(parsed.generator.group)
    return out


def _phantom_order(
    options: Sequence[Generator],
    phantom: Domain,
    reference_needs: Sequence[str],
    rng: random.Random,
) -> list[Generator]:
    """``options`` in the order a reference of a request in ``phantom`` would take them: needs bearing
    on ``phantom`` when any are left, each as often as the user's references use it, so distractors'
    needs follow references' and their words do not stand out."""
    weights = Counter(reference_needs)
    bearing = domain_needs(phantom)
    by_need: dict[str, list[Generator]] = {}
    for generator in options:
        by_need.setdefault(generator.need, []).append(generator)
    if bearing & by_need.keys():
        by_need = {need: members for need, members in by_need.items() if need in bearing}
    keys: dict[str, tuple[int, float]] = {}
    for need, members in by_need.items():
        rng.shuffle(members)
        draw = rng.random()
        if weights[need]:
            # Weighted sampling without replacement: larger draw ** (1 / weight) first.
            keys[need] = (0, -(draw ** (1.0 / weights[need])))
        else:
            keys[need] = (1 if need in bearing else 2, draw)
    return [g for need in sorted(by_need, key=keys.__getitem__) for g in by_need[need]]


def bridge_to_request(
    update: LifeUpdate, request: str, domain: Domain, rng: random.Random
) -> LifeUpdate:
    """The update with what it gets in the way of in ``domain``, in words ``request`` does not use.

    References bridge to their request and distractors to a phantom one through
    this one function, so both obey the no-echo rule alike.
    """
    if rng.random() >= BRIDGE_SHARE:
        return update
    before = len(shared_content_words(request, update.text))
    clause = bridge(
        domain, rng, lambda c: len(shared_content_words(request, update.text + c)) <= before
    )
    return replace(update, text=update.text + clause)


def _phantom_domain(
    world: World, spoken_in: Domain, planned: Sequence[Domain], rng: random.Random
) -> Domain:
    """The request a distractor pretends to matter for: a domain the user's references bridge to
    (one entry per reference), else one of the persona's task domains, else the conversation's."""
    if planned:
        return rng.choice(list(planned))
    own = sorted(world.task_domains())
    return rng.choice(own) if own else spoken_in


def distractor_update(
    world: World,
    domain: Domain,
    date: dt.date,
    rng: random.Random,
    avoid_needs: set[str],
    avoid_texts: set[str],
    bridge_domains: Sequence[Domain] = (),
    reference_needs: Sequence[str] = (),
    phantom_requests: Mapping[Domain, Sequence[str]] | None = None,
) -> LifeUpdate | None:
    """A life update to mention in ``domain`` on ``date``: a reference of no query.

    Chosen as a reference of a phantom request (of ``bridge_domains``, worded as one of
    ``phantom_requests``) would be, so wording cannot tell the two apart; never of ``avoid_needs``
    (it must not stand in for the query's reference) nor of a group behind ``avoid_texts``.
    """
    avoid = {normalise_text(t) for t in avoid_texts}
    used = groups_of(avoid_texts)
    options = [g for g in _variants(world) if g.need not in avoid_needs and g.group not in used]
    phantom = _phantom_domain(world, domain, bridge_domains, rng)
    for generator in _phantom_order(options, phantom, reference_needs, rng):
        # Still true on the phantom request's date, as far ahead as a reference's request may be.
        horizon = date + dt.timedelta(
            days=rng.randint(REFERENCE_LEAD_DAYS_MIN, BOUNDED_WINDOW_DAYS)
        )
        # The spell still under way on that day: one of this persona's, whenever it is mentioned.
        spell = occurrence_on(world, generator, horizon)
        update = fill(generator, world, date, horizon, rng, occurrence=spell)
        if update is not None and normalise_text(update.text) not in avoid:
            requests = (phantom_requests or {}).get(phantom, ())
            request = rng.choice(requests) if requests else ""
            return with_domain(bridge_to_request(update, request, phantom, rng), domain)
    return None
