"""Phrase banks for simulated conversations, composed from parts and filled from the persona.

Nothing here is said as a whole sentence from a fixed list: a sentence is an
opener, a body and sometimes a tail, each picked from its own bank, with slots
filled from the persona's affinities, demographics and situation, from the
request's topic, or from small random details (a time, a price, a day). With
a few dozen parts per slot the same sentence seldom comes back for one user.

Two sides:

* the user's **personal statements** — preferences from the affinities, small
  news built on them ("I just finished The Martian again"), the situation
  they are chatting in, who they are — each optionally framed in time
  ("These days ...", "Since the spring ...") the way a life update is framed,
  so a stated update is one personal remark among many;
* the **topic** of the request (what kind of help and about what), from which
  the assistant's proposals, questions and both sides' closings are drawn, so
  the conversation stays on what was asked.

All functions take a seeded ``random.Random`` and are pure otherwise.
"""

from __future__ import annotations

import random
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from memoryquest.contracts import Affinity, Demographics, Domain
from memoryquest.simulator.grammar import (
    MONTHS,
    WEEKDAYS,
    clean_value,
    fix_articles,
    from_first_person,
    join_list,
    name_key,
    ordinal,
    plural,
    sentence,
    shift_person,
)
from memoryquest.simulator.needs.bridges import bridge
from memoryquest.text import STOPWORDS

D = Domain


def pick(rng: random.Random, options: Sequence[str]) -> str:
    return options[rng.randrange(len(options))] if options else ""


def lower_start(text: str) -> str:
    """Lower-case the first letter when the first word is an ordinary word ("Since" yes, "I" and names no)."""
    first = text.split(" ", 1)[0]
    bare = re.sub(r"[^A-Za-z']", "", first)
    if bare in {"I", "I'm", "I've", "I'd", "I'll"} or not bare:
        return text
    if bare.lower() in STOPWORDS or bare.lower() in _COMMON_STARTERS:
        return text[:1].lower() + text[1:]
    return text


_COMMON_STARTERS = frozenset(
    [
        "great",
        "perfect",
        "lovely",
        "love",
        "adding",
        "starting",
        "done",
        "okay",
        "sure",
        "yes",
        "yeah",
        "let's",
        "book",
        "go",
        "set",
        "keep",
        "helpful",
        "thanks",
        "good",
        "nice",
        "hmm",
        "interesting",
        "close",
        "could",
        "decent",
        "fair",
        "huh",
        "ooh",
        "oh",
        "sounds",
        "what's",
        "what",
        "how",
        "which",
        "will",
        "can",
        "is",
        "does",
        "any",
        "anything",
        "got",
        "should",
        "when",
        "where",
        "since",
        "ever",
        "lately",
        "recently",
        "these",
        "every",
        "most",
        "right",
        "nowadays",
        "for",
        "after",
        "until",
        "because",
        "at",
        "in",
        "on",
        "this",
        "last",
        "next",
        "now",
        "as",
        "there",
        "things",
        "work",
        "money",
        "physio",
        "ever-since",
        "honestly",
    ]
)


# --------------------------------------------------------------------------- small random details


def clock_time(rng: random.Random, part: str = "") -> str:
    ranges = {"morning": (7, 11), "afternoon": (12, 17), "evening": (17, 21), "night": (19, 23)}
    low, high = ranges.get(part.lower(), (8, 21))
    hour = rng.randint(low, high)
    minute = pick(rng, ("00", "15", "30", "45", "10", "40", "20", "50"))
    return f"{(hour % 12) or 12}:{minute} {'AM' if hour < 12 else 'PM'}"


def price(rng: random.Random, low: int = 12, high: int = 240) -> str:
    return f"${rng.randint(low, high)}"


_PRICES: dict[Domain, tuple[int, int]] = {
    D.BOOKS: (8, 35),
    D.MOVIES: (9, 28),
    D.MEDIA: (4, 20),
    D.MUSIC: (5, 25),
    D.GAMES: (10, 70),
    D.RESTAURANTS: (25, 140),
    D.HOTELS: (80, 380),
    D.FLIGHTS: (90, 900),
    D.TRAIN: (15, 160),
    D.BUSES: (10, 90),
    D.EVENTS: (15, 160),
    D.SHOPPING: (15, 400),
    D.SERVICES: (25, 160),
    D.RENTAL_CARS: (35, 160),
    D.SPORTS: (20, 180),
    D.TRAVEL: (150, 2400),
}


def rating(rng: random.Random) -> str:
    return f"{rng.randint(40, 49) / 10:.1f}"


def day_phrase(rng: random.Random) -> str:
    return pick(
        rng,
        (
            *(f"on {d}" for d in WEEKDAYS),
            "this weekend",
            "next week",
            "tomorrow",
            "later this week",
        ),
    )


def month_name(rng: random.Random) -> str:
    return pick(rng, MONTHS)


# --------------------------------------------------------------------------- the user's voice


@dataclass(frozen=True)
class AttributeVoice:
    """How a user talks about one affinity attribute."""

    noun: str  # "alarm sound": "my usual {noun}", "for {noun}"
    says: tuple[str, ...]  # first person; {v} = all values joined, {v1} = one value
    news: tuple[str, ...] = ()  # small recent things built on one value {v1}
    plural: bool = False  # values are a list of favourites ("my favorite authors")


def _a(
    noun: str, says: tuple[str, ...], news: tuple[str, ...] = (), plural: bool = False
) -> AttributeVoice:
    return AttributeVoice(noun=noun, says=says, news=news, plural=plural)


