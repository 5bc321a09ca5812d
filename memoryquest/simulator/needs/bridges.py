"""The consequence a life update has for some kind of plan: "..., which complicates late gigs".

The clause ties a reference to a scene of its request's domain in words the request does
not use; distractors and plain remarks bridge the same way, so it never marks a reference.
A bridged text is ``core + joiner + frame`` (``data/bridges.json``); :func:`split_bridge`
reads it back, so a statement's need is read from its core alone.
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
    """A bridge clause (", which complicates concert nights") to a scene of ``domain``: scenes in a random
    order until ``acceptable`` passes the whole clause, else ""."""
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
