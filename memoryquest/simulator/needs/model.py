"""What a request needs: plan steps per task domain and the personal needs that bear on them.

A fact matters to a request exactly when its need category (diet, health, budget ...)
bears on one of the request's plan steps. That one rule drives query generation, the
relevance judge and simulated PGR, so they agree without sharing hidden ids. A text's need
is read from a weighted cue lexicon (``data/needs.json``) over content-word stems.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import cache, lru_cache

from memoryquest.contracts import Domain
from memoryquest.simulator.needs.bridges import core_of
from memoryquest.simulator.schema import Need, NeedsTable
from memoryquest.simulator.tables import load
from memoryquest.text import content_words, stem


@dataclass(frozen=True)
class PlanStep:
    """One step a request in ``domain`` implies, and the need categories that bear on it."""

    domain: Domain
    key: str
    phrase: str  # gerund phrase: "choosing the restaurant"
    needs: tuple[str, ...]


@cache
def need_categories() -> dict[str, Need]:
    """The need categories, in the order a plan usually meets them."""
    return {need.key: need for need in load(NeedsTable).needs}


@cache
def domain_plans() -> dict[Domain, tuple[PlanStep, ...]]:
    """The plan steps each PersonaLens domain implies, in the order they unfold."""
    return {
        domain: tuple(
            PlanStep(domain, f"{domain.value.lower()}:{s.key}", s.phrase, s.needs) for s in steps
        )
        for domain, steps in load(NeedsTable).plans.items()
    }


def domain_hits(text: str) -> list[tuple[Domain, int]]:
    """Domains the wording of a request points to, with how many cue words each has, strongest first."""
    scored: list[tuple[int, int, Domain]] = []
    for domain, pattern in load(NeedsTable).domain_cues.items():
        hits = list(pattern.finditer(text))
        if hits:
            scored.append((-len(hits), hits[0].start(), domain))
    scored.sort(key=lambda s: (s[0], s[1]))
    return [(domain, -count) for count, _, domain in scored]


def infer_domains(text: str, limit: int = 2) -> list[Domain]:
    """The domains a request's wording points to, strongest first (at most ``limit``)."""
    return [domain for domain, _ in domain_hits(text)[:limit]]


SECOND_DOMAIN_HITS = 2
"""Cue words a request needs before a domain other than its own adds plan steps."""


def needs_of_request(text: str, domain: Domain | None = None) -> list[PlanStep]:
    """The plan steps a request implies: its own domain's first, then one more domain its wording stresses.

    With ``domain`` known, a second domain counts only when named :data:`SECOND_DOMAIN_HITS` times, so a
    passing word does not widen the plan; without it (PGR sees only the request) the two most named do,
    and an unreadable request gets the Calendar steps, the most generic plan.
    """
    hits = domain_hits(text)
    if domain is not None:
        domains = [domain] + [
            d for d, count in hits if d != domain and count >= SECOND_DOMAIN_HITS
        ][:1]
    else:
        domains = [d for d, _ in hits[:2]] or [Domain.CALENDAR]
    return [step for d in domains for step in domain_plans()[d]]


def request_needs(steps: list[PlanStep]) -> list[str]:
    """The need categories of ``steps``, each once, in the order the steps meet them."""
    out: list[str] = []
    for step in steps:
        out.extend(n for n in step.needs if n not in out)
    return out


@cache
def breadth(need: str) -> int:
    """How many domains a need bears on: the fewer, the more a statement of it says about one request."""
    return sum(any(need in step.needs for step in steps) for steps in domain_plans().values())


def domain_needs(domain: Domain) -> frozenset[str]:
    """Every need category that bears on some plan step of ``domain``."""
    return frozenset(n for step in domain_plans()[domain] for n in step.needs)


def step_for(need: str, steps: list[PlanStep]) -> PlanStep | None:
    """The first step ``need`` bears on."""
    return next((s for s in steps if need in s.needs), None)


def need_scores(text: str) -> dict[str, int]:
    """Cue weight of every need category present in ``text`` (absent ones left out).

    A bridge clause (what the update gets in the way of) is not read: the need is the update's own.
    """
    return dict(_need_scores(core_of(text)))


@lru_cache(maxsize=65_536)
def _need_scores(text: str) -> tuple[tuple[str, int], ...]:
    stems = set(content_words(text))
    scored = []
    for need in need_categories().values():
        score = sum(weight for word, weight in need.weights.items() if word in stems)
        if score:
            scored.append((need.key, score))
    return tuple(scored)


def classify_need(text: str) -> str | None:
    """The need category a statement is about: the highest total cue weight, ties to the first listed;
    a lone weak cue is not enough (None)."""
    scores = need_scores(text)
    if not scores:
        return None
    order = list(need_categories())
    best = max(scores, key=lambda k: (scores[k], -order.index(k)))
    return best if scores[best] >= 2 else None


def cue_words(text: str, need: str) -> list[str]:
    """The words of ``text`` that point to ``need``, strongest first (for naming a fact's focus)."""
    cues = need_categories()[need].weights
    found: dict[str, int] = {}
    for word in re.findall(r"[A-Za-z][A-Za-z'\-]*", text):
        weight = cues.get(stem(word.casefold()), 0)
        if weight and word.casefold() not in found:
            found[word.casefold()] = weight
    return sorted(found, key=lambda w: -found[w])