_ATTRIBUTES: dict[str, AttributeVoice] = {
    "alarm time preference": _a(
        "wake-up time",
        (
            "my alarm goes off at {v1} on weekdays",
            "I get up at {v1} on most days",
            "I've had my alarm on {v1} since {month}",
        ),
        ("I was up before {v1} twice since {day}", "I slept through my {v1} alarm on {day}"),
    ),
    "alarm sound preference": _a(
        "alarm sound",
        (
            "my alarm plays {v}",
            "I only wake up properly to {v1}",
            "I switched my alarm to {v1} a while ago and I'm still on it",
        ),
    ),
    "alarm recurring preference": _a(
        "alarm schedule",
        ("my alarm repeats on {v}", "I have the alarm set for {v1} and nothing else"),
    ),
    "genre": _a(
        "genres",
        (
            "I've read mostly {v} since {month}",
            "my reading is {v1} almost every night",
            "I get through a {v1} book every couple of weeks",
        ),
        (
            "I got three {v1} books from the library on {day}",
            "I finished a {v1} novel on the train on {day}",
        ),
        plural=True,
    ),
    "favorite authors": _a(
        "authors",
        (
            "my favorite authors are {v}",
            "I pre-order anything new from {v1}",
            "I've read everything by {v1} since a friend got me into it",
        ),
        (
            "I got a signed {v1} book as a gift in {month}",
            "I started the new {v1} book after a long week",
        ),
        plural=True,
    ),
    "favorite books": _a(
        "books",
        (
            "my all-time favorite books are {v}",
            "I reread {v1} every year or so",
            "my copy of {v1} is falling apart from rereading",
        ),
        ("I lent my copy of {v1} to my coworker on {day}", "I finished {v1} again on {day}"),
        plural=True,
    ),
    "favorite book series": _a(
        "book series",
        ("my favorite series is {v}", "I've read the {v1} books twice since {month}"),
        ("I'm on book two of {v1} again since {month}",),
        plural=True,
    ),
    "reading format": _a(
        "reading format",
        (
            "I read {v} books",
            "my reading is mostly {v1} since {month}",
            "I got used to {v1} after a long trip",
        ),
    ),
    "reading time preference": _a(
        "reading time",
        (
            "my reading time is the {v1}",
            "I read in the {v1} after work",
            "I get my reading done in the {v1}",
        ),
    ),
    "reading frequency": _a("reading habit", ("I read {v}", "I get through a book {v1}")),
    "preferred bus company": _a(
        "bus company",
        (
            "my go-to bus companies are {v}",
            "I book {v1} for coach trips",
            "I've stuck with {v1} since a bad trip with another company",
        ),
        ("my last coach trip with {v1} was on {day}",),
        plural=True,
    ),
    "travel frequency": _a("travel habit", ("I take the bus {v}", "I'm on a coach {v1}")),
    "seat preference": _a(
        "seat",
        (
            "I always get a {v1} seat",
            "I can't do anything but a {v1} seat on long rides",
            "my seat is always the {v1} one",
        ),
    ),
    "departure time preference": _a(
        "departure time",
        (
            "I leave in the {v1} when I can",
            "I only book {v1} departures",
            "my trips start in the {v1} since I got tired of late ones",
        ),
    ),
    "event type preference": _a(
        "events",
        ("I go to {v}", "I've been to a lot of {v1} since {month}", "my free time goes on {v1}"),
        ("I went to some {v1} on {day}", "my friends got me into {v1} in {month}"),
        plural=True,
    ),
    "notification preference": _a(
        "reminders",
        (
            "I get my reminders {v1}",
            "my notifications go off {v1}",
            "I need a reminder {v1} or I forget",
        ),
    ),
    "timezone": _a("time zone", ("my time zone is {v1}", "I'm on {v1} time")),
    "price range": _a(
        "budget", ("my budget is {v1}", "I keep nights out {v1}", "my tickets are {v1} at most")
    ),
    "group size preference": _a(
        "group size",
        ("I go out in a {v1}", "I'm happiest in a {v1}", "I've gone as a {v1} since {month}"),
    ),
    "seating preference": _a(
        "seating", ("I pick {v1} seating", "I get {v1} seats when there's a choice")
    ),
    "days of week preference": _a(
        "days", ("I'm free on {v}", "I go out on {v}", "my {v1} are free after work")
    ),
    "preferred sectors": _a(
        "sectors",
        (
            "I invest in {v}",
            "my portfolio is mostly {v1}",
            "I've put money into {v1} since {month}",
        ),
        ("I read up on {v1} stocks on {day}",),
        plural=True,
    ),
    "news sources": _a(
        "news sources", ("I get my market news from {v}", "I check {v1} every morning")
    ),
    "financial company": _a(
        "companies",
        ("I hold shares in {v}", "I follow {v} closely", "I've had a bit of {v1} since {month}"),
        ("I checked the {v1} numbers on {day}",),
        plural=True,
    ),
    "preferred airline": _a(
        "airline",
        (
            "I fly with {v}",
            "my airline is {v1} whenever it flies there",
            "I've flown {v1} since a good trip with them",
        ),
        ("I flew {v1} in {month}", "my last flight with {v1} was on {day}"),
        plural=True,
    ),
    "seat class preference": _a(
        "cabin class",
        ("I fly {v1}", "I book {v1} on long flights", "I've flown {v1} since {month}"),
    ),
    "layover preference": _a(
        "connections",
        ("I only book {v1} flights", "I go for {v1} connections after a missed one once"),
    ),
    "preferred game genres": _a(
        "game genres",
        ("I play {v} games", "my games are mostly {v1}", "I've played a lot of {v1} since {month}"),
        ("I got a new {v1} game on {day}",),
        plural=True,
    ),
    "gaming platforms": _a(
        "platform",
        (
            "I game on {v}",
            "my {v1} is where I play most",
            "I got my {v1} a while ago and still use it every week",
        ),
        ("my {v1} has been on every evening since {day}",),
    ),
    "multiplayer preference": _a(
        "play style", ("I play {v} games", "I stick to {v1} since my friends got into it")
    ),
    "gaming frequency": _a("gaming routine", ("I game {v1}", "my gaming time is {v1}")),
    "preferred game name": _a(
        "games",
        (
            "my favorite games are {v}",
            "I still play {v1} every week",
            "I've put hundreds of hours into {v1}",
        ),
        ("I finished {v1} again on {day}", "I got back into {v1} after a long break"),
        plural=True,
    ),
    "hotel chains preference": _a(
        "hotels",
        (
            "I stay at {v} hotels",
            "my hotel is a {v1} one whenever there's one",
            "I've stuck with {v1} since a good stay",
        ),
        ("my last stay was at a {v1} hotel in {month}",),
        plural=True,
    ),
    "amenity preference": _a(
        "amenities",
        (
            "I need {v} where I stay",
            "I can't do without {v1} on a trip",
            "my hotel has to have {v1}",
        ),
        plural=True,
    ),
    "location preference": _a(
        "location",
        (
            "I stay {v1}",
            "my hotels are always {v1}",
            "I book places {v1} since a long commute once",
        ),
    ),
    "star rating preference": _a(
        "star rating", ("I book {v1} hotels", "my hotels are {v1} or better")
    ),
    "room type preference": _a(
        "room type", ("I get a {v1} room", "my room is a {v1} whenever it's available")
    ),
    "preferred genres": _a(
        "genres",
        (
            "my favorite genres are {v}",
            "I watch mostly {v1} since {month}",
            "I'm on a {v1} streak at the moment",
        ),
        ("I watched two {v1} films on {day}",),
        plural=True,
    ),
    "favorite actors and directors": _a(
        "actors and directors",
        (
            "I'm a fan of {v}",
            "I watch anything with {v1}",
            "I've seen everything by {v1} since {month}",
        ),
        ("I watched an old {v1} film on {day}",),
        plural=True,
    ),
    "favorite media": _a(
        "favorites",
        ("my favorites are {v}", "I rewatch {v1} every year", "my comfort watch is {v1}"),
        ("I rewatched {v1} on {day}", "I got my coworker into {v1} in {month}"),
        plural=True,
    ),
    "viewing platform preference": _a(
        "streaming service",
        ("I watch on {v}", "my shows are on {v1}", "I've had {v1} since {month}"),
        ("I got the {v1} yearly plan in {month}",),
        plural=True,
    ),
    "preferred messaging apps": _a(
        "messaging apps",
        ("I message people on {v}", "everyone reaches me on {v1}", "my group chats are on {v1}"),
        ("my {v1} has been busy since {day}",),
        plural=True,
    ),
    "communication style": _a("style", ("I send {v1} messages", "my messages are {v1} only")),
    "frequent contact": _a(
        "contacts",
        (
            "I text my {v} the most",
            "my {v1} message me every day",
            "I've chatted with my {v1} every day since {month}",
        ),
        ("my {v1} have been messaging me since {day}",),
        plural=True,
    ),
    "preferred communication style": _a(
        "tone",
        ("my messages are {v1}", "I keep it {v1} over text", "my tone is {v1} with everyone"),
    ),
    "theater type preference": _a(
        "screen",
        (
            "I watch films in {v1}",
            "I see every big release in {v1}",
            "I've gone {v1} since {month}",
        ),
    ),
    "viewing time preference": _a(
        "showtime", ("I go to the movies {v1}", "my cinema time is {v1}")
    ),
    "seat type preference": _a(
        "cinema seat", ("I get {v1} seats at the cinema", "my cinema seat is always {v1}")
    ),
    "favorite artists": _a(
        "artists",
        (
            "my favorite artists are {v}",
            "I listen to {v1} every day",
            "{v1} has been on my playlists since {month}",
        ),
        ("I had {v1} on repeat since {day}", "I saw {v1} live in {month}"),
        plural=True,
    ),
    "favorite bands": _a(
        "bands",
        ("my favorite bands are {v}", "I've listened to {v1} since I was a teenager"),
        ("I got {v1} tickets in {month}",),
        plural=True,
    ),
    "favorite albums": _a(
        "albums",
        ("my favorite albums are {v}", "I play {v1} start to finish on long drives"),
        ("I had {v1} on all through {day}",),
        plural=True,
    ),
    "platform preference": _a(
        "music app", ("I stream on {v}", "my music is on {v1}", "I've had {v1} since {month}")
    ),
    "preferred audio quality": _a(
        "audio quality", ("I listen in {v1} quality", "my music has to be {v1}")
    ),
    "playlist preference": _a("playlists", ("I play {v}", "my playlists are {v}"), plural=True),
    "car type preference": _a(
        "car type",
        (
            "I rent {v1} cars",
            "my rental is a {v1} every time",
            "I've rented a {v1} since a cramped trip once",
        ),
    ),
    "preferred rental company": _a(
        "rental company",
        ("I rent from {v}", "my rentals are from {v1}", "I've used {v1} since {month}"),
        ("my last rental from {v1} was on {day}",),
        plural=True,
    ),
    "preferred car brand": _a(
        "car brand", ("I drive {v}", "my rentals are {v1} when there's one"), plural=True
    ),
    "rental duration preference": _a("rental length", ("I rent for {v1}", "my rentals last {v1}")),
    "additional feature preference": _a(
        "extras",
        (
            "I add {v} to every rental",
            "I can't rent without {v1}",
            "my rentals always come with {v1}",
        ),
        plural=True,
    ),
    "preferred fuel type": _a("fuel type", ("I rent {v1} cars", "my rentals run on {v1}")),
    "cuisine preference": _a(
        "cuisines",
        (
            "my favorite cuisines are {v}",
            "I eat {v1} food every week",
            "I've been on {v1} food since {month}",
        ),
        ("I had {v1} food on {day}", "I got {v1} takeaway after a long day"),
        plural=True,
    ),
    "dietary restrictions": _a(
        "diet",
        (
            "I have a dietary restriction: {v}",
            "I'm careful about {v} at every meal",
            "my meals are {v1}",
        ),
    ),
    "ambiance preference": _a(
        "atmosphere", ("I eat at {v1} places", "my favorite spots are {v1} ones")
    ),
    "preferred service provider types": _a(
        "providers", ("I go to {v1} providers", "my providers are {v1} ones since {month}")
    ),
    "appointment time preference": _a(
        "appointment time",
        ("I book appointments in the {v1}", "my appointments are in the {v1} after work"),
    ),
    "service frequency preference": _a(
        "routine", ("I book services {v1}", "my appointments are {v1}")
    ),
    "service provider gender preference": _a(
        "provider", ("for service providers my gender preference is {v1}",)
    ),
    "preferred product category": _a(
        "categories",
        ("I shop for {v}", "my money goes on {v1}", "I've bought a lot of {v1} since {month}"),
        ("I got some {v1} on {day}",),
        plural=True,
    ),
    "price range preference": _a("price range", ("I shop {v1}", "my budget is {v1}")),
    "brand preference": _a(
        "brands",
        ("my favorite brands are {v}", "I buy {v1} when I can", "I've trusted {v1} since {month}"),
        ("I got something from {v1} on {day}",),
        plural=True,
    ),
    "favorite sports": _a(
        "sports",
        (
            "my favorite sports are {v}",
            "I watch {v1} every weekend",
            "I've played {v1} since school",
        ),
        ("I played {v1} on {day}", "I watched a lot of {v1} since {month}"),
        plural=True,
    ),
    "favorite team": _a(
        "team",
        ("I support the {v1}", "my team is the {v1}", "I've followed the {v1} since I was a kid"),
        ("I watched the {v1} game on {day}",),
        plural=True,
    ),
    "viewing preference": _a(
        "way of watching", ("I watch sports {v1}", "my games are {v1} whenever I can")
    ),
    "preferred train class": _a(
        "train class",
        ("I travel {v1} on trains", "my tickets are {v1}", "I've booked {v1} since {month}"),
    ),
    "travel time preference": _a(
        "travel time", ("I travel in the {v1}", "my trains are {v1} ones")
    ),
    "preferred seat type": _a(
        "seat", ("I get an {v1} seat on trains", "my seat is the {v1} one on every train")
    ),
    "preferred destination types": _a(
        "destinations",
        (
            "I go for {v} destinations",
            "my trips are {v1} ones",
            "I've done {v1} trips since {month}",
        ),
        plural=True,
    ),
    "duration preference": _a("trip length", ("my trips last {v1}", "I travel for {v1}")),
    "frequent travel destination": _a(
        "destinations",
        ("I travel to {v}", "I go back to {v1} every year", "my trips end up in {v1}"),
        ("I was in {v1} in {month}", "my friend got back from {v1} on {day}"),
        plural=True,
    ),
    "travel season preference": _a("season", ("I travel in {v}", "my trips are in {v1}")),
}

