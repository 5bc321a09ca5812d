"""Simulated answers for the PGR runner and its judges, planned from the request alone.

Like a real model they see the request, the steps and the facts retrieved so far, never
the required references: one probe per need bearing on the request's plan steps (needs
its own words touch first), facts folded into their need's step and followed up once, a
probe that found nothing asked from the need's next side, until the plan stops changing
and δ ends the loop. The plan and the facts as read are in
:mod:`~memoryquest.simulator.pgr_plan`; the judges' answers in
:mod:`~memoryquest.simulator.pgr_judges`.
"""

from __future__ import annotations

import random
import re
from collections.abc import Sequence
from functools import cache
from typing import Any

from memoryquest.pgr.expansion_contracts import HypotheticalFactsInputs, MultiQueryInputs
from memoryquest.pgr.prospection_contracts import (
    AnswerInputs,
    AugmentInputs,
    CotInitialInputs,
    CotRefineInputs,
    SummaryInputs,
    TotInitialInputs,
    TotRefineInputs,
)
from memoryquest.simulator import simulates
from memoryquest.simulator.grammar import join_list
from memoryquest.simulator.needs import PlanStep, need_categories
from memoryquest.simulator.pgr_plan import (
    FactView,
    Plan,
    anchor_step,
    fact_views,
    probe_step,
    read_request,
    recent_first,
    short,
    step_order,
)

MAX_NEW_STEPS = 3
MAX_CHAIN_STEPS = 10
MAX_TREE_NODES = 12
CHAIN_MIN, CHAIN_MAX = 5, 8
FOLDED_PER_STEP = 2
SUMMARY_FACTS = 6
ANSWER_FACTS = 8
KNOWN = " | known: "


@simulates(AugmentInputs)
def augment(inputs: AugmentInputs, rng: random.Random) -> dict[str, Any]:
    query, plan_ = read_request(inputs)
    phrases = join_list([s.phrase for s in plan_.steps[:4]])
    text = f"{query} The user wants this sorted on {inputs.query_date}: {phrases}."
    relevant = [f for f in recent_first(fact_views(inputs.context_facts)) if f.need in plan_.needs]
    if relevant:
        known = "; ".join(f"{short(f.info, 10)} ({f.date})" for f in relevant[:3])
        text += f" Known from earlier: {known}."
    return {"augmented_query": text}


@simulates(CotInitialInputs)
def cot_initial(inputs: CotInitialInputs, rng: random.Random) -> dict[str, Any]:
    query, plan_ = read_request(inputs, rng)
    count = min(max(len(plan_.probes), CHAIN_MIN), CHAIN_MAX, rng.randint(CHAIN_MIN + 1, CHAIN_MAX))
    chosen = step_order(plan_, plan_.probes[:count])
    steps = [probe_step(p, query) for p in chosen]
    for step in plan_.steps:
        if len(steps) >= CHAIN_MIN:
            break
        steps.append(anchor_step(step, query))
    return {"steps": steps}


def _root(query: str, plan_: Plan) -> dict[str, str]:
    request = short(re.split(r"(?<=[.?!])\s", query)[0], 18)
    return {
        "action": f"Get this done: {request}",
        "constraints": "; ".join(s.phrase for s in plan_.steps[:4]),
    }


def _branch(step: PlanStep, needs: Sequence[str]) -> dict[str, str]:
    return {
        "action": f"How {step.phrase} goes",
        "constraints": ", ".join(need_categories()[n].label for n in needs),
    }


