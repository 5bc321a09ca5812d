"""Simulated answer for ``dialogue_expansion``: one conversation, in this persona's voice.

The user opens with the event's own request (moved into the first person) and
its situation, then states things about themselves that come from the real
profile — affinities ("My favorite authors are Carl Sagan and Stephen
Hawking.") and the domain's interaction summary ("I prefer to set a recurring
alarm for 7:00 AM on weekdays.") — one clear first-person sentence at a time.
A reference event's update is said once, as its own sentence, in a paraphrase
that never repeats the stored text; the index of that user turn is reported.
The assistant answers helpfully from the same profile (second person, "you
usually prefer ...") with concrete options built from the affinities.

Turn counts follow the paper's shape: about six exchanges on average (three to
ten), always alternating and starting with the user.
"""

from __future__ import annotations

import datetime as dt
import math
import random
import re
from typing import Any

from memoryquest.contracts import Affinity, Demographics, Domain
from memoryquest.simulator import simulates
from memoryquest.simulator.persona_grounding import (
    PersonaMaterial,
    affinity_statements,
    clean_value,
    fix_articles,
    identity_statements,
    interaction_sentences,
    lower_first,
    paraphrase_reference,
    reference_slots,
    sentence,
    shift_person,
)
from memoryquest.simulator.timelines import REFERENCE_MARKER

EXCHANGES = range(3, 11)
EXCHANGE_WEIGHTS = (5, 11, 17, 20, 17, 13, 10, 7)  # mean ≈ 6.2 exchanges, as in the paper

_GREETINGS = ("Hi!", "Hey there.", "Hello,", "", "Hi there,", "")
_ASKS = (
    "Can you help me with that?",
    "Could you sort this out for me?",
    "What do you suggest?",
    "Where should we start?",
    "Can you give me a hand?",
)
_FOLLOW_UPS = (
    "What would you recommend?",
    "Can you narrow it down to two options?",
    "Any other options?",
    "What do you think?",
    "Does that change your suggestion?",
    "Can you take that into account?",
    "What are the pros and cons?",
    "Could you give me a bit more detail?",
    "Which one would you pick?",
    "Is there anything that fits better?",
)
_CLOSINGS = (
    "Perfect, let's go with that. Thanks!",
    "Great — please book it.",
    "That works for me, thank you.",
    "Sounds good. I'll take it from here.",
    "Thanks, that's exactly what I needed.",
    "Okay, let's do that. Appreciate the help!",
)
_ASSISTANT_OPENERS = ("Of course!", "Happy to help.", "Sure thing.", "Absolutely.", "Glad to help with that.")
_RECALL_FRAMES = ("{s}", "From our past chats, I remember that {l}", "As I recall, {l}", "Last time we talked, I noted that {l}")
_PROPOSALS = ("How about {o}?", "I'd suggest {o}.", "One good fit would be {o}.", "I can set up {o}.", "What do you think of {o}?")
_NOTED = ("Noted.", "Got it.", "Good to know.", "Makes sense.", "Understood.")
_REFERENCE_ACKS = (
    "Thanks for telling me — I'll plan around that.",
    "That's useful to know; I'll keep it in mind from now on.",
    "Understood, I'll factor that in.",
    "Good to know, I'll make sure my suggestions account for it.",
)
_ASSISTANT_QUESTIONS = (
    "Do you want me to check availability?",
    "Should I keep your usual timing?",
    "Would you like a reminder as well?",
    "Shall I compare a couple of alternatives?",
    "Want me to save this for later?",
)
_ASSISTANT_CLOSINGS = (
    "Done — it's all set for {weekday}. Anything else?",
    "You're all set. Enjoy!",
    "Great choice. I've saved the details for you.",
    "All sorted. Let me know if anything changes.",
    "Booked and noted. Have a good {weekday}!",
)

