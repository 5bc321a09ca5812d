"""The life-update bank: what can change in a user's life, per need category.

Each entry is a :class:`~memoryquest.simulator.needs.bank.Generator`: a need
category, an exclusive group (one per user), the conversations it would come
up in, core wordings (stored text first, then first-person sayings), optional
details and, for things that expire, time limits. Slots read the persona where
it has something to say (its sports, airline, streaming service, city,
currency, employment, family) and fall back to small word lists.

Writing rules, checked by the tests: core sayings start with the speaker (I,
I'm, I've, My) and never repeat the stored core; detail and limit sayings hold
no first-person word; every text carries a cue word of its own need category
(see :data:`memoryquest.simulator.needs.model.NEEDS`) and none stronger for
another.
"""

from __future__ import annotations

import random
import re
from collections.abc import Callable
from dataclasses import replace

from memoryquest.contracts import Domain
from memoryquest.simulator.needs.bank import Generator, P, Part, register
from memoryquest.simulator.needs.model import need_scores
from memoryquest.simulator.needs.world import (
    Grounded,
    Slot,
    World,
    affinity,
    amount,
    either,
    persona,
    pick,
    shared,
)
from memoryquest.simulator.persona_grounding import WEEKDAYS, clean_value

D = Domain
AL, BK, BU, CA, EV, FI, FL, GA, HO, ME = (
    D.ALARM,
    D.BOOKS,
    D.BUSES,
    D.CALENDAR,
    D.EVENTS,
    D.FINANCE,
    D.FLIGHTS,
    D.GAMES,
    D.HOTELS,
    D.MEDIA,
)
MS, MO, MU, RC, RE, SV, SH, SP, TN, TR = (
    D.MESSAGING,
    D.MOVIES,
    D.MUSIC,
    D.RENTAL_CARS,
    D.RESTAURANTS,
    D.SERVICES,
    D.SHOPPING,
    D.SPORTS,
    D.TRAIN,
    D.TRAVEL,
)

UNTIL = P("until {until}", "until {until}", "till {until}", "right up to {until}")
FOR_SPAN = P(
    "for the next {span}",
    "for the next {span}",
    "for another {span} or so",
    "over the coming {span}",
)
MONTH_END = P(
    "until the end of {month}",
    "until the end of {month}",
    "through to the end of {month}",
    "till {month} is over",
)
LIMITS = (UNTIL, FOR_SPAN)
VALID_UNTIL = P("valid until {until}", "valid until {until}", "good till {until}")
ALL_LIMITS = (UNTIL, FOR_SPAN, MONTH_END)


def weekday(index: int) -> Slot:
    """The persona's ``index``-th weekday of a seeded order: commitments with different indexes never share a day."""

    def fill(world: World, rng: random.Random) -> str:
        order = list(WEEKDAYS[:5])
        world.rng("weekdays").shuffle(order)
        return order[index % len(order)]

    return Slot(fill, persona=True)


def city(world: World, rng: random.Random) -> str | None:
    return world.city or None


_BALL_SPORTS = {
    "baseball",
    "basketball",
    "cricket",
    "football",
    "golf",
    "hockey",
    "netball",
    "rugby",
    "soccer",
    "tennis",
    "volleyball",
}


def sport_cause(world: World, rng: random.Random) -> str | None:
    sports = [s.lower() for s in world.values(D.SPORTS, "Favorite Sports")]
    own = [f"playing {s}" for s in sports if s in _BALL_SPORTS]
    own += [s for s in sports if s in {"cycling", "boxing", "snowboarding", "skateboarding"}]
    if own and rng.random() < 0.7:
        return Grounded(rng.choice(own))
    return rng.choice(
        ("on an icy step", "stepping off a curb", "moving furniture", "on a hiking trail")
    )


def allergen(world: World, rng: random.Random) -> str:
    restrictions = " ".join(world.values(D.RESTAURANTS, "Dietary Restrictions")).casefold()
    if "nut" in restrictions:
        return Grounded(
            rng.choice(("tree nuts", "cashews", "pistachios", "walnuts", "hazelnuts", "peanuts"))
        )
    return rng.choice(
        ("shellfish", "sesame", "kiwi fruit", "peanuts", "tree nuts", "mustard seed", "celery")
    )


def concert(world: World, rng: random.Random) -> str | None:
    names = [
        v
        for v in world.values(D.MUSIC, "Favorite Artists") + world.values(D.MUSIC, "Favorite Bands")
        if len(v) < 28
    ]
    return f"a {rng.choice(names)} concert" if names else None


def screenings(world: World, rng: random.Random) -> str | None:
    kinds = [v for v in world.values(D.MOVIES, "Theater Type Preference") if v in {"IMAX", "3D"}]
    return f"{rng.choice(kinds)} screenings" if kinds else None


def crush(world: World, rng: random.Random) -> str | None:
    teams = [clean_value(v) for v in world.values(D.SPORTS, "Favorite Team")]
    teams = [t for t in teams if len(t) < 28 and " " in t]
    return f"getting caught in a crush at a {rng.choice(teams)} match" if teams else None


def heatstroke(world: World, rng: random.Random) -> str | None:
    places = [v for v in world.values(D.TRAVEL, "Frequent Travel Destination") if v[:1].isupper()]
    return f"a heatstroke on a trip to {rng.choice(places)}" if places else None


def persona_value(fill_from: Callable[[World, random.Random], str | None]) -> Slot:
    """A slot read from the persona's affinities through a helper (not a word list)."""
    return Slot(
        lambda world, rng: Grounded(v) if (v := fill_from(world, rng)) else None,
        persona=True,
        profile=True,
    )


def destination(world: World, rng: random.Random) -> str | None:
    # A place whose name reads like a need ("Kruger National Park": parking) would blur the update's need.
    places = [
        v
        for v in world.values(D.TRAVEL, "Frequent Travel Destination")
        if v[:1].isupper() and not need_scores(v)
    ]
    return rng.choice(places) if places else None


def cuisine_takeaway(world: World, rng: random.Random) -> str | None:
    cuisines = [
        v
        for v in world.values(D.RESTAURANTS, "Cuisine Preference")
        if v[:1].isupper() and len(v) < 20
    ]
    return f"a {rng.choice(cuisines)} takeaway" if cuisines else None


def diet_is(word: str) -> Callable[[World], bool]:
    return lambda world: (
        word in " ".join(world.values(D.RESTAURANTS, "Dietary Restrictions")).casefold()
    )


def diet_not(*words: str) -> Callable[[World], bool]:
    return lambda world: (
        not any(
            w in " ".join(world.values(D.RESTAURANTS, "Dietary Restrictions")).casefold()
            for w in words
        )
    )


def works(world: World) -> bool:
    return world.employment in {"full", "part"}


def student(world: World) -> bool:
    return world.employment == "student"


def earlier_wake(world: World, rng: random.Random) -> str | None:
    times = world.values(D.ALARM, "Alarm Time Preference")
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


COMMON_OCCASIONS = pick(
    "a work lunch",
    "a cousin's wedding",
    "a street-food market",
    "a friend's barbecue",
    "a birthday dinner",
    "a food festival",
)

