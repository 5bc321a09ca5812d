"""Simulated answers for the PGR runner and its judges, built from the request variables only.

The prospection answers see what a real model would see — the query, its
date, the augmented query, previous steps and retrieved facts — and never the
query's required references.

* Augmentation (``pgr_augment``): the query restated, followed by the key
  entities of the context facts (related entities first, most recent fact
  first; at most six).
* Initial chain (``pgr_cot_initial``): five to seven steps, each a concrete
  situational action for one *dimension* of the situation (timing, schedule,
  budget, work, bookings, transport, lodging, equipment, weather, food,
  people, health, energy, pets). Dimensions whose cue words occur in the query
  come first; every theme (preparation / getting it done / people and
  wellbeing) contributes at least one; the rest are drawn with the rng. Steps
  are ordered along the canonical dimension order (roughly chronological), and
  their constraints name the query's own entities, rotating so steps differ.
* Initial tree (``pgr_tot_initial``): a root (the task itself), two or three
  theme branches (three with probability 2/3), each with one or two children.
* Refinement (``pgr_*_refine``): each previous step keeps its action; its
  constraints are rebuilt as ``<base> | known: <focus (date)>; ...`` from up to
  two of the most recent retrieved facts of the same dimension. Facts whose
  focus entity is not yet mentioned by any step then open new steps (at most
  ``MAX_NEW_STEPS`` per round, most recent facts first) with the follow-up
  template of the fact's dimension — e.g. a fact about a knee injury opens a
  health step about a lower-impact way of doing the task — or a generic "how X
  bears on the task" step when no dimension matches. Chains keep at most
  ``MAX_CHAIN_STEPS`` steps, trees ``MAX_TREE_NODES`` nodes (new nodes hang
  under the branch of their theme, else under the root).
* Summary (``pgr_summary``): one paragraph naming the dimensions explored and
  up to ``SUMMARY_FACTS`` facts that the final steps folded in (then the most
  recent others).
* Answer (``pgr_answer``): a short Markdown answer citing up to
  ``ANSWER_FACTS`` facts verbatim with their dates, the facts most related to
  the query and summary first.
* Reference judge (``judge_references``): a reference is "found" when one
  retrieved fact contains at least ``JUDGE_OVERLAP`` (40%) of the reference's
  content-word stems and at least ``JUDGE_MIN_SHARED`` (two) of them (all of
  them when the reference has fewer); stems come from a light suffix-stripping
  stemmer, so "reacted badly" matches "bad reaction". The reason names the
  best-matching fact and the share.
* Pairwise judge (``judge_pairwise``): counts, per response, the user facts
  and references it cites (a fact is cited when ``CITE_SHARE`` of its content
  stems, and at least two, appear in the response); more citations wins,
  equal counts are a tie.
"""

from __future__ import annotations

import random
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from memoryquest.contracts import Domain
from memoryquest.simulator import simulates

MAX_NEW_STEPS = 3
MAX_CHAIN_STEPS = 10
MAX_TREE_NODES = 12
FOLDED_PER_STEP = 2
SUMMARY_FACTS = 6
ANSWER_FACTS = 8
JUDGE_OVERLAP = 0.4
JUDGE_MIN_SHARED = 2
CITE_SHARE = 0.6
AUGMENT_ENTITIES = 6
KNOWN = " | known: "

# --------------------------------------------------------------------------- text helpers

def _wordset(text: str) -> frozenset[str]:
    return frozenset(text.split())


_STOPWORDS = _wordset(
    """a about above after again against all also am an and any are as at be because been before being
    below between both but by can could did do does doing down during each few for from further had has
    have having he her here hers herself him himself his how i if in into is it its itself just let me
    more most my myself no nor not now of off on once only or other our ours ourselves out over own same
    she should so some such than that the their theirs them themselves then there these they this those
    through to too under until up very was we were what when where which while who whom why will with
    would you your yours yourself yourselves can't don't i'm i've i'd i'll it's that's there's what's
    user user's help please want need like get got make going thing things something anything really
    maybe might must shall may us lot lots still even ever much many well way ways one two new next last
    around within without per via etc"""
)
_TOKEN = re.compile(r"[a-z0-9][a-z0-9'\-]*")


_SUFFIXES = ("ations", "ation", "ions", "ion", "ments", "ment", "ness", "ingly", "edly", "ings", "ing", "ly", "ed", "es", "s")
_VOWELS = frozenset("aeiouy")


