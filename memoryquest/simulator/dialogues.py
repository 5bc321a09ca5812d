"""Simulated answer for ``dialogue_expansion``: one conversation, in this persona's voice.

The assistant works on the event's request; the user makes personal remarks in most
turns, and each of the event's life updates is said once as one of them, with the same
lead-ins, place and reply as any other remark. So nothing around a reference marks it;
only its content does. Turn counts follow the paper's shape (three to ten exchanges).
"""

from __future__ import annotations

import datetime as dt
import math
import random
import re
from typing import Any

from memoryquest.contracts import Affinity, Demographics, Domain
from memoryquest.simulator import phrasing, simulates
from memoryquest.simulator.grammar import sentence, upper_first
from memoryquest.simulator.needs import say_update as needs_say_update
from memoryquest.simulator.phrasing import Options, Setting, Topic, Voice
from memoryquest.stages.dialogues_contracts import DialogueInputs

EXCHANGES = range(3, 11)
EXCHANGE_WEIGHTS = (5, 11, 17, 20, 17, 13, 10, 7)  # mean ≈ 6.2 exchanges, as in the paper

NEWS_TURN_SHARE = 1.0
"""Share of user turns a conversation's life updates fill: people chatting to an assistant mostly talk
about what is going on with them, so a turn with news in it is the rule, not the exception, and a
turn without news would tell which turns are the ordinary ones."""
EXTRA_EXCHANGE_SHARE = 0.15
"""Conversations with one exchange more than their news needs (its user turn has a plain remark instead)."""
SECOND_REMARK_SHARE = 0.12
"""User turns with a second personal remark. A turn's remarks are its life updates first and plain
remarks (preferences, habits, where they are) only for the slots left over, so these two shares set
how much of the memory is plain remarks rather than dated updates; every update, reference or
distractor, is said with the same odds of a second remark next to it."""
PERSONAL_QUESTION_SHARE = 0.22
"""Assistant turns (before the last) that ask about the user's circumstances, in every session alike."""
TOPIC_QUESTION_SHARE = 0.3
VOLUNTEERED_LEAD_SHARE = 0.3
"""Personal remarks (updates included) opened with a lead-in such as "By the way,"."""
ACK_SHARE = 0.6
"""Assistant turns after a user turn with a personal remark that open by acknowledging it."""

_SETTING = re.compile(
    r"\s*Chatting(?: in (?P<location>.+?))?(?: on their (?P<device>[\w -]+?))?(?: in the (?P<time>\w+))?\.\s*$"
)


def split_description(description: str) -> tuple[str, dict[str, str]]:
    """(activity, setting) of a timeline event description."""
    activity = description.strip()
    setting: dict[str, str] = {}
    match = _SETTING.search(activity)
    if match:
        setting = {k: v for k, v in match.groupdict().items() if v}
        activity = activity[: match.start()].strip()
    return activity, setting


def _setting(setting: dict[str, str], situations: list[dict[str, str]], weekday: str) -> Setting:
    situation = situations[0] if situations else {}
    return Setting(
        location=setting.get("location") or situation.get("Location", ""),
        device=setting.get("device") or situation.get("Device", ""),
        time_of_day=setting.get("time") or situation.get("Time of Day", ""),
        environment=situation.get("Environment", ""),
        weekday=weekday,
    )