GENERATORS: tuple[Generator, ...] = (
    # ------------------------------------------------------------------ diet and allergies
    Generator(
        "diet",
        "food_allergy",
        (RE, SH, SV, EV, TR, FL),
        cores=(
            P(
                "Was told by an allergist to cut out {allergen} completely",
                "My allergist wants me to stay away from {allergen} completely",
                "I have to avoid {allergen} completely now, on my allergist's orders",
            ),
            P(
                "Carries an EpiPen since a bad reaction to {allergen}",
                "I keep an EpiPen on me now that {allergen} gave me a bad reaction",
                "My EpiPen goes everywhere with me since I reacted badly to {allergen}",
            ),
            P(
                "Tested positive for an allergy to {allergen} in a skin-prick test",
                "My skin-prick test came back positive for {allergen}",
                "I'm officially allergic to {allergen} according to a skin-prick test",
            ),
        ),
        extras=(
            P(
                "after a scare at {occasion}",
                "after a scare at {occasion}",
                "following a scare at {occasion}",
            ),
            P(
                "— even traces are a problem",
                "— even traces are a problem",
                "and even a trace counts",
            ),
        ),
        slots={"allergen": persona(allergen), "occasion": COMMON_OCCASIONS},
    ),
    Generator(
        "diet",
        "diet_change",
        (RE, SH, SV, EV, TR),
        cores=(
            P(
                "Went fully vegan after years as a vegetarian",
                "I've gone from vegetarian to fully vegan",
                "I dropped eggs and dairy as well, so I'm vegan now",
                when=diet_is("vegetarian"),
            ),
            P(
                "Now keeps kosher when eating out too, not only at home",
                "I've started keeping kosher outside the house as well",
                "I only eat at kosher-certified places now, even away from home",
                when=diet_is("kosher"),
            ),
            P(
                "Gave up red meat to bring down high cholesterol",
                "I stopped eating red meat because my cholesterol is high",
                "My cholesterol came back high, so red meat is off my plate",
                when=diet_not("vegetarian", "kosher"),
            ),
            P(
                "Stopped drinking alcohol entirely and orders alcohol-free drinks",
                "I've quit alcohol completely and stick to alcohol-free drinks",
                "I don't drink alcohol at all anymore, not even a glass of wine",
            ),
            P(
                "Went pescatarian and only eats fish on top of vegetables",
                "I've gone pescatarian, so fish is the only meat-like thing I eat",
                "My diet is pescatarian now — fish, but no meat",
                when=diet_not("vegetarian", "kosher"),
            ),
        ),
        extras=(
            P(
                "after a month-long trial",
                "after a month-long trial",
                "following a month-long trial",
            ),
            P("with no exceptions", "with no exceptions at all", "and no exceptions"),
        ),
        slots={},
    ),
    Generator(
        "diet",
        "diet_challenge",
        (RE, SH, EV, SV, CA),
        cores=(
            P(
                "Is doing a sugar-free challenge with {crowd}",
                "I'm on a no-sugar challenge with {crowd}",
                "I signed up for a sugar-free diet challenge with {crowd}",
            ),
            P(
                "Can only eat soft food while a new dental crown settles",
                "My new dental crown means soft food only",
                "I'm stuck eating soft food while my new crown settles",
            ),
            P(
                "Is on an elimination diet set by a dietitian",
                "My dietitian has me on an elimination diet",
                "I'm following an elimination diet from my dietitian",
            ),
            P(
                "Is fasting from dawn to sunset for Ramadan",
                "I'm fasting from dawn to sunset for Ramadan",
                "My days are dawn-to-sunset fasts for Ramadan",
                when=lambda w: (
                    "islam" in (w.material.demographics.religion or "").casefold()
                    or "muslim" in (w.material.demographics.religion or "").casefold()
                ),
            ),
        ),
        limits=ALL_LIMITS,
        slots={
            "crowd": persona(
                lambda w, r: (
                    "classmates"
                    if w.employment == "student"
                    else "coworkers"
                    if works(w)
                    else "friends"
                )
            )
        },
        span_days=(3, 30),
    ),
    Generator(
        "diet",
        "diet_medical",
        (RE, SH, SV, EV, TR),
        cores=(
            P(
                "Cut out dairy after a lactose intolerance diagnosis",
                "I found out I'm lactose intolerant, so dairy is out for me",
                "My doctor diagnosed lactose intolerance, so I skip dairy now",
                when=diet_not("vegetarian", "kosher"),
            ),
            P(
                "Went gluten-free after a coeliac diagnosis",
                "I was diagnosed with coeliac disease and can't have gluten anymore",
                "I'm strictly gluten-free now because of coeliac disease",
                when=diet_not("kosher"),
            ),
            P(
                "Was put on a low-sodium diet by a cardiologist",
                "My cardiologist has me on a low-salt diet",
                "I'm supposed to keep salt really low in my diet on my cardiologist's advice",
            ),
            P(
                "Follows a low-FODMAP diet set by a dietitian",
                "My dietitian put me on a low-FODMAP diet",
                "I'm eating low-FODMAP now, on a dietitian's plan",
            ),
            P(
                "Has to keep sugar low in the diet after a prediabetes result",
                "My blood test showed prediabetes, so sugar has to stay low in my diet",
                "I'm cutting sugar right down because my doctor flagged prediabetes",
            ),
        ),
        extras=(P("and reads every label", "and checks every label", "with every label checked"),),
        slots={},
    ),
    Generator(
        "diet",
        "food_poisoning",
        (RE, SH, SV, TR, EV),
        cores=(
            P(
                "Had food poisoning from {dish} and is sticking to plain food",
                "I got food poisoning from {dish}, so I'm eating only plain food",
                "My stomach is still recovering from food poisoning after {dish} — plain food only",
            ),
        ),
        extras=(P("picked up on a night out", "picked up on a night out", "from a night out"),),
        limits=LIMITS,
        slots={
            "dish": either(
                cuisine_takeaway,
                "takeaway sushi",
                "a street taco",
                "a buffet lunch",
                "oysters",
                "reheated rice",
                "a kebab",
            )
        },
        span_days=(3, 14),
    ),
    # ------------------------------------------------------------------ injuries, mobility and health
    Generator(
        "health",
        "injury",
        (SP, SV, CA, EV, TR, SH),
        cores=(
            P(
                "Sprained an ankle {cause} and is in a walking boot",
                "I sprained my ankle {cause} and I'm in a walking boot",
                "My ankle got sprained {cause}, so I'm wearing a walking boot",
            ),
            P(
                "Tore a knee ligament {cause} and has to avoid stairs",
                "I tore a ligament in my knee {cause}, and stairs are hard for me",
                "My knee ligament got torn {cause}, so stairs are off limits",
            ),
            P(
                "Fractured a wrist {cause} and has it in a cast",
                "I broke my wrist {cause} and it's in a cast",
                "My wrist is fractured and in a cast after a fall {cause}",
            ),
            P(
                "Pulled a muscle in the lower back {cause} and can't sit for long stretches",
                "I pulled a muscle in my lower back {cause} and sitting for long hurts",
                "My lower back went {cause}, so long stretches of sitting are painful",
            ),
        ),
        extras=(
            P(
                "and is doing physio twice a week",
                "with physio twice a week",
                "plus physio twice a week",
            ),
            P(
                "— all sport is off for now",
                "— all sport is off for now",
                "and sport is off the table",
            ),
        ),
        limits=LIMITS,
        slots={"cause": persona(sport_cause)},
        span_days=(5, 40),
    ),
    Generator(
        "health",
        "surgery",
        (SV, CA, TR, SH, FI),
        cores=(
            P(
                "Is recovering from {surgery} and can't lift anything heavy",
                "I'm still recovering from {surgery}, so no heavy lifting for me",
                "My doctor says no lifting anything heavy while I recover from {surgery}",
            ),
            P(
                "Had {surgery} and walks with crutches",
                "I'm on crutches after {surgery}",
                "I've been getting around on crutches since {surgery}",
            ),
        ),
        extras=(
            P(
                "after months on a waiting list",
                "after months on a waiting list",
                "following a long wait for the operation",
            ),
            P("done as day surgery", "done as day surgery", "as a day-surgery case"),
        ),
        limits=LIMITS,
        slots={
            "surgery": pick(
                "knee surgery",
                "a hernia operation",
                "shoulder surgery",
                "foot surgery",
                "hip surgery",
                "an ankle operation",
            )
        },
        span_days=(7, 50),
    ),
    Generator(
        "health",
        "chronic",
        (SV, SP, CA, TR, EV),
        cores=(
            P(
                "Was diagnosed with asthma that flares up in cold air",
                "I found out I have asthma, and cold air sets it off",
                "My new asthma diagnosis means cold air is a trigger for me",
            ),
            P(
                "Has early arthritis in both knees that makes long walks painful",
                "I have early arthritis in my knees, so long walks hurt",
                "My knees have early arthritis and long walks are painful now",
            ),
            P(
                "Was told by a cardiologist to avoid strenuous exercise",
                "My cardiologist told me to stay away from strenuous exercise",
                "I'm not supposed to do anything strenuous, according to my cardiologist",
            ),
            P(
                "Developed plantar fasciitis and can't stand for long",
                "I've got plantar fasciitis, so standing for long hurts",
                "My feet are bad with plantar fasciitis, and long standing is a problem",
            ),
        ),
        extras=(
            P(
                "and keeps medication on hand",
                "with medication always on hand",
                "and medication is always on hand",
            ),
        ),
        slots={},
    ),
    Generator(
        "health",
        "pregnancy",
        (SV, CA, SH, TR, FI),
        cores=(
            P(
                "Is pregnant, with the due date on {until}",
                "I'm pregnant, and the baby is due on {until}",
                "My due date is {until} — I'm pregnant",
            ),
        ),
        extras=(
            P(
                "and was told to avoid long spells of standing",
                "and long spells of standing are discouraged",
                "with long standing discouraged by the midwife",
            ),
        ),
        when=lambda w: w.female and 25 <= w.age_from < 45,
        span_days=(40, 170),
    ),
    Generator(
        "health",
        "medication",
        (SV, RE, EV, SH, TR),
        cores=(
            P(
                "Is on a course of antibiotics that rules out alcohol",
                "I'm on antibiotics, which means no alcohol",
                "My antibiotics mean alcohol is off limits",
            ),
            P(
                "Is on new heart medication that makes standing up fast dizzying",
                "I'm on new heart medication and get light-headed if I stand up fast",
                "My new heart medication makes me light-headed when I get up quickly",
            ),
        ),
        extras=(
            P(
                "prescribed after a chest infection",
                "prescribed after a chest infection",
                "after a chest infection",
            ),
        ),
        limits=LIMITS,
        span_days=(4, 25),
    ),
    Generator(
        "health",
        "physio",
        (SV, SP, CA, AL),
        cores=(
            P(
                "Goes to physiotherapy every {day} morning for a shoulder tendon problem",
                "I have physio every {day} morning for my shoulder tendon",
                "My shoulder tendon needs physio, so {day} mornings are taken",
            ),
            P(
                "Sees a physiotherapist every {day} for a stiff hip",
                "I see a physiotherapist each {day} about my stiff hip",
                "My hip is stiff, so there's physio every {day}",
            ),
        ),
        extras=(
            P("after too much {sport}", "after too much {sport}", "from too much {sport}"),
            P(
                "that will likely run for a few months",
                "likely for a few months",
                "probably for a few months",
            ),
        ),
        slots={"sport": affinity(SP, "Favorite Sports", lower=True), "day": weekday(5)},
    ),
    Generator(
        "health",
        "dental",
        (SV, RE, SH, CA),
        cores=(
            P(
                "Had a wisdom tooth out and was told to rest and avoid hard exercise",
                "I had a wisdom tooth pulled and I'm supposed to rest, no hard exercise",
                "My dentist pulled a wisdom tooth and told me to rest and skip exercise",
            ),
            P(
                "Has a temporary filling and must avoid chewing on one side",
                "I have a temporary filling, so chewing on one side is out",
                "My temporary filling means I can't chew on one side",
            ),
        ),
        extras=(
            P("after a nasty infection", "after a nasty infection", "following a nasty infection"),
        ),
        limits=(UNTIL,),
        span_days=(3, 12),
    ),
    Generator(
        "health",
        "fitness_limit",
        (SP, SV, CA, TR, EV),
        cores=(
            P(
                "Was told by a physiotherapist to skip running and jumping",
                "My physiotherapist says no running or jumping",
                "I've been told by my physio to avoid running and jumping",
            ),
            P(
                "Gets out of breath on hills since a bout of pneumonia",
                "I get breathless on hills since I had pneumonia",
                "My lungs still struggle on hills after pneumonia",
            ),
            P(
                "Was told by a physiotherapist to give {sport} a rest",
                "My physiotherapist says {sport} needs a rest",
                "I've been told by my physio to take a break from {sport}",
            ),
        ),
        extras=(
            P("while the knee settles", "while the knee settles", "until the knee settles down"),
        ),
        slots={"sport": affinity(SP, "Favorite Sports", lower=True, exclude="motor")},
    ),
    # ------------------------------------------------------------------ money and budget
    Generator(
        "budget",
        "income",
        (FI, SH, CA, MS, SV),
        cores=(
            P(
                "Had hours cut at work, leaving about {money} less income a month",
                "My hours at work got cut and I'm bringing home roughly {money} less each month",
                "I'm earning about {money} less a month since my hours were cut",
                when=works,
            ),
            P(
                "Lost a part-time campus job and lives on a {money} monthly allowance",
                "I lost my campus job, so I'm living on a {money} monthly allowance",
                "My only income now is a {money} monthly allowance since the campus job ended",
                when=student,
            ),
            P(
                "Had the unemployment benefit cut to {money} a month",
                "My unemployment benefit dropped to {money} a month",
                "I'm down to {money} a month in unemployment benefit",
                when=lambda w: w.employment == "seeking",
            ),
            P(
                "Had the pension drop by {money} a month after a tax change",
                "My pension went down by {money} a month with the tax change",
                "I'm getting {money} less pension a month since the tax change",
                when=lambda w: w.employment == "retired",
            ),
            P(
                "Lives on one household income of about {money} a month",
                "My household is living on one income, about {money} a month",
                "I'm managing the household on a single income of roughly {money} a month",
                when=lambda w: w.employment in {"home", "other"},
            ),
        ),
        slots={"money": amount(150, 200, 250, 300, 400)},
    ),
    Generator(
        "budget",
        "rent",
        (FI, SH, MS, CA),
        cores=(
            P(
                "Rent went up by {money} a month at the lease renewal",
                "My rent jumped by {money} a month when the lease renewed",
                "My landlord put the rent up by {money} a month",
            ),
            P(
                "Pays {money} more in rent a month since a flatmate left",
                "My share of the rent rose by {money} after a flatmate left",
                "I'm covering {money} more rent a month since my flatmate moved out",
            ),
        ),
        extras=(
            P("after the yearly review", "after the yearly review", "following the yearly review"),
            P("with only a month's notice", "with only a month's notice", "at a month's notice"),
        ),
        slots={"money": amount(60, 80, 100, 120, 150)},
    ),
    Generator(
        "budget",
        "savings_goal",
        (FI, SH, MS, CA, EV),
        cores=(
            P(
                "Is saving {money} for {goal} and keeps spending to essentials",
                "I'm putting away {money} for {goal}, so I only spend on essentials",
                "My savings goal is {money} for {goal}, which means essentials only",
            ),
            P(
                "Is saving {money} for a trip to {dest} and keeps spending to essentials",
                "I'm putting away {money} for a trip to {dest}, so I only spend on essentials",
                "My savings goal is {money} for a trip to {dest}, which means essentials only",
            ),
        ),
        extras=(
            P(
                "with an automatic transfer every payday",
                "with an automatic transfer every payday",
                "through a payday transfer",
            ),
            P("by the end of the year", "by the end of the year", "before the year is out"),
        ),
        slots={
            "dest": persona_value(destination),
            "money": amount(2000, 3000, 5000, 8000),
            "goal": pick(
                "a wedding", "an emergency fund", "a master's programme", "a house deposit"
            ),
        },
    ),
    Generator(
        "budget",
        "big_bill",
        (FI, SH, MS, SV),
        cores=(
            P(
                "Was hit with a {money} {bill}",
                "I got a {money} {bill} I wasn't expecting",
                "My {bill} came to {money}, which I didn't see coming",
            ),
        ),
        extras=(
            P("due within two weeks", "due within a fortnight", "payable within two weeks"),
            P(
                "that eats most of this month's spare money",
                "which eats most of this month's spare money",
                "that swallows most spare money this month",
            ),
        ),
        slots={
            "money": amount(300, 400, 600, 800),
            "bill": pick("dental bill", "tax bill", "insurance excess bill", "electricity bill"),
        },
    ),
    Generator(
        "budget",
        "spending_cap",
        (FI, SH, MS, CA, ME),
        cores=(
            P(
                "Capped fun spending at {money} a month",
                "I've capped my fun spending at {money} a month",
                "My limit for fun spending is {money} a month",
            ),
            P(
                "Put every non-essential purchase on hold to clear an overdraft",
                "I'm holding off on anything non-essential to clear my overdraft",
                "My overdraft needs clearing, so non-essential spending is frozen",
            ),
            P(
                "Stopped buying from {brand} to stay under a {money} monthly budget",
                "I've stopped shopping at {brand} to keep under a {money} monthly budget",
                "My {money} monthly budget means no more {brand} for now",
            ),
        ),
        extras=(
            P(
                "after overspending over the winter",
                "after overspending over the winter",
                "following an expensive winter",
            ),
            P("to rebuild savings", "to rebuild savings", "to get savings back up"),
        ),
        limits=(UNTIL, MONTH_END),
        slots={
            "brand": affinity(SH, "Brand Preference", proper=True),
            "money": amount(80, 100, 120, 150),
        },
        span_days=(5, 50),
    ),
    Generator(
        "budget",
        "refund",
        (FI, SH, MS, SV),
        cores=(
            P(
                "Is still waiting on a {money} refund for a cancelled {thing}",
                "I'm still owed a {money} refund for a {thing} that got cancelled",
                "My {money} refund for the cancelled {thing} still hasn't come through",
            ),
            P(
                "Is still waiting on a {money} refund for tickets to cancelled {event_type}",
                "I'm still owed {money} for tickets to {event_type} that got cancelled",
                "My {money} refund for tickets to cancelled {event_type} hasn't arrived",
            ),
        ),
        extras=(P("promised weeks ago", "promised weeks ago", "that was promised weeks ago"),),
        slots={
            "event_type": affinity(EV, "Event Type Preference", lower=True),
            "money": amount(100, 150, 200, 300),
            "thing": pick(
                "gym contract", "language course", "furniture order", "deposit on a flat"
            ),
        },
    ),
    Generator(
        "budget",
        "debt",
        (FI, SH, MS, CA),
        cores=(
            P(
                "Is paying off {money} of credit card debt",
                "I'm working through a {money} credit card balance",
                "My credit card balance is {money} and I'm paying it off",
            ),
            P(
                "Started repaying a student loan at {small} a month",
                "I've started paying back my student loan, {small} a month",
                "My student loan repayments of {small} a month just kicked in",
                when=lambda w: w.age_from < 35,
            ),
        ),
        slots={"money": amount(1500, 2000, 3000), "small": amount(80, 100, 150)},
    ),
    Generator(
        "budget",
        "shares",
        (FI, MS, SH),
        cores=(
            P(
                "Lost about {money} of savings when {company} shares fell",
                "My {company} shares dropped and I'm down about {money}",
                "I'm roughly {money} down since the {company} share price fell",
            ),
        ),
        extras=(P("in a single week", "in a single week", "within one week"),),
        slots={
            "money": amount(500, 800, 1200),
            "company": affinity(FI, "Financial Company", proper=True),
        },
    ),
    Generator(
        "budget",
        "tuition",
        (FI, CA, MS, SH),
        cores=(
            P(
                "Has a {money} tuition instalment due on {until}",
                "My next tuition payment of {money} is due on {until}",
                "I owe {money} in tuition on {until}",
            ),
            P(
                "Owes {money} in course fees by {until}",
                "I owe {money} in course fees by {until}",
                "My course fees of {money} are due by {until}",
            ),
        ),
        when=student,
        slots={"money": amount(800, 1000, 1500)},
        span_days=(5, 40),
    ),
    Generator(
        "budget",
        "insurance",
        (FI, SH, MS, SV),
        cores=(
            P(
                "Saw the {policy} premium jump by {money} a year",
                "My {policy} premium went up by {money} a year",
                "I'm paying {money} a year more for {policy} now",
            ),
        ),
        extras=(
            P(
                "after a claim last winter",
                "after a claim last winter",
                "following a claim last winter",
            ),
        ),
        slots={
            "policy": pick(
                "home insurance", "health insurance", "contents insurance", "travel insurance"
            ),
            "money": amount(120, 180, 240),
        },
    ),
    # ------------------------------------------------------------------ work, study and commitments
    Generator(
        "schedule",
        "job",
        (CA, AL, MS, FI, SV),
        cores=(
            P(
                "Was moved onto night shifts at work from Monday to Thursday",
                "I've been put on night shifts at work, Monday to Thursday",
                "My shifts at work are nights now, Monday through Thursday",
                when=lambda w: w.employment == "full",
            ),
            P(
                "Now has to be in the office every {day} and {day2}",
                "I'm required in the office every {day} and {day2} now",
                "My office days are {day} and {day2} from now on",
                when=lambda w: w.employment == "full",
            ),
            P(
                "Picked up extra weekend shifts at work",
                "I'm working extra weekend shifts",
                "My weekends are taken up by extra shifts at work",
                when=lambda w: w.employment == "part",
            ),
            P(
                "Has lab classes every {day} afternoon this semester",
                "I have lab classes each {day} afternoon this semester",
                "My {day} afternoons are lab classes for the semester",
                when=student,
            ),
            P(
                "Started a full-time job-readiness course on weekdays",
                "I'm doing a full-time job-readiness course every weekday",
                "My weekdays are taken by a job-readiness course",
                when=lambda w: w.employment == "seeking",
            ),
            P(
                "Volunteers at the hospital on weekday mornings",
                "I volunteer at the hospital on weekday mornings",
                "My weekday mornings are hospital volunteering",
                when=lambda w: w.employment == "retired",
            ),
            P(
                "Does the school run every weekday at 8 AM and 3 PM",
                "I do the school run every weekday at 8 and again at 3",
                "My weekdays revolve around the 8 AM and 3 PM school run",
                when=lambda w: w.employment in {"home", "other"},
            ),
        ),
        slots={"day": weekday(0), "day2": weekday(3)},
    ),
    Generator(
        "schedule",
        "deadline",
        (CA, MS, FI, BK, AL),
        cores=(
            P(
                "Has final exams running until {until}",
                "I'm in the middle of final exams that go on till {until}",
                "My final exams last until {until}",
                when=student,
            ),
            P(
                "Has a thesis draft due on {until}",
                "My thesis draft is due on {until}",
                "I have to hand in my thesis draft on {until}",
                when=student,
            ),
            P(
                "Has a big project deadline at work on {until}",
                "I'm up against a big work deadline on {until}",
                "My project at work is due on {until}",
                when=works,
            ),
            P(
                "Is presenting at a conference on {until}",
                "I'm giving a talk at a conference on {until}",
                "My conference presentation is on {until}",
                when=works,
            ),
            P(
                "Has a second-round job interview on {until}",
                "I got a second-round job interview on {until}",
                "My second job interview is scheduled for {until}",
                when=lambda w: w.employment in {"seeking", "student"},
            ),
        ),
        span_days=(3, 25),
    ),
    Generator(
        "schedule",
        "course",
        (CA, BK, MS, SV, AL),
        cores=(
            P(
                "Signed up for an evening {course} course on {day}s",
                "I'm taking an evening {course} class on {day}s",
                "My {day} evenings are for a {course} course I joined",
            ),
        ),
        extras=(P("to earn a certificate", "to earn a certificate", "for a certificate"),),
        limits=(UNTIL, FOR_SPAN),
        slots={
            "course": pick(
                "Spanish", "pottery", "coding", "first-aid", "photography", "Italian", "bookkeeping"
            ),
            "day": weekday(1),
        },
        span_days=(10, 60),
    ),
    Generator(
        "schedule",
        "volunteering",
        (CA, EV, MS, SP),
        cores=(
            P(
                "Volunteers at a food bank every {day} evening",
                "I volunteer at the food bank on {day} evenings",
                "My {day} evenings go to volunteering at a food bank",
            ),
            P(
                "Runs training for a junior {sport} team on {day} afternoons",
                "I run training for a junior {sport} team every {day} afternoon",
                "My {day} afternoons are spent coaching a junior {sport} team",
            ),
            P(
                "Volunteers at {event_type} every {day}",
                "I volunteer at {event_type} every {day}",
                "My {day}s go to volunteering at {event_type}",
            ),
        ),
        extras=(P("through a local charity", "through a local charity", "via a local charity"),),
        slots={
            "event_type": affinity(
                EV, "Event Type Preference", lower=True, exclude="sports|conferences"
            ),
            "day": weekday(2),
            "sport": affinity(
                SP, "Favorite Sports", lower=True, exclude="motor|gymnast|skate|snow|boxing|cycling"
            ),
        },
    ),
    Generator(
        "schedule",
        "rehearsal",
        (CA, MU, EV, MS),
        cores=(
            P(
                "Joined a community choir that rehearses every {day} night",
                "I joined a choir and we rehearse every {day} night",
                "My {day} nights are choir rehearsals now",
            ),
            P(
                "Plays in a five-a-side league with games on {day} evenings",
                "I play five-a-side in a league every {day} evening",
                "My league games are on {day} evenings",
            ),
            P(
                "Plays in a {team_sport} league with games on {day} evenings",
                "I play in a {team_sport} league, games on {day} evenings",
                "My {team_sport} league plays on {day} evenings",
            ),
        ),
        extras=(P("and rarely misses a week", "and rarely misses a week", "almost without fail"),),
        slots={
            "team_sport": affinity(
                SP,
                "Favorite Sports",
                lower=True,
                exclude="motor|gymnast|skate|snow|boxing|cycling|golf|tennis",
            ),
            "day": weekday(4),
        },
    ),
    Generator(
        "schedule",
        "on_call",
        (CA, AL, MS),
        cores=(
            P(
                "Is on call for work every other weekend",
                "I'm on the on-call rota for work every second weekend",
                "My work has me on call every other weekend",
            ),
        ),
        extras=(
            P(
                "to cover a colleague on leave",
                "to cover a colleague on leave",
                "covering for a colleague on leave",
            ),
        ),
        limits=LIMITS,
        when=works,
        span_days=(10, 60),
    ),
    Generator(
        "schedule",
        "standing_meeting",
        (CA, AL, MS, FI),
        cores=(
            P(
                "Meets a thesis supervisor every {day} at 9 AM",
                "I meet my thesis supervisor every {day} at 9",
                "My supervisor meetings are every {day} at 9 AM",
                when=student,
            ),
            P(
                "Has a weekly team meeting every {day} at 8 AM",
                "I have a team meeting every {day} at 8 AM sharp",
                "My {day} mornings start with an 8 AM team meeting",
                when=works,
            ),
            P(
                "Has a weekly job-centre appointment every {day} morning",
                "I have to check in at the job centre every {day} morning",
                "My {day} mornings are for the job-centre appointment",
                when=lambda w: w.employment == "seeking",
            ),
        ),
        extras=(
            P(
                "that nobody is allowed to miss",
                "that nobody is allowed to miss",
                "which nobody may miss",
            ),
        ),
        slots={"day": weekday(6)},
    ),
    Generator(
        "schedule",
        "side_gig",
        (CA, MS, FI, SH),
        cores=(
            P(
                "Took on {gig} every {day} evening",
                "I took on {gig} every {day} evening",
                "My {day} evenings are now spent on {gig}",
            ),
        ),
        extras=(
            P(
                "alongside the day job",
                "alongside the day job",
                "on top of the day job",
                when=works,
            ),
        ),
        slots={
            "gig": pick(
                "private tutoring",
                "bar work",
                "a delivery round",
                "freelance design work",
                "translation work",
            ),
            "day": weekday(0),
        },
    ),
    Generator(
        "schedule",
        "gym_class",
        (CA, SP, AL, SV),
        cores=(
            P(
                "Booked a twelve-week {class_} course that meets at 7 AM on {day}s",
                "I signed up for twelve weeks of {class_} at 7 AM on {day}s",
                "My {day} mornings start with a 7 AM {class_} class for the next three months",
            ),
        ),
        slots={
            "class_": pick("spin", "boxing fitness", "yoga", "Pilates", "swimming"),
            "day": weekday(3),
        },
    ),
    Generator(
        "schedule",
        "exam_prep",
        (CA, BK, MS, AL),
        cores=(
            P(
                "Is studying for a certification exam on {until}",
                "I'm revising for a certification exam on {until}",
                "My certification exam is on {until}, so evenings are for revision",
                when=works,
            ),
            P(
                "Has a language proficiency exam on {until}",
                "I'm sitting a language proficiency exam on {until}",
                "My language exam is on {until}, so evenings are for revision",
                when=lambda w: not works(w),
            ),
        ),
        span_days=(5, 40),
    ),
    # ------------------------------------------------------------------ the people who come along
    Generator(
        "companions",
        "house_guests",
        (MS, CA, RE, HO, ME),
        cores=(
            P(
                "Sister and her {kids} are staying over",
                "My sister is staying with me, along with her {kids}",
                "I've got my sister and her {kids} sleeping over",
            ),
            P(
                "Brother and his {kids} are staying over",
                "My brother is staying at my place with his {kids}",
                "I have my brother and his {kids} staying with me",
            ),
            P(
                "Parents are visiting from {homeland}",
                "My parents are over from {homeland} for a visit",
                "I have my parents here visiting from {homeland}",
                when=lambda w: bool(w.home_country_abroad),
            ),
        ),
        extras=(
            P("for a family wedding", "for a family wedding", "because of a family wedding"),
            P(
                "while their own place is being painted",
                "while their place gets painted",
                "during the painting of their place",
            ),
        ),
        limits=LIMITS,
        slots={
            "kids": pick("two kids", "toddler", "teenage son", "three children", "little twins"),
            "homeland": persona(lambda w, r: w.home_country_abroad or None),
        },
        span_days=(3, 25),
    ),
    Generator(
        "companions",
        "partner",
        (MS, EV, RE, CA),
        cores=(
            P(
                "Got engaged and now plans weekends as a couple",
                "I got engaged, so weekends are planned for two now",
                "My fiancé and I plan our weekends together these days",
                when=lambda w: not w.married,
            ),
            P(
                "Has a new partner who lives in another city",
                "I'm seeing someone new, and my partner lives in another city",
                "My new partner lives in a different city",
                when=lambda w: not w.married,
            ),
            P(
                "Spouse took a weekend job, so weekday evenings are the only couple time",
                "My spouse works weekends now, so weekday evenings are our only time together",
                "I only get weekday evenings with my spouse since the weekend job started",
                when=lambda w: w.married,
            ),
            P(
                "Has a new partner who is a big {team} fan and wants match days together",
                "My new partner is a big {team} fan and wants us at every match",
                "I'm with someone new who follows {team} and wants match days together",
                when=lambda w: not w.married,
            ),
        ),
        slots={"team": affinity(SP, "Favorite Team", proper=True)},
    ),
    Generator(
        "companions",
        "kids",
        (MS, CA, SV, SH),
        cores=(
            P(
                "Has the kids every other weekend since the separation",
                "I have my kids every second weekend since we separated",
                "My weekends alternate: the kids are with me every other one",
                when=lambda w: w.separated,
            ),
            P(
                "Son has {activity} every {day} afternoon and needs a lift there",
                "My son started {activity} on {day} afternoons and I drive him",
                "I take my son to {activity} every {day} afternoon now",
                when=lambda w: w.family,
            ),
            P(
                "Daughter just started daycare with a 5 PM pick-up",
                "My daughter started daycare and I collect her at 5",
                "I have to pick my daughter up from daycare at 5 PM now",
                when=lambda w: w.family,
            ),
        ),
        slots={
            "activity": pick("swimming lessons", "judo", "violin lessons", "football"),
            "day": weekday(3),
        },
    ),
    Generator(
        "companions",
        "friend_visit",
        (MS, EV, CA, RE, ME),
        cores=(
            P(
                "A friend from university is in town and staying on the sofa",
                "My university friend is in town and sleeping on my sofa",
                "I have an old friend from university crashing on the sofa",
                when=lambda w: "university" in (w.material.demographics.education or "").casefold(),
            ),
            P(
                "Is hosting a childhood friend who arrived from {place}",
                "I'm hosting a childhood friend who came over from {place}",
                "My childhood friend is visiting from {place} and staying with me",
            ),
            P(
                "A friend from {dest} is in town and staying on the sofa",
                "My friend from {dest} is in town and crashing on my sofa",
                "I have a friend over from {dest} sleeping on the sofa",
            ),
        ),
        extras=(
            P(
                "to catch up after years apart",
                "to catch up after years apart",
                "for a catch-up after years apart",
            ),
        ),
        limits=LIMITS,
        slots={
            "dest": persona_value(destination),
            "place": pick("abroad", "the coast", "up north", "another city"),
        },
        span_days=(3, 20),
    ),
    Generator(
        "companions",
        "care",
        (MS, CA, SV, SH),
        cores=(
            P(
                "Mother moved in after a fall and needs help getting around",
                "My mother lives with me since her fall and needs help getting around",
                "I'm looking after my mum, who moved in after a fall",
            ),
            P(
                "Grandmother needs a visit every {day} to help with shopping",
                "My grandmother needs me every {day} to help with her shopping",
                "I help my grandmother with her shopping every {day}",
            ),
            P(
                "Drives an aunt to her dialysis sessions three times a week",
                "I drive my aunt to dialysis three times a week",
                "My aunt needs a lift to dialysis three times a week, and I do it",
            ),
        ),
        slots={"day": weekday(1)},
    ),
    Generator(
        "companions",
        "babysitting",
        (MS, CA, ME, SH),
        cores=(
            P(
                "Is babysitting a niece on weekday afternoons",
                "I'm babysitting my niece on weekday afternoons",
                "My weekday afternoons are for babysitting my niece",
            ),
            P(
                "Is looking after a nephew while his parents are abroad",
                "I'm looking after my nephew while his parents are abroad",
                "My nephew is staying with me while his parents are away abroad",
            ),
        ),
        limits=LIMITS,
        span_days=(4, 30),
    ),
    Generator(
        "companions",
        "host",
        (MS, CA, RE),
        cores=(
            P(
                "Promised {contact} to host the next get-together",
                "I told my {contact} the next get-together is at my place",
                "I offered to have my {contact} over for the next get-together",
            ),
            P(
                "Offered to cook for {contact} at the next birthday",
                "I offered to cook for my {contact} at the next birthday",
                "My {contact} get a home-cooked meal from me at the next birthday, as I offered",
            ),
            P(
                "Promised {contact} to host a games night next month",
                "I promised my {contact} a games night at my place next month",
                "My {contact} are coming for a games night I promised next month",
            ),
        ),
        extras=(P("to return the favour", "to return the favour", "as a return favour"),),
        slots={"contact": affinity(MS, "Frequent Contact", lower=True)},
    ),
    Generator(
        "companions",
        "family_event",
        (MS, CA, EV, SH),
        cores=(
            P(
                "Cousin's wedding is on {until} and the whole family is travelling for it",
                "My cousin is getting married on {until} and the whole family is going",
                "I have my cousin's wedding on {until}, with the entire family coming",
            ),
            P(
                "Grandparents celebrate their golden anniversary on {until} with a family lunch",
                "My grandparents have their golden anniversary lunch with the family on {until}",
                "I'm due at my grandparents' golden anniversary family lunch on {until}",
            ),
            P(
                "Niece's christening is on {until} and the whole family is expected",
                "My niece's christening is on {until} and the whole family is expected",
                "I'm expected at my niece's christening on {until}, with all the family",
            ),
        ),
        span_days=(5, 45),
    ),
    Generator(
        "companions",
        "exchange_student",
        (MS, CA, RE, EV),
        cores=(
            P(
                "Is hosting an exchange student from {place} who tags along on outings",
                "I'm hosting an exchange student from {place}, and they come along on outings",
                "My home has an exchange student from {place} who joins me on outings",
            ),
        ),
        extras=(
            P("via an exchange agency", "via an exchange agency", "through an exchange agency"),
        ),
        limits=LIMITS,
        slots={"place": pick("Japan", "Brazil", "Germany", "Korea", "Italy", "Chile")},
        span_days=(10, 60),
    ),
    # ------------------------------------------------------------------ pets
    Generator(
        "pets",
        "own_pet",
        (SH, SV, CA, MS, HO),
        cores=(
            P(
                "Adopted a rescue {pet} called {pet_name} who hates being left alone",
                "I adopted a rescue {pet} named {pet_name}, and {pet_name} hates being left alone",
                "My new rescue {pet}, {pet_name}, can't stand being left alone",
            ),
            P(
                "Got a {pet} called {pet_name} who needs feeding three times a day",
                "I got a {pet}, {pet_name}, and {pet_name} needs feeding three times a day",
                "My {pet} {pet_name} has to be fed three times a day",
            ),
        ),
        slots={
            "pet": shared("dog", "cat", "puppy", "kitten"),
            "pet_name": shared(
                "Biscuit",
                "Luna",
                "Milo",
                "Pepper",
                "Nala",
                "Otto",
                "Ziggy",
                "Mochi",
                "Bruno",
                "Kiwi",
                "Olive",
                "Tofu",
            ),
        },
    ),
    Generator(
        "pets",
        "pet_health",
        (SV, SH, CA, MS),
        cores=(
            P(
                "Has to give the {pet} pills twice a day",
                "I have to give my {pet} pills twice a day",
                "My {pet} needs pills morning and evening",
            ),
            P(
                "Was told by the vet to keep the {pet} on short, calm walks",
                "My vet wants my {pet} kept to short, calm walks",
                "I can only take my {pet} on short, calm outings on the vet's orders",
            ),
        ),
        extras=(
            P(
                "after a vet visit for a limp",
                "after a vet visit for a limp",
                "following a vet visit about a limp",
            ),
        ),
        limits=LIMITS,
        slots={"pet": shared("dog", "cat", "puppy", "kitten")},
        span_days=(5, 30),
    ),
    Generator(
        "pets",
        "pet_sitting",
        (MS, CA, HO, SH),
        cores=(
            P(
                "Is pet-sitting a friend's {animal}",
                "I'm pet-sitting my friend's {animal}",
                "My friend's {animal} is staying with me while I pet-sit",
            ),
        ),
        extras=(
            P(
                "while the owners are abroad",
                "while the owners are abroad",
                "with the owners away abroad",
            ),
        ),
        limits=LIMITS,
        slots={"animal": pick("dog", "cat", "rabbit", "parrot", "two guinea pigs")},
        span_days=(3, 20),
    ),
    Generator(
        "pets",
        "pet_training",
        (SV, CA, MS, SH),
        cores=(
            P(
                "Signed the {pet} up for obedience classes on {day} evenings",
                "I enrolled my {pet} in obedience classes on {day} evenings",
                "My {pet} has obedience training every {day} evening",
            ),
        ),
        extras=(
            P(
                "to stop the pulling on walks",
                "to stop the pulling on walks",
                "because of pulling on walks",
            ),
        ),
        slots={"pet": shared("dog", "cat", "puppy", "kitten"), "day": weekday(2)},
        when=lambda w: (
            w.rng("slot", "pet").choice(("dog", "cat", "puppy", "kitten")) in {"dog", "puppy"}
        ),
    ),
    Generator(
        "pets",
        "pet_passport",
        (SV, TR, SH, FL),
        cores=(
            P(
                "Is getting a pet passport and vaccinations for the {pet}",
                "I'm sorting out a pet passport and jabs for my {pet}",
                "My {pet} needs vaccinations for the pet passport I'm arranging",
            ),
        ),
        extras=(
            P(
                "with the vet appointment still to book",
                "with the vet appointment still to book",
                "and the vet appointment is still to book",
            ),
        ),
        slots={"pet": shared("dog", "cat", "puppy", "kitten")},
    ),
    # ------------------------------------------------------------------ devices, apps and subscriptions
    Generator(
        "devices",
        "phone",
        (SH, MS, AL, CA, SV),
        cores=(
            P(
                "Cracked the phone screen and uses an old backup phone",
                "My phone screen cracked, so I'm on an old spare phone",
                "I'm using a backup phone since I cracked the screen on mine",
            ),
            P(
                "Had the phone stolen and the replacement arrives on {until}",
                "My phone got stolen and the new one only comes on {until}",
                "I'm without my own phone till {until}, when the replacement arrives",
            ),
            P(
                "Switched to a basic phone without apps to cut screen time",
                "I swapped my smartphone for a basic phone without apps",
                "My phone is a basic one now, no apps, to cut my screen time",
            ),
            P(
                "Lost the phone with all the {app} chats and is on a borrowed one",
                "I lost my phone with all my {app} chats and I'm on a borrowed one",
                "My phone is gone, {app} chats and all, so I'm using a borrowed one",
            ),
        ),
        slots={"app": affinity(MS, "Preferred Messaging Apps", proper=True)},
        span_days=(3, 15),
    ),
    Generator(
        "devices",
        "laptop",
        (SH, FI, MS, GA, CA),
        cores=(
            P(
                "Laptop is in for repair",
                "My laptop is at the repair shop",
                "I'm without my laptop while it's being repaired",
            ),
            P(
                "Spilled coffee on the laptop and works from a tablet",
                "I spilled coffee on my laptop and I'm making do with a tablet",
                "My laptop died in a coffee spill, so a tablet is all I have",
            ),
        ),
        limits=(UNTIL,),
        span_days=(3, 20),
    ),
    Generator(
        "devices",
        "streaming",
        (ME, MO, SH, FI),
        cores=(
            P(
                "Lost access to {platform} streaming when a shared account closed",
                "My shared {platform} account got closed, so I can't stream there anymore",
                "I can't use {platform} anymore since the shared account I was on shut down",
            ),
            P(
                "Cut back to the basic {platform} streaming plan with adverts",
                "I dropped to the basic {platform} plan, adverts and all",
                "My {platform} plan is the basic one with adverts now",
            ),
            P(
                "Shares a {platform} streaming profile with a flatmate and often finds shows spoiled",
                "I share my {platform} streaming profile with a flatmate and shows get spoiled",
                "My {platform} streaming profile is shared with a flatmate, so shows get spoiled",
            ),
        ),
        slots={"platform": affinity(ME, "Viewing Platform Preference", proper=True)},
    ),
    Generator(
        "devices",
        "console",
        (GA, SH, ME),
        cores=(
            P(
                "The {gplatform} broke and is away for repair",
                "My {gplatform} broke and it's away being fixed",
                "I'm without my {gplatform} while it's in for repair",
            ),
            P(
                "Lent the {gplatform} to a cousin and has no console at home",
                "I lent my {gplatform} to my cousin, so there's no console at home",
                "My {gplatform} is at my cousin's, so no console for me at home",
            ),
        ),
        limits=(UNTIL,),
        slots={"gplatform": affinity(GA, "Gaming Platforms", exclude="mobile")},
        span_days=(4, 25),
    ),
    Generator(
        "devices",
        "console",
        (GA, SH, ME),
        cores=(
            P(
                "Sold the {gplatform} to pay a bill and only games on a phone",
                "I sold my {gplatform} to cover a bill, so I game on my phone",
                "My {gplatform} is gone — sold for a bill — and I play on my phone",
            ),
        ),
        slots={"gplatform": affinity(GA, "Gaming Platforms", exclude="mobile")},
    ),
    Generator(
        "devices",
        "music_app",
        (MU, SH, FI),
        cores=(
            P(
                "Cancelled the paid {mplatform} subscription and listens with ads",
                "I cancelled my paid {mplatform} subscription, so it's the free version with ads",
                "My {mplatform} is the free tier with ads since I dropped the subscription",
            ),
            P(
                "Lost a shared {mplatform} subscription when its owner cancelled it",
                "I lost my shared {mplatform} subscription when the owner cancelled it",
                "My shared {mplatform} subscription ended when the owner cancelled",
            ),
        ),
        extras=(P("after a price rise", "after a price rise", "following a price rise"),),
        slots={"mplatform": affinity(MU, "Platform Preference", proper=True)},
    ),
    Generator(
        "devices",
        "headphones",
        (MU, SH, TN, GA),
        cores=(
            P(
                "Left the headphones on a train and has only cheap earbuds",
                "I left my headphones on a train, so cheap earbuds are all I have",
                "My good headphones are gone, left on a train, and I'm using cheap earbuds",
            ),
            P(
                "Has a cracked headphone jack, so only the phone speaker works",
                "My headphone jack cracked, so I only have the phone speaker",
                "I'm stuck with my phone speaker since the headphone jack cracked",
            ),
        ),
        slots={},
    ),
    Generator(
        "devices",
        "data_plan",
        (SH, MS, FI, TR),
        cores=(
            P(
                "Moved to a phone plan with only 5 GB of data a month",
                "My phone plan only has 5 GB of data a month now",
                "I switched to a phone contract with just 5 GB of data monthly",
            ),
        ),
        extras=(
            P("after switching networks", "after switching networks", "since switching networks"),
        ),
        slots={},
    ),
    Generator(
        "devices",
        "smartwatch",
        (SH, AL, CA, SP),
        cores=(
            P(
                "Started wearing a smartwatch that buzzes for every reminder",
                "I wear a smartwatch now and it buzzes for all my reminders",
                "My new smartwatch vibrates for every reminder",
            ),
            P(
                "Gets every calendar alert on a new smartwatch",
                "I get all my calendar alerts on a new smartwatch",
                "My new smartwatch pings me for every calendar alert",
            ),
            P(
                "Gets calendar alerts {notification} on a new smartwatch",
                "I get my calendar alerts {notification} on a new smartwatch",
                "My new smartwatch gives me calendar alerts {notification}",
            ),
        ),
        extras=(
            P("from a birthday present", "from a birthday present", "that was a birthday present"),
        ),
        slots={"notification": affinity(CA, "Notification Preference", lower=True)},
    ),
    Generator(
        "devices",
        "tv",
        (ME, SH, MO, GA),
        cores=(
            P(
                "TV died and everything gets watched on a laptop",
                "My TV died, so I watch everything on my laptop",
                "I've been watching all my shows on a laptop since the TV broke",
            ),
            P(
                "Gave the TV to a flatmate and streams on a tablet in bed",
                "I handed my TV over to a flatmate and stream on a tablet",
                "My viewing is all on a tablet now that the TV went to a flatmate",
            ),
            P(
                "TV died and {platform} gets watched on a laptop",
                "My TV died, so I watch {platform} on my laptop",
                "I'm watching {platform} on a laptop since the TV died",
            ),
        ),
        slots={"platform": affinity(ME, "Viewing Platform Preference", proper=True)},
    ),
    Generator(
        "devices",
        "smart_speaker",
        (AL, MU, SH, MS),
        cores=(
            P(
                "Set up a smart speaker in the bedroom that the whole household shares",
                "I put a smart speaker in the bedroom, and everyone at home uses it",
                "My household shares a smart speaker I set up in the bedroom",
            ),
            P(
                "Gave the smart speaker to a neighbour and uses only the phone for alarms",
                "I gave my smart speaker away, so my phone does all the alarms",
                "My phone is my only alarm since I gave the smart speaker away",
            ),
        ),
        extras=(
            P("to run the alarms and music", "to run the alarms and music", "for alarms and music"),
        ),
        slots={},
    ),
    Generator(
        "devices",
        "wifi",
        (ME, GA, SH, MS),
        cores=(
            P(
                "Home wifi keeps dropping and the router replacement is due on {until}",
                "My home wifi keeps cutting out and the new router only arrives on {until}",
                "I've had patchy wifi at home, with the router swap booked for {until}",
            ),
            P(
                "Has had no broadband since switching providers, only mobile data",
                "I have no broadband since switching providers, just mobile data",
                "My broadband is down during the provider switch, so it's mobile data only",
            ),
        ),
        span_days=(3, 20),
    ),
    # ------------------------------------------------------------------ passports, visas and papers
    Generator(
        "documents",
        "passport",
        (TR, FL, SV, FI),
        cores=(
            P(
                "Passport is at the passport office for renewal",
                "My passport is with the passport office being renewed",
                "I sent my passport off for renewal and don't have it",
            ),
        ),
        extras=(
            P("ahead of a trip to {dest}", "ahead of a trip to {dest}", "before a trip to {dest}"),
            P(
                "after it got damaged in the wash",
                "after it got damaged in the wash",
                "since it went through the wash",
            ),
        ),
        limits=(UNTIL,),
        span_days=(5, 40),
        slots={"dest": persona_value(destination)},
    ),
    Generator(
        "documents",
        "passport_validity",
        (TR, FL, SV, FI),
        cores=(
            P(
                "Passport has less than six months left on it",
                "My passport has under six months of validity left",
                "I only have about five months left on my passport",
            ),
            P(
                "Changed surname after the wedding but the passport still shows the old one",
                "My passport still has my old surname from before the wedding",
                "I changed my surname when I got married, but my passport hasn't caught up",
                when=lambda w: w.married,
            ),
        ),
        extras=(
            P(
                "and renewal takes up to ten weeks",
                "and renewal takes up to ten weeks",
                "with renewals taking up to ten weeks",
            ),
        ),
        slots={},
    ),
    Generator(
        "documents",
        "visa",
        (TR, FL, SV, FI, CA),
        cores=(
            P(
                "Applied for {visa} and is waiting for the embassy appointment",
                "I applied for {visa} and I'm waiting on the embassy appointment",
                "My application for {visa} is stuck waiting for an embassy appointment",
            ),
            P(
                "Has a visa appointment at the {visa_office} that cannot be moved",
                "I have a visa appointment at the {visa_office} that can't be moved",
                "My visa appointment at the {visa_office} is fixed and can't move",
            ),
        ),
        extras=(
            P("for a trip to {dest}", "for a trip to {dest}", "ahead of a trip to {dest}"),
            P(
                "for a family occasion abroad",
                "for a family occasion abroad",
                "because of a family occasion abroad",
            ),
        ),
        slots={
            "dest": persona_value(destination),
            "visa_office": pick("consulate", "embassy", "visa centre"),
            "visa": persona(visa_kind),
        },
    ),
    Generator(
        "documents",
        "residence_permit",
        (TR, FL, SV, FI),
        cores=(
            P(
                "Residence permit in {country} is being renewed, so trips abroad are on hold",
                "My residence permit for {country} is in renewal, so I can't travel abroad",
                "I'm waiting on my {country} residence permit renewal before any trip abroad",
            ),
        ),
        extras=(
            P(
                "after a change of address",
                "after a change of address",
                "following a change of address",
            ),
        ),
        limits=(UNTIL,),
        when=lambda w: bool(w.home_country_abroad and w.country),
        slots={"country": persona(lambda w, r: w.country or None)},
        span_days=(10, 50),
    ),
    Generator(
        "documents",
        "id_card",
        (TR, FL, SV, FI, SH),
        cores=(
            P(
                "Lost the national ID card and only has a temporary paper",
                "I lost my ID card, so all I have is a temporary paper",
                "My national ID card is lost and I'm on a temporary paper for now",
            ),
        ),
        extras=(
            P(
                "after a wallet was stolen",
                "after a wallet was stolen",
                "following a stolen wallet",
            ),
        ),
        limits=(UNTIL,),
        span_days=(5, 35),
    ),
    Generator(
        "documents",
        "insurance_card",
        (TR, FL, SV),
        cores=(
            P(
                "European health insurance card expired and the new one has not arrived",
                "My European health insurance card ran out and the new card hasn't come",
                "I'm without a valid European health insurance card until the new one arrives",
            ),
            P(
                "Has a health insurance card being reissued after a name mismatch",
                "My health insurance card is being reissued because of a name mismatch",
                "I'm waiting for a reissued health insurance card after a name mismatch",
            ),
        ),
        when=lambda w: w.in_eu,
        slots={},
    ),
    Generator(
        "documents",
        "driving_permit",
        (RC, TR, FL, SV),
        cores=(
            P(
                "Applied for an international driving permit that has not arrived",
                "I applied for an international driving permit and it hasn't come",
                "My international driving permit is still on its way",
            ),
        ),
        extras=(
            P(
                "despite applying weeks ago",
                "despite applying weeks ago",
                "even though the application went in weeks ago",
            ),
        ),
        slots={"homeland": persona(lambda w, r: w.home_country_abroad or None)},
    ),
    # ------------------------------------------------------------------ memberships, points and passes
    Generator(
        "travel_rewards",
        "airline",
        (FL, TR, FI, SH),
        cores=(
            P(
                "Has 40,000 {airline} miles that expire on {until}",
                "I've got 40,000 {airline} miles that run out on {until}",
                "My 40,000 {airline} miles lapse on {until}",
            ),
        ),
        extras=(P("earned on work trips", "earned on work trips", "collected on work trips"),),
        slots={"airline": affinity(FL, "Preferred Airline", proper=True)},
        span_days=(10, 60),
    ),
    Generator(
        "travel_rewards",
        "airline_status",
        (FL, TR, SH),
        cores=(
            P(
                "Reached silver status with {airline} with lounge access",
                "I made silver status with {airline}, lounge access included",
                "My {airline} membership is silver now, so I get lounge access",
            ),
            P(
                "Lost the {airline} gold tier after flying less this year",
                "I dropped out of {airline} gold this year after flying less",
                "My {airline} tier fell from gold since I flew less",
            ),
        ),
        slots={"airline": affinity(FL, "Preferred Airline", proper=True)},
    ),
    Generator(
        "travel_rewards",
        "hotel",
        (HO, TR, SH, FI),
        cores=(
            P(
                "Earned gold status with {chain}, which includes late checkout",
                "I earned gold with {chain}, so late checkout is included",
                "My {chain} membership is gold now, with late checkout",
            ),
            P(
                "Holds a free-night award from {chain} valid until {until}",
                "I have a free-night award from {chain} good till {until}",
                "My {chain} free-night award is valid until {until}",
            ),
        ),
        slots={"chain": affinity(HO, "Hotel Chains Preference", proper=True)},
        span_days=(10, 60),
    ),
    Generator(
        "travel_rewards",
        "rail",
        (TN, TR, FI, SH),
        cores=(
            P(
                "Bought a {train_class} rail pass valid until {until}",
                "I have a {train_class} rail pass that's good till {until}",
                "My {train_class} rail pass runs until {until}",
            ),
            P(
                "Got a railcard that takes a third off off-peak fares",
                "I have a railcard now that knocks a third off off-peak fares",
                "My new railcard cuts off-peak fares by a third",
            ),
        ),
        slots={"train_class": affinity(TN, "Preferred Train Class", lower=True)},
        span_days=(10, 60),
    ),
    Generator(
        "travel_rewards",
        "bus_pass",
        (BU, TR, FI, SH),
        cores=(
            P(
                "Has a ten-ride {bus_company} pass that lapses on {until}",
                "I've got a ten-ride {bus_company} pass that runs out on {until}",
                "My ten-ride {bus_company} pass expires on {until}",
            ),
        ),
        slots={"bus_company": affinity(BU, "Preferred Bus Company", proper=True)},
        span_days=(10, 50),
    ),
    Generator(
        "vouchers",
        "cinema",
        (MO, EV, SH, FI),
        cores=(
            P(
                "Pays for a cinema membership with two free {theater} screenings a month",
                "I have a cinema membership that gives me two free {theater} screenings a month",
                "My cinema membership covers two {theater} screenings every month",
            ),
        ),
        extras=(P("plus discounted snacks", "plus discounted snacks", "with discounted snacks"),),
        slots={"theater": affinity(MO, "Theater Type Preference", exclude="open-air|standard")},
    ),
    Generator(
        "vouchers",
        "gift_card",
        (SH, FI, MS),
        cores=(
            P(
                "Got a {money} {brand} gift card that expires on {until}",
                "I was given a {money} {brand} gift card that runs out on {until}",
                "My {money} {brand} gift card is good until {until}",
            ),
            P(
                "Has a {money} {brand} gift card that is about to expire on {until}",
                "I have a {money} {brand} gift card about to expire on {until}",
                "My {money} {brand} gift card runs out on {until}",
            ),
        ),
        extras=(
            P("from a birthday", "from a birthday", "as a birthday present"),
            P("won in a raffle", "won in a raffle", "from a raffle win"),
        ),
        slots={
            "money": amount(50, 75, 100),
            "brand": affinity(SH, "Brand Preference", proper=True),
        },
        span_days=(10, 60),
    ),
    Generator(
        "travel_rewards",
        "rental",
        (RC, TR, FI),
        cores=(
            P(
                "Joined the {company} loyalty scheme and has a free upgrade to use by {until}",
                "I joined the {company} loyalty scheme, with a free upgrade to use by {until}",
                "My {company} loyalty membership came with a free upgrade valid till {until}",
            ),
        ),
        slots={
            "company": affinity(RC, "Preferred Rental Company", proper=True, exclude="^Budget$")
        },
        span_days=(10, 60),
    ),
    Generator(
        "vouchers",
        "credit",
        (SH, FI, EV, MS),
        cores=(
            P(
                "Has a {money} voucher from a cancelled booking to use by {until}",
                "I have a {money} voucher from a cancelled booking that must be used by {until}",
                "My {money} voucher from a cancelled booking expires on {until}",
            ),
            P(
                "Holds a {money} store voucher that expires on {until}",
                "I have a {money} store voucher expiring on {until}",
                "My {money} store voucher runs out on {until}",
            ),
            P(
                "Has a {money} voucher from tickets to cancelled {event_type}, to use by {until}",
                "I have a {money} voucher from tickets to cancelled {event_type}, to use by {until}",
                "My {money} voucher from tickets to cancelled {event_type} expires on {until}",
            ),
        ),
        slots={
            "event_type": affinity(EV, "Event Type Preference", lower=True),
            "money": amount(80, 120, 150, 200),
        },
        span_days=(10, 60),
    ),
    Generator(
        "vouchers",
        "team_membership",
        (SP, EV, SH),
        cores=(
            P(
                "Bought a {team} club membership with priority ticket access",
                "I'm a {team} club member now, so I get priority on tickets",
                "My {team} membership gives me priority ticket access",
            ),
            P(
                "Bought a season ticket membership for {team} home games",
                "I bought a season ticket membership for {team} home games",
                "My {team} season ticket membership covers the home games",
            ),
        ),
        extras=(P("for the whole season", "for the whole season", "covering the season"),),
        slots={"team": affinity(SP, "Favorite Team", proper=True)},
    ),
    Generator(
        "travel_rewards",
        "hotel_points",
        (HO, TR, FI),
        cores=(
            P(
                "Has enough {chain} points for two free nights",
                "I've saved up enough {chain} points for two free nights",
                "My {chain} points balance covers two free nights",
            ),
        ),
        extras=(
            P(
                "from last year's work trips",
                "from last year's work trips",
                "from work trips last year",
                when=works,
            ),
        ),
        slots={"chain": affinity(HO, "Hotel Chains Preference", proper=True)},
    ),
    Generator(
        "travel_rewards",
        "frequent_traveller",
        (FL, TR, TN, FI),
        cores=(
            P(
                "Earned a companion pass that lets a second person travel free on {carrier}",
                "I earned a companion pass, so a second person goes free on {carrier}",
                "My new companion pass gets someone a free seat with me on {carrier}",
            ),
        ),
        extras=(
            P("after a year of flying", "after a year of flying", "following a year of flying"),
        ),
        slots={"carrier": affinity(FL, "Preferred Airline", proper=True)},
    ),
    Generator(
        "vouchers",
        "dining_voucher",
        (RE, SH, EV, FI),
        cores=(
            P(
                "Won a {money} voucher for a tasting menu in a raffle",
                "I won a {money} tasting-menu voucher in a raffle",
                "My raffle prize was a {money} voucher for a tasting menu",
            ),
            P(
                "Was given a {money} voucher for a cooking class that expires on {until}",
                "I was given a {money} cooking-class voucher that expires on {until}",
                "My {money} cooking-class voucher runs out on {until}",
            ),
            P(
                "Has a {money} voucher for a wine bar from a work raffle that lapses on {until}",
                "I won a {money} wine-bar voucher in a work raffle, good till {until}",
                "My {money} wine-bar voucher from a work raffle lapses on {until}",
            ),
            P(
                "Won a {money} voucher for a {cuisine} tasting menu in a raffle",
                "I won a {money} voucher for a {cuisine} tasting menu in a raffle",
                "My raffle prize was a {money} {cuisine} tasting-menu voucher",
            ),
        ),
        limits=(VALID_UNTIL,),
        slots={
            "cuisine": affinity(RE, "Cuisine Preference", proper=True),
            "money": amount(60, 80, 120),
        },
        span_days=(10, 60),
    ),
    Generator(
        "vouchers",
        "discount_card",
        (MO, EV, SH, SP),
        cores=(
            P(
                "Got a student discount card that covers cinemas and museums",
                "I have a student discount card now for cinemas and museums",
                "My student discount card gets me cheaper cinema and museum tickets",
                when=student,
            ),
            P(
                "Joined a culture membership that gives half-price tickets to shows",
                "I joined a culture membership with half-price show tickets",
                "My new culture membership halves the price of show tickets",
            ),
            P(
                "Has a stamp card at a local cinema chain with every fifth film free",
                "I have a stamp card at a local cinema chain, every fifth film free",
                "My cinema stamp card gives me every fifth film free",
            ),
        ),
        slots={},
    ),
    # ------------------------------------------------------------------ getting around
    Generator(
        "transport",
        "own_car",
        (RC, CA, SH, FI, SV),
        cores=(
            P(
                "Sold the car and gets around by {mode}",
                "I sold my car, so it's the {mode} for me now",
                "My car is gone — I sold it and take the {mode} everywhere",
            ),
            P(
                "Car is at the garage for a gearbox repair",
                "My car is in the garage getting its gearbox fixed",
                "I'm without my car while the garage repairs the gearbox",
            ),
            P(
                "Shares one car with a flatmate who needs it on weekends",
                "I share a car with my flatmate, and it's theirs on weekends",
                "My flatmate and I share one car, and weekends are their turn",
            ),
            P(
                "Sold the old {car_brand} car and gets around by {mode}",
                "I sold my old {car_brand}, so I use the {mode} now",
                "My old {car_brand} is sold and the {mode} is how I get around",
            ),
        ),
        limits=(),
        slots={
            "car_brand": affinity(RC, "Preferred Car Brand", proper=True),
            "mode": pick("tram", "bike", "metro", "bus"),
        },
    ),
    Generator(
        "transport",
        "car_repair",
        (RC, CA, SH, SV),
        cores=(
            P(
                "Car failed its inspection and can't be driven",
                "My car failed its inspection, so I can't drive it",
                "I'm off the road because my car failed inspection",
            ),
            P(
                "The {car_brand} car failed its inspection and can't be driven",
                "My {car_brand} car failed its inspection, so I can't drive it",
                "I'm off the road because my {car_brand} car failed inspection",
            ),
        ),
        extras=(
            P(
                "with parts on back order",
                "with parts on back order",
                "while parts are on back order",
            ),
            P(
                "after a warning light came on",
                "after a warning light came on",
                "following a dashboard warning light",
            ),
        ),
        limits=(UNTIL,),
        span_days=(4, 25),
        slots={"car_brand": affinity(RC, "Preferred Car Brand", proper=True)},
    ),
    Generator(
        "transport",
        "licence",
        (RC, TR, CA, SV),
        cores=(
            P(
                "Had the driving licence suspended after speeding points",
                "My driving licence got suspended over speeding points",
                "I lost my driving licence for a while because of speeding points",
            ),
        ),
        extras=(
            P(
                "after a speed camera caught three offences",
                "after a speed camera caught three offences",
                "once a speed camera caught three offences",
            ),
        ),
        limits=(FOR_SPAN,),
        span_days=(10, 80),
    ),
    Generator(
        "transport",
        "learner",
        (RC, TR, CA),
        cores=(
            P(
                "Is still on a learner's permit and can't drive alone",
                "I'm still a learner driver, so I can't drive on my own",
                "My licence is only a learner's permit, no solo driving",
            ),
            P(
                "Failed a driving test and has a retake months away",
                "I failed my driving test and the retake is months away",
                "My driving test retake is months off after a fail",
            ),
        ),
        when=lambda w: w.age_from < 25,
        slots={},
    ),
    Generator(
        "transport",
        "bike",
        (CA, SH, SP, SV),
        cores=(
            P(
                "Had the bike stolen from outside {spot}",
                "My bike got stolen from outside {spot}",
                "I lost my bike to a thief outside {spot}",
            ),
            P(
                "Commutes by bike now, even in the rain",
                "I cycle everywhere now, rain or shine, on my bike",
                "My bike is how I get around now, whatever the weather",
            ),
            P(
                "Had a crash on the bike and is too shaken to ride in traffic",
                "I crashed my bike and I'm too shaken to ride in traffic",
                "My bike crash left me too shaken to ride in traffic",
            ),
        ),
        slots={
            "spot": persona(
                lambda w, r: (
                    "the library"
                    if w.employment == "student"
                    else r.choice(("the office", "the gym", "the station"))
                )
            )
        },
    ),
    Generator(
        "transport",
        "commute",
        (CA, AL, SV, FI),
        cores=(
            P(
                "Office moved across {city}, adding 40 minutes to the commute",
                "My office moved to the other side of {city}, and the commute is 40 minutes longer",
                "I now commute 40 minutes more since the office relocated across {city}",
            ),
            P(
                "Now leaves at 6:45 AM to beat the commute since a change of manager",
                "I leave at 6:45 now to beat the commute, since my new manager started",
                "My commute starts at 6:45 AM since the new manager arrived",
                when=works,
            ),
        ),
        when=works,
        slots={"city": persona(city)},
    ),
    Generator(
        "transport",
        "transit_closure",
        (CA, BU, TN, SV),
        cores=(
            P(
                "The metro line near home is closed for works",
                "My nearest metro line is shut for works",
                "I can't use the metro line near my place, it's closed for works",
            ),
            P(
                "The tram route to the centre of {city} is suspended",
                "My tram into central {city} isn't running",
                "I've lost my tram into the centre of {city} for now",
            ),
        ),
        extras=(P("for track repairs", "for track repairs", "because of track repairs"),),
        limits=(UNTIL, MONTH_END),
        slots={"city": persona(city)},
        span_days=(7, 45),
    ),
    Generator(
        "transport",
        "parking",
        (CA, SH, SV, RC),
        cores=(
            P(
                "Lost the parking space at the building and parks on the street",
                "My parking space at the building is gone, so I park on the street",
                "I have to find street parking since I lost my spot at the building",
            ),
            P(
                "Has to move the car for street cleaning every {day} morning",
                "I have to move my car for street cleaning every {day} morning",
                "My car has to be moved every {day} morning for street cleaning",
            ),
        ),
        extras=(
            P(
                "after the building sold the spaces",
                "after the building sold the spaces",
                "since the building sold the spaces",
            ),
        ),
        slots={"day": weekday(6)},
    ),
    Generator(
        "transport",
        "lift_share",
        (CA, SV, SH, MS),
        cores=(
            P(
                "Gets a lift to work with a colleague on weekdays and has no car of their own",
                "I ride to work with a colleague on weekdays since I don't own a car",
                "My weekday commute is a lift from a colleague — no car of my own",
                when=works,
            ),
            P(
                "Relies on a friend's car for anything outside the city",
                "I depend on a friend's car for any trip out of the city",
                "My only way out of town is borrowing a friend's car",
            ),
        ),
        slots={},
    ),
    Generator(
        "transport",
        "scooter",
        (CA, SH, SV, SP),
        cores=(
            P(
                "Bought an electric scooter for short trips around {city}",
                "I got an electric scooter for getting around {city}",
                "My e-scooter is how I do short trips around {city} now",
            ),
            P(
                "Switched to a shared e-bike scheme for getting around",
                "I use a shared e-bike scheme to get around now",
                "My way around is a shared e-bike scheme these days",
            ),
            P(
                "Gets around {city} on a folding bike that fits on trams",
                "I get around {city} on a folding bike that fits on trams",
                "My folding bike is how I get around {city}, trams included",
            ),
        ),
        slots={"city": persona(city)},
    ),
    Generator(
        "transport",
        "foreign_licence",
        (RC, CA, SV, TR),
        cores=(
            P(
                "Has a driving licence from {homeland} that is not valid for driving locally",
                "My driving licence from {homeland} isn't valid here",
                "I can't drive here because my licence is from {homeland}",
            ),
        ),
        extras=(P("until it is exchanged", "until it gets exchanged", "pending an exchange"),),
        when=lambda w: bool(w.home_country_abroad),
        slots={"homeland": persona(lambda w, r: w.home_country_abroad or None)},
    ),
    # ------------------------------------------------------------------ home and household
    Generator(
        "home",
        "move",
        (SH, FI, MS, SV, CA),
        cores=(
            P(
                "Moved to a smaller flat on the other side of {city}",
                "I moved into a smaller flat across {city}",
                "My new place is a smaller flat on the far side of {city}",
            ),
            P(
                "Moved into a fourth-floor flat with no lift",
                "I moved to a fourth-floor flat and there's no lift",
                "My new flat is on the fourth floor, with no lift",
            ),
            P(
                "Is moving house on {until}",
                "I'm moving house on {until}",
                "My move to a new place is on {until}",
            ),
        ),
        extras=(
            P("to cut costs", "to cut costs", "to save on costs"),
            P(
                "after the old building was sold",
                "after the old building was sold",
                "since the old building got sold",
            ),
        ),
        slots={"city": persona(city)},
        span_days=(5, 40),
    ),
    Generator(
        "home",
        "flatmate",
        (MS, SH, ME, MU),
        cores=(
            P(
                "A new flatmate moved in who works nights and sleeps in the day",
                "My new flatmate works nights, so the flat has to be quiet in the day",
                "I have a new flatmate who sleeps during the day after night work",
            ),
            P(
                "A new flatmate moved in and uses the living room as an office",
                "My new flatmate works from our living room",
                "I have a new flatmate who turned the living room into an office",
            ),
            P(
                "A flatmate's partner has moved in and the flat feels crowded",
                "My flatmate's partner moved in and the flat feels crowded",
                "I'm sharing with my flatmate and now their partner too, so the flat is crowded",
            ),
            P(
                "A new flatmate moved in who plays {genre} music late at night",
                "My new flatmate plays {genre} music late at night",
                "I have a new flatmate blasting {genre} music late at night",
            ),
        ),
        extras=(
            P(
                "found through an online listing",
                "found through an online listing",
                "via an online listing",
            ),
        ),
        slots={"genre": affinity(MU, "Preferred Genres", lower=True)},
        when=lambda w: not w.married,
    ),
    Generator(
        "home",
        "renovation",
        (SH, FI, MS, SV),
        cores=(
            P(
                "Kitchen is being renovated and can't be used",
                "My kitchen is mid-renovation and out of action",
                "I have no kitchen while the renovation is going on",
            ),
            P(
                "Builders are redoing the bathroom",
                "My bathroom is being redone by builders",
                "I've got builders in redoing the bathroom",
            ),
        ),
        extras=(P("after a burst pipe", "after a burst pipe", "following a burst pipe"),),
        limits=LIMITS,
        span_days=(7, 40),
    ),
    Generator(
        "home",
        "neighbours",
        (MS, MU, ME, GA),
        cores=(
            P(
                "{who} complained about noise after 10 PM",
                "My {who} complained that I was noisy after 10 PM",
                "I got a complaint about noise past 10 from my {who}",
            ),
        ),
        extras=(
            P(
                "and threatened to call the landlord",
                "and threatened to call the landlord",
                "with a threat to call the landlord",
            ),
        ),
        slots={"who": pick("downstairs neighbour", "neighbour next door", "upstairs neighbour")},
    ),
    Generator(
        "home",
        "baby",
        (MS, ME, SH, AL),
        cores=(
            P(
                "Baby naps from 1 to 3 PM and the flat has to stay quiet",
                "My baby naps from 1 to 3, so the flat has to be quiet then",
                "I keep the flat quiet from 1 to 3 PM for the baby's nap",
            ),
        ),
        when=lambda w: w.family,
        slots={},
    ),
    Generator(
        "home",
        "heating",
        (SV, MS, SH),
        cores=(
            P(
                "Heating broke and the landlord has not fixed it",
                "My heating is broken and the landlord hasn't sorted it",
                "I've had no heating since it broke, and my landlord is slow to fix it",
            ),
            P(
                "Boiler broke, so there is no hot water at home",
                "My boiler broke and there's no hot water at home",
                "I have no hot water at home since the boiler broke",
            ),
        ),
        extras=(
            P("in the middle of a cold snap", "in the middle of a cold snap", "during a cold snap"),
        ),
        limits=(UNTIL,),
        span_days=(5, 25),
    ),
    Generator(
        "home",
        "building_works",
        (MS, SH, ME, AL),
        cores=(
            P(
                "Construction next door starts at 7 AM every weekday",
                "I have a construction site next door that kicks off at 7 every weekday",
                "My street has construction next door from 7 AM on weekdays",
            ),
            P(
                "Scaffolding went up on the building and the drilling starts at 8 AM",
                "I have scaffolding on my building and drilling from 8 every morning",
                "My building is covered in scaffolding, with drilling from 8 AM",
            ),
        ),
        extras=(
            P(
                "and the drilling goes on all day",
                "and the drilling goes on all day",
                "with drilling all day",
            ),
        ),
        limits=(UNTIL, MONTH_END),
        span_days=(10, 60),
    ),
    Generator(
        "home",
        "home_office",
        (SH, FI, MS, GA),
        cores=(
            P(
                "Turned the spare room into a home office and has no guest bed",
                "I made the spare room my office, so there's no guest bed anymore",
                "My spare room is an office now, without a guest bed",
            ),
            P(
                "Works from home now and needs the flat quiet during calls",
                "I work from home now, so the flat needs to be quiet during calls",
                "My job is from home now and calls need a quiet flat",
                when=works,
            ),
        ),
        extras=(
            P(
                "with a desk and two monitors",
                "with a desk and two monitors",
                "complete with a desk and two monitors",
            ),
        ),
        slots={},
        when=works,
    ),
    Generator(
        "home",
        "inspection",
        (MS, SH, FI, SV),
        cores=(
            P(
                "Landlord is inspecting the flat on {until} and it has to be spotless",
                "My landlord inspects the flat on {until}, so it has to be spotless",
                "I need the flat spotless for the landlord's inspection on {until}",
            ),
            P(
                "Has an estate agent showing the flat to buyers on {until}",
                "I have an estate agent showing my flat to buyers on {until}",
                "My flat is being shown to buyers by an estate agent on {until}",
            ),
            P(
                "Has a plumber coming to the flat on {until} for a leak in the kitchen",
                "I have a plumber coming to the flat on {until} for a kitchen leak",
                "My kitchen leak gets fixed when the plumber comes to the flat on {until}",
            ),
        ),
        extras=(
            P(
                "with a list of repairs to check",
                "with a list of repairs to check",
                "and a list of repairs to go through",
            ),
        ),
        span_days=(3, 25),
    ),
    # ------------------------------------------------------------------ noise, light, motion and crowds
    Generator(
        "hearing",
        "hearing_loss",
        (MU, EV, MO, SV),
        cores=(
            P(
                "Has tinnitus since {loud_event} and avoids loud venues",
                "I've had tinnitus since {loud_event} and I avoid loud venues",
                "My ears ring since {loud_event}, so loud venues are out",
            ),
            P(
                "Lost some hearing in one ear after an infection",
                "I lost some hearing in one ear after an infection",
                "My hearing in one ear is reduced since an infection",
            ),
            P(
                "Has muffled hearing on one side after a bad cold",
                "I've had muffled hearing on one side since a bad cold",
                "My hearing on one side is muffled after a bad cold",
            ),
            P(
                "Was told by an audiologist to protect the ears from loud noise",
                "My audiologist told me to protect my ears from loud noise",
                "I've been told by an audiologist to keep my ears away from loud noise",
            ),
        ),
        slots={
            "loud_event": either(
                concert,
                "a loud gig",
                "a club night",
                "a fireworks display",
                "a drumming workshop",
                "a stadium concert",
            )
        },
    ),
    Generator(
        "sight",
        "light",
        (MO, ME, GA, SV),
        cores=(
            P(
                "Gets migraines from {trigger}",
                "I get migraines from {trigger}",
                "My migraines are triggered by {trigger}",
            ),
            P(
                "Has eyes sensitive to glare after laser eye treatment",
                "My eyes are sensitive to glare since laser eye treatment",
                "I'm very glare-sensitive after my laser eye treatment",
            ),
        ),
        extras=(
            P(
                "and keeps sunglasses on hand",
                "and keeps sunglasses on hand",
                "with sunglasses always on hand",
            ),
        ),
        slots={
            "trigger": either(
                screenings,
                "flashing lights and bright screens",
                "strobe lighting",
                "harsh fluorescent light",
                "bright sunlight on screens",
            )
        },
    ),
    Generator(
        "comfort",
        "motion",
        (BU, TN, TR, FL),
        cores=(
            P(
                "Gets motion sick on {ride}",
                "I get motion sickness on {ride}",
                "My stomach can't handle {ride} — motion sickness",
            ),
        ),
        extras=(
            P("unless in a {seat} seat", "unless in a {seat} seat", "unless seated by the {seat}"),
            P(
                "and sits up front whenever possible",
                "and sits up front whenever possible",
                "so the front seat is a must",
            ),
        ),
        slots={
            "seat": affinity(BU, "Seat Preference", lower=True),
            "ride": pick(
                "winding roads and boats",
                "long coach rides",
                "ferries",
                "the back seat of cars",
                "anything that sways",
            ),
        },
    ),
    Generator(
        "comfort",
        "heat",
        (TR, SP, EV, HO),
        cores=(
            P(
                "Can't handle strong heat since {heat_cause}",
                "I can't cope with strong heat since {heat_cause}",
                "My body doesn't handle heat well since {heat_cause}",
            ),
            P(
                "Overheats easily on new blood-pressure pills and needs shade on warm days",
                "I overheat easily on my new blood-pressure pills and need shade on warm days",
                "My new blood-pressure pills make me overheat, so warm days mean finding shade",
            ),
        ),
        slots={
            "heat_cause": either(
                heatstroke,
                "a heatstroke last summer",
                "a fainting spell in a heatwave",
                "a bout of heat exhaustion",
            )
        },
    ),
    Generator(
        "comfort",
        "crowds",
        (EV, SP, MU, SH),
        cores=(
            P(
                "Gets panicky in packed crowds since {crowd_cause}",
                "I panic in packed crowds since {crowd_cause}",
                "My nerves go in crowds ever since {crowd_cause}",
            ),
            P(
                "Feels anxious in crowds and needs an easy way out of busy places",
                "I get anxious in crowds and need an easy way out of busy places",
                "My anxiety spikes in crowds, so I need an easy exit from busy places",
            ),
        ),
        extras=(P("and avoids big venues", "and avoids big venues", "so big venues are out"),),
        slots={
            "crowd_cause": either(
                crush,
                "getting caught in a crush",
                "a panic attack at a stadium",
                "a scary moment on a packed platform",
            )
        },
    ),
    Generator(
        "comfort",
        "smell",
        (RE, SH, HO, SV),
        cores=(
            P(
                "Is sensitive to {smells} since a bout of bronchitis",
                "I react to {smells} since I had bronchitis",
                "My lungs can't take {smells} since bronchitis",
            ),
        ),
        slots={
            "smells": pick(
                "strong perfume and smoke",
                "cigarette smoke",
                "incense and scented candles",
                "smoke from grills",
            )
        },
    ),
    Generator(
        "sight",
        "glasses",
        (SH, SV, RC, MO),
        cores=(
            P(
                "Broke the glasses and can't see well at a distance",
                "I broke my glasses, so distance vision is blurry for me",
                "My glasses are broken and I can't see far properly",
            ),
            P(
                "Lost the glasses on a night out and is wearing an old pair with a weak prescription",
                "I lost my glasses on a night out and I'm in an old weak pair",
                "My glasses got lost on a night out, so I'm in an old weak pair",
            ),
            P(
                "Is waiting on new glasses and is squinting at anything far away",
                "I'm waiting on new glasses and squinting at anything far away",
                "My new glasses haven't come, so I squint at anything far away",
            ),
        ),
        limits=(UNTIL,),
        span_days=(3, 15),
    ),
    Generator(
        "hearing",
        "hearing_aids",
        (MU, EV, MO, SV, ME),
        cores=(
            P(
                "Got hearing aids that whistle in noisy rooms",
                "I have hearing aids now, and they whistle in noisy rooms",
                "My new hearing aids squeal when a room gets noisy",
            ),
            P(
                "Struggles to follow speech in loud places since losing some hearing",
                "I can't follow conversations in loud places since my hearing dropped",
                "My hearing has dropped, so loud places make conversation impossible",
            ),
            P(
                "Has a new cochlear processor that struggles with background noise",
                "I have a new cochlear processor that struggles with background noise",
                "My new cochlear processor can't cope with background noise",
            ),
        ),
        slots={},
    ),
    Generator(
        "hearing",
        "ear_infection",
        (SV, TR, EV, MU),
        cores=(
            P(
                "Has an ear infection and was told to avoid loud places",
                "I've got an ear infection and I'm meant to avoid loud places",
                "My ear is infected, so no loud places",
            ),
            P(
                "Has a perforated eardrum and was told to keep away from loud music",
                "My eardrum is perforated and I've been told to keep away from loud music",
                "I have a perforated eardrum, so loud music is off limits",
            ),
        ),
        extras=(P("after a swimming trip", "after a swimming trip", "following a swimming trip"),),
        limits=LIMITS,
        span_days=(4, 20),
    ),
    Generator(
        "hearing",
        "noise_headaches",
        (MU, RE, EV, ME),
        cores=(
            P(
                "Gets headaches from loud music and keeps away from noisy bars",
                "I get headaches from loud music, so I stay out of noisy bars",
                "My head can't take loud music lately — noisy bars are out",
            ),
            P(
                "Gets ringing headaches after noisy {venues}",
                "I get ringing headaches after noisy {venues}",
                "My head rings after noisy {venues}",
            ),
        ),
        slots={"venues": pick("bars", "gigs", "club nights", "stadium games")},
    ),
    Generator(
        "sight",
        "night_vision",
        (RC, CA, SV, TR),
        cores=(
            P(
                "Was told by an optician not to drive after dark",
                "My optician says I shouldn't drive after dark",
                "I'm not supposed to drive at night, according to my optician",
            ),
            P(
                "Sees halos around lights at night since new contact lenses",
                "I see halos around lights at night since my new contact lenses",
                "My new contact lenses give me halos around lights at night",
            ),
        ),
        extras=(P("because of {eye_issue}", "because of {eye_issue}", "due to {eye_issue}"),),
        slots={
            "eye_issue": pick(
                "early cataracts", "astigmatism", "glare from headlights", "a new prescription"
            )
        },
    ),
    Generator(
        "sight",
        "screen_limit",
        (GA, ME, SV, BK),
        cores=(
            P(
                "Was told by an eye doctor to keep screen time under two hours a day",
                "My eye doctor wants my screen time under two hours a day",
                "I've been limited to two hours of screens a day by my eye doctor",
            ),
            P(
                "Has dry eyes from screens and uses drops every few hours",
                "My eyes get dry from screens, so I use drops every few hours",
                "I have dry eyes from screens and need drops every few hours",
            ),
        ),
        extras=(
            P(
                "after long {game} sessions",
                "after long {game} sessions",
                "following long {game} sessions",
            ),
            P(
                "after weeks of eye strain",
                "after weeks of eye strain",
                "following weeks of eye strain",
            ),
            P(
                "and wears blue-light glasses",
                "plus blue-light glasses",
                "along with blue-light glasses",
            ),
        ),
        slots={"game": affinity(GA, "Preferred Game Name", proper=True)},
    ),
    Generator(
        "sight",
        "new_prescription",
        (BK, SH, SV, GA),
        cores=(
            P(
                "Started wearing varifocals and still struggles with small print",
                "I just got varifocals and small print is still hard for me",
                "My new varifocals haven't fixed small print yet",
            ),
            P(
                "Needs reading glasses now and keeps forgetting them",
                "I need reading glasses these days and keep forgetting them",
                "My eyes need reading glasses now, which I keep leaving behind",
            ),
            P(
                "Switched to contact lenses and finds them dry in air-conditioned rooms",
                "I switched to contact lenses and they dry out in air-conditioned rooms",
                "My new contact lenses get dry in air-conditioned rooms",
            ),
        ),
        slots={},
    ),
    Generator(
        "comfort",
        "vertigo",
        (TN, BU, TR, EV),
        cores=(
            P(
                "Developed vertigo that makes heights and swaying hard",
                "I've developed vertigo, so heights and swaying are hard for me",
                "My vertigo makes heights and anything swaying difficult",
            ),
            P(
                "Gets dizzy on escalators and balconies",
                "I get dizzy on escalators and balconies",
                "My head spins on escalators and balconies",
            ),
        ),
        extras=(
            P(
                "since a balance problem was diagnosed",
                "since a balance problem was diagnosed",
                "after a balance problem was diagnosed",
            ),
        ),
        slots={},
    ),
    Generator(
        "comfort",
        "claustrophobia",
        (TN, BU, FL, EV),
        cores=(
            P(
                "Gets claustrophobic in lifts and packed carriages",
                "I feel claustrophobic in lifts and packed carriages",
                "My claustrophobia kicks in with lifts and crowded carriages",
            ),
            P(
                "Gets claustrophobic in windowless rooms and small cabins",
                "I feel claustrophobic in windowless rooms and small cabins",
                "My claustrophobia flares up in windowless rooms and small cabins",
            ),
        ),
        extras=(
            P(
                "since being stuck in a lift",
                "since being stuck in a lift",
                "ever since getting stuck in a lift",
            ),
        ),
        slots={},
    ),
    # ------------------------------------------------------------------ sleep and energy
    Generator(
        "sleep",
        "insomnia",
        (AL, SV, BK, ME),
        cores=(
            P(
                "Was diagnosed with insomnia and keeps a strict 10:30 PM bedtime",
                "I was diagnosed with insomnia, so my bedtime is 10:30 sharp",
                "My insomnia diagnosis means a strict 10:30 PM bedtime",
            ),
            P(
                "Works with a sleep coach on a strict wind-down routine",
                "I'm working with a sleep coach on a strict wind-down routine",
                "My sleep coach has me on a strict wind-down routine",
            ),
            P(
                "Was diagnosed with insomnia and keeps a fixed bedtime to wake at {alarm_time}",
                "I was diagnosed with insomnia, so I keep a fixed bedtime to wake at {alarm_time}",
                "My insomnia means a fixed bedtime so I can wake at {alarm_time}",
            ),
        ),
        extras=(
            P(
                "after months of broken nights",
                "after months of broken nights",
                "following months of broken nights",
            ),
        ),
        slots={"alarm_time": affinity(AL, "Alarm Time Preference")},
    ),
    Generator(
        "sleep",
        "sleep_study",
        (SV, AL, CA),
        cores=(
            P(
                "Has an overnight sleep study at a clinic on {until}",
                "I'm booked for an overnight sleep study at a clinic on {until}",
                "My overnight sleep study at the clinic is on {until}",
            ),
            P(
                "Is on a two-week sleep diary for a clinic, in bed by 11 PM",
                "I'm keeping a two-week sleep diary for a clinic, in bed by 11",
                "My clinic has me on a two-week sleep diary with bed at 11 PM",
            ),
        ),
        span_days=(3, 30),
    ),
    Generator(
        "sleep",
        "early_wake",
        (AL, SP, CA, SV),
        cores=(
            P(
                "Now wakes at {early} to fit in the gym before work",
                "I get up at {early} now to squeeze in the gym before work",
                "My wake-up is {early} these days, for the gym before work",
                when=works,
            ),
            P(
                "Now wakes at {early} to study before classes",
                "I get up at {early} now to study before class",
                "My wake-up is {early} these days, to study before classes",
                when=student,
            ),
        ),
        extras=(P("and is in bed by ten", "and is in bed by ten", "with bed by ten"),),
        slots={"early": persona(earlier_wake)},
    ),
    Generator(
        "sleep",
        "light_sleeper",
        (AL, SH, MS, HO),
        cores=(
            P(
                "Sleeps badly since {disturbance}",
                "I sleep badly since {disturbance}",
                "My sleep has been awful since {disturbance}",
            ),
            P(
                "Wakes at the slightest sound and now sleeps with earplugs",
                "I wake at the slightest sound, so I sleep with earplugs",
                "My sleep is so light that earplugs are a must now",
            ),
        ),
        slots={
            "disturbance": pick(
                "a bar opened below the flat",
                "a night bus route started outside",
                "the streetlight outside was replaced with a brighter one",
                "a new motorway opened nearby",
            )
        },
    ),
    Generator(
        "sleep",
        "melatonin",
        (AL, SV, SH),
        cores=(
            P(
                "Takes melatonin on a doctor's advice and is groggy before 8 AM",
                "I take melatonin on my doctor's advice, so I'm groggy before 8",
                "My doctor has me on melatonin, and I'm useless before 8 AM",
            ),
            P(
                "Switched to a sleep-friendly routine with no screens after 9 PM",
                "I have a no-screens-after-9 routine to help my sleep",
                "My sleep routine bans screens after 9 PM",
            ),
        ),
        extras=(
            P(
                "since a stressful stretch at work",
                "since a stressful stretch at work",
                "after a stressful stretch at work",
            ),
        ),
        slots={},
    ),
    Generator(
        "sleep",
        "jetlag",
        (AL, SV, CA, MS),
        cores=(
            P(
                "Is still jet-lagged after a long-haul trip and wakes at 4 AM",
                "I'm still jet-lagged and waking at 4 in the morning",
                "My body clock is off after a long-haul trip — awake at 4 AM",
            ),
            P(
                "Has been on a broken sleep pattern since returning from {far_place}",
                "I've had a broken sleep pattern since coming back from {far_place}",
                "My sleep is all over the place since I got back from {far_place}",
            ),
        ),
        limits=(UNTIL,),
        span_days=(2, 10),
        slots={
            "far_place": either(
                destination, "Asia", "Australia", "the West Coast", "South America", "Japan"
            )
        },
    ),
    Generator(
        "sleep",
        "nap",
        (AL, SV, CA, ME),
        cores=(
            P(
                "Needs an afternoon nap since starting new medication",
                "I need a nap every afternoon since my new medication",
                "My new medication leaves me needing an afternoon nap",
            ),
            P(
                "Crashes for a nap every afternoon since starting {med}",
                "I crash every afternoon since I started {med}",
                "My afternoons are a write-off since I started {med}",
            ),
        ),
        limits=LIMITS,
        span_days=(7, 40),
        slots={"med": pick("antihistamines", "blood-pressure pills", "a new antidepressant")},
    ),
    Generator(
        "sleep",
        "night_owl",
        (AL, CA, MS, GA),
        cores=(
            P(
                "Has been falling asleep after 2 AM and feels wrecked before noon",
                "I keep falling asleep after 2 AM and I'm wrecked till noon",
                "My sleep starts after 2 AM lately, so mornings are rough",
            ),
            P(
                "Stays up past 2 AM playing {game} and sleeps badly",
                "I stay up past 2 AM playing {game} and my sleep suffers",
                "My sleep is bad because I play {game} past 2 AM",
            ),
        ),
        slots={"game": affinity(GA, "Preferred Game Name", proper=True)},
    ),
)