@lru_cache(maxsize=65536)
def _stem(word: str) -> str:
    """A light suffix-stripping stemmer: 'reacted', 'reaction' -> 'react'; 'driving', 'drive' -> 'driv'."""
    word = word.strip("'-")
    if word.endswith("'s"):
        word = word[:-2]
    if len(word) > 4 and word.endswith("ies"):
        return word[:-3] + "y"
    stripped = False
    for suffix in _SUFFIXES:
        if word.endswith(suffix) and len(word) - len(suffix) >= 3:
            if suffix == "s" and word.endswith(("ss", "us", "is")):
                break
            word = word[: -len(suffix)]
            stripped = True
            break
    if stripped and len(word) > 3 and word[-1] == word[-2] and word[-1] not in _VOWELS | {"l", "s"}:
        word = word[:-1]  # running -> runn -> run
    if len(word) > 3 and word.endswith("e"):
        word = word[:-1]
    return word


def content_words(text: str) -> list[str]:
    """Lower-cased words that carry meaning, in order, stop words and short tokens removed."""
    words = []
    for token in _TOKEN.findall(text.lower().replace("’", "'")):
        token = token.strip("'-")
        if len(token) < 3 and not token.isdigit():
            continue
        if token in _STOPWORDS:
            continue
        words.append(token)
    return words


@lru_cache(maxsize=16384)
def _stems(text: str) -> frozenset[str]:
    return frozenset(_stem(w) for w in content_words(text))


def stems(text: str) -> set[str]:
    """Stems of the content words; memoised because fact texts are compared again and again."""
    return set(_stems(text))


def _dedupe(values: Iterable[str]) -> list[str]:
    seen: set[str] = set()
    out = []
    for value in values:
        key = value.strip().lower()
        if key and key not in seen:
            seen.add(key)
            out.append(value.strip())
    return out


def _short(text: str, words: int = 12) -> str:
    parts = text.strip().rstrip(".").split()
    return " ".join(parts[:words]) + (" …" if len(parts) > words else "")


def _join(items: Sequence[str]) -> str:
    items = list(items)
    if not items:
        return ""
    if len(items) == 1:
        return items[0]
    return ", ".join(items[:-1]) + " and " + items[-1]


# --------------------------------------------------------------------------- the query frame

_TASK_VERB = re.compile(
    r"\b(?:plan|planning|organi[sz]e|organi[sz]ing|book|booking|find|finding|arrange|arranging|prepare|"
    r"preparing|set up|setting up|schedule|scheduling|choose|choosing|pick|buy|buying|join|joining|start|"
    r"starting|host|hosting|attend|attending|take|taking|sign up for|look for|looking for|put together|"
    r"throw|throwing|get ready for|sort out|figure out|try|trying|go to|going to|visit|visiting|run|running|"
    r"rent|renting|order|ordering|learn|learning|train for|training for|celebrate|celebrating)\s+"
    r"(?:me\s+|us\s+)?(?P<det>(?:a|an|the|my|our|some|this|that|another)\s+)?"
    r"(?P<topic>[^,.;:?!]+?)(?=\s+(?:for|with|in|on|at|by|before|after|this|next|so|that|to|while|when|"
    r"and|but|or|because|since|from|during|without|if)\b|[,.;:?!]|$)",
    re.IGNORECASE,
)
_PLACE = re.compile(r"\b(?:in|to|at|near|around|from)\s+(?P<place>(?:[A-Z][\w'\-]*(?:\s+|$)){1,3})")
_WHEN = re.compile(
    r"\b(?P<when>(?:this|next|coming|upcoming)\s+(?:week|weekend|month|year|spring|summer|autumn|fall|winter|"
    r"monday|tuesday|wednesday|thursday|friday|saturday|sunday)|(?:in|on|by|before|after)\s+(?:early\s+|late\s+|mid-?)?"
    r"(?:january|february|march|april|may|june|july|august|september|october|november|december)(?:\s+\d{1,2})?"
    r"|tomorrow|tonight|over the holidays)\b",
    re.IGNORECASE,
)
_CAPITALISED = re.compile(r"(?<![.!?]\s)(?<!^)\b([A-Z][\w'\-]+(?:\s+[A-Z][\w'\-]+){0,2})")
_NOT_ENTITIES = frozenset({"I", "I'm", "I've", "I'd", "I'll", "Can", "Could", "What", "How", "Help", "Please"})
_REQUEST_WORDS = _wordset(
    """plan planning organise organize organising organizing book booking find finding arrange arranging
    prepare preparing set setting schedule scheduling choose choosing pick buy buying join joining start
    starting host hosting attend attending take taking sign look looking put throw throwing sort figure
    try trying visit visiting thinking wondering considering idea ideas advice suggestion suggestions
    recommend recommendation recommendations tips ready able going"""
)