@simulates(TotInitialInputs)
def tot_initial(inputs: TotInitialInputs, rng: random.Random) -> dict[str, Any]:
    query, plan_ = read_request(inputs, rng)
    # Branches: the two or three steps holding the most pressing needs, in the order they unfold.
    keys = list(dict.fromkeys(p.step.key for p in plan_.probes))
    wanted = 3 if rng.random() < 0.85 else 2
    step_index = [s.key for s in plan_.steps]
    nodes: list[dict[str, Any]] = [
        {"id": "A1", **_root(query, plan_), "parent": None, "children": []}
    ]
    for key in sorted(keys[:wanted], key=step_index.index):
        take = [p for p in plan_.probes if p.step.key == key][: 1 if rng.random() < 0.15 else 2]
        branch_id = f"A{len(nodes) + 1}"
        nodes[0]["children"].append(branch_id)
        branch: dict[str, Any] = {
            "id": branch_id,
            **_branch(take[0].step, [p.need for p in take]),
            "parent": "A1",
            "children": [],
        }
        nodes.append(branch)
        for probe in take:
            child_id = f"A{len(nodes) + 1}"
            branch["children"].append(child_id)
            nodes.append(
                {"id": child_id, **probe_step(probe, query), "parent": branch_id, "children": []}
            )
    return {"nodes": nodes}


def _need_of_step(step: dict[str, Any], plan_: Plan) -> str | None:
    """The need a step probes or follows up (None for the root, branches and steps not ours)."""
    action = str(step.get("action", ""))
    for probe in plan_.probes:
        if action == probe.action:
            return probe.need
    for need, pattern in _follow_patterns().items():
        if pattern.fullmatch(action):
            return need
    return None


def _template_pattern(template: str) -> re.Pattern[str]:
    pieces = re.split(r"\{\w+\}", template)
    return re.compile(".+?".join(re.escape(p) for p in pieces))


@cache
def _follow_patterns() -> dict[str, re.Pattern[str]]:
    return {key: _template_pattern(need.follow) for key, need in need_categories().items()}


def _folded(step: dict[str, Any], facts: Sequence[FactView], need: str | None, plan_: Plan) -> str:
    """The step's constraints for the next round: facts of its need folded in (``<base> | known: ...``),
    or, when its probe found none, the need's next side (facet) until the sides run out."""
    base = str(step.get("constraints", "")).split(KNOWN, 1)[0]
    matching = [f for f in recent_first(facts) if need is not None and f.need == need]
    if matching:
        return base + KNOWN + "; ".join(f"{f.focus} ({f.date})" for f in matching[:FOLDED_PER_STEP])
    probe = plan_.probe(need) if need is not None else None
    if probe is None or str(step.get("action", "")) != probe.action:
        return base
    facets = need_categories()[probe.need].facets
    side = next((i for i, facet in enumerate(facets) if base.startswith(facet)), len(facets) - 1)
    return (
        facets[min(side + 1, len(facets) - 1)] + base[len(facets[side]) :]
        if side < len(facets)
        else base
    )


def _follow_up(fact: FactView, plan_: Plan) -> dict[str, str]:
    need = fact.need or ""
    probe = plan_.probe(need)
    phrase = probe.step.phrase if probe else "it"
    return {
        "action": need_categories()[need].follow.format(focus=fact.focus, step=phrase),
        "constraints": f"{short(fact.info)} ({fact.date})",
    }


def _additions(
    previous: Sequence[dict[str, Any]],
    facts: Sequence[FactView],
    plan_: Plan,
    query: str,
    room: int,
) -> list[tuple[str, dict[str, str]]]:
    """(need, step) pairs new this round: follow-ups on facts of the plan's needs first, then needs not probed yet."""
    probed: set[str] = set()
    followed: set[str] = set()
    for step in previous:
        need = _need_of_step(step, plan_)
        if need is None:
            continue
        probed.add(need)
        probe = plan_.probe(need)
        if probe is None or str(step.get("action", "")) != probe.action:
            followed.add(need)
    follow_ups: list[tuple[str, dict[str, str]]] = []
    for fact in recent_first(facts):
        if (
            fact.need in plan_.needs
            and fact.need not in followed
            and all(n != fact.need for n, _ in follow_ups)
        ):
            follow_ups.append((fact.need or "", _follow_up(fact, plan_)))
    missing = [(p.need, probe_step(p, query)) for p in plan_.probes if p.need not in probed]
    return (follow_ups + missing)[: max(min(room, MAX_NEW_STEPS), 0)]


