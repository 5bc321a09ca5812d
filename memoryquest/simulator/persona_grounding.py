"""Turn a persona's real PersonaLens content into conversational material.

:class:`PersonaMaterial` indexes the persona for lookup and :func:`task_scenarios` turns
its tasks into in-situ requests. Everything is a pure function of its inputs
plus a caller-provided ``random.Random``, so simulated answers stay reproducible.
"""

from __future__ import annotations

import random
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from memoryquest.contracts import Affinity, Demographics, Domain, Interaction, TaskBrief, TaskKind
from memoryquest.simulator.grammar import (
    from_second_person,
    lower_first,
    name_key,
    sentence,
    shift_person,
)
from memoryquest.simulator.schema import QueriesTable
from memoryquest.simulator.tables import load


@dataclass
class PersonaMaterial:
    """The parts of a persona a simulated answer draws on, indexed for lookup."""

    demographics: Demographics
    affinities: list[Affinity]
    interactions: list[Interaction]
    tasks: list[TaskBrief]

    @classmethod
    def from_variables(cls, variables: dict[str, Any]) -> PersonaMaterial:
        """Rebuild from request variables (the JSON dumps a stage sent)."""
        return cls(
            demographics=Demographics.model_validate(variables.get("demographics") or {}),
            affinities=[Affinity.model_validate(a) for a in variables.get("affinities") or []],
            interactions=[
                Interaction.model_validate(i) for i in variables.get("interactions") or []
            ],
            tasks=[TaskBrief.model_validate(t) for t in variables.get("tasks") or []],
        )

    def values(self, domain: Domain, name: str) -> list[str]:
        key = name_key(name)
        for affinity in self.affinities:
            if affinity.domain == domain and name_key(affinity.name) == key:
                return [
                    v for v in affinity.values if v and v.strip() and v.strip().upper() != "N/A"
                ]
        return []

    def value(self, domain: Domain, name: str, rng: random.Random, default: str = "") -> str:
        found = self.values(domain, name)
        return rng.choice(found) if found else default

    def interaction(self, domain: Domain) -> str | None:
        for item in self.interactions:
            if item.domain == domain:
                return item.summary
        return None


_SENTENCE_SPLIT = re.compile(r"(?<=[.!?])\s+(?=[A-Z])")


def split_sentences(text: str) -> list[str]:
    return [s.strip() for s in _SENTENCE_SPLIT.split(re.sub(r"\s+", " ", text)) if s.strip()]


@dataclass(frozen=True)
class TaskScenario:
    """One persona task, phrased the ways a dialogue or a query needs it."""

    task_id: str
    kind: TaskKind
    domains: tuple[Domain, ...]
    core: str  # "plan a weekend getaway" (first person, lower-case, no final stop)
    activity: str  # third person: "The user needs to set a new alarm ..."
    opening: str  # first person: "I need to set a new alarm ..."
    situation: dict[str, str] = field(default_factory=dict)

    @property
    def primary_domain(self) -> Domain:
        return self.domains[0]


def intent_core(intent: str) -> str:
    """'Plan a weekend getaway by finding ...' -> 'plan a weekend getaway'."""
    text = intent.strip().rstrip(".")
    cut = len(text)
    for marker in load(QueriesTable).intent_cuts:
        position = text.find(marker)
        if 12 <= position < cut:
            cut = position
    text = text[:cut].strip().rstrip(",")
    text = re.sub(r"\[[^\]]*\]", "an upcoming occasion", text)
    # The request supplies its own date; drop the intent's relative one.
    text = re.sub(r"\s+(?:for tomorrow|for the next day|this weekend|for this weekend)$", "", text)
    return lower_first(from_second_person(text))


def task_scenarios(tasks: Iterable[TaskBrief]) -> list[TaskScenario]:
    out: list[TaskScenario] = []
    for task in tasks:
        if not task.domains:
            continue
        first = split_sentences(task.description)[0] if task.description.strip() else ""
        opening = shift_person(first, "first", they_is_user=True) if first else None
        activity = first or f"Works on a {task.domains[0].value} task"
        out.append(
            TaskScenario(
                task_id=task.task_id,
                kind=task.kind,
                domains=tuple(task.domains),
                core=intent_core(task.user_intent or task.description),
                activity=sentence(activity),
                opening=opening or sentence(f"I need help with {intent_core(task.user_intent)}"),
                situation={s.name: s.value for s in task.situations},
            )
        )
    return out