# A concrete option per domain, filled from the persona's affinities.
_OPTIONS: dict[Domain, tuple[str, ...]] = {
    Domain.ALARM: ("an alarm at {Alarm Time Preference} with {Alarm Sound Preference}, repeating on {Alarm Recurring Preference}",),
    Domain.BOOKS: ("the latest from {Favorite Authors}", "another {Genre} title in {Reading Format} format"),
    Domain.BUSES: ("a {Departure Time Preference} {Preferred Bus Company} departure with a {Seat Preference} seat",),
    Domain.CALENDAR: ("a slot with a reminder {Notification Preference}", "blocking time for {Event Type Preference}"),
    Domain.EVENTS: ("some {Event Type Preference} on {Days of Week Preference}, around {Price Range}",),
    Domain.FINANCE: ("a short briefing on {Financial Company} from {News Sources}",),
    Domain.FLIGHTS: ("a {Layover Preference} {Preferred Airline} flight in {Seat Class Preference} with an {Seat Preference} seat",),
    Domain.GAMES: ("something in the {Preferred Game Genres} vein on {Gaming Platforms}, a bit like {Preferred Game Name}",),
    Domain.HOTELS: ("a {Star Rating Preference} {Hotel Chains Preference} option in the {Location Preference} with {Amenity Preference}",),
    Domain.MEDIA: ("a {Preferred Genres} title on {Viewing Platform Preference}, in the spirit of {Favorite Media}",),
    Domain.MESSAGING: ("a {Preferred Communication Style} note on {Preferred Messaging Apps}",),
    Domain.MOVIES: ("a {Preferred Genres} film in {Theater Type Preference}, with {Seat Type Preference} seats",),
    Domain.MUSIC: ("some {Preferred Genres} picks on {Platform Preference}, starting with {Favorite Artists}", "a mix built around {Favorite Albums}"),
    Domain.RENTAL_CARS: ("a {Car Type Preference} {Preferred Car Brand} from {Preferred Rental Company} with {Additional Feature Preference}",),
    Domain.RESTAURANTS: ("a {Ambiance Preference} {Cuisine Preference} place in the {Price Range} range",),
    Domain.SERVICES: ("an {Appointment Time Preference} appointment with a {Preferred Service Provider Types} provider {Location Preference}",),
    Domain.SHOPPING: ("{Brand Preference} options in {Preferred Product Category}, {Price Range Preference}",),
    Domain.SPORTS: ("the next {Favorite Team} game, {Viewing Preference}", "catching some {Favorite Sports} {Viewing Preference}"),
    Domain.TRAIN: ("a {Travel Time Preference} train in {Preferred Train Class} with an {Preferred Seat Type} seat and {Amenity Preference}",),
    Domain.TRAVEL: ("a {Duration Preference} {Preferred Destination Types} trip to {Frequent Travel Destination} in {Travel Season Preference}",),
}

_SETTING = re.compile(r"\s*Chatting(?: in (?P<location>.+?))?(?: on their (?P<device>[\w-]+))?(?: in the (?P<time>\w+))?\.\s*$")


def _split_description(description: str) -> tuple[str, dict[str, str]]:
    """(activity sentence, setting) from a timeline event description."""
    activity = description.split(REFERENCE_MARKER)[0].strip()
    setting: dict[str, str] = {}
    match = _SETTING.search(activity)
    if match:
        setting = {k: v for k, v in match.groupdict().items() if v}
        activity = activity[: match.start()].strip()
    return activity, setting


def _opening(activity: str, domain: Domain) -> str:
    if activity.startswith("The user checks in with the assistant about"):
        return f"I could use some help with {domain.value.lower()} today."
    first = activity.split(". ")[0]
    moved = shift_person(first, "first", they_is_user=True)
    return moved or f"I could use some help with {domain.value.lower()} today."


def _setting_sentence(setting: dict[str, str], weekday: str, rng: random.Random) -> str:
    bits = []
    if setting.get("device"):
        bits.append(f"on my {setting['device']}")
    if setting.get("location"):
        bits.append(f"in {setting['location']}")
    if setting.get("time"):
        bits.append(f"this {weekday} {setting['time']}" if rng.random() < 0.5 else f"this {setting['time']}")
    return sentence("I'm " + " ".join(bits)) if bits else ""


def _option(material: PersonaMaterial, domain: Domain, rng: random.Random, avoid: list[str]) -> str:
    """A concrete suggestion from the affinities, never restating a value the reference changed."""
    templates = list(_OPTIONS.get(domain, ()))
    rng.shuffle(templates)
    for template in templates:
        values: dict[str, str] = {}
        for name in re.findall(r"\{([^}]+)\}", template):
            choices = [v for v in material.values(domain, name) if not _mentions_any(v, avoid)]
            if not choices:
                break
            values[name] = clean_value(rng.choice(choices))
        else:
            text = template
            for name, value in values.items():
                text = text.replace("{" + name + "}", value)
            return fix_articles(text)
    return "a couple of options that match what you usually go for"