@dataclass(frozen=True)
class QueryFrame:
    text: str
    topic: str
    place: str
    when: str
    entities: list[str]

    def tail(self, position: int, size: int = 2) -> str:
        """A rotating slice of the query's entities, so constraints name them without repeating."""
        if not self.entities:
            return ""
        start = (position * size) % len(self.entities)
        picked = [self.entities[(start + i) % len(self.entities)] for i in range(min(size, len(self.entities)))]
        return ", ".join(_dedupe(picked))


@lru_cache(maxsize=4096)
def frame(query: str) -> QueryFrame:
    """Memoised: every plan, refinement and summary of a query parses the same text (treat as read-only)."""
    text = " ".join(query.split())
    match = _TASK_VERB.search(text)
    topic = match.group("topic").strip() if match else ""
    if len(topic.split()) > 6:
        topic = " ".join(topic.split()[:6])
    if not topic or not content_words(topic):
        topic = " ".join(w for w in content_words(text) if w not in _REQUEST_WORDS)[:60] or text[:40]
    determiner = (match.group("det") or "").strip().lower() if match else ""
    while match and topic.split()[0].lower() in _REQUEST_WORDS and len(topic.split()) > 1:
        # "plan joining a league": the task is the league, not the joining.
        inner = _TASK_VERB.match(topic)
        if inner is None:
            topic = " ".join(topic.split()[1:])
            continue
        topic = inner.group("topic").strip()
        determiner = (inner.group("det") or "").strip().lower()
    topic = f"{determiner if determiner in {'my', 'our'} else 'the'} {topic}"
    place_match = _PLACE.search(text)
    place = place_match.group("place").strip() if place_match else ""
    when_match = _WHEN.search(text)
    when = when_match.group("when").strip() if when_match else ""
    capitalised = [m for m in _CAPITALISED.findall(text) if m.split()[0] not in _NOT_ENTITIES]
    keywords = [w for w in content_words(text) if _stem(w) not in stems(topic) and w not in _REQUEST_WORDS]
    entities: list[str] = []
    for candidate in _dedupe([*capitalised, *keywords]):
        if not any(candidate.lower() in e.lower() or e.lower() in candidate.lower() for e in entities):
            entities.append(candidate)
    entities = entities[:8]
    return QueryFrame(text=text, topic=topic, place=place, when=when, entities=entities)


# --------------------------------------------------------------------------- dimensions


@dataclass(frozen=True)
class Dimension:
    name: str
    theme: str
    triggers: frozenset[str]
    action: str
    constraints: str
    follow_action: str
    follow_constraints: str


def _dim(name: str, theme: str, triggers: str, initial: tuple[str, str], follow: tuple[str, str]) -> Dimension:
    return Dimension(name, theme, frozenset(_stem(t) for t in triggers.split()), *initial, *follow)


PREPARATION, DOING, PEOPLE = "preparation", "getting it done", "people and wellbeing"
THEMES = (PREPARATION, DOING, PEOPLE)