@simulates(CotRefineInputs)
def cot_refine(inputs: CotRefineInputs, rng: random.Random) -> dict[str, Any]:
    query, plan_ = read_request(inputs)
    facts = fact_views(inputs.facts)
    previous = [dict(s) for s in inputs.previous_steps]
    rewritten = [
        {
            "action": str(s.get("action", "")),
            "constraints": _folded(s, facts, _need_of_step(s, plan_), plan_),
        }
        for s in previous
    ]
    added = _additions(previous, facts, plan_, query, MAX_CHAIN_STEPS - len(rewritten))
    return {"steps": rewritten + [step for _, step in added]}


CHECKED = " | checked: "


def _checked(root: dict[str, Any] | None) -> set[str]:
    """Needs the tree has probed before (noted on the root, so pruned probes are not asked again)."""
    if root is None or CHECKED not in str(root["constraints"]):
        return set()
    return {
        n.strip()
        for n in str(root["constraints"]).split(CHECKED, 1)[1].split(",")
        if n.strip() in need_categories()
    }


@simulates(TotRefineInputs)
def tot_refine(inputs: TotRefineInputs, rng: random.Random) -> dict[str, Any]:
    """Fold facts in, prune probes that found nothing of their need to make room, add follow-ups and unasked needs."""
    query, plan_ = read_request(inputs)
    facts = fact_views(inputs.facts)
    previous = [dict(s) for s in inputs.previous_steps]
    nodes: list[dict[str, Any]] = [
        {
            "id": str(s["id"]),
            "action": str(s.get("action", "")),
            "constraints": str(s.get("constraints", ""))
            if s.get("parent") is None
            else _folded(s, facts, _need_of_step(s, plan_), plan_),
            "parent": s.get("parent"),
            "children": [],
        }
        for s in previous
    ]
    root = next((n for n in nodes if n["parent"] is None), None)
    checked = _checked(root) | {n for s in previous if (n := _need_of_step(s, plan_)) is not None}
    asked = [p for p in plan_.probes if p.need in checked]
    remembered = previous + [{"action": p.action} for p in asked]
    added = _additions(remembered, facts, plan_, query, MAX_NEW_STEPS)
    # Room for them: drop probes that were asked from every side of their need and found nothing (oldest first).
    evidence = {f.need for f in facts}
    parents = {n["parent"] for n in nodes}
    for node in list(nodes):
        if len(nodes) + len(added) <= MAX_TREE_NODES:
            break
        probe = plan_.probe(_need_of_step(node, plan_) or "")
        if (
            probe is not None
            and node["action"] == probe.action
            and probe.need not in evidence
            and str(node["constraints"]).startswith(need_categories()[probe.need].facets[-1])
            and node["id"] not in parents
        ):
            nodes.remove(node)
    added = added[: max(MAX_TREE_NODES - len(nodes), 0)]
    if root is not None:
        base = str(root["constraints"]).split(CHECKED, 1)[0]
        noted = checked | {need for need, _ in added}
        root["constraints"] = base + CHECKED + ", ".join(n for n in need_categories() if n in noted)
    numbers = [int(n["id"][1:]) for n in nodes if re.fullmatch(r"A\d+", n["id"])]
    next_number = max(numbers, default=0) + 1
    branches = [n for n in nodes if root is not None and n["parent"] == root["id"]]
    for need, step in added:
        probe = plan_.probe(need)
        parent = root["id"] if root else None
        if probe is not None:
            for branch in branches:
                if branch["action"].startswith(f"How {probe.step.phrase} goes"):
                    parent = branch["id"]
                    break
        nodes.append({"id": f"A{next_number}", **step, "parent": parent, "children": []})
        next_number += 1
    for node in nodes:
        node["children"] = [m["id"] for m in nodes if m["parent"] == node["id"]]
    return {"nodes": nodes}


