"""The consequence a life update has for some kind of plan: "..., which complicates late gigs".

People rarely state a change in their life without saying what it gets in the
way of, and that clause is what ties a reference to the request it matters
for: a reference bridges to a scene of its request's domain (concert nights,
window seats on long flights) in words the request does not use, so it is
related to the request without echoing it. Distractor updates bridge the same
way, at the same rate, to a scene of one of the user's other requests, so
the clause is never a sign of a reference; plain remarks may bridge too.

A bridged text is ``core + joiner + frame``; :func:`split_bridge` reads it
back (the stored text, a first-person saying of it, or a fact extracted from
that saying), so the need of a statement is read from its core alone.
"""

from __future__ import annotations

import random
import re
from collections.abc import Callable
from functools import lru_cache

from memoryquest.contracts import Domain

D = Domain
SCENES: dict[Domain, tuple[str, ...]] = {
    D.ALARM: (
        "early starts",
        "getting up on weekday mornings",
        "the morning routine",
        "early wake-ups before work",
        "snoozing and getting out of bed",
        "the first hour of the day",
        "weekend lie-ins",
        "reminders that wake the household",
        "the dawn alarm on workdays",
        "setting reminders for the next day",
        "quiet alarms for shift mornings",
        "waking up on time for flights out",
    ),
    D.BOOKS: (
        "long reading sessions",
        "evenings with a novel",
        "book club nights",
        "reading on the commute",
        "getting through the reading list",
        "library visits",
        "audiobooks on walks",
        "browsing second-hand bookshops",
        "finishing a series before the sequel",
        "annotating a paperback",
        "bedtime chapters",
        "swapping books with friends",
    ),
    D.BUSES: (
        "long coach journeys",
        "bus trips across town",
        "catching the coach",
        "commuting by bus",
        "overnight coach rides",
        "waiting at draughty bus stops",
        "the night bus home",
        "day trips by coach",
        "transfers between regional buses",
        "rural bus timetables",
        "stopping services through small towns",
        "school-holiday coach fares",
    ),
    D.CALENDAR: (
        "the weekly schedule",
        "appointments and meetings",
        "juggling the diary",
        "fitting commitments into the week",
        "planning the next few weeks",
        "recurring commitments",
        "the shared family calendar",
        "blocking out focus time",
        "keeping the diary free for friends",
        "the block of Friday meetings",
        "moving appointments around",
        "booking in birthdays and anniversaries",
    ),
    D.EVENTS: (
        "festivals and shows",
        "nights out at live events",
        "exhibitions and talks",
        "crowded venues",
        "conferences and meetups",
        "street fairs and markets",
        "ticketed talks",
        "standing for hours at open-air shows",
        "queueing for popular exhibitions",
        "late entry to gallery nights",
        "charity runs and fun days",
        "open studio weekends",
    ),
    D.FINANCE: (
        "the monthly accounts",
        "savings and investments",
        "paying the bills on time",
        "keeping the finances in order",
        "the household budget spreadsheet",
        "the pension contributions",
        "tracking spending each month",
        "the emergency fund",
        "the quarterly tax return",
        "direct debits at the start of the month",
        "topping up the savings pot",
        "checking the credit card statement",
    ),
    D.FLIGHTS: (
        "long-haul flights",
        "airport transfers and check-in",
        "hours in an aircraft seat",
        "early departures from the airport",
        "connecting flights",
        "red-eye flights",
        "boarding with carry-on only",
        "layovers in big hubs",
        "budget airline baggage rules",
        "aisle seats on short hops",
        "security queues at dawn",
        "booking seats together on a plane",
    ),
    D.GAMES: (
        "long gaming sessions",
        "online matches with friends",
        "late-night console sessions",
        "co-op campaigns",
        "competitive play",
        "raids that run past midnight",
        "board game evenings",
        "streaming gameplay",
        "weekend tabletop campaigns",
        "ranked ladders after work",
        "handheld gaming on the go",
        "pre-ordering new releases",
    ),
    D.HOTELS: (
        "hotel stays",
        "nights away in hotel rooms",
        "check-in and room choice",
        "weekends in a guesthouse",
        "staying somewhere unfamiliar",
        "city-break hotel nights",
        "breakfast buffets and late check-outs",
        "resort stays",
        "picking a quiet room away from the lift",
        "booking a twin room",
        "boutique hotel breaks",
        "hostel dorms on a budget",
    ),
    D.MEDIA: (
        "streaming and podcasts",
        "catching up on series",
        "news and documentaries",
        "evenings in front of the screen",
        "following favourite channels",
        "binge-watching weekends",
        "long podcast episodes",
        "the news in the evenings",
        "watching the match on the sofa",
        "a documentary every Sunday",
        "keeping up with new seasons",
        "radio in the kitchen",
    ),
    D.MESSAGING: (
        "group chats",
        "keeping in touch with people",
        "replying to messages",
        "voice notes and video calls",
        "late replies to friends",
        "the family group thread",
        "late-night texting",
        "keeping up with old friends",
        "planning things over chat",
        "answering voice messages",
        "the neighbours' chat group",
        "sending photos to the family",
    ),
    D.MOVIES: (
        "cinema nights",
        "film screenings",
        "long films at the cinema",
        "movie nights with friends",
        "premieres and matinees",
        "double bills",
        "late showings",
        "film festival days",
        "Sunday matinees",
        "catching new releases on opening weekend",
        "arthouse screenings",
        "outdoor cinema evenings",
    ),
    D.MUSIC: (
        "concerts and gigs",
        "listening to albums",
        "playlists and headphones",
        "live sets in loud venues",
        "practising an instrument",
        "record shopping",
        "festival weekends",
        "rehearsals with the band",
        "singing in a choir",
        "vinyl evenings at home",
        "discovering new artists",
        "open-mic nights",
    ),
    D.RENTAL_CARS: (
        "long drives",
        "road trips in a hire car",
        "picking up a rental car",
        "driving somewhere new",
        "time behind the wheel",
        "weekend car hire",
        "mountain roads in a hire car",
        "returning the car on time",
        "one-way car hire",
        "collecting keys at the hire desk",
        "fuel stops on unfamiliar motorways",
        "child seats in a hired car",
    ),
    D.RESTAURANTS: (
        "meals out",
        "dinners with friends",
        "trying new places to eat",
        "long lunches",
        "tasting menus",
        "brunch with friends",
        "late dinners out",
        "food markets and street food",
        "dinner reservations for a group",
        "birthday dinners out",
        "trying a new cuisine",
        "booth seats at a bistro",
    ),
    D.SERVICES: (
        "appointments with professionals",
        "repairs around the place",
        "bookings with tradespeople",
        "errands and paperwork",
        "regular check-ups",
        "home visits from technicians",
        "the yearly servicing",
        "getting quotes from contractors",
        "haircut appointments",
        "the annual boiler check",
        "dropping the car off for its MOT",
        "visits from the cleaner",
    ),
    D.SHOPPING: (
        "shopping trips",
        "buying things online",
        "big purchases",
        "browsing the high street",
        "deliveries and returns",
        "the weekly supermarket run",
        "sale days",
        "trying things on in town",
        "comparing prices before buying",
        "collecting parcels from lockers",
        "gift shopping for birthdays",
        "the weekly farmers' market haul",
    ),
    D.SPORTS: (
        "training sessions",
        "match days",
        "playing with the team",
        "workouts at the gym",
        "watching games at the stadium",
        "weekend league games",
        "early morning runs",
        "swimming laps",
        "cycling club rides",
        "yoga classes",
        "five-a-side kickabouts",
        "tennis doubles on weekends",
    ),
    D.TRAIN: (
        "train journeys",
        "hours on the rail network",
        "commuting by train",
        "changing trains",
        "early trains out of the city",
        "sleeper trains",
        "standing on packed carriages",
        "rail day trips",
        "seat reservations on intercity trains",
        "connections at busy stations",
        "quiet coaches on weekday trains",
        "railcard discounts",
    ),
    D.TRAVEL: (
        "trips away",
        "holidays abroad",
        "sightseeing days",
        "packing for a getaway",
        "weekends exploring a new city",
        "hiking holidays",
        "long weekends away",
        "trips to see family abroad",
        "city breaks in the spring",
        "island hopping",
        "booking excursions abroad",
        "long-distance visits to old friends",
    ),
}
"""Kinds of plan in each domain that a change in someone's life can get in the way of."""