NEED_EXTRAS: dict[str, tuple[Part, ...]] = {
    "diet": (
        P(
            ", so eating out needs planning",
            ", so eating out needs planning",
            ", which makes eating out a planning job",
        ),
    ),
    "health": (
        P(
            ", so anything strenuous is out",
            ", so anything strenuous is out",
            ", which rules out anything strenuous",
        ),
        P(
            ", with a follow-up check booked",
            ", with a follow-up check booked",
            ", and a follow-up check is booked",
        ),
    ),
    "budget": (
        P(", so money is tight", ", so money is tight", ", which leaves money tight"),
        P(
            ", with every expense tracked",
            ", with every expense tracked",
            ", so every expense gets tracked",
        ),
    ),
    "schedule": (
        P(
            ", which leaves little free time in the week",
            ", which leaves little free time in the week",
            ", so the week has little free time",
        ),
        P(
            ", and that time stays blocked",
            ", and that time stays blocked",
            ", with that time kept blocked",
        ),
    ),
    "companions": (
        P(
            ", so plans have to include everyone",
            ", so plans have to include everyone",
            ", which means plans must include everyone",
        ),
        P(
            ", which changes who comes along to things",
            ", which changes who comes along to things",
            ", so who comes along to things has changed",
        ),
    ),
    "pets": (
        P(
            ", so long days out need a sitter",
            ", so long days out need a sitter",
            ", which means a sitter for long days out",
        ),
    ),
    "devices": (
        P(", which is a daily annoyance", ", which is a daily annoyance", ", a daily annoyance"),
        P(
            ", so for now it is a case of making do",
            ", so for now it's a case of making do",
            ", which means making do for now",
        ),
    ),
    "documents": (
        P(
            ", so anything abroad has to wait",
            ", so anything abroad has to wait",
            ", which puts anything abroad on hold",
        ),
        P(
            ", with copies of everything kept",
            ", with copies of everything kept",
            ", and copies of everything are kept",
        ),
    ),
    "travel_rewards": (
        P(
            ", which makes the next booking cheaper",
            ", which makes the next booking cheaper",
            ", so the next booking gets cheaper",
        ),
        P(
            ", with the balance checked often",
            ", with the balance checked often",
            ", and the balance gets checked often",
        ),
    ),
    "vouchers": (
        P(", still unused so far", ", still unused so far", ", not used yet"),
        P(
            ", enough to cover part of a night out",
            ", enough to cover part of a night out",
            ", which would cover part of a night out",
        ),
    ),
    "transport": (
        P(
            ", so journeys need planning around it",
            ", so journeys need planning around it",
            ", which means planning journeys around it",
        ),
        P(
            ", which makes every outing take longer",
            ", which makes every outing take longer",
            ", so every outing takes longer",
        ),
    ),
    "home": (
        P(
            ", and the household is still adjusting",
            ", and the household is still adjusting",
            ", with the household still adjusting",
        ),
    ),
    "hearing": (
        P(
            ", so quieter places are a must",
            ", so quieter places are a must",
            ", which makes quieter places a must",
        ),
    ),
    "sight": (
        P(
            ", so screens and small print are a strain",
            ", so screens and small print are a strain",
            ", which makes screens and small print a strain",
        ),
    ),
    "comfort": (
        P(
            ", so regular breaks are needed",
            ", so regular breaks are needed",
            ", which means regular breaks",
        ),
        P(
            ", which rules out some outings",
            ", which rules out some outings",
            ", so some outings are off the table",
        ),
    ),
    "sleep": (
        P(
            ", so daytime energy is low",
            ", so daytime energy is low",
            ", which leaves daytime energy low",
        ),
        P(
            ", with an early wind-down every night",
            ", with an early wind-down every night",
            ", plus an early wind-down every night",
        ),
    ),
}
"""Consequences that fit every generator of a need: more ways for a user's update to read."""


