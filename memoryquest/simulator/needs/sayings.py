"""Saying a life update in the first person without repeating its stored text.

A bank text is read back into its parts and said with one of each part's sayings; any
other text (a real model's reference) is moved into the first person and reworded. The
result never contains the stored text word for word, as the dialogue stage checks.
"""

from __future__ import annotations

import random
import re

from memoryquest.simulator.grammar import (
    FIRST_PERSON,
    fix_articles,
    from_fact,
    lower_first,
    sentence,
    upper_first,
)
from memoryquest.simulator.needs.bank import Parsed, join_parts, parse_update
from memoryquest.simulator.needs.bridges import say_bridge
from memoryquest.simulator.schema import SayingsTable
from memoryquest.simulator.tables import load
from memoryquest.text import contains_verbatim

_FRONTABLE = re.compile(r"^(?:after|since|ever since|following|because of|due to)\b", re.I)


def _lower_subject(clause: str) -> str:
    return clause if re.match(r"^I\b|^I'", clause) else lower_first(clause)


def _compose(parsed: Parsed, core_saying: str, rng: random.Random) -> str:
    values = parsed.slots
    core = core_saying.format(**values)
    extra = rng.choice(parsed.extra.sayings).format(**values) if parsed.extra else ""
    limit = rng.choice(parsed.limit.sayings).format(**values) if parsed.limit else ""
    opener = rng.choice(load(SayingsTable).openers)
    frontable = (
        extra and _FRONTABLE.match(extra) and len(extra) <= 44 and not FIRST_PERSON.search(extra)
    )
    if frontable and rng.random() < 0.4:
        body = join_parts([f"{upper_first(extra)}, {_lower_subject(core)}", limit])
        opener = ""
    else:
        body = join_parts([core, limit, extra])
    if opener:
        body = opener + _lower_subject(body)
    if parsed.bridge:
        body = body.rstrip(".!") + say_bridge(parsed.bridge, rng)
    return sentence(fix_articles(body))


def say_update(text: str, rng: random.Random) -> str:
    """A natural first-person sentence conveying ``text`` that never contains it word for word: a bank
    text with its parts' sayings (tried until one does not repeat it), any other text reworded."""
    parsed = parse_update(text)
    if parsed is not None:
        sayings = list(parsed.core.sayings)
        rng.shuffle(sayings)
        for core_saying in sayings:
            said = _compose(parsed, core_saying, rng)
            if not contains_verbatim(said, text):
                return said
    return _fallback_saying(text, rng)


def _fallback_saying(text: str, rng: random.Random) -> str:
    """First person and lightly reworded: for texts the bank did not write."""
    voiced = from_fact(" ".join(text.strip().rstrip(".!").split()))
    swaps = list(load(SayingsTable).swaps)
    rng.shuffle(swaps)
    for swap in swaps:
        if not contains_verbatim(voiced, text):
            break
        voiced = swap.pattern.sub(swap.replacement, voiced, count=1)
    if contains_verbatim(voiced, text):
        words = voiced.split()
        cut = max(1, len(words) // 2)
        voiced = " ".join(words[:cut] + ["— at least for now —"] + words[cut:])
    opener = rng.choice(("", "By the way, ", "Just an update: ", "For context, ", "Oh, and "))
    said = opener + (_lower_subject(voiced) if opener else voiced)
    return sentence(said)