DIMENSIONS: tuple[Dimension, ...] = (
    _dim("timing", PREPARATION, "date dates weekend weekends deadline deadlines timing calendar-free holiday holidays vacation",
         ("Which day and time {topic} actually happens{when}", "how far ahead it has to be arranged, days off, holidays; {tail}"),
         ("Which dates around {focus} leave room for {topic}", "{detail}; overlap, lead time")),
    _dim("schedule", PREPARATION, "calendar schedule appointment appointments meeting meetings class classes shift shifts routine commitment commitments exam exams reminder",
         ("What else is already on the calendar that week besides {topic}", "standing appointments, recurring meetings or classes, evening commitments; {tail}"),
         ("How {focus} on the calendar moves the slot for {topic}", "{detail}; conflicts, rescheduling")),
    _dim("budget", PREPARATION, "budget cost costs price prices money cheap expensive afford saving savings pay paid spend spending loan salary rent bill bills subscription fee fees debt",
         ("How much {topic} will cost in total", "monthly budget, savings goals, recent big purchases, fees; {tail}"),
         ("How the money tied up in {focus} limits spending on {topic}", "{detail}; affordability, cheaper options")),
    _dim("work", PREPARATION, "work job office boss manager colleague colleagues project projects career promotion remote client clients team deadline workload",
         ("How work hours and deadlines leave room for {topic}", "job hours, time off, busy periods at work; {tail}"),
         ("Whether {focus} at work clashes with {topic}", "{detail}; workload, leave, deadlines")),
    _dim("bookings", DOING, "book booking bookings reservation reservations confirm confirmation venue register registration ticket tickets order delivery availability",
         ("What has to be booked or confirmed for {topic}", "reservations, sign-up forms, tickets, opening hours; {tail}"),
         ("What to book differently because of {focus}", "{detail}; reservations, cancellation terms")),
    _dim("transport", DOING, "car drive driving train trains bus buses flight flights fly airport bike cycling taxi uber parking commute transit subway metro walk walking ride",
         ("How to get to and from {place}", "car or no car, public transit, parking, travel time; {tail}"),
         ("How to get around given {focus}", "{detail}; routes, parking, travel time")),
    _dim("venue", DOING, "party parties host hosting dinner home apartment flat house kitchen space venue seating table guests",
         ("Where {topic} takes place and how much room there is", "size of the home, kitchen, table and seating, or renting a venue; {tail}"),
         ("How {focus} limits the space for {topic}", "{detail}; seating, cooking, moving things around")),
    _dim("lodging", DOING, "hotel hotels stay airbnb room rooms move moving lease overnight cabin hostel accommodation trip",
         ("Where to sleep if {topic} runs overnight", "location, room type, check-in times, loyalty programmes; {tail}"),
         ("Which place to stay suits {focus}", "{detail}; location, comfort, price")),
    _dim("equipment", DOING, "gear equipment pack packing bag shoes boots clothes jacket laptop phone camera device tent tools kit charger headphones",
         ("What to pack or bring along for {topic}", "gear, shoes and clothing, devices, documents; {tail}"),
         ("Whether the {focus} is needed or in good shape for {topic}", "{detail}; repairs, replacements")),
    _dim("weather", DOING, "weather rain snow cold hot heat sun sunny winter summer spring autumn fall outdoor outdoors outside storm temperature",
         ("What the weather and season will be like during {topic}", "temperature, rain, daylight, indoor fallback; {tail}"),
         ("How {focus} changes what works outdoors for {topic}", "{detail}; season, indoor alternatives")),
    _dim("food", PEOPLE, "food eat eating dinner lunch breakfast meal meals restaurant restaurants cook cooking vegan vegetarian gluten gluten-free coeliac celiac diet drink drinks coffee wine cuisine snack snacks dairy lactose keto nut nuts",
         ("What there will be to eat and drink during {topic}", "dietary restrictions, food allergies or intolerances, vegetarian or gluten-free needs; {tail}"),
         ("Which meals suit {focus} around {topic}", "{detail}; menus, allergies, where to eat")),
    _dim("people", PEOPLE, "friend friends family partner wife husband girlfriend boyfriend sister brother mother mom father dad parent parents son daughter kid kids children child colleague coworker coworkers roommate neighbour neighbor guest guests group together wedding birthday",
         ("Who comes along or is affected by {topic}", "partner, family, friends or coworkers, their availability, diets and tastes; {tail}"),
         ("Whether {focus} joins in or needs to hear about {topic}", "{detail}; their plans, preferences, feelings")),
    _dim("health", PEOPLE, "health injury injured knee back ankle shoulder wrist pain doctor physio physiotherapy physiotherapist strained strain surgery sprain sick ill illness recovery therapy medication allergy allergic asthma pregnant pregnancy blood diabetes fitness exercise running gym hurt migraine soccer football basketball tennis hiking hike marathon league sport sports training yoga swim swimming climbing ski skiing workout dance physical",
         ("Whether any injury, pain or fitness limit gets in the way of {topic}", "old injuries, joint or back pain, physiotherapy, fitness level; {tail}"),
         ("Which lower-impact way of doing {topic} is easier on the {focus}", "{detail}; recovery, physical limits, gentler alternatives")),
    _dim("energy", PEOPLE, "stress stressed anxious anxiety tired exhausted burnout mood relax relaxing rest motivation lonely overwhelmed calm quiet noise noisy crowd crowds sleep",
         ("How much energy and calm is left for {topic}", "stress, sleep, rest, crowds and noise; {tail}"),
         ("How {focus} affects the energy available for {topic}", "{detail}; rest, pacing, quiet options")),
    _dim("pets", PEOPLE, "dog dogs cat cats pet pets puppy kitten vet walker sitter",
         ("Who looks after the pets while {topic} takes place", "sitter, boarding, walking and feeding times; {tail}"),
         ("Who looks after the {focus} during {topic}", "{detail}; sitter, boarding, feeding")),
)
_BY_NAME = {d.name: d for d in DIMENSIONS}
_ORDER = {d.name: i for i, d in enumerate(DIMENSIONS)}
_GENERIC = ("How {focus} bears on {topic}", "{detail}")
_GENERIC_ENTITIES = frozenset(
    {"health", "food", "travel", "finance", "planning", "plan", "plans", "preference", "preferences", "user",
     "activity", "event", "events", "goal", "interest", "identity", "personal", "info", "information", "time",
     "times", "day", "days", "week", "weeks", "month", "price", "cost", "type", "frequency", "include",
     "prefers", "preferred", "favourite", "favorite"}
    | {d.value.lower() for d in Domain}
)