# Standing arrangements per attribute (keyed by the attribute's noun): the areas life updates touch.
_STEADY: dict[str, tuple[str, ...]] = {
    "diet": ("my diet is {v1}, so menus take a bit of checking", "I eat {v1} at home and out"),
    # Values are ranges or words ("under $50", "budget-friendly", "free"), never a monthly sum.
    "budget": ("I keep tickets and nights out {v1}", "I look for tickets that are {v1}"),
    "airline": ("I collect {v1} miles when I fly", "my frequent-flyer account is with {v1}"),
    "hotels": ("I'm a member of the {v1} rewards programme", "my hotel points are with {v1}"),
    "wake-up time": ("I go to bed early to be up at {v1}", "my sleep is built around a {v1} alarm"),
    "group size": ("I usually go out as a {v1}", "plans for me are for a {v1}"),
    "contacts": ("my {v1} are the people I plan with", "I share most plans with my {v1}"),
    "bus company": ("I get around on {v1} coaches", "my coach trips are with {v1}"),
    "train class": ("I commute by train in {v1}", "my train tickets are {v1}"),
    "price range": ("my shopping budget is {v1}", "money for shopping stays {v1}"),
    "streaming service": ("my {v1} account is shared with family", "I pay for {v1} every month"),
    "music app": ("my {v1} subscription renews every month", "I pay for {v1} premium"),
    "platform": ("my {v1} is the only console at home", "I game on the {v1} in the living room"),
    "rental company": ("I have a {v1} rental account", "my rentals go through {v1}"),
    "appointment time": (
        "I book appointments in the {v1} around work",
        "my appointments have to be in the {v1}",
    ),
}
# Time anchors, as life updates carry them.
_TIME_FRAMES = (
    "for a while now",
    "at the moment",
    "right now",
    "nowadays",
    "since {month}",
    "ever since last {season}",
    "for now",
    "still",
    "for the past few months",
    "since last {season}",
    "now",
    "since the new year",
    "for a couple of years now",
    "since {month} or so",
    "after a long stretch without",
    "since a trip in {month}",
)
REMARK_BRIDGE_SHARE = 0.5
"""Remark consequences said as a life update's bridge clause (", which complicates cinema nights"):
the clause is how people tie any personal remark to their plans, never a sign of a life update."""
# What a remark means for the request, tacked on the way an update's consequence is.
_CONSEQUENCES = (
    ("so", "that's what I'd look for"),
    ("so", "the rest is flexible"),
    ("and", "that hasn't changed"),
    ("so", "I'd rather stick with it"),
    ("and", "I don't see that changing"),
    ("which", "makes this a bit easier"),
    ("and", "it'll probably stay that way"),
    ("so", "that's my starting point"),
    ("which", "rules a few things out"),
    ("and", "that's been working well"),
    ("so", "I plan around it"),
    ("which", "shapes most of my plans"),
    ("and", "I'd like to keep it that way"),
    ("so", "anything close to it works"),
    ("which", "leaves a bit of room"),
    ("so", "it's worth keeping in mind"),
    ("and", "it suits me fine"),
)
_DATES = re.compile(r"\b(?:" + "|".join(MONTHS + WEEKDAYS) + r")\b|\d+(?::\d+)?")
_TIMED = re.compile(
    r"\b(?:since|until|till|ago|after|before|every|each|on (?:Monday|Tuesday|Wednesday|Thursday|Friday|Saturday|Sunday)|in [A-Z][a-z]+|for the next|right up to|for a few|for most|now)\b"
)
# Generic preference frames around one attribute's noun and a value.
_PREFERENCE_FRAMES = (
    "my go-to is still {v1}",
    "I've stuck with {v1} since {month}",
    "I still pick {v1} whenever I can",
    "I got into {v1} after a friend recommended it",
    "I got into {v1} a while ago and I'm still on it",
    "since {month} it's been {v1} for me",
    "{v1} has been a favorite of mine for years",
)
_NO_GENERIC_FRAMES = frozenset(
    {"amenities", "extras", "contacts", "destinations", "sectors", "categories", "cuisines"}
)
"""Favourites (by noun) no generic frame fits: "I've stuck with WiFi since December",
"I got into classmates after a friend recommended it"."""
_PLURAL_FRAMES = (
    "I'm into {v1} and {v2}",
    "my favorites are still {v1} and {v2}",
    "I go back and forth between {v1} and {v2}",
    "I've gone for {v1} more than {v2} since {month}",
    "I can't choose between {v1} and {v2}",
)


@dataclass(frozen=True)
class Setting:
    """Where, on what and when the user is chatting."""

    location: str = ""
    device: str = ""
    time_of_day: str = ""
    environment: str = ""
    weekday: str = ""


_IDENTITY_BODY = {
    "working full-time": (
        "I work full-time",
        "I have a full-time job",
        "my job keeps me busy full-time",
    ),
    "working part-time": ("I work part-time", "I've got a part-time job", "I only work part-time"),
    "student": ("I'm a student", "I'm still studying", "I'm in school"),
    "retired": ("I'm retired", "I stopped working a while ago"),
    "unemployed": ("I'm between jobs", "I'm looking for work at the moment"),
    "homemaker": ("I'm home with the family most days", "I look after the house and kids"),
}
_AGE_BODY = {
    "18-24": ("I'm in my early twenties", "I'm not long out of my teens"),
    "25-34": ("I'm in my late twenties or so", "I'm around thirty"),
    "35-44": ("I'm in my late thirties", "I'm around forty"),
    "45-54": ("I'm in my late forties", "I'm around fifty"),
    "55-64": ("I'm in my late fifties", "I'm around sixty"),
}


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
            if affinity.domain != domain:
                continue
            values = [
                clean_value(v)
                for v in affinity.values
                if v and v.strip() and v.strip().upper() != "N/A"
            ]
            values = [v for v in values if v and not self._avoided(v)]
            if not values:
                continue
            voice = _ATTRIBUTES.get(name_key(affinity.name)) or _a(
                affinity.name.lower(),
                (
                    f"my {affinity.name.lower()} is {{v}}",
                    f"for {affinity.name.lower()} I go with {{v1}}",
                ),
            )
            # Hidden conditioning: attributes the interaction summary dwells on come up more often.
            weight = (
                2.0
                if emphasis and any(v.casefold() in emphasis.casefold() for v in values)
                else 1.0
            )
            self.attributes.append((voice, values, weight))
        self.said: set[str] = set()
        self.core = ""  # the last remark before it was shaped: what "said already" compares

    def _avoided(self, text: str) -> bool:
        lowered = text.casefold()
        return any(a in lowered or lowered in a for a in self.avoid)

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
        if voice.plural and len(shuffled) >= 2 and roll < 0.2:
            body = (
                pick(rng, _PLURAL_FRAMES).replace("{v1}", shuffled[0]).replace("{v2}", shuffled[1])
            )
        elif voice.plural and voice.noun not in _NO_GENERIC_FRAMES and roll < 0.45:
            body = (
                pick(rng, _PREFERENCE_FRAMES)
                .replace("{noun}", voice.noun)
                .replace("{v1}", shuffled[0])
            )
        else:
            subset = shuffled[: rng.randint(1, min(3, len(shuffled)))]
            body = (
                pick(rng, voice.says).replace("{v}", join_list(subset)).replace("{v1}", shuffled[0])
            )
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
        device = s.device.lower()
        until = self._until(rng)
        options: list[str] = []
        if device:
            options += [
                f"I'm on my {device} {pick(rng, ('on the bus', 'between meetings', 'after a long day', 'on my lunch break'))}",
                f"my {device} is all I have with me {until}",
                f"my {device} has my notes from {pick(rng, ('the last trip', 'a friend', 'last time'))} on it",
            ]
        if s.location:
            options += [
                f"I'm {pick(rng, ('at home', 'back', 'staying', 'based'))} in {s.location} {until}",
                f"I'm in {s.location} {pick(rng, ('until the weekend', 'for a few more days', 'for most of the month', until))}",
                f"I've lived in {s.location} for {pick(rng, ('a few', 'two', 'three', 'several'))} years",
                f"I got back to {s.location} on {{day}}",
            ]
        if s.time_of_day:
            part = s.time_of_day.lower()
            options += [
                f"I've got a free {part} on {{day}}",
                f"my {part}s are free {until}",
                f"I sort these plans out in the {part} after {pick(rng, ('work', 'dinner', 'the gym', 'class', 'the school run'))}",
                f"my {part}s have been packed since {{day}}",
            ]
        if s.environment:
            env = s.environment.lower()
            options.append(
                f"it's {env} around me {pick(rng, ('right now', 'for once', 'since the neighbours left'))}"
            )
        if s.weekday:
            options += [
                f"my {s.weekday}s are {pick(rng, ('packed', 'free', 'my lazy days', 'the busiest of the week'))} {until}",
                f"I have {s.weekday} {pick(rng, ('free', 'to myself', 'open'))} after {clock_time(rng, 'afternoon')}",
            ]
        if not options:
            return self.preference(rng)
        return self._shaped(pick(rng, options), rng, anchor=0.0, extra=0.1)

    def identity(self, rng: random.Random) -> str:
        d = self.demographics
        options: list[str] = []
        status = (d.employment_status or "").lower()
        for key, bodies in _IDENTITY_BODY.items():
            if key in status:
                options += list(bodies)
        age = (d.age or "")[:5]
        options += list(_AGE_BODY.get(age, ()))
        if d.reside_country and d.reside_country.upper() != "N/A":
            options += [f"I live in {d.reside_country}", f"I'm based in {d.reside_country}"]
        marital = (d.marital_status or "").lower()
        if marital == "married":
            options += ["I'm married", "my spouse and I share most plans"]
        elif "never" in marital:
            options += ["I'm single", "it's just me, no partner to plan around"]
        if not options:
            return self.context(rng)
        return self._shaped(pick(rng, options), rng, anchor=0.1, extra=0.4)

    def steady(self, rng: random.Random) -> str:
        """How the user's life is set up — work, who they plan with, getting around, money, screens, sleep.

        Built only from the demographics, the setting and this domain's affinities, so
        it never contradicts the profile; it touches the same areas life updates do.
        """
        d = self.demographics
        s = self.setting
        options: list[str] = []
        status = (d.employment_status or "").lower()
        day_a, day_b = rng.sample(WEEKDAYS[:5], 2)
        if "full-time" in status:
            options += [
                "I work full-time, Monday to Friday",
                "my job takes up weekdays until {time}",
                "work keeps my weekdays busy until the evening",
            ]
        elif "part-time" in status:
            options += [
                f"I work part-time, mostly {day_a}s and {day_b}s",
                f"my shifts are on {day_a}s and {day_b}s",
            ]
        elif "student" in status:
            options += [
                "I have classes most weekday mornings",
                "my lectures run until {time} on weekdays",
                f"my seminars are on {day_a}s",
            ]
        elif "retired" in status:
            options += ["I'm retired, so my weekdays are open", "my days are free since I retired"]
        elif "unemployed" in status:
            options += [
                "I'm job hunting, so my days are flexible",
                "my days are open while I look for work",
            ]
        elif "homemaker" in status:
            options += ["the school run shapes my mornings", "my days follow the kids' schedule"]
        marital = (d.marital_status or "").lower()
        if marital == "married":
            options += ["my partner joins me for most plans", "I plan most things for two"]
        elif "never" in marital:
            options += [
                "I plan most things just for myself",
                "it's usually just me, no partner to plan around",
            ]
        if s.device:
            device = s.device.lower()
            options += [f"my {device} is my main screen", f"I do all my planning on my {device}"]
        if s.location:
            city = s.location.split(",")[0]
            options += [
                f"I get around {city} by bus most days",
                f"my commute across {city} takes about {{minutes}} minutes",
                f"I live in {city}",
            ]
        for voice, values, _ in self.attributes:
            value = pick(rng, values)
            steady = _STEADY.get(voice.noun)
            if steady:
                options += [t.replace("{v1}", value) for t in steady]
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
            if text and key not in self.said and not self._avoided(text):
                self.said.add(key)
                return text
        return ""

    def _until(self, rng: random.Random) -> str:
        day = rng.randint(2, 28)
        return pick(
            rng,
            (
                f"until {month_name(rng)} {day}",
                f"till the {ordinal(day)}",
                f"for the next {pick(rng, ('few days', 'two weeks', 'week or so', 'couple of weeks', 'month'))}",
                f"right up to {pick(rng, WEEKDAYS)}",
                f"until the end of {month_name(rng)}",
            ),
        )

    def _shaped(self, body: str, rng: random.Random, *, anchor: float, extra: float) -> str:
        """The remark as a life update is said: core, then maybe a time anchor (when it has none) and a consequence."""
        self.core = _DATES.sub("", body)
        body = fix_articles(fill_time(body, rng))
        body = re.sub(r"\b(seats?) \1\b", r"\1", body)
        if rng.random() < anchor and not _TIMED.search(body):
            frame = fill_time(pick(rng, _TIME_FRAMES), rng)
            body = f"{frame}, {lower_start(body)}" if rng.random() < 0.5 else f"{body} {frame}"
        if rng.random() < extra:
            if rng.random() < REMARK_BRIDGE_SHARE:
                body += bridge(self.domain, rng)
            else:
                joiner, tail = _CONSEQUENCES[rng.randrange(len(_CONSEQUENCES))]
                body = f"{body}, {joiner} {tail}"
        return sentence(body)