def _prioritised(facts: Sequence[FactView], plan_: Plan, context: str) -> list[FactView]:
    """Facts of the plan's needs first (those the steps folded in before others), then the rest, recent first."""
    lowered = context.lower()
    return sorted(
        recent_first(facts),
        key=lambda f: (f.need not in plan_.needs, f.focus.lower() not in lowered),
    )


@simulates(SummaryInputs)
def summary(inputs: SummaryInputs, rng: random.Random) -> dict[str, Any]:
    query, plan_ = read_request(inputs)
    steps = [dict(s) for s in inputs.steps]
    facts = fact_views(inputs.facts)
    explored = []
    for step in steps:
        need = _need_of_step(step, plan_)
        if need is not None and need_categories()[need].label not in explored:
            explored.append(need_categories()[need].label)
    context = " ".join(f"{s.get('action', '')} {s.get('constraints', '')}" for s in steps)
    cited = [f for f in _prioritised(facts, plan_, context) if f.need in plan_.needs][
        :SUMMARY_FACTS
    ]
    parts = [f"Playing the request forward covered {'; '.join(explored) or 'the request itself'}."]
    if cited:
        memories = "; ".join(f"{short(f.info, 16)} ({f.date})" for f in cited)
        parts.append(
            f"Of {len(facts)} memories brought back, these shape the plan most: {memories}."
        )
        parts.append(
            f"The plan therefore has to work around {join_list(list(dict.fromkeys(f.focus for f in cited))[:3])}."
        )
    else:
        parts.append("No stored memory bore on it, so the plan stays generic.")
    return {"summary": " ".join(parts)}


@simulates(MultiQueryInputs)
def expand_queries(inputs: MultiQueryInputs, rng: random.Random) -> dict[str, Any]:
    """One search per need the request's plan meets, as a one-shot planner would write them:
    what PGR's first plan knows, without the augmentation and the rounds that follow it."""
    query, plan_ = read_request(inputs, rng)
    probes = step_order(plan_, plan_.probes)[: max(1, int(inputs.count))]
    queries = [f"{p.action} ({p.constraints})" for p in probes] or [query]
    return {"queries": queries}


@simulates(HypotheticalFactsInputs)
def hypothetical_facts(inputs: HypotheticalFactsInputs, rng: random.Random) -> dict[str, Any]:
    """One imagined note per need of the plan: the kind of circumstance that would matter."""
    query, plan_ = read_request(inputs, rng)
    probes = step_order(plan_, plan_.probes)[: max(1, int(inputs.count))]
    facts = [
        f"{need_categories()[p.need].label}: {p.constraints} when {p.step.phrase}" for p in probes
    ]
    return {"facts": facts or [f"Something about the user matters for {short(query, 8)}"]}


@simulates(AnswerInputs)
def answer(inputs: AnswerInputs, rng: random.Random) -> dict[str, Any]:
    query, plan_ = read_request(inputs)
    facts = fact_views(inputs.facts)
    summary_text = str(inputs.summary)
    cited = _prioritised(facts, plan_, summary_text)[:ANSWER_FACTS]
    lines = [f"**{short(query, 14)}** — shaped by what you've told me:"]
    for fact in cited:
        label = need_categories()[fact.need].label if fact.need else "context"
        lines.append(f"- *{label}*: {fact.info.rstrip('.')} (noted {fact.date}).")
    if not cited:
        lines.append("- I have nothing stored that bears on this, so here are general next steps.")
    first = plan_.steps[0].phrase if plan_.steps else "the first step"
    lines.append(f"Next step: start with {first}, then book what has to be booked.")
    reasoning = f"Used {len(cited)} of {len(facts)} facts" + (
        " and the prospection summary." if summary_text else "."
    )
    return {"reasoning": reasoning, "answer": "\n".join(lines)}
