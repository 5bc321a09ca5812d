"""The consequence a life update has for some kind of plan: "..., which complicates late gigs".

People rarely state a change in their life without saying what it gets in the
way of, and that clause is what ties a reference to the request it matters
for: a reference bridges to a scene of its request's domain (concert nights,
window seats on long flights) in words the request does not use, so it is
related to the request without echoing it. Distractor updates bridge the same
way, at the same rate, to a scene of one of the user's other requests, so
the clause is never a sign of a reference; plain remarks may bridge too.

Scenes, connectives, hedges and frames are data (``data/bridges.json``). A
bridged text is ``core + joiner + frame``; :func:`split_bridge` reads it
back (the stored text, a first-person saying of it, or a fact extracted from
that saying), so the need of a statement is read from its core alone.
"""

from __future__ import annotations

import random
import re
from collections.abc import Callable
from functools import cache

from memoryquest.contracts import Domain
from memoryquest.simulator.schema import BridgeTable
from memoryquest.simulator.tables import load


def _table() -> BridgeTable:
    return load(BridgeTable)


@cache
def joiners() -> tuple[str, ...]:
    """A connective and, often, a hedge: composed, so no few joiners dominate the text."""
    table = _table()
    return tuple(
        dict.fromkeys(f"{c} {h}".rstrip() for c in table.connectives for h in table.hedges)
    )


PAIRED_SHARE = 0.6
"""Bridges that name two scenes of the domain ("concerts and gigs and listening to albums")."""
BRIDGE_SHARE = 0.9
"""Updates that come with a bridge; the rest stand alone, references and distractors alike."""


@cache
def _pattern() -> re.Pattern[str]:
    table = _table()
    connectives = "|".join(re.escape(c) for c in table.connectives)
    hedges = "|".join(re.escape(h) for h in table.hedges if h)
    joiner = rf"(?:{connectives})(?: (?:{hedges}))?"
    frames = "|".join(
        re.escape(frame).replace(re.escape("{scene}"), r"(?:.+?)") for frame in table.frames
    )
    return re.compile(rf"^(?P<core>.+)(?P<joiner>{joiner}) (?P<frame>{frames})[.!]?$", re.DOTALL)


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
    scenes = list(_table().scenes[domain])
    rng.shuffle(scenes)
    pairs = [f"{a} and {b}" for a, b in zip(scenes, scenes[1:], strict=False)]
    options = (pairs + scenes) if rng.random() < PAIRED_SHARE else scenes
    for scene in options:
        clause = f"{rng.choice(joiners())} {rng.choice(_table().frames).format(scene=scene)}"
        if acceptable(clause):
            return clause
    return ""


def bridged_domain(text: str) -> Domain | None:
    """The domain whose scene the bridge of ``text`` names (None without a bridge or a known scene)."""
    clause = split_bridge(text)[1]
    if not clause:
        return None
    return next(
        (d for d, scenes in _table().scenes.items() if any(scene in clause for scene in scenes)),
        None,
    )


def say_bridge(bridge_clause: str, rng: random.Random) -> str:
    """The same bridge, joined the way the speaker happens to join it this time."""
    match = _pattern().match("x" + bridge_clause)
    if match is None:
        return bridge_clause
    return f"{rng.choice(joiners())} {match.group('frame')}"