def fill_time(text: str, rng: random.Random) -> str:
    """Fill the time slots a remark may carry: {month}, {season}, {day} (a weekday)."""
    return (
        text.replace("{month}", month_name(rng))
        .replace("{season}", pick(rng, ("spring", "summer", "fall", "winter")))
        .replace("{day}", pick(rng, WEEKDAYS))
    )


# Lead-ins for a personal remark, shared by every kind of remark (updates included).
VOLUNTEERED = (
    "Oh, also —",
    "By the way,",
    "For context,",
    "Just so you know,",
    "Also,",
    "One more thing:",
    "Side note:",
    "Oh, and",
    "Before I forget,",
    "Worth mentioning:",
    "Quick note:",
    "In case it matters,",
    "FYI,",
    "Honestly,",
    "Funny enough,",
    "Come to think of it,",
    "On that note,",
    "If it helps,",
    "Plus,",
    "Oh —",
    "Actually,",
)
ANSWERS = (
    "Well,",
    "Hmm, let me think —",
    "Now that you ask,",
    "Good question —",
    "Actually, yes —",
    "Let's see,",
    "Since you ask,",
    "Hmm,",
    "Right, so",
    "Off the top of my head,",
    "Well, one thing:",
    "Now that you mention it,",
)


def with_lead(remark: str, lead: str) -> str:
    if not lead:
        return remark
    return f"{lead} {lower_start(remark)}"


# --------------------------------------------------------------------------- the topic of the request


@dataclass(frozen=True)
class Topic:
    """What the conversation is about."""

    domain: Domain
    kind: str  # settings | booking | recommend | info | message | schedule | plan | shop
    thing: str  # short noun phrase for what is being worked on: "the alarm", "a bus ticket"
    request: (
        str  # first person, lower-case start, no final stop: "temporarily disable my regular alarm"
    )
    background: str = ""  # first-person circumstance from the task: "I'm going on a trip"
    options: tuple[str, ...] = field(default_factory=tuple)

    @property
    def request_to_user(self) -> str:
        """The request as the assistant words it back: "share your current location"."""
        return from_first_person(self.request, "second")


# (domain, pattern on the activity, kind, thing, option templates or () for the domain's)
_TOPICS: tuple[tuple[Domain, str, str, str, tuple[str, ...]], ...] = (
    (
        D.ALARM,
        r"disable",
        "settings",
        "the alarm",
        (
            "pausing the {Alarm Recurring Preference} alarm and adding a one-time {Alarm Time Preference} alarm for the day you're back",
            "switching off the usual alarm until {date} and keeping {Alarm Sound Preference} for the return",
        ),
    ),
    (
        D.ALARM,
        r"sound",
        "settings",
        "the alarm sound",
        (
            "{sound} with a slow fade-in",
            "a {Alarm Sound Preference} track that builds over {minutes} seconds",
            "something close to {Alarm Sound Preference}, like {sound}",
        ),
    ),
    (
        D.ALARM,
        r"",
        "settings",
        "the alarm",
        (
            "an alarm at {Alarm Time Preference} with {Alarm Sound Preference}, repeating on {Alarm Recurring Preference}",
            "a {Alarm Time Preference} alarm plus a backup {minutes} minutes later",
            "keeping {Alarm Time Preference} on {Alarm Recurring Preference} and switching the tone to {sound}",
        ),
    ),
    (D.BUSES, r"book", "booking", "the bus ticket", ()),
    (D.BUSES, r"", "info", "the bus routes", ()),
    (
        D.CALENDAR,
        r"reschedule|cancel",
        "schedule",
        "the calendar",
        (
            "moving it to {day} at {time}",
            "pushing it back a week and keeping the reminder {Notification Preference}",
            "cancelling it and blocking {day} afternoon instead",
        ),
    ),
    (
        D.CALENDAR,
        r"review",
        "schedule",
        "the schedule",
        (
            "a summary of the week with reminders {Notification Preference}",
            "a daily digest at {time} with everything flagged {Notification Preference}",
        ),
    ),
    (D.CALENDAR, r"", "schedule", "the calendar", ()),
    (D.EVENTS, r"tickets", "booking", "the tickets", ()),
    (D.EVENTS, r"", "recommend", "something to go to", ()),
    (
        D.FINANCE,
        r"tracking",
        "settings",
        "the portfolio tracking",
        (
            "a weekly summary of {Financial Company} with alerts on big moves",
            "tracking {Financial Company} with a digest from {News Sources} every {weekday}",
        ),
    ),
    (D.FINANCE, r"", "info", "the market picture", ()),
    (D.FLIGHTS, r"change", "booking", "the flight change", ()),
    (D.FLIGHTS, r"", "booking", "the flight", ()),
    (D.GAMES, r"release", "info", "the upcoming release", ()),
    (D.GAMES, r"", "recommend", "a new game", ()),
    (D.HOTELS, r"", "booking", "the hotel", ()),
    (
        D.MEDIA,
        r"recall|title",
        "info",
        "the title I'm trying to remember",
        (
            "{Favorite Media}-style picks from the same years",
            "a few {Preferred Genres} titles on {Viewing Platform Preference} that match the plot you describe",
        ),
    ),
    (D.MEDIA, r"updated|upcoming seasons", "info", "new seasons", ()),
    (D.MEDIA, r"", "recommend", "something to watch", ()),
    (
        D.MESSAGING,
        r"mute|leave",
        "message",
        "the group chat",
        (
            "muting the group on {Preferred Messaging Apps} for {span} and posting a short {Preferred Communication Style} note first",
            "archiving the chat on {Preferred Messaging Apps} instead of leaving, so nobody gets a notification",
            "turning off notifications for the group until {date}",
        ),
    ),
    (
        D.MESSAGING,
        r"location",
        "message",
        "the location share",
        (
            "sharing your live location on {Preferred Messaging Apps} for {span} with just that one person",
            "sending a pinned location in a private chat on {Preferred Messaging Apps}",
        ),
    ),
    (
        D.MESSAGING,
        r"time-sensitive|noticed promptly",
        "message",
        "the urgent message",
        (
            "a short {Preferred Communication Style} text on {Preferred Messaging Apps} marked urgent, then a call if there's no reply in {minutes} minutes",
            "sending it on {Preferred Messaging Apps} with the key point in the first line",
        ),
    ),
    (
        D.MESSAGING,
        r"",
        "message",
        "the message",
        (
            "a {Preferred Communication Style} note on {Preferred Messaging Apps}",
            "a quick {Preferred Communication Style} message on {Preferred Messaging Apps} with a follow-up {day}",
        ),
    ),
    (D.MOVIES, r"tickets|showtimes|outing", "booking", "the movie tickets", ()),
    (D.MOVIES, r"", "recommend", "a movie", ()),
    (D.MUSIC, r"playlist", "recommend", "the playlist", ()),
    (D.MUSIC, r"audio", "info", "high-quality audio", ()),
    (D.MUSIC, r"", "recommend", "new music", ()),
    (D.RENTAL_CARS, r"", "booking", "the rental car", ()),
    (D.RESTAURANTS, r"", "booking", "a restaurant", ()),
    (D.SERVICES, r"", "booking", "the appointment", ()),
    (D.SHOPPING, r"gift", "shop", "the gift", ()),
    (D.SHOPPING, r"up-to-date|latest product", "info", "new releases", ()),
    (D.SHOPPING, r"", "shop", "the purchase", ()),
    (D.SPORTS, r"attend", "booking", "the game", ()),
    (D.SPORTS, r"merchandise|memorabilia", "shop", "team merchandise", ()),
    (D.SPORTS, r"", "info", "the sports news", ()),
    (D.TRAIN, r"book", "booking", "the train ticket", ()),
    (D.TRAIN, r"", "plan", "the train journey", ()),
    (D.TRAVEL, r"", "plan", "the trip", ()),
    (D.BOOKS, r"", "recommend", "something to read", ()),
)