def _relevance(dimension: Dimension, words: set[str] | frozenset[str]) -> int:
    return len(dimension.triggers & words)


def dimensions_of(text: str, *, salient: Iterable[str] = (), ignore: Iterable[str] = ()) -> list[Dimension]:
    """Dimensions whose cue words occur in the text, strongest first (ties in canonical order).

    Cue words among ``salient`` (a fact's related entities) count double; stems in
    ``ignore`` (the query's own words, when classifying a step) do not count.
    """
    return list(_dimensions_of(text, tuple(salient), frozenset(ignore)))


@lru_cache(maxsize=65536)
def _dimensions_of(text: str, salient: tuple[str, ...], skip: frozenset[str]) -> tuple[Dimension, ...]:
    """Memoised: fact texts and step texts are classified again in every refinement round."""
    words = _stems(text) - skip
    key_words = frozenset(w for phrase in salient for w in _stems(phrase)) - skip
    scored = [(d, _relevance(d, words) + 2 * _relevance(d, key_words)) for d in DIMENSIONS]
    return tuple(d for d, score in sorted(scored, key=lambda ds: (-ds[1], _ORDER[ds[0].name])) if score > 0)


def _ranked_dimensions(query: QueryFrame, rng: random.Random) -> list[Dimension]:
    words = stems(query.text)
    keyed = [(-_relevance(d, words), rng.random(), d) for d in DIMENSIONS]
    return [d for _, _, d in sorted(keyed, key=lambda k: (k[0], k[1]))]


def _fill(template: str, query: QueryFrame, **extra: str) -> str:
    values = {
        "topic": query.topic,
        "when": f" {query.when}" if query.when else "",
        "place": query.place or f"where {query.topic} takes place",
        "tail": "",
        **extra,
    }
    text = template.format(**values)
    return re.sub(r"\s*;\s*$", "", " ".join(text.split()))


def _initial_step(dimension: Dimension, query: QueryFrame, position: int) -> dict[str, str]:
    return {
        "action": _fill(dimension.action, query),
        "constraints": _fill(dimension.constraints, query, tail=query.tail(position)),
    }


# --------------------------------------------------------------------------- facts


@dataclass(frozen=True)
class FactView:
    fid: str
    info: str
    date: str
    entities: tuple[str, ...]
    dimensions: tuple[Dimension, ...]
    focus: str


def _facts(raw: Sequence[dict[str, Any]]) -> list[FactView]:
    return [
        _fact_view(
            str(item.get("fid", "")),
            str(item.get("info", "")),
            str(item.get("date", "")),
            tuple(str(e) for e in item.get("related_entities", []) if str(e).strip()),
        )
        for item in raw
    ]


@lru_cache(maxsize=65536)
def _fact_view(fid: str, info: str, date: str, entities: tuple[str, ...]) -> FactView:
    """Memoised: the same facts come back in every refinement, summary and answer prompt of a query."""
    dims = tuple(dimensions_of(info, salient=entities))
    return FactView(fid=fid, info=info, date=date, entities=entities, dimensions=dims, focus=_focus(info, entities, dims))


def _focus(info: str, entities: Sequence[str], dims: Sequence[Dimension]) -> str:
    """The fact's most telling entity: one that triggered its dimension, else a specific entity, else a word."""
    specific = [e for e in entities if e.lower() not in _GENERIC_ENTITIES and content_words(e)]
    if dims:
        for entity in specific:
            if stems(entity) & dims[0].triggers:
                return entity
        words = [w for w in content_words(info) if _stem(w) in dims[0].triggers and w not in _GENERIC_ENTITIES]
        if words:
            return words[0]
    if specific:
        return specific[0]
    words = sorted((w for w in content_words(info) if w not in _GENERIC_ENTITIES), key=len, reverse=True)
    return words[0] if words else _short(info, 3)


def _recent_first(facts: Sequence[FactView]) -> list[FactView]:
    return sorted(facts, key=lambda f: (f.date, f.fid), reverse=True)