CONNECTIVES = (
    ", which",
    ", and that",
    " — that",
    ", and it",
    " — which",
    ", something that",
    ", and this",
    ", which in turn",
    " — and that",
    ", a change that",
    ", which now",
    " — and it",
)
HEDGES = (
    "",
    "",
    "",
    "honestly",
    "really",
    "kind of",
    "rather",
    "probably",
    "definitely",
    "already",
    "inevitably",
    "quietly",
    "somewhat",
    "frankly",
    "clearly",
    "certainly",
    "slightly",
    "sort of",
    "genuinely",
    "still",
)
"""A joiner is a connective and, often, a hedge: composed, so no few joiners dominate the text."""
JOINERS = tuple(dict.fromkeys(f"{c} {h}".rstrip() for c in CONNECTIVES for h in HEDGES))
FRAMES = (
    "complicates {scene}",
    "changes things for {scene}",
    "puts limits on {scene}",
    "matters for {scene}",
    "has a knock-on effect on {scene}",
    "cuts into {scene}",
    "means rethinking {scene}",
    "affects {scene}",
    "makes {scene} trickier",
    "takes some of the ease out of {scene}",
    "shapes {scene} for now",
    "weighs on {scene}",
    "gets in the way of {scene}",
    "adds a wrinkle to {scene}",
    "throws a spanner into {scene}",
    "leaves less room for {scene}",
    "changes the maths on {scene}",
    "makes {scene} a bit harder",
    "has to be factored into {scene}",
    "narrows the options for {scene}",
    "plays into {scene}",
    "makes {scene} less straightforward",
    "hangs over {scene}",
    "eats into {scene}",
    "takes a toll on {scene}",
    "puts a damper on {scene}",
    "calls for a rethink of {scene}",
    "makes a difference to {scene}",
    "bears on {scene}",
    "sets the terms for {scene}",
    "reshuffles {scene}",
    "squeezes {scene}",
    "tips the balance on {scene}",
    "raises questions about {scene}",
    "complicates the logistics of {scene}",
    "makes {scene} harder to pull off",
    "turns {scene} into a juggling act",
    "puts pressure on {scene}",
    "takes a bite out of {scene}",
    "has consequences for {scene}",
    "constrains {scene}",
    "changes the picture for {scene}",
    "means extra planning around {scene}",
    "makes {scene} a bit of a puzzle",
    "rubs up against {scene}",
    "shifts the priorities around {scene}",
    "tightens things up for {scene}",
    "gets tangled up with {scene}",
    "limits what's possible for {scene}",
    "reshapes {scene}",
    "muddles {scene}",
    "brings new limits to {scene}",
    "is a factor in {scene}",
    "casts a shadow over {scene}",
    "needs working around when it comes to {scene}",
    "puts a question mark over {scene}",
    "knocks {scene} off balance",
    "rearranges {scene}",
    "dictates a lot about {scene}",
    "makes {scene} more of an effort",
)
"""What the update does to the scene; said the same way by references and distractors."""