# Concrete proposals per domain, from the persona's affinities ({Affinity Name}) and random details.
_OPTIONS: dict[Domain, tuple[str, ...]] = {
    D.ALARM: ("an alarm at {Alarm Time Preference} with {Alarm Sound Preference}",),
    D.BOOKS: (
        "the latest from {Favorite Authors}",
        "another {Genre} title in {Reading Format} format",
        "{title}, which readers of {Favorite Books} tend to love",
        "a short {Genre} collection you could finish in a {Reading Time Preference} or two",
        "the first book of a {Genre} series in {Reading Format}",
    ),
    D.BUSES: (
        "a {Departure Time Preference} {Preferred Bus Company} departure with a {Seat Preference} seat",
        "the {time} {Preferred Bus Company} coach for about {price}",
        "a direct {Preferred Bus Company} route that leaves at {time}",
    ),
    D.CALENDAR: (
        "a slot on {day} at {time} with a reminder {Notification Preference}",
        "blocking {day} for {Event Type Preference}",
        "a {minutes}-minute hold on {day} morning",
    ),
    D.EVENTS: (
        "some {Event Type Preference} on {Days of Week Preference}, around {Price Range}",
        "{venue}, a {Event Type Preference} lineup on {day}",
        "a {Event Type Preference} night {day} for {price}",
        "a {Group Size Preference}-friendly {Event Type Preference} with {Seating Preference} entry",
    ),
    D.FINANCE: (
        "a short briefing on {Financial Company} from {News Sources}",
        "a comparison of {Financial Company} against the {Preferred Sectors} average",
        "a weekly digest on {Preferred Sectors} from {News Sources}",
    ),
    D.FLIGHTS: (
        "a {Layover Preference} {Preferred Airline} flight in {Seat Class Preference} with an {Seat Preference} seat",
        "the {time} {Preferred Airline} departure in {Seat Class Preference} for {price}",
        "a {Departure Time Preference} {Preferred Airline} option with a {Seat Preference} seat",
    ),
    D.GAMES: (
        "something in the {Preferred Game Genres} vein on {Gaming Platforms}, a bit like {Preferred Game Name}",
        "a {Multiplayer Preference} {Preferred Game Genres} game on {Gaming Platforms} for about {price}",
        "{title} on {Gaming Platforms}, which plays a lot like {Preferred Game Name}",
    ),
    D.HOTELS: (
        "a {Star Rating Preference} {Hotel Chains Preference} option {Location Preference} with {Amenity Preference}",
        "{venue}, {Location Preference}, with {Amenity Preference}",
        "a {Room Type Preference} room at a {Hotel Chains Preference} place for {price} a night",
        "a {Star Rating Preference} hotel {Location Preference}, rated {rating}",
    ),
    D.MEDIA: (
        "a {Preferred Genres} title on {Viewing Platform Preference}, in the spirit of {Favorite Media}",
        "{title}, a {Preferred Genres} series on {Viewing Platform Preference}",
        "something with {Favorite Actors and Directors} on {Viewing Platform Preference}",
    ),
    D.MESSAGING: ("a {Preferred Communication Style} note on {Preferred Messaging Apps}",),
    D.MOVIES: (
        "a {Preferred Genres} film in {Theater Type Preference}, with {Seat Type Preference} seats",
        "the {time} {Theater Type Preference} showing with {Seat Type Preference} seats for {price}",
        "{title}, a new {Preferred Genres} release with {Favorite Actors and Directors}",
    ),
    D.MUSIC: (
        "some {Preferred Genres} picks on {Platform Preference}, starting with {Favorite Artists}",
        "a mix built around {Favorite Albums}",
        "a {Preferred Genres} playlist on {Platform Preference} in {Preferred Audio Quality} quality",
        "artists close to {Favorite Bands}, queued on {Platform Preference}",
    ),
    D.RENTAL_CARS: (
        "a {Car Type Preference} {Preferred Car Brand} from {Preferred Rental Company} with {Additional Feature Preference}",
        "a {Car Type Preference} car from {Preferred Rental Company} for {price} a day",
        "a {Preferred Car Brand} with {Additional Feature Preference}, pick-up at {time}",
    ),
    D.RESTAURANTS: (
        "a {Ambiance Preference} {Cuisine Preference} place in the {Price Range} range",
        "{venue}, a {Cuisine Preference} spot with {Ambiance Preference}",
        "a table at {venue} at {time}",
        "a {Cuisine Preference} spot with {Ambiance Preference}, rated {rating}",
        "a table for {time} at a {Price Range} {Cuisine Preference} restaurant",
    ),
    D.SERVICES: (
        "an {Appointment Time Preference} appointment with a {Preferred Service Provider Types} provider {Location Preference}",
        "{venue}, {Location Preference}, with an {Appointment Time Preference} slot",
        "a {Preferred Service Provider Types} place {Location Preference} with a slot {day} at {time}",
        "a provider rated {rating}, {Location Preference}",
    ),
    D.SHOPPING: (
        "{Brand Preference} options in {Preferred Product Category}, {Price Range Preference}",
        "a {Price Range Preference} pick from {Brand Preference} for about {price}",
        "a well-reviewed {Preferred Product Category} item at {price}",
    ),
    D.SPORTS: (
        "the next {Favorite Team} game, {Viewing Preference}",
        "catching some {Favorite Sports} {Viewing Preference}",
        "a {Favorite Sports} recap every {weekday} with the {Favorite Team} results first",
    ),
    D.TRAIN: (
        "a {Travel Time Preference} train in {Preferred Train Class} with an {Preferred Seat Type} seat and {Amenity Preference}",
        "the {time} train in {Preferred Train Class} for {price}",
        "a direct {Travel Time Preference} service with {Amenity Preference}",
    ),
    D.TRAVEL: (
        "a {Duration Preference} {Preferred Destination Types} trip to {Frequent Travel Destination} in {Travel Season Preference}",
        "a {Preferred Destination Types} itinerary around {Frequent Travel Destination}",
        "{days} days in {Frequent Travel Destination} with one {Preferred Destination Types} day trip",
    ),
}
# Proposals that need no affinity, per kind of request (the persona's values may all be ruled out).
_GENERIC_OPTIONS: dict[str, tuple[str, ...]] = {
    "settings": (
        "a gentle {sound} alarm with a backup {minutes} minutes later",
        "switching the tone to {sound} from {day}",
    ),
    "booking": (
        "the {time} option at {venue} for about {price}",
        "a flexible slot on {day} at {time}",
    ),
    "recommend": (
        "{title}, which people rate {rating}",
        "{title}, a newer pick that's getting good word of mouth",
    ),
    "info": (
        "a short summary every {day} with the main changes",
        "a two-minute digest on {day} mornings",
    ),
    "message": ("a short note sent at {time} with a quick follow-up on {day}",),
    "schedule": ("a slot on {day} at {time} with a reminder the evening before",),
    "plan": (
        "{days} days with one free day in the middle",
        "a loose plan built around {day} and {day}",
    ),
    "shop": (
        "a well-reviewed option from {venue} at {price}",
        "the {price} model with free returns",
    ),
}
_SOUNDS = (
    "birdsong",
    "soft chimes",
    "ocean waves",
    "a rising piano loop",
    "a marimba riff",
    "gentle rain",
    "a guitar strum",
)

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
                            _base(m.group(1)) + (f" and {_base(m.group(2))}" if m.group(2) else "")
                        ),
                        body,
                    )
                break
    request = _trim(re.sub(r"\s+and (?:need|want)s? .*$", "", request)) if request else ""
    if not request:
        request = f"sort out some {domain.value.lower()} plans"
    kind, thing = "recommend", domain.value.lower()
    options: tuple[str, ...] = ()
    for topic_domain, pattern, topic_kind, topic_thing, topic_options in _TOPICS:
        if topic_domain == domain and re.search(pattern, activity, re.IGNORECASE):
            kind, thing, options = topic_kind, topic_thing, topic_options
            break
    return Topic(
        domain=domain,
        kind=kind,
        thing=thing,
        request=request,
        background=background,
        options=options or _OPTIONS.get(domain, ()),
    )


def _base(stem: str) -> str:
    """'explor' -> 'explore', 'research' -> 'research', 'sett' -> 'set' (after cutting -ing)."""
    if len(stem) > 2 and stem[-1] == stem[-2] and stem[-1] not in "ls":
        return stem[:-1]
    if stem.endswith(
        ("or", "ar", "ur", "at", "iv", "uc", "ag", "ac", "ok", "in", "ov", "us", "id", "ir", "ad")
    ) and not stem.endswith(("ear", "oin", "ain")):
        return stem + "e"
    return stem


class Options:
    """Concrete proposals for a topic, filled from the affinities; never one that restates an avoided value."""

    def __init__(
        self, topic: Topic, affinities: Sequence[Affinity], avoid: Sequence[str], device: str = ""
    ) -> None:
        self.topic = topic
        self.device = device.lower() or "phone"
        self.named = ""  # the last generated title or venue a proposal named
        self.values: dict[str, list[str]] = {}
        avoided = [a.casefold() for a in avoid if len(a) > 2]
        for affinity in affinities:
            if affinity.domain != topic.domain:
                continue
            values = [
                clean_value(v)
                for v in affinity.values
                if v and v.strip() and v.strip().upper() != "N/A"
            ]
            values = [
                v
                for v in values
                if v and not any(a in v.casefold() or v.casefold() in a for a in avoided)
            ]
            if values:
                self.values[name_key(affinity.name)] = values
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
        lists = sorted(k for k in self.values if (v := _ATTRIBUTES.get(k)) is not None and v.plural)
        if not lists:
            return pick(rng, ("the usual", "the classics", "the basics"))
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
        generated = {
            "time": lambda: clock_time(rng),
            "price": lambda: price(rng, *_PRICES.get(self.topic.domain, (12, 240))),
            "rating": lambda: rating(rng),
            "day": lambda: pick(rng, WEEKDAYS),
            "weekday": lambda: pick(rng, WEEKDAYS),
            "date": lambda: f"{month_name(rng)} {rng.randint(2, 28)}",
            "minutes": lambda: str(pick(rng, ("10", "15", "20", "30", "45"))),
            "title": lambda: self._named(title(rng)),
            "venue": lambda: self._named(
                self.constant("venue", lambda: venue(self.topic.domain, rng))
            ),
            "name": lambda: self.constant("name", lambda: pick(rng, _FIRST_NAMES)),
            "count": lambda: str(rng.randint(2, 9)),
            "place": lambda: pick(
                rng,
                (
                    "the station",
                    "the centre",
                    "home",
                    "work",
                    "the old town",
                    "the park",
                    "the airport",
                    "campus",
                    "the river",
                ),
            ),
            "part": lambda: pick(rng, ("evening", "weekend", "morning", "afternoon", "night")),
            "month": lambda: month_name(rng),
            "day_phrase": lambda: day_phrase(rng),
            "on_day": lambda: pick(
                rng,
                (
                    "on " + pick(rng, WEEKDAYS),
                    "later in the week",
                    "after " + clock_time(rng),
                    "before " + clock_time(rng),
                    "that evening",
                    "over the weekend",
                ),
            ),
            "value": lambda: self.any_value(rng),
            "device": lambda: self.device,
            "sound": lambda: pick(rng, _SOUNDS),
            "span": lambda: pick(
                rng, ("a day", "a week", "eight hours", "the weekend", "two weeks")
            ),
            "days": lambda: str(rng.randint(3, 9)),
        }
        if name in generated:
            return generated[name]()
        return self.value(name, rng)

    def propose(self, rng: random.Random) -> str:
        own, generic = list(self.topic.options), list(_GENERIC_OPTIONS[self.topic.kind])
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
        return pick(
            rng, ("that one", "the first one", "that option", "the second one", "the last one")
        )