def _exchange_count(turns_min: int, turns_max: int, updates: int, rng: random.Random) -> int:
    """About one exchange per piece of news (at most the paper-shaped draw), within the turn limits."""
    drawn = rng.choices(list(EXCHANGES), weights=EXCHANGE_WEIGHTS)[0]
    wanted = math.ceil(updates / NEWS_TURN_SHARE) + (rng.random() < EXTRA_EXCHANGE_SHARE)
    exchanges = max(min(drawn, wanted), EXCHANGES[0], math.ceil(turns_min / 2))
    return max(1, min(exchanges, turns_max // 2))


def _avoided_values(affinities: list[Affinity], update: str) -> list[str]:
    """Affinity values the update talks about: restating them elsewhere could contradict it."""
    lowered = update.casefold()
    return [v for a in affinities for v in a.values if len(v) > 2 and v.casefold() in lowered]


_SAYING_OPENER = re.compile(
    r"^(?:by the way|oh,? and|also|actually|for context|side note|one more thing|just an update|fyi|"
    r"just so you know|quick update)\s*[,:—–-]?\s+",
    re.IGNORECASE,
)


def say_update(text: str, rng: random.Random) -> str:
    """The update in the user's words (the needs model's phrasing, shared with the query side).

    Any lead-in the saying came with is dropped: lead-ins are added by
    :func:`user_turn`, at the same rate for every personal remark.
    """
    said = needs_say_update(text, rng).strip()
    bare = _SAYING_OPENER.sub("", said, count=1)
    if bare != said and bare:
        said = upper_first(bare)
    return said


def user_turn(
    k: int,
    last: bool,
    asked: str,
    topic: Topic,
    options: Options,
    voice: Voice,
    updates: list[str],
    rng: random.Random,
) -> tuple[str, bool]:
    """(turn text, whether the turn has a personal remark); each of ``updates`` is one of its remarks.

    ``asked`` is what the assistant's previous turn asked: "topic", "personal" or "".
    """
    head: list[str] = []
    react = ""
    if k == 0:
        head.append(phrasing.opening_request(topic, options, rng))
        if topic.background and rng.random() < 0.5:
            head.append(phrasing.background_sentence(topic, rng))
        count = 1 + (rng.random() < SECOND_REMARK_SHARE)
    else:
        if asked == "topic":
            head.append(phrasing.answer_topic_question(options, rng))
        elif asked != "personal" and rng.random() < 0.6:
            react = phrasing.reaction(topic, options, rng)
        count = 1 if last else 1 + (rng.random() < SECOND_REMARK_SHARE)
    if asked == "personal":
        count = max(count, 1)
    remarks = [r for r in (voice.remark(rng) for _ in range(max(0, count - len(updates)))) if r]
    for update in updates:  # each at a random place among the remarks
        remarks.insert(rng.randint(0, len(remarks)), update)
    for position, remark in enumerate(remarks):
        lead = ""
        if position == 0 and asked == "personal":
            lead = phrasing.pick(rng, phrasing.table().answers)
        elif rng.random() < VOLUNTEERED_LEAD_SHARE:
            lead = phrasing.pick(rng, phrasing.table().volunteered)
        remarks[position] = phrasing.with_lead(remark, lead)
    # A short answer or reaction never stands alone: it opens the turn's last sentence.
    short = react or (head.pop() if k > 0 and head else "")
    tail: list[str] = []
    if last and k > 0:
        tail.append(phrasing.user_closing(topic, options, rng, lead=short))
    elif k > 0 and (short or rng.random() < 0.85 or not remarks):
        tail.append(phrasing.follow_up(topic, options, rng, lead=short))
    text = " ".join(p for p in [*head, *remarks, *tail] if p)
    return text, bool(remarks)


def assistant_turn(
    k: int, last: bool, personal: bool, topic: Topic, options: Options, rng: random.Random
) -> tuple[str, str]:
    """(turn text, what it asks: "topic", "personal" or ""). ``personal`` is only whether the user's turn
    had a remark; what the remark was (an update or not) never reaches this function."""
    parts: list[str] = []
    lead = ""
    if personal and rng.random() < ACK_SHARE:
        lead = phrasing.acknowledgement(topic, rng)
    elif k > 0 and rng.random() < 0.5:
        lead = phrasing.pick(rng, phrasing.table().lead_words)
    if k == 0:
        opener = phrasing.assistant_opener(topic, rng)
        # An acknowledgement is its own sentence before the opener ("Got it. Happy to help ...").
        lead = f"{sentence(lead)} {opener}" if lead else opener
    if last and k > 0:
        parts.append(phrasing.assistant_closing(topic, options, rng, lead=lead))
        return " ".join(parts), ""
    parts.append(phrasing.proposal(topic, options, rng, lead=lead))
    roll = rng.random()
    if roll < 0.3:
        parts.append(phrasing.reason(topic, options, rng))
    elif roll < 0.65:
        parts.append(phrasing.detail(topic, options, rng))
    asks = ""
    roll = rng.random()
    if roll < PERSONAL_QUESTION_SHARE:
        parts.append(phrasing.personal_question(options, rng))
        asks = "personal"
    elif roll < PERSONAL_QUESTION_SHARE + TOPIC_QUESTION_SHARE:
        parts.append(phrasing.topic_question(topic, options, rng))
        asks = "topic"
    return " ".join(p for p in parts if p), asks


@simulates(DialogueInputs)
def expand_dialogue(inputs: DialogueInputs, rng: random.Random) -> dict[str, Any]:
    event = inputs.event
    domain = Domain(event["domain"])
    weekday = event.get("weekday") or dt.date.fromisoformat(event["date"]).strftime("%A")
    activity, setting = split_description(event["description"])
    updates = [item.strip().rstrip(".") for item in inputs.news]
    affinities = [Affinity.model_validate(a) for a in inputs.affinities or []]
    demographics = Demographics.model_validate(inputs.demographics or {})
    avoid = [v for u in updates for v in _avoided_values(affinities, u)]
    topic = phrasing.parse_topic(activity, domain)
    where = _setting(setting, list(inputs.situations or []), weekday)
    options = Options(topic, affinities, avoid, device=where.device)
    voice = Voice(
        affinities,
        demographics,
        domain,
        where,
        avoid=avoid,
        emphasis=str(inputs.interaction_summary or ""),
    )
    exchanges = _exchange_count(int(inputs.turns_min), int(inputs.turns_max), len(updates), rng)
    # Each update goes to its own exchange while there are enough of them, picked at random.
    order = list(range(exchanges))
    rng.shuffle(order)
    placed = [order[i % exchanges] for i in range(len(updates))]
    sayings = [say_update(u, rng) for u in updates]

    turns: list[str] = []  # user, assistant, user, ...
    said_at: dict[int, int] = {}  # update -> the turn saying it
    asked = ""
    for k in range(exchanges):
        last = k == exchanges - 1
        here = [i for i in range(len(updates)) if placed[i] == k]
        text, personal = user_turn(
            k, last, asked, topic, options, voice, [sayings[i] for i in here], rng
        )
        said_at.update((i, len(turns)) for i in here)
        turns.append(text)
        reply, asked = assistant_turn(k, last, personal, topic, options, rng)
        turns.append(reply)

    news_said = [{"news_index": k, "turn_index": said_at[k]} for k in sorted(said_at)]
    return {"turns": turns, "news_said": news_said}