def _mentioned(fact: FactView, text: str) -> bool:
    """Whether the text already names the fact's focus (as whole words: 'bus' is not in 'busy')."""
    return _mentioned_in_lowered(fact, text.lower())


def _mentioned_in_lowered(fact: FactView, lowered: str) -> bool:
    """:func:`_mentioned` for a text already lower-cased (callers test many facts against one text)."""
    focus = fact.focus.lower()
    return focus in lowered and _focus_pattern(focus).search(lowered) is not None  # substring test first: cheap


@lru_cache(maxsize=16384)
def _focus_pattern(focus: str) -> re.Pattern[str]:
    return re.compile(rf"(?<!\w){re.escape(focus)}(?!\w)")


# --------------------------------------------------------------------------- augmentation


@simulates("pgr_augment")
def augment(variables: dict[str, Any], rng: random.Random) -> dict[str, Any]:
    query = " ".join(str(variables["query"]).split())
    facts = _recent_first(_facts(variables.get("context_facts", [])))
    entities = _dedupe(e for f in facts for e in (*f.entities, f.focus))[:AUGMENT_ENTITIES]
    if not entities:
        return {"augmented_query": f"{query} (asked on {variables.get('query_date', '')})".strip()}
    return {"augmented_query": f"{query} — for someone whose recent history involves {_join(entities)}."}


# --------------------------------------------------------------------------- Phase 1


def _chain_dimensions(query: QueryFrame, rng: random.Random) -> list[Dimension]:
    ranked = _ranked_dimensions(query, rng)
    count = rng.randint(5, 7)
    picked = [next(d for d in ranked if d.theme == theme) for theme in THEMES]
    for dimension in ranked:
        if len(picked) >= count:
            break
        if dimension not in picked:
            picked.append(dimension)
    return sorted(picked, key=lambda d: _ORDER[d.name])


@simulates("pgr_cot_initial")
def cot_initial(variables: dict[str, Any], rng: random.Random) -> dict[str, Any]:
    query = frame(str(variables["query"]))
    dims = _chain_dimensions(query, rng)
    return {"steps": [_initial_step(d, query, i) for i, d in enumerate(dims)]}


def _root(query: QueryFrame) -> dict[str, str]:
    return {
        "action": _fill("Go ahead with {topic}{when}", query),
        "constraints": _fill("what {topic} needs first; {tail}", query, tail=query.tail(0, 3)),
    }


@simulates("pgr_tot_initial")
def tot_initial(variables: dict[str, Any], rng: random.Random) -> dict[str, Any]:
    query = frame(str(variables["query"]))
    ranked = _ranked_dimensions(query, rng)
    by_theme = {theme: [d for d in ranked if d.theme == theme] for theme in THEMES}
    themes = list(THEMES)
    if rng.random() < 1 / 3:
        # Two branches: drop the theme whose best dimension is least related to the query.
        weakest = min(themes, key=lambda t: (_relevance(by_theme[t][0], stems(query.text)), -THEMES.index(t)))
        themes = [t for t in themes if t != weakest]
    nodes: list[dict[str, Any]] = [{"id": "A1", **_root(query), "parent": None, "children": []}]
    position = 1
    for theme in themes:
        head, *rest = by_theme[theme]
        branch_id = f"A{len(nodes) + 1}"
        nodes[0]["children"].append(branch_id)
        branch_children: list[str] = []
        nodes.append({"id": branch_id, **_initial_step(head, query, position), "parent": "A1", "children": branch_children})
        position += 1
        for child in rest[: 1 if rng.random() < 1 / 3 else 2]:
            child_id = f"A{len(nodes) + 1}"
            branch_children.append(child_id)
            nodes.append({"id": child_id, **_initial_step(child, query, position), "parent": branch_id, "children": []})
            position += 1
    return {"nodes": nodes}


# --------------------------------------------------------------------------- Phase 2


def _step_dimension(text: str, query: QueryFrame) -> Dimension | None:
    """The aspect a step is about, judged without the query's own words (which every step repeats)."""
    base = text.split(KNOWN, 1)[0]
    found = dimensions_of(base, ignore=stems(query.text))
    return found[0] if found else None


def _folded(base: str, facts: Sequence[FactView]) -> str:
    if not facts:
        return base
    return base + KNOWN + "; ".join(f"{f.focus} ({f.date})" for f in facts)