# --------------------------------------------------------------------------- generated names

_FIRST_NAMES = (
    "Ana",
    "Marta",
    "Tomasz",
    "Lerato",
    "Diego",
    "Sofia",
    "Liam",
    "Aoife",
    "Kasia",
    "Thabo",
    "Lucia",
    "Mateo",
    "Emma",
    "Noah",
    "Zanele",
    "Pablo",
    "Julia",
    "Oskar",
    "Nadia",
    "Sipho",
    "Camila",
    "Jakub",
    "Ines",
    "Ronan",
    "Valeria",
    "Piotr",
    "Naledi",
    "Javier",
    "Chloe",
    "Ethan",
    "Maya",
    "Felix",
    "Olga",
    "Andile",
    "Carmen",
    "Hugo",
    "Iga",
    "Leo",
    "Rosa",
    "Kai",
    "Elena",
    "Marek",
    "Nomsa",
    "Ruben",
    "Clara",
    "Owen",
    "Zofia",
    "Bongani",
    "Alba",
    "Sean",
)
_ADJECTIVES = (
    "Quiet",
    "Golden",
    "Hidden",
    "Silver",
    "Crooked",
    "Bright",
    "Little",
    "Salt",
    "Copper",
    "Velvet",
    "Wild",
    "Blue",
    "Northern",
    "Lantern",
    "Paper",
    "Hollow",
    "Open",
    "Secret",
    "Winter",
    "Summer",
    "Amber",
    "Iron",
    "Painted",
    "Lucky",
    "Sleepy",
    "Green",
    "Red",
    "Tall",
    "Second",
    "Last",
    "Distant",
    "Gentle",
    "Broken",
    "Bold",
    "Clever",
    "Old",
)
_NOUNS = (
    "Harbor",
    "Orchard",
    "Lighthouse",
    "Satellite",
    "Field",
    "Season",
    "Ferry",
    "Signal",
    "Meridian",
    "Street",
    "Garden",
    "River",
    "Kettle",
    "Compass",
    "Window",
    "Bridge",
    "Lantern",
    "Fox",
    "Anchor",
    "Market",
    "Tide",
    "Mountain",
    "Atlas",
    "Owl",
    "Sparrow",
    "Engine",
    "Letter",
    "Island",
    "Canyon",
    "Clock",
    "Mirror",
    "Table",
    "Forest",
    "Station",
    "Cellar",
)
_VENUE_KINDS: dict[Domain, tuple[str, ...]] = {
    D.RESTAURANTS: (
        "Kitchen",
        "Table",
        "Bistro",
        "Grill",
        "Cantina",
        "Trattoria",
        "Canteen",
        "Brasserie",
        "Eatery",
    ),
    D.HOTELS: ("Hotel", "Suites", "Inn", "House", "Lodge", "Residences"),
    D.EVENTS: ("Festival", "Night", "Series", "Showcase", "Fair", "Sessions"),
    D.SERVICES: ("Studio", "Clinic", "Practice", "Salon", "Centre", "Rooms"),
    D.MOVIES: ("Cinema", "Picturehouse", "Screens", "Playhouse"),
    D.SHOPPING: ("Store", "Outlet", "Boutique", "Shop", "Market"),
}


def title(rng: random.Random) -> str:
    a, n, m = pick(rng, _ADJECTIVES), pick(rng, _NOUNS), pick(rng, _NOUNS)
    return pick(
        rng,
        (
            f"The {a} {n}",
            f"{n} of {plural(m)}",
            f"A {n} for {pick(rng, _FIRST_NAMES)}",
            f"{a} {plural(n)}",
            f"The {n} and the {m}",
            f"{pick(rng, _FIRST_NAMES)}'s {n}",
        ),
    )


def venue(domain: Domain, rng: random.Random) -> str:
    kind = pick(rng, _VENUE_KINDS.get(domain, ("Place", "Spot", "House")))
    return pick(
        rng,
        (
            f"{pick(rng, _FIRST_NAMES)}'s {kind}",
            f"the {pick(rng, _ADJECTIVES)} {pick(rng, _NOUNS)} {kind}",
            f"{kind} {pick(rng, _NOUNS)}",
            f"the {pick(rng, _NOUNS)} {kind}",
        ),
    )


# --------------------------------------------------------------------------- composition


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


# --------------------------------------------------------------------------- assistant phrasing

_PROPOSAL_FRAMES = (
    "How about {o}?",
    "I'd suggest {o}.",
    "One option is {o}.",
    "You could go with {o}.",
    "I found {o}.",
    "There's {o} that fits.",
    "A good match would be {o}.",
    "Consider {o}.",
    "My pick would be {o}.",
    "Here's one: {o}.",
    "What about {o}?",
    "I'd lean toward {o}.",
    "Top of my list is {o}.",
    "Best bet might be {o}.",
    "Try {o}.",
    "I can line up {o}.",
    "There's also {o}.",
    "Another idea: {o}.",
    "If you want something different, there's {o}.",
    "The strongest fit I see is {o}.",
    "For {thing}, I'd start with {o}.",
    "For {thing}, {o} stands out.",
    "I'd put {o} first.",
    "It might be worth looking at {o}.",
    "Right now {o} looks good.",
    "I'd go with {o} here.",
    "A solid choice would be {o}.",
    "I've got {o} lined up.",
    "Have a look at {o}.",
    "Something like {o} could work.",
    "Going by what you like, {o}.",
    "I'd shortlist {o}.",
    "Near the top: {o}.",
    "You might enjoy {o}.",
)
_TASTE_REASONS = (
    "It's in the spirit of {value}, which you like.",
    "Fans of {value} tend to like it.",
    "It's close to {value}, one of your favorites.",
    "Since you enjoy {value}, it seemed a natural pick.",
    "It has a lot in common with {value}.",
    "If you liked {value}, this should land.",
    "People who follow {value} rate it highly.",
    "It came up next to {value} in a few lists.",
    "It shares a lot with {value}.",
)
"""Why a pick suits a taste in works, artists and genres ("Fans of Coldplay tend to like it")."""
_PREFERENCE_REASONS = (
    "It fits your preference for {value}.",
    "You've mentioned {value} before, and this has it covered.",
    "It lines up with what you like: {value}.",
    "It ticks the {value} box for you.",
    "That suits your preference for {value}.",
    "It takes your liking for {value} into account.",
)
"""Why a pick suits any other favourite (an amenity, a contact group, a kind of event)."""
TASTE_DOMAINS = frozenset({Domain.BOOKS, Domain.GAMES, Domain.MEDIA, Domain.MOVIES, Domain.MUSIC})
"""Domains whose favourites are works, artists and genres, so a pick can be likened to them."""
_COMMERCIAL_DETAILS = (
    "It's about {price}.",
    "Reviews put it at {rating} out of 5.",
    "There's availability {day_phrase}.",
    "It starts at {time}.",
    "The price is around {price}.",
    "It's rated {rating} by {count}00 people.",
    "The next opening is {day} at {time}.",
    "It would come to roughly {price} in total.",
    "People rate it {rating} on average.",
    "There's still space {day_phrase}.",
    "{venue} has it for {price}.",
    "It's {minutes} minutes from {place}.",
    "{name} from the reviews called it the best of the bunch.",
    "The {day} slot at {time} is the quietest.",
    "It's {price}, or a bit more with extras.",
    "There are {count} left at that price.",
)
_WORK_DETAILS = (
    "It's about {price}.",
    "Reviews put it at {rating} out of 5.",
    "It's rated {rating} by {count}00 people.",
    "People rate it {rating} on average.",
    "{name} from the reviews called it the best of the bunch.",
    "It's been on a few best-of lists since {month}.",
    "It got a lot of attention back in {month}.",
    "The price is around {price}.",
)
"""Details of a work (a book, an album, a film, a game): no opening times or distances."""
_DETAILS: dict[str, tuple[str, ...]] = {
    "booking": _COMMERCIAL_DETAILS,
    "recommend": _COMMERCIAL_DETAILS,
    "shop": _COMMERCIAL_DETAILS,
    "plan": _COMMERCIAL_DETAILS,
    "settings": (
        "It takes effect from {day}.",
        "You can change it again anytime before {day}.",
        "It won't touch your {time} alarm or the others.",
        "The change syncs to your {device} right away.",
        "It'll fade in over {minutes} seconds.",
    ),
    "message": (
        "{name} usually answers within {minutes} minutes.",
        "Nobody gets a notification when you do that, {name} included.",
        "It works the same on your {device}.",
        "You can undo it within {minutes} minutes.",
        "{name} was last online at {time}.",
    ),
    "schedule": (
        "{day} is otherwise clear after {time}.",
        "That leaves a {minutes}-minute buffer.",
        "Nothing else overlaps on {day} after {time}.",
        "The reminder would go out at {time}.",
    ),
    "info": (
        "The latest figures are from {day}.",
        "{value} moved the most since {month}.",
        "The summary takes about {minutes} minutes to read.",
        "Most sources agree on {value} right now.",
        "There was a small change on {day}.",
    ),
}
_ACK_OPENERS = (
    "Thanks for mentioning that",
    "Good to know",
    "That helps",
    "Noted",
    "Okay",
    "Got it",
    "Appreciate the context",
    "Makes sense",
    "Understood",
    "Thanks, that's useful",
    "Ah, okay",
    "Right",
    "Fair enough",
    "Sure",
    "I see",
    "Thanks for the detail",
    "Helpful",
    "Good point",
    "All right",
    "Okay, noted",
    "Thanks for the heads-up",
    "Oh, okay",
    "Gotcha",
    "Thanks for flagging it",
    "That's useful",
    "Ah, I see",
    "Okay then",
    "Sounds good",
)
_ACK_BODIES = (
    "I'll keep it in mind",
    "that narrows things down",
    "I'll work with that",
    "let me factor that in",
    "that changes what I'd pick",
    "I'll adjust the options",
    "I'll shape the next ideas around it",
    "that's a useful detail for {thing}",
    "it helps with {thing}",
    "I'll use that for {thing}",
    "I'll bear that in mind for {thing}",
    "let me take that into account",
    "that gives me a better picture",
    "I'll keep that in the plan",
    "that makes the choice easier",
    "I'll plan {thing} with that in mind",
    "that rules a few things out",
    "it points me in a better direction",
    "I'll tune {thing} to it",
)
_LEAD_WORDS = (
    "Sure",
    "Okay",
    "Of course",
    "Alright",
    "Sounds good",
    "Happy to",
    "No problem",
    "Let me look",
    "Let's see",
    "Here's what I found",
    "Good call",
    "Easy enough",
    "Absolutely",
    "Sure thing",
    "Right",
    "Got it",
    "Let me check",
    "One sec",
    "Okay, so",
    "Looking now",
    "Fair question",
    "Good question",
)
_ASSISTANT_OPENERS = (
    "Happy to help with {thing}",
    "Sure, let's sort out {thing}",
    "Of course — {thing} it is",
    "Let's take a look at {thing}",
    "Glad to help you {request}",
    "Okay, let's {request}",
    "Sure thing, {thing} first",
    "Absolutely, I can help you {request}",
    "Let's get {thing} sorted",
    "Good idea — let's look at {thing}",
    "I can help with {thing}",
    "Alright, {thing}",
    "Let's {request} together",
    "Sure — {thing} coming up",
)
_PERSONAL_QUESTIONS = (
    "{lead} anything going on {when} that I should plan around?",
    "{lead} anything new on your side {when}?",
    "How does your {span} look {when}?",
    "{lead} anything new for you {when} that matters here?",
    "What else should I know about your {span} {when}?",
    "{lead} anything coming up {when} that could get in the way?",
    "How are things with you {when}?",
    "{lead} anything about your situation {when} I should keep in mind?",
    "Before I book anything, {lead_lower} anything {when} I should work around?",
    "{lead} anything in your {span} {when} that rules some of this out?",
)
_QUESTION_LEADS = (
    "Is there",
    "Has there been",
    "Any chance there's",
    "Is there maybe",
    "Would there be",
)
_QUESTION_WHEN = (
    "lately",
    "these days",
    "at the moment",
    "this month",
    "right now",
    "this week",
    "recently",
    "coming up",
    "before {day}",
)
_QUESTION_SPANS = (
    "week",
    "schedule",
    "month",
    "calendar",
    "routine",
    "budget",
    "plans",
    "situation",
)