# Wording variants for the stored text (sayings are written separately): each pattern
# turns a phrase into "[a|b]", resolved per persona when an update is filled.
WORDING: tuple[tuple[str, str], ...] = (
    (r"^Was told by ", "[Was told by|Was advised by] "),
    (
        r"^Gets (migraines|motion sick|panicky|claustrophobic|headaches|dizzy|ringing headaches)\b",
        r"[Gets|Has started getting] \1",
    ),
    (r"\bcompletely\b", "[completely|entirely|altogether]"),
    (r"\bentirely\b", "[entirely|completely]"),
    (r"\ba bad\b", "a [bad|nasty|severe]"),
    (r"\band has to\b", "[and has to|and must]"),
    (r"^Has to\b", "[Has to|Must]"),
    (r"\band can't\b", "[and can't|and cannot|and is unable to]"),
    (r"^Can't handle\b", "[Can't handle|Struggles with]"),
    (r"^Is sensitive to\b", "[Is sensitive to|Reacts badly to]"),
    (r"\bavoids\b", "[avoids|stays away from|steers clear of]"),
    (r"\bto avoid\b", "to [avoid|stay away from|steer clear of]"),
    (r"\bis away for repair\b", "[is away for repair|is in for repair|is at the repair shop]"),
    (r"^Laptop is in for repair\b", "[Laptop is in for repair|Laptop is at the repair shop]"),
    (r"^Started\b", "[Started|Began]"),
    (r"^Bought\b", "[Bought|Picked up]"),
    (r"^Moved to(?= a smaller flat)", "[Moved to|Relocated to]"),
    (r"\bsince a\b", "[since a|after a]"),
    (r"\bafter a\b", "[after a|following a]"),
    (r"\ba month\b", "[a month|per month|each month]"),
    (r"\bevery weekday\b", "[every weekday|each weekday]"),
    (r"\bfor long stretches\b", "[for long stretches|for long periods]"),
    (r"\bwith no exceptions\b", "[with no exceptions|without exception]"),
)


