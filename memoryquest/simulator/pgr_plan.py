"""How the simulator's PGR answers read a request and the facts retrieved for it: the request's
plan (one probe per need bearing on its steps, needs its own words touch first) and each fact's
need and telling word. Like a real model, they see the request and the facts, never the
required references."""

from __future__ import annotations

import random
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from memoryquest.pgr.prospection_contracts import QueryInputs
from memoryquest.simulator.needs import (
    PlanStep,
    classify_need,
    cue_words,
    need_categories,
    need_scores,
    needs_of_request,
)


@dataclass(frozen=True)
class Probe:
    """One need probed at one plan step."""

    need: str
    step: PlanStep

    @property
    def action(self) -> str:
        return need_categories()[self.need].probe.format(step=self.step.phrase)

    @property
    def constraints(self) -> str:
        return need_categories()[self.need].constraints


@dataclass(frozen=True)
class Plan:
    steps: tuple[PlanStep, ...]
    probes: tuple[Probe, ...]  # one per need, in the order to probe them

    def probe(self, need: str) -> Probe | None:
        return next((p for p in self.probes if p.need == need), None)

    @property
    def needs(self) -> tuple[str, ...]:
        return tuple(p.need for p in self.probes)


@lru_cache(maxsize=4096)
def _plan_skeleton(query: str) -> tuple[tuple[PlanStep, ...], tuple[Probe, ...]]:
    steps = tuple(needs_of_request(query))
    probes: list[Probe] = []
    for step in steps:
        probes.extend(Probe(n, step) for n in step.needs if all(p.need != n for p in probes))
    return steps, tuple(probes)


def plan(query: str, rng: random.Random | None = None) -> Plan:
    """The request's plan: needs its own words touch first, the rest in step order (shuffled within by ``rng``)."""
    steps, probes = _plan_skeleton(" ".join(query.split()))
    mentioned = need_scores(query)
    order = {p.need: i for i, p in enumerate(probes)}
    jitter = {p.need: rng.random() if rng else 0.0 for p in probes}
    ranked = sorted(
        probes, key=lambda p: (-mentioned.get(p.need, 0), order[p.need] + jitter[p.need] * 1.5)
    )
    return Plan(steps, tuple(ranked))


def read_request(inputs: QueryInputs, rng: random.Random | None = None) -> tuple[str, Plan]:
    """The request as every PGR simulator reads it (spaces folded), and its plan."""
    query = " ".join(str(inputs.query).split())
    return query, plan(query, rng)


def step_order(plan_: Plan, probes: Iterable[Probe]) -> list[Probe]:
    index = {s.key: i for i, s in enumerate(plan_.steps)}
    return sorted(probes, key=lambda p: index[p.step.key])


_WHEN = re.compile(
    r"\b(?:for|around|on|by|before)\s+(?:the\s+)?(?:weekend of|week of)?\s*"
    r"(?:(?:Monday|Tuesday|Wednesday|Thursday|Friday|Saturday|Sunday),?\s+)?"
    r"(?:January|February|March|April|May|June|July|August|September|October|November|December)\s+\d{1,2}\b"
)


def _when(query: str) -> str:
    match = _WHEN.search(query)
    return match.group(0) if match else ""


def probe_step(probe: Probe, query: str) -> dict[str, str]:
    when = _when(query)
    constraints = probe.constraints + (f"; {when}" if when and probe.need == "schedule" else "")
    return {"action": probe.action, "constraints": constraints}


def anchor_step(step: PlanStep, query: str) -> dict[str, str]:
    """A plan-step step with no particular need: fills a chain of a request with few needs."""
    when = _when(query)
    return {
        "action": f"What {step.phrase} involves on the day",
        "constraints": "; ".join(
            x for x in ("order of things, what has to be ready first", when) if x
        ),
    }


@dataclass(frozen=True)
class FactView:
    info: str
    date: str
    entities: tuple[str, ...]
    need: str | None
    focus: str


def fact_views(raw: Iterable[Mapping[str, Any]]) -> list[FactView]:
    return [
        _fact_view(
            str(item.get("info", "")),
            str(item.get("date", "")),
            tuple(str(e) for e in item.get("related_entities", []) if str(e).strip()),
        )
        for item in raw
    ]


@lru_cache(maxsize=65_536)
def _fact_view(info: str, date: str, entities: tuple[str, ...]) -> FactView:
    """Memoised: the same facts come back in every refinement, summary and answer prompt of a query."""
    need = classify_need(" ".join([info, *entities]))
    return FactView(info, date, entities, need, _focus(info, entities, need))


def _focus(info: str, entities: Sequence[str], need: str | None) -> str:
    """The fact's telling word: an entity that cues its need, else its strongest cue, else an entity."""
    if need is not None:
        cues = cue_words(" ".join([info, *entities]), need)
        for entity in entities:
            if entity.casefold() in cues:
                return entity
        if cues:
            return cues[0]
    if entities:
        return entities[0]
    words = sorted(re.findall(r"[A-Za-z]{4,}", info), key=len, reverse=True)
    return words[0].lower() if words else info[:20]


def recent_first(facts: Iterable[FactView]) -> list[FactView]:
    return sorted(facts, key=lambda f: (f.date, f.info), reverse=True)


def short(text: str, words: int = 12) -> str:
    parts = text.strip().rstrip(".").split()
    return " ".join(parts[:words]) + (" …" if len(parts) > words else "")