_TOPIC_QUESTIONS: dict[str, tuple[str, ...]] = {
    "settings": (
        "Should I keep it on {Alarm Recurring Preference}?",
        "Do you want a backup {minutes} minutes later?",
        "Should I apply that from {day}?",
        "Want a preview of {sound} first?",
        "Keep the volume where it is, or a bit louder from {day}?",
        "Should it skip {day}s?",
    ),
    "booking": (
        "Do you want me to hold it until {day}?",
        "Should I check {day} as well?",
        "Want me to compare prices with {venue} first?",
        "Is {time} too early?",
        "Shall I reserve it for {count}?",
        "Do you want a flexible ticket for about {price} more?",
        "Should I look closer to {place}?",
    ),
    "recommend": (
        "Want a couple more like {title}?",
        "Should I look for something shorter than {title}?",
        "Do you want newer picks or classics like {value}?",
        "Shall I save these to your {day} list?",
        "Want one wildcard pick too, say {title}?",
        "Should I include {value}?",
    ),
    "info": (
        "Do you want alerts when {value} moves?",
        "Should I send this as a summary every {day}?",
        "Want the details on {value} or just the headline?",
        "Shall I keep tracking {value}?",
        "Should I add {value} as a source?",
    ),
    "message": (
        "Do you want me to draft it for {name}?",
        "Should it go out now or at {time}?",
        "Want it shorter for {name}?",
        "Shall I add an emoji for {name} or keep it plain?",
        "Should I send it on {value}?",
    ),
    "schedule": (
        "Should I send invites to {name} too?",
        "Want a reminder on {day} as well?",
        "Does {day} at {time} work?",
        "Shall I block {minutes} minutes of travel time as well?",
        "Should I mark it as busy for {name}?",
    ),
    "plan": (
        "Do you want a day-by-day outline for {month}?",
        "Should I look at getting there on {day}?",
        "Want me to price it out under {price}?",
        "Is {day} a good start?",
        "Should I add a day in {value}?",
    ),
    "shop": (
        "Want me to watch for a discount below {price}?",
        "Should I compare it with one from {value}?",
        "Shall I check delivery by {day}?",
        "Do you want gift wrapping for {name}?",
        "Should I look at {venue} too?",
    ),
}

# --------------------------------------------------------------------------- user phrasing

_USER_OPENINGS = (
    "can you help me {request}?",
    "I'd like to {request}.",
    "I need to {request} — can you help?",
    "could we {request} today?",
    "I'm hoping to {request}.",
    "quick one: I want to {request}.",
    "hoping you can help me {request}.",
    "let's {request}.",
    "I'm trying to {request}.",
    "today I want to {request}.",
    "help me {request}, please.",
    "could you help me {request}?",
    "I've been meaning to {request}.",
    "can we {request}?",
    "I want to {request} and could use a hand.",
    "would you help me {request}?",
    "time to {request}, I think.",
    "any chance you can help me {request}?",
    "I'd love some help to {request}.",
    "I want to {request} {when}.",
    "can you help me {request} {when}?",
    "I'm looking to {request} {when}.",
)
_OPEN_WHEN = (
    "this week",
    "today",
    "before the weekend",
    "this evening",
    "if you have a minute",
    "while I have some time",
    "for {day}",
)
_GREETINGS = (
    "Hi",
    "Hey",
    "Hello",
    "Hi there",
    "Morning",
    "Hey there",
    "Evening",
    "Hiya",
    "Hi again",
    "Hello again",
    "Okay",
    "So",
)
_REACTIONS = (
    "That sounds promising",
    "Hmm, maybe",
    "Not bad",
    "Interesting",
    "Oh, that could work",
    "Sounds decent",
    "Okay, that's a start",
    "Nice one",
    "That's closer",
    "Hmm, not sure about that one",
    "Good shout",
    "That's an idea",
    "Sounds nice, actually",
    "Close, but not quite",
    "Ooh, tempting",
    "Fair enough",
    "Could be good",
    "That one looks solid",
    "Huh, never thought of that",
    "Decent option",
    "Oh nice",
    "Hmm, {short} might be a stretch",
    "{short} sounds good",
    "Okay, {short} is interesting",
    "That works for {thing}",
)
_YES = (
    "Yes, please",
    "Sure, go ahead",
    "Yeah, that'd be great",
    "Please do",
    "Yes",
    "Sure",
    "Go for it",
    "Sounds good, yes",
    "Yeah",
    "Definitely",
)
_NO = (
    "No need",
    "Not for now",
    "Nah, that's fine",
    "No, skip that",
    "Not this time",
    "Maybe later",
    "Rather not",
    "Let's leave it",
)
_ANSWER_TAILS = (
    "",
    "",
    "thanks",
    "and {day} works too",
    "as long as it's under {price}",
    "{time} is fine",
    "for {count} of us",
    "that would help",
    "just keep it simple",
    "whatever is easier",
    "let's see how it goes",
)