def _vary(text: str) -> str:
    """Apply :data:`WORDING` outside slots and existing alternations."""
    pieces = re.split(r"(\{\w+\}|\[[^\]]*\])", text)
    for pattern, replacement in WORDING:
        for index in range(0, len(pieces), 2):  # even pieces are plain wording
            if pattern.startswith("^") and index != 0:
                continue
            changed = re.sub(pattern, replacement, pieces[index], count=1)
            if changed != pieces[index]:
                pieces[index] = changed
                pieces = re.split(r"(\{\w+\}|\[[^\]]*\])", "".join(pieces))
                break
    return "".join(pieces)


WITHOUT_GENERIC = frozenset({"smartwatch", "smart_speaker"})
"""Groups that are not a nuisance, so the need's consequences ("a daily annoyance") do not fit."""


def _finished(generator: Generator) -> Generator:
    """Add the need's generic consequences and the wording variants."""
    generic = () if generator.group in WITHOUT_GENERIC else NEED_EXTRAS.get(generator.need, ())
    extras = generator.extras + generic
    return replace(
        generator,
        cores=tuple(replace(p, text=_vary(p.text)) for p in generator.cores),
        extras=tuple(replace(p, text=_vary(p.text)) for p in extras),
    )


register(_finished(g) for g in GENERATORS)