def _rewrite(step: dict[str, Any], facts: Sequence[FactView], query: QueryFrame) -> dict[str, Any]:
    """Fold the most recent facts of the step's dimension into its constraints."""
    action = str(step.get("action", ""))
    base = str(step.get("constraints", "")).split(KNOWN, 1)[0]
    dimension = _step_dimension(f"{action} {base}", query)
    matching: list[FactView] = []
    if dimension is not None:
        matching = [f for f in _recent_first(facts) if f.dimensions and f.dimensions[0] is dimension]
    return {**step, "action": action, "constraints": _folded(base, matching[:FOLDED_PER_STEP])}


def _follow_up(fact: FactView, query: QueryFrame) -> tuple[dict[str, str], Dimension | None]:
    dimension = fact.dimensions[0] if fact.dimensions else None
    action, constraints = (
        (dimension.follow_action, dimension.follow_constraints) if dimension else _GENERIC
    )
    detail = _short(fact.info)
    step = {
        "action": _fill(action, query, focus=fact.focus),
        "constraints": _fill(constraints, query, focus=fact.focus, detail=detail),
    }
    return step, dimension


def _new_facts(steps: Sequence[dict[str, Any]], facts: Sequence[FactView]) -> list[FactView]:
    """Facts no step mentions yet, most recent first, one per focus."""
    text = " ".join(f"{s.get('action', '')} {s.get('constraints', '')}" for s in steps).lower()
    fresh: list[FactView] = []
    for fact in _recent_first(facts):
        if _mentioned_in_lowered(fact, text) or any(f.focus.lower() == fact.focus.lower() for f in fresh):
            continue
        fresh.append(fact)
    return fresh[:MAX_NEW_STEPS]


@simulates("pgr_cot_refine")
def cot_refine(variables: dict[str, Any], rng: random.Random) -> dict[str, Any]:
    query = frame(str(variables["query"]))
    facts = _facts(variables.get("facts", []))
    previous = list(variables.get("previous_steps", []))
    fresh = _new_facts(previous, facts)
    rewritten = [_rewrite(s, facts, query) for s in previous]
    added = [_follow_up(f, query)[0] for f in fresh]
    keep = max(MAX_CHAIN_STEPS - len(added), 0)
    steps = [{"action": s["action"], "constraints": s["constraints"]} for s in rewritten[:keep]] + added
    return {"steps": steps}


@simulates("pgr_tot_refine")
def tot_refine(variables: dict[str, Any], rng: random.Random) -> dict[str, Any]:
    query = frame(str(variables["query"]))
    facts = _facts(variables.get("facts", []))
    previous = list(variables.get("previous_steps", []))
    fresh = _new_facts(previous, facts)
    nodes = [
        {
            "id": str(s["id"]),
            "action": s["action"],
            "constraints": s["constraints"] if s.get("parent") is None else _rewrite(s, facts, query)["constraints"],
            "parent": s.get("parent"),
            "children": [],
        }
        for s in previous
    ]
    room = MAX_TREE_NODES - len(nodes)
    if room < len(fresh):
        # Drop the oldest leaves added by earlier refinements (never the root or a branch).
        removable = [n for n in nodes[::-1] if n["parent"] is not None and not any(m["parent"] == n["id"] for m in nodes)]
        for node in removable[: len(fresh) - room]:
            nodes.remove(node)
    root = next((n for n in nodes if n["parent"] is None), nodes[0] if nodes else None)
    numbers = [int(n["id"][1:]) for n in nodes if re.fullmatch(r"A\d+", n["id"])]
    next_number = max(numbers, default=0) + 1
    for fact in fresh:
        step, dimension = _follow_up(fact, query)
        parent = root["id"] if root else None
        if dimension is not None and root is not None:
            for node in nodes:
                own = _step_dimension(f"{node['action']} {node['constraints']}", query)
                if node["parent"] == root["id"] and own is not None and own.theme == dimension.theme:
                    parent = node["id"]
                    break
        nodes.append({"id": f"A{next_number}", **step, "parent": parent, "children": []})
        next_number += 1
    for node in nodes:
        node["children"] = [m["id"] for m in nodes if m["parent"] == node["id"]]
    return {"nodes": nodes}


# --------------------------------------------------------------------------- summary and answer


def _steps_text(steps: Sequence[dict[str, Any]]) -> str:
    return " ".join(f"{s.get('action', '')} {s.get('constraints', '')}" for s in steps)


def _prioritised(facts: Sequence[FactView], context: str) -> list[FactView]:
    """Facts the steps folded in first, then by word overlap with the context, then most recent."""
    context_stems = _stems(context)
    lowered = context.lower()
    return sorted(
        facts,
        key=lambda f: (not _mentioned_in_lowered(f, lowered), -len(_stems(f.info) & context_stems), _neg_date(f), f.fid),
    )