def _to_second(first_person: str) -> str:
    text = first_person
    for pattern, repl in (
        (r"\bI'm\b", "you're"), (r"\bI've\b", "you've"), (r"\bI'd\b", "you'd"), (r"\bI am\b", "you are"),
        (r"\bI\b", "you"), (r"\bmy\b", "your"), (r"\bMy\b", "Your"), (r"\bme\b", "you"), (r"\bmyself\b", "yourself"),
    ):
        text = re.sub(pattern, repl, text)
    return sentence(text)


def _mentions_any(text: str, values: list[str]) -> bool:
    lowered = text.casefold()
    return any(v.casefold() in lowered for v in values if len(v) > 2)


def _exchange_count(turns_min: int, turns_max: int, rng: random.Random) -> int:
    exchanges = rng.choices(list(EXCHANGES), weights=EXCHANGE_WEIGHTS)[0]
    exchanges = max(exchanges, math.ceil(turns_min / 2))
    return max(1, min(exchanges, turns_max // 2))


@simulates("dialogue_expansion")
def expand_dialogue(variables: dict[str, Any], rng: random.Random) -> dict[str, Any]:
    event = variables["event"]
    domain = Domain(event["domain"])
    weekday = event.get("weekday") or dt.date.fromisoformat(event["date"]).strftime("%A")
    reference = variables.get("reference")
    material = PersonaMaterial(
        demographics=Demographics.model_validate(variables.get("demographics") or {}),
        affinities=[Affinity.model_validate(a) for a in variables.get("affinities") or []],
        interactions=[],
        tasks=[],
    )
    summary = variables.get("interaction_summary")
    activity, setting = _split_description(event["description"])

    # What the user can say about themselves, and what the assistant remembers.
    avoid = list(reference_slots(reference["text"]).values()) if reference else []
    user_facts = [s for s in affinity_statements(material.affinities, domain, rng) + interaction_sentences(summary, "first")
                  if not _mentions_any(s, avoid)]
    rng.shuffle(user_facts)
    identity = identity_statements(material.demographics)
    if identity and rng.random() < 0.5:
        user_facts.insert(rng.randint(0, min(2, len(user_facts))), rng.choice(identity))
    recalls = [s for s in interaction_sentences(summary, "second") if not _mentions_any(s, avoid)]
    recalls += [_to_second(s) for s in affinity_statements(material.affinities, domain, rng) if not _mentions_any(s, avoid)]
    rng.shuffle(recalls)

    exchanges = _exchange_count(int(variables["turns_min"]), int(variables["turns_max"]), rng)
    ref_exchange = rng.randrange(0, max(1, exchanges - 1)) if reference else None
    said_reference = paraphrase_reference(reference["text"], rng) if reference else ""

    turns: list[dict[str, str]] = []
    reference_turns: list[int] = []
    for k in range(exchanges):
        # ---- user
        parts: list[str] = []
        if k == 0:
            parts += [rng.choice(_GREETINGS), _opening(activity, domain)]
            if rng.random() < 0.7:
                parts.append(_setting_sentence(setting, weekday, rng))
        if k == ref_exchange:
            parts.append(said_reference)
        if k == exchanges - 1 and k > 0:
            if user_facts and rng.random() < 0.4:
                parts.append(user_facts.pop())
            parts.append(rng.choice(_CLOSINGS))
        else:
            for _ in range(1 if k == 0 else rng.choice((1, 1, 2))):
                if user_facts:
                    parts.append(user_facts.pop())
            parts.append(rng.choice(_ASKS if k == 0 else _FOLLOW_UPS))
        if k == ref_exchange:
            reference_turns.append(len(turns))
        turns.append({"role": "user", "content": " ".join(p for p in parts if p)})

        # ---- assistant
        reply: list[str] = []
        if k == exchanges - 1 and k > 0:
            reply.append(rng.choice(_ASSISTANT_CLOSINGS).format(weekday=weekday))
        else:
            if k == ref_exchange:
                reply.append(rng.choice(_REFERENCE_ACKS))
            else:
                reply.append(rng.choice(_ASSISTANT_OPENERS) if k == 0 else rng.choice(_NOTED))
            if recalls and rng.random() < 0.6:
                recall = recalls.pop()
                reply.append(sentence(rng.choice(_RECALL_FRAMES).format(s=recall, l=lower_first(recall))))
            reply.append(rng.choice(_PROPOSALS).format(o=_option(material, domain, rng, avoid)))
            if rng.random() < 0.4:
                reply.append(rng.choice(_ASSISTANT_QUESTIONS))
        turns.append({"role": "assistant", "content": " ".join(reply)})
    return {"turns": turns, "reference_turn_indices": reference_turns}