PAIRED_SHARE = 0.6
"""Bridges that name two scenes of the domain ("concerts and gigs and listening to albums")."""
BRIDGE_SHARE = 0.9
"""Updates that come with a bridge; the rest stand alone, references and distractors alike."""


@lru_cache(maxsize=1)
def _pattern() -> re.Pattern[str]:
    connectives = "|".join(re.escape(c) for c in CONNECTIVES)
    hedges = "|".join(re.escape(h) for h in HEDGES if h)
    joiners = rf"(?:{connectives})(?: (?:{hedges}))?"
    frames = "|".join(
        re.escape(frame).replace(re.escape("{scene}"), r"(?:.+?)") for frame in FRAMES
    )
    return re.compile(rf"^(?P<core>.+)(?P<joiner>{joiners}) (?P<frame>{frames})[.!]?$", re.DOTALL)


def split_bridge(text: str) -> tuple[str, str]:
    """(core, bridge) of ``text``; the bridge is "" when the text has none."""
    match = _pattern().match(text.strip())
    if match is None:
        return text, ""
    core = match.group("core")
    return core, text.strip()[len(core) :].rstrip(".!")


def core_of(text: str) -> str:
    return split_bridge(text)[0]


def bridge(
    domain: Domain, rng: random.Random, acceptable: Callable[[str], bool] = lambda _: True
) -> str:
    """A bridge clause (", which complicates concert nights") to a scene of ``domain``.

    ``acceptable`` vets the whole clause (say, for words it shares with a
    request); scenes are tried in a random order and "" comes back when none
    passes.
    """
    scenes = list(SCENES[domain])
    rng.shuffle(scenes)
    pairs = [f"{a} and {b}" for a, b in zip(scenes, scenes[1:], strict=False)]
    options = (pairs + scenes) if rng.random() < PAIRED_SHARE else scenes
    for scene in options:
        clause = f"{rng.choice(JOINERS)} {rng.choice(FRAMES).format(scene=scene)}"
        if acceptable(clause):
            return clause
    return ""


def bridged_domain(text: str) -> Domain | None:
    """The domain whose scene the bridge of ``text`` names (None without a bridge or a known scene)."""
    clause = split_bridge(text)[1]
    if not clause:
        return None
    return next(
        (domain for domain, scenes in SCENES.items() if any(scene in clause for scene in scenes)),
        None,
    )


def say_bridge(bridge_clause: str, rng: random.Random) -> str:
    """The same bridge, joined the way the speaker happens to join it this time."""
    match = _pattern().match("x" + bridge_clause)
    if match is None:
        return bridge_clause
    return f"{rng.choice(JOINERS)} {match.group('frame')}"