def _neg_date(fact: FactView) -> tuple[int, ...]:
    return tuple(-ord(c) for c in fact.date)


@simulates("pgr_summary")
def summary(variables: dict[str, Any], rng: random.Random) -> dict[str, Any]:
    query = frame(str(variables["query"]))
    steps = list(variables.get("steps", []))
    facts = _facts(variables.get("facts", []))
    dims = _dedupe(
        d.name
        for s in steps
        for d in dimensions_of(f"{s.get('action', '')} {s.get('constraints', '')}".split(KNOWN)[0], ignore=stems(query.text))[:1]
    )
    cited = _prioritised(facts, _steps_text(steps))[:SUMMARY_FACTS]
    parts = [f"Running ahead through {query.topic}, the simulation covered {_join(dims) or 'the task itself'}."]
    if cited:
        memories = "; ".join(f"{_short(f.info, 16)} ({f.date})" for f in cited)
        parts.append(f"It brought back {len(facts)} memories; the ones that shape the plan most: {memories}.")
        foci = _dedupe(f.focus for f in cited)[:3]
        parts.append(f"The plan therefore has to work around {_join(foci)}.")
    else:
        parts.append("No stored memory bore on it, so the plan stays generic.")
    return {"summary": " ".join(parts)}


@simulates("pgr_answer")
def answer(variables: dict[str, Any], rng: random.Random) -> dict[str, Any]:
    query = frame(str(variables["query"]))
    facts = _facts(variables.get("facts", []))
    summary_text = str(variables.get("summary", ""))
    cited = _prioritised(facts, f"{query.text} {summary_text}")[:ANSWER_FACTS]
    lines = [f"**{query.topic[:1].upper()}{query.topic[1:]}{' ' + query.when if query.when else ''}** — shaped by what you've told me:"]
    for fact in cited:
        dimension = fact.dimensions[0].name if fact.dimensions else "context"
        lines.append(f"- *{dimension}*: {fact.info.rstrip('.')} (noted {fact.date}).")
    if not cited:
        lines.append("- I have nothing stored that bears on this, so here are general next steps.")
    lines.append("Next step: confirm the date, then book what has to be booked first.")
    reasoning = f"Used {len(cited)} of {len(facts)} facts" + (" and the prospection summary." if summary_text else ".")
    return {"reasoning": reasoning, "answer": "\n".join(lines)}


# --------------------------------------------------------------------------- judges


def _overlap(reference: str, fact: str) -> tuple[float, int]:
    wanted = stems(reference)
    if not wanted:
        return 0.0, 0
    shared = len(wanted & stems(fact))
    return shared / len(wanted), shared


@simulates("judge_references")
def judge_references(variables: dict[str, Any], rng: random.Random) -> dict[str, Any]:
    retrieved = [str(item.get("info", "")) for item in variables.get("retrieved", [])]
    verdicts = []
    for reference in variables.get("references", []):
        text = str(reference["text"])
        best_share, best_shared, best_fact = 0.0, 0, ""
        for info in retrieved:
            share, shared = _overlap(text, info)
            if (share, shared) > (best_share, best_shared):
                best_share, best_shared, best_fact = share, shared, info
        needed = min(JUDGE_MIN_SHARED, len(stems(text)))
        found = best_share >= JUDGE_OVERLAP and best_shared >= needed
        reason = (
            f"'{_short(best_fact, 10)}' shares {best_share:.0%} of its content words"
            if best_fact
            else "no retrieved fact shares its content words"
        )
        verdicts.append({"number": int(reference["number"]), "found": found, "reason": reason})
    return {"verdicts": verdicts}


def _cited(text: str, statements: Iterable[str]) -> int:
    have = stems(text)
    count = 0
    for statement in statements:
        wanted = stems(statement)
        if len(wanted) >= 2 and len(wanted & have) >= max(2, CITE_SHARE * len(wanted)):
            count += 1
    return count


@simulates("judge_pairwise")
def judge_pairwise(variables: dict[str, Any], rng: random.Random) -> dict[str, Any]:
    statements = [str(f.get("info", "")) for f in variables.get("user_facts", [])]
    statements += [str(r) for r in variables.get("references", [])]
    first = _cited(str(variables["first_response"]), statements)
    second = _cited(str(variables["second_response"]), statements)
    choice = "first" if first > second else "second" if second > first else "tie"
    reasoning = f"The first response draws on {first} of the user's facts, the second on {second}."
    return {"reasoning": reasoning, "choice": choice}
