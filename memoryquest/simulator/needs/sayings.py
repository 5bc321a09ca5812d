"""Saying a life update in the first person without repeating its stored text.

A bank text is read back into its generator, parts and slot values
(:func:`~memoryquest.simulator.needs.bank.parse_update`) and said again with
one of each part's sayings, behind an optional discourse opener ("By the way,
my ...") or with a cause fronted ("After a scare at a work lunch, my ...").
Any other text — a real model's reference — is moved into the first person
and lightly reworded. Either way the result never contains the stored text
word for word, which is what the dialogue stage checks.
"""

from __future__ import annotations

import random
import re

from memoryquest.simulator.needs.bank import Parsed, join_parts, parse_update
from memoryquest.simulator.needs.bridges import say_bridge
from memoryquest.simulator.persona_grounding import fix_articles, lower_first, sentence
from memoryquest.text import contains_verbatim

_OPENERS = (
    "",
    "",
    "",
    "By the way, ",
    "Oh, and ",
    "Also, ",
    "Actually, ",
    "For context, ",
    "Side note: ",
    "One more thing: ",
)
_FRONTABLE = re.compile(r"^(?:after|since|ever since|following|because of|due to)\b", re.I)
_FIRST_PERSON = re.compile(r"\b(?:I|I'm|I've|I'd|I'll|my|me|mine|myself)\b", re.IGNORECASE)


def _lower_subject(clause: str) -> str:
    return clause if re.match(r"^I\b|^I'", clause) else lower_first(clause)


def _compose(parsed: Parsed, core_saying: str, rng: random.Random) -> str:
    values = parsed.slots
    core = core_saying.format(**values)
    extra = rng.choice(parsed.extra.sayings).format(**values) if parsed.extra else ""
    limit = rng.choice(parsed.limit.sayings).format(**values) if parsed.limit else ""
    opener = rng.choice(_OPENERS)
    frontable = (
        extra and _FRONTABLE.match(extra) and len(extra) <= 44 and not _FIRST_PERSON.search(extra)
    )
    if frontable and rng.random() < 0.4:
        body = join_parts([f"{extra[:1].upper()}{extra[1:]}, {_lower_subject(core)}", limit])
        opener = ""
    else:
        body = join_parts([core, limit, extra])
    if opener:
        body = opener + _lower_subject(body)
    if parsed.bridge:
        body = body.rstrip(".!") + say_bridge(parsed.bridge, rng)
    return sentence(fix_articles(body))


def say_update(text: str, rng: random.Random) -> str:
    """A natural first-person sentence conveying ``text`` that never contains it word for word.

    Bank texts are read back into their parts and said with one of each
    part's sayings (tried in a shuffled order until one does not repeat the
    text); any other text (say, a real model's reference) is moved into the
    first person and lightly reworded.
    """
    parsed = parse_update(text)
    if parsed is not None:
        sayings = list(parsed.core.sayings)
        rng.shuffle(sayings)
        for core_saying in sayings:
            said = _compose(parsed, core_saying, rng)
            if not contains_verbatim(said, text):
                return said
    return _fallback_saying(text, rng)


_LEADS: tuple[tuple[re.Pattern[str], str], ...] = tuple(
    (re.compile(pattern, re.IGNORECASE), replacement)
    for pattern, replacement in (
        (r"^is\b", "I'm"),
        (r"^was\b", "I was"),
        (r"^has been\b", "I've been"),
        (r"^has\b", "I have"),
        (r"^had\b", "I had"),
        (r"^can't\b", "I can't"),
        (r"^cannot\b", "I cannot"),
        (r"^does not\b", "I don't"),
        (r"^doesn't\b", "I don't"),
        (r"^will\b", "I'll"),
        (r"^needs\b", "I need"),
        (r"^wants\b", "I want"),
        (r"^prefers\b", "I prefer"),
        (r"^likes\b", "I like"),
        (r"^loves\b", "I love"),
        (r"^(allergic|unable|busy|away|recovering|pregnant|saving|moving|off)\b", r"I'm \1"),
        (r"^the user's\b", "my"),
        (r"^the user\b", "I"),
        (r"^user's\b", "my"),
        (
            r"^(sister|brother|mother|father|mom|mum|dad|parents|partner|wife|husband|son|daughter|kids|children|"
            r"boss|landlord|flatmate|roommate|dog|cat|car|phone|laptop|passport|doctor|friend|friends)\b",
            r"my \1",
        ),
    )
)
_SWAPS: tuple[tuple[str, str], ...] = (
    ("started", "began"),
    ("starts", "begins"),
    ("bought", "picked up"),
    ("moved", "relocated"),
    ("cancelled", "called off"),
    ("canceled", "called off"),
    ("sold", "got rid of"),
    ("joined", "signed up for"),
    ("booked", "reserved"),
    ("broke", "damaged"),
    ("lost", "misplaced"),
    ("received", "got"),
    ("told", "advised"),
    ("until", "through"),
    ("because of", "due to"),
    ("after", "following"),
    ("since", "ever since"),
    ("every", "each"),
    ("now", "these days"),
    ("stopped", "quit"),
    ("avoids", "steers clear of"),
    ("avoid", "steer clear of"),
    ("recently", "lately"),
    ("weekly", "every week"),
    ("currently", "at the moment"),
)


def _fallback_saying(text: str, rng: random.Random) -> str:
    """First person and lightly reworded: for texts the bank did not write."""
    body = " ".join(text.strip().rstrip(".!").split())
    voiced = body
    for pattern, replacement in _LEADS:
        if pattern.search(voiced):
            voiced = pattern.sub(replacement, voiced, count=1)
            break
    else:
        if re.match(r"^[A-Za-z]+ed\b", voiced):
            voiced = "I " + lower_first(voiced)
        elif not _FIRST_PERSON.match(voiced):
            # A noun phrase ("Upstairs neighbour complained ...") is the user's.
            voiced = "My " + lower_first(voiced)
    voiced = re.sub(r"\bthe user's\b", "my", voiced, flags=re.IGNORECASE)
    voiced = re.sub(r"\bthe user\b", "me", voiced, flags=re.IGNORECASE)
    swaps = list(_SWAPS)
    rng.shuffle(swaps)
    for old, new in swaps:
        if not contains_verbatim(voiced, text):
            break
        voiced = re.sub(rf"\b{re.escape(old)}\b", new, voiced, count=1, flags=re.IGNORECASE)
    if contains_verbatim(voiced, text):
        words = voiced.split()
        cut = max(1, len(words) // 2)
        voiced = " ".join(words[:cut] + ["— at least for now —"] + words[cut:])
    opener = rng.choice(("", "By the way, ", "Just an update: ", "For context, ", "Oh, and "))
    said = opener + (_lower_subject(voiced) if opener else voiced)
    return sentence(said)