_FOLLOW_UPS: dict[str, tuple[str, ...]] = {
    "settings": (
        "Can it repeat on {Alarm Recurring Preference}?",
        "What would {sound} sound like?",
        "Could you make it a bit gentler than {sound}?",
        "Can I snooze it once for {minutes} minutes?",
        "Does that keep the {Alarm Time Preference} one too?",
        "What if I switch to {sound} on {day}s?",
        "Could it start quieter and build up over {minutes} seconds?",
        "Is there a way to skip it on {day}?",
    ),
    "booking": (
        "What times are there {on_day}?",
        "How much would {short} be?",
        "Is there anything cheaper than {price}?",
        "Can you check {day} instead?",
        "Is {short} refundable?",
        "What's the next option after {time}?",
        "Any with better reviews than {rating}?",
        "Is there one closer to {place}?",
        "Could we do {time} instead?",
        "Does {venue} have anything {on_day}?",
        "What's included for {price}?",
        "How far is it from {place}?",
    ),
    "recommend": (
        "What's {short} about?",
        "Anything a bit more recent than {title}?",
        "Got something similar to {short} but lighter?",
        "Which one would you start with, {short} or {title}?",
        "Anything else in the {value} vein?",
        "Is {title} very long?",
        "How does it compare with {value}?",
        "Anything else for someone who likes {value}?",
        "Is {short} good for a {part} like this?",
        "Any hidden gems besides {title}?",
    ),
    "info": (
        "What's the main takeaway on {value}?",
        "How reliable is {value} as a source?",
        "Can you go a bit deeper on {value}?",
        "Anything to watch out for before {day}?",
        "What changed since {month}?",
        "How does {value} compare right now?",
        "Is that the latest from {day}?",
        "What are people saying about {value}?",
    ),
    "message": (
        "How would you word it for {name}?",
        "Will {name} get a notification?",
        "Can you make it sound less formal for {name}?",
        "What if {name} doesn't reply by {time}?",
        "Should I send it on {value} or text instead?",
        "Could it be shorter, for {name}?",
        "Is {time} too late to send it?",
    ),
    "schedule": (
        "What else is on {day}?",
        "Can you move it to {time}?",
        "Will that clash with anything on {day}?",
        "Can I get a reminder at {time} too?",
        "Could {name} join at {time}?",
        "What does {day} look like after {time}?",
    ),
    "plan": (
        "How would the days break down in {value}?",
        "What's the rough cost, under {price}?",
        "Anything off the beaten path near {value}?",
        "How do I get there from {place}?",
        "What should I book first, {short} or the rest?",
        "Could we fit in a day at {venue}?",
        "Is {month} a good time for {value}?",
    ),
    "shop": (
        "How's the quality on {short}?",
        "Is there a cheaper version than {price}?",
        "When would it arrive if I order by {day}?",
        "What do reviews say about {value}?",
        "Can you compare it with the one from {venue}?",
        "Does {value} make something similar?",
        "Is {price} a fair price for it?",
    ),
}
_USER_CLOSINGS: dict[str, tuple[str, ...]] = {
    "settings": (
        "Perfect, save it like that",
        "Great, keep those settings",
        "That's it — apply it from {day}",
        "Lovely, that should do",
        "Set it and I'm done",
        "Keep {sound} then",
    ),
    "booking": (
        "Great, go ahead and book it",
        "Let's lock that in for {day}",
        "Book {short}, then",
        "Perfect — reserve it",
        "That works; confirm it please",
        "Go with {venue} at {time}",
    ),
    "recommend": (
        "Starting with {short}, then",
        "{title} goes on the list too",
        "Great picks — {short} first",
        "That's plenty to go on",
        "{short} it is for this {part}",
    ),
    "info": (
        "That's a good overview of {value}",
        "Helpful — keep me posted on {value}",
        "Great, that's exactly what was needed before {day}",
        "That clears up {value}",
    ),
    "message": (
        "Perfect, send it that way",
        "Great, that wording works for {name}",
        "Okay, sending it at {time}",
        "That's exactly the tone for {name}",
    ),
    "schedule": (
        "Great, put it on the calendar for {day}",
        "Perfect, block {day}",
        "Done deal — add it at {time}",
        "That works, save it",
    ),
    "plan": (
        "Let's go with that plan",
        "Love it — {value} it is",
        "Great, that's the plan for {month}",
        "Perfect, start with {short}",
    ),
    "shop": (
        "Let's order {short}",
        "Great, add it to the cart",
        "That's the one for under {price}",
        "Perfect, go with {venue}",
    ),
}
_CLOSING_TAILS = (
    "",
    "",
    "thanks!",
    "thanks a lot",
    "appreciate it",
    "cheers",
    "thank you!",
    "that's all for now",
    "thanks for the help",
    "much appreciated",
    "you're a star",
    "that settles it",
)
_ASSISTANT_CLOSINGS: dict[str, tuple[str, ...]] = {
    "settings": (
        "Done — {thing} is updated from {day}.",
        "Saved. {thing_cap} is set for {time}.",
        "All set; {thing} will run as agreed.",
        "Updated, and you can change it anytime.",
    ),
    "booking": (
        "Done — {short} is booked for {day}.",
        "Reserved for {day} at {time}; the confirmation is on its way.",
        "All booked at {venue}.",
        "Confirmed for {day}, {price} in total.",
    ),
    "recommend": (
        "Tell me how you like {short}.",
        "I've saved {title} to your list as well.",
        "Saved to your list for {day}.",
        "Happy exploring — {title} is a good next one.",
    ),
    "info": (
        "Glad it helped; I'll flag anything new by {day}.",
        "I'll keep an eye on {value} for you.",
        "More updates on {day}.",
        "Ping me for a refresh after {day}.",
    ),
    "message": (
        "Sent to {name}, nice and clear.",
        "Done — it's on its way to {name}.",
        "Message out; I'll tell you when {name} replies.",
        "It went through at {time}.",
    ),
    "schedule": (
        "Added to your calendar for {day} at {time}.",
        "Blocked, with a reminder at {time}.",
        "It's in the calendar for {day}.",
        "Saved — the reminder goes out at {time}.",
    ),
    "plan": (
        "I'll draft the first bookings for {month}.",
        "Plan saved; next we can book {short}.",
        "I'll start on the {value} part.",
        "The outline for {month} is saved.",
    ),
    "shop": (
        "Added {short} to your cart.",
        "Ordered — it should arrive by {day}.",
        "Done, {price} in total.",
        "It's in the cart for when you're ready.",
    ),
}
_ASSISTANT_TAILS = (
    "",
    "enjoy!",
    "have a good {day}!",
    "anything else for {day}?",
    "let me know if plans change",
    "have a lovely {part}!",
    "glad to help",
    "shout if {name} has questions",
    "talk soon",
    "good luck with it",
    "I'll check in on {day}",
)


def _greeted(text: str, rng: random.Random) -> str:
    """The opening with a greeting in front, in the same sentence ("Hi, can you help me ...?")."""
    if rng.random() < 0.35:
        return sentence(text)
    return sentence(f"{pick(rng, _GREETINGS)}{pick(rng, (', ', ' — '))}{text}")


def opening_request(topic: Topic, options: Options, rng: random.Random) -> str:
    text = pick(rng, _USER_OPENINGS).replace("{request}", topic.request)
    text = text.replace("{when}", fill_slots(pick(rng, _OPEN_WHEN), options, rng))
    return _greeted(text, rng)


def background_sentence(topic: Topic, rng: random.Random) -> str:
    if not topic.background:
        return ""
    frame = pick(
        rng,
        (
            "{b}.",
            "For context, {b}.",
            "{b}, so that's the situation.",
            "Basically, {b}.",
            "{b} at the moment.",
            "The thing is, {b}.",
        ),
    )
    body = topic.background if frame.startswith("{b}") else lower_start(topic.background)
    return sentence(frame.format(b=body))


def reaction(topic: Topic, options: Options, rng: random.Random) -> str:
    return fill_slots(
        pick(rng, _REACTIONS), options, rng, short=options.short(rng), thing=topic.thing
    )


def answer_topic_question(options: Options, rng: random.Random) -> str:
    if rng.random() < 0.35:
        return sentence(pick(rng, _NO))
    head = pick(rng, _YES)
    tail = fill_slots(pick(rng, _ANSWER_TAILS), options, rng)
    return sentence(f"{head}, {tail}" if tail else head)


def follow_up(topic: Topic, options: Options, rng: random.Random, lead: str = "") -> str:
    question = fill_slots(
        options.fresh("follow_up", _FOLLOW_UPS[topic.kind], rng),
        options,
        rng,
        short=options.short(rng),
    )
    return sentence(_join_clause(lead, question, rng)) if lead else question


def user_closing(topic: Topic, options: Options, rng: random.Random, lead: str = "") -> str:
    """The user's last sentence: a closing for the request, with the reaction before it and thanks after it."""
    text = fill_slots(pick(rng, _USER_CLOSINGS[topic.kind]), options, rng, short=options.short(rng))
    tail = pick(rng, _CLOSING_TAILS)
    if tail:
        text = f"{text}{pick(rng, (' — ', ', ', '; '))}{tail[:1].lower()}{tail[1:]}"
    return sentence(_join_clause(lead, text, rng)) if lead else sentence(text)


def assistant_opener(topic: Topic, rng: random.Random) -> str:
    return pick(rng, _ASSISTANT_OPENERS).format(thing=topic.thing, request=topic.request_to_user)


def acknowledgement(topic: Topic, rng: random.Random) -> str:
    """A reply to a personal remark of any kind: it never depends on what the remark was."""
    opener = pick(rng, _ACK_OPENERS)
    if rng.random() < 0.35:
        return opener
    body = pick(rng, _ACK_BODIES).format(thing=topic.thing)
    return f"{opener} — {body}" if rng.random() < 0.4 else f"{opener}, {body}"


def lead_word(rng: random.Random) -> str:
    return pick(rng, _LEAD_WORDS)


def proposal(topic: Topic, options: Options, rng: random.Random, lead: str = "") -> str:
    """One proposal sentence; ``lead`` (an opener or an acknowledgement) joins it as one sentence or stands alone."""
    option = options.propose(rng)
    frame = pick(rng, _PROPOSAL_FRAMES)
    text = frame.replace("{thing}", topic.thing).replace("{o}", option)
    if text.startswith(option):
        text = option[:1].upper() + option[1:] + text[len(option) :]
    if not lead:
        return sentence(text)
    joined = text if text.startswith(("I ", "I'", option[:12])) else text[:1].lower() + text[1:]
    return sentence(f"{lead.rstrip(' .!,')}{pick(rng, (' — ', ', ', ' — '))}{joined}")


def reason(topic: Topic, options: Options, rng: random.Random) -> str:
    """Why the proposal suits the user, by one of their favourites (nothing when they have none here)."""
    value = options.any_value(rng)
    if value in {"the usual", "the classics", "the basics"}:
        return ""
    reasons = _TASTE_REASONS if topic.domain in TASTE_DOMAINS else _PREFERENCE_REASONS
    return fill_slots(options.fresh("reason", reasons, rng), options, rng, value=value)


def detail(topic: Topic, options: Options, rng: random.Random) -> str:
    details = _DETAILS[topic.kind]
    if details is _COMMERCIAL_DETAILS and topic.domain in TASTE_DOMAINS:
        details = _WORK_DETAILS
    return sentence(fill_slots(pick(rng, details), options, rng))


def topic_question(topic: Topic, options: Options, rng: random.Random) -> str:
    return fill_slots(pick(rng, _TOPIC_QUESTIONS[topic.kind]), options, rng)


def personal_question(options: Options, rng: random.Random) -> str:
    lead = pick(rng, _QUESTION_LEADS)
    text = pick(rng, _PERSONAL_QUESTIONS).format(
        lead=lead,
        lead_lower=lead.lower(),
        when=pick(rng, _QUESTION_WHEN),
        span=pick(rng, _QUESTION_SPANS),
    )
    return sentence(fill_slots(text, options, rng))


def assistant_closing(topic: Topic, options: Options, rng: random.Random, lead: str = "") -> str:
    """The assistant's last sentence: the request done, a friendly tail after it, the lead before it."""
    thing_cap = topic.thing[:1].upper() + topic.thing[1:]
    text = fill_slots(
        pick(rng, _ASSISTANT_CLOSINGS[topic.kind]),
        options,
        rng,
        short=options.short(rng),
        thing=topic.thing,
        thing_cap=thing_cap,
    )
    text = text.rstrip(".")
    tail = fill_slots(pick(rng, _ASSISTANT_TAILS), options, rng)
    if tail:
        text = f"{text}{pick(rng, (' — ', '; '))}{tail[:1].lower()}{tail[1:]}"
    if not lead:
        return sentence(text)
    # Every closing opens on an ordinary word ("Happy exploring", "Added to ..."), never a name.
    if not re.match(r"I\b|I'", text):
        text = text[:1].lower() + text[1:]
    return sentence(_join_clause(lead, text, rng))
