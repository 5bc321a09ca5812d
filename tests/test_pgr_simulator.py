"""The simulator's PGR answers: planned from the request alone, deterministic, well-formed."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest

from memoryquest.contracts import Query, RetrievalMethod
from memoryquest.dataset import GeneratedDataset
from memoryquest.generation.common import normalise_text
from memoryquest.llm.backends import ChatCall, ChatResult
from memoryquest.llm.client import ModelClient
from memoryquest.llm.factory import shared_local_embedder
from memoryquest.llm.simulated import SimulatedChatBackend
from memoryquest.pgr.prospection import ChainPlan, TreeNode, TreePlan, parse_tree
from memoryquest.pgr.retrieval import IndexCache
from memoryquest.pgr.runner import run_query
from memoryquest.pgr.sample import sample_dataset
from memoryquest.settings import PGRSettings
from memoryquest.simulator import simulate
from memoryquest.simulator.needs import need_categories
from memoryquest.simulator.pgr import (
    CHAIN_MAX,
    CHAIN_MIN,
    KNOWN,
    MAX_CHAIN_STEPS,
    MAX_TREE_NODES,
)
from memoryquest.simulator.pgr_judges import JUDGE_OVERLAP

QUERY = "Can you help me plan joining a recreational soccer league in Toronto this spring?"
DINNER = "Could you book a table for dinner with my sister on Friday, June 7? Somewhere casual would be nice."
BASE = {"query": QUERY, "query_date": "2024-04-10", "augmented_query": QUERY}
KNEE: dict[str, Any] = {
    "date": "2024-03-04",
    "type": "Event",
    "info": "Strained left knee while running in early March; sees a physiotherapist every week",
    "related_entities": ["knee", "physiotherapist", "running"],
}
BUS: dict[str, Any] = {
    "date": "2024-03-28",
    "type": "Event",
    "info": "Sold car in March and now takes the bus or streetcar around Toronto",
    "related_entities": ["bus", "streetcar", "Toronto"],
}
NUTS: dict[str, Any] = {
    "date": "2024-03-30",
    "type": "Event",
    "info": "Was told by an allergist to cut out tree nuts completely",
    "related_entities": ["allergist", "tree nuts"],
}
THINKING_VERBS = (
    "imagine",
    "anticipate",
    "think",
    "plan",
    "decide",
    "evaluate",
    "review",
    "verify",
    "consider",
    "assess",
    "reflect",
)


def ask(template: str, variables: dict[str, Any], seed: int = 0) -> Any:
    return json.loads(simulate(template, variables, seed=seed))


@pytest.fixture(scope="module")
def sample() -> GeneratedDataset:
    client = ModelClient(SimulatedChatBackend(), shared_local_embedder())
    return asyncio.run(sample_dataset(client, background=40))


class RecordingBackend(SimulatedChatBackend):
    """The simulator, keeping every request's template and variables."""

    def __init__(self) -> None:
        super().__init__()
        self.seen: list[tuple[str, dict[str, Any]]] = []

    async def chat(self, call: ChatCall) -> ChatResult:
        self.seen.append(
            (call.request.template_id, json.loads(json.dumps(call.request.variables, default=str)))
        )
        return await super().chat(call)


async def recorded_run(
    query: Query, sample: GeneratedDataset, method: RetrievalMethod
) -> tuple[Any, list[tuple[str, dict[str, Any]]]]:
    backend = RecordingBackend()
    client = ModelClient(backend, shared_local_embedder())
    outcome = await run_query(
        query, sample.facts, method, client, PGRSettings(max_iterations=4), index_cache=IndexCache()
    )
    return outcome, backend.seen


# --------------------------------------------------------------------------- the planner cannot see the references


@pytest.mark.parametrize("method", [RetrievalMethod.PGR_TOT, RetrievalMethod.PGR_COT])
async def test_prospection_never_sees_the_required_references(
    sample: GeneratedDataset, method: RetrievalMethod
) -> None:
    query = sample.queries[0]
    outcome, seen = await recorded_run(query, sample, method)
    templates = [t for t, _ in seen]
    assert templates[0] == "pgr_augment" and templates[-1] == "pgr_summary"
    for _, variables in seen:
        assert "references" not in variables
        dumped = normalise_text(json.dumps(variables))
        for reference in query.references:
            assert normalise_text(reference.text) not in dumped
    # Other references and other timelines behind the same facts: the same plans, word for word.
    rewritten = query.model_copy(
        update={
            "references": [
                r.model_copy(update={"text": f"unrelated statement {i}"})
                for i, r in enumerate(query.references)
            ]
        }
    )
    other_dataset = sample.model_copy(update={"timelines": [], "sessions": []})
    changed, seen_again = await recorded_run(rewritten, other_dataset, method)
    assert seen_again == seen
    assert changed.model_dump() == outcome.model_dump()


async def test_pgr_finds_the_scenario_references_in_a_few_calls(sample: GeneratedDataset) -> None:
    query = sample.queries[0]
    outcome, seen = await recorded_run(query, sample, RetrievalMethod.PGR_TOT)
    assert 4 <= outcome.llm_calls <= 8  # augmentation, Phase 1, a few refinements, summary
    found = set(outcome.retrieved_fids)
    credited = {
        f.fid
        for f in sample.facts
        if set(f.source_reference_ids) & {r.reference_id for r in query.references}
    }
    assert (
        len(found & credited) >= 3
    )  # knee, evenings, budget, bus: the plan's needs find most of them
    # The loop stops because the needs run out, not because of the iteration cap.
    assert len(outcome.iterations) - 1 < 4


# --------------------------------------------------------------------------- Phase 1


def test_answers_are_deterministic_for_a_seed() -> None:
    assert simulate("pgr_tot_initial", BASE, seed=3) == simulate("pgr_tot_initial", BASE, seed=3)
    trees = {simulate("pgr_tot_initial", BASE, seed=s) for s in range(8)}
    assert len(trees) > 1  # the rng does shape the tree


@pytest.mark.parametrize("seed", range(6))
def test_initial_chain_probes_the_needs_of_the_request(seed: int) -> None:
    plan = ChainPlan.model_validate(ask("pgr_cot_initial", BASE, seed))
    assert CHAIN_MIN <= len(plan.steps) <= CHAIN_MAX
    actions = [s.action for s in plan.steps]
    assert len(set(actions)) == len(actions)
    assert not any(a.lower().startswith(THINKING_VERBS) for a in actions)
    assert all(a.split()[0] in {"Whether", "How", "Which", "Who", "What"} for a in actions)
    # A sports league: the body, the week's commitments and getting to games all come up.
    assert any("injury" in a for a in actions)
    assert any("commitments" in a for a in actions)
    probes = {need.probe.split("{")[0] for need in need_categories().values()}
    assert sum(any(a.startswith(p) for p in probes) for a in actions) >= CHAIN_MIN - 1


def test_dinner_plans_ask_about_diet_and_a_flight_does_not() -> None:
    dinner = [
        s["action"]
        for s in ask(
            "pgr_cot_initial",
            {"query": DINNER, "query_date": "2024-06-01", "augmented_query": DINNER},
        )["steps"]
    ]
    assert any("food allergy" in a and "restaurant" in a for a in dinner)
    flight_query = "Please find and book a flight to Rome for the week of June 10."
    flight = [
        s["action"]
        for s in ask(
            "pgr_cot_initial",
            {"query": flight_query, "query_date": "2024-06-01", "augmented_query": flight_query},
        )["steps"]
    ]
    assert any("passport" in a for a in flight)
    assert not any("food allergy" in a for a in flight)


@pytest.mark.parametrize("seed", range(6))
def test_initial_tree_is_a_real_tree(seed: int) -> None:
    plan = TreePlan.model_validate(ask("pgr_tot_initial", BASE, seed))
    parsed = parse_tree(plan.nodes, repair=False)
    children = {s.step_id: s.children for s in parsed.steps}
    branches = children[parsed.root]
    assert 2 <= len(branches) <= 3
    assert all(1 <= len(children[b]) <= 2 for b in branches)
    assert len(parsed.steps) == 1 + len(branches) + sum(len(children[b]) for b in branches)
    leaves = [s.action for s in parsed.steps if s.parent in branches]
    assert len(set(leaves)) == len(leaves)


# --------------------------------------------------------------------------- Phase 2


def test_refinement_folds_facts_into_their_need_and_follows_them_up() -> None:
    initial = ask("pgr_cot_initial", BASE, 1)["steps"]
    refined = ask(
        "pgr_cot_refine", {**BASE, "previous_steps": initial, "facts": [KNEE, BUS, NUTS]}
    )["steps"]
    # Existing steps keep their action; a need with facts gains them, one without is asked from its next side.
    for before, after in zip(initial, refined[: len(initial)], strict=True):
        assert after["action"] == before["action"]
        if KNOWN not in after["constraints"]:
            facets = [f for n in need_categories().values() for f in n.facets]
            assert any(after["constraints"].startswith(f) for f in facets)
            assert after["constraints"] != before["constraints"] or before[
                "constraints"
            ].startswith(tuple(n.facets[-1] for n in need_categories().values()))
    health = next(s for s in refined[: len(initial)] if "injury" in s["action"])
    assert health["constraints"].startswith(need_categories()["health"].facets[0])
    assert f"{KNOWN}knee (2024-03-04)" in health["constraints"]
    added = refined[len(initial) :]
    knee_step = next(s for s in added if "knee" in s["action"])
    assert "walking" in knee_step["action"] and "physiotherapist" in knee_step["constraints"]
    assert any("car" in s["action"] for s in added)
    # A tree-nut allergy does not bear on joining a sports league: no step for it.
    assert not any("nut" in f"{s['action']} {s['constraints']}" for s in refined)
    assert len(refined) <= MAX_CHAIN_STEPS


def test_a_probe_that_finds_nothing_is_asked_from_the_next_side_of_its_need() -> None:
    steps = ask("pgr_cot_initial", BASE, 1)["steps"]
    budget = next(
        s
        for s in steps
        if s["action"] == need_categories()["budget"].probe.format(step="getting the tickets")
    )
    sides = [budget["constraints"]]
    for _ in range(4):  # no fact about money comes back
        steps = ask("pgr_cot_refine", {**BASE, "previous_steps": steps, "facts": [KNEE]})["steps"]
        sides.append(next(s["constraints"] for s in steps if s["action"] == budget["action"]))
    assert sides[:3] == list(need_categories()["budget"].facets)
    assert (
        sides[3] == sides[4] == need_categories()["budget"].facets[-1]
    )  # then it stays: the plan can settle


def test_refinement_converges_once_the_needs_run_out() -> None:
    steps = ask("pgr_cot_initial", BASE, 1)["steps"]
    sizes = []
    for _ in range(6):
        steps = ask("pgr_cot_refine", {**BASE, "previous_steps": steps, "facts": [KNEE, BUS]})[
            "steps"
        ]
        sizes.append(len(steps))
    assert sizes[-1] == sizes[-2] == sizes[-3]  # nothing new to add: the plan stops changing
    assert sizes[-1] <= MAX_CHAIN_STEPS
    again = ask("pgr_cot_refine", {**BASE, "previous_steps": steps, "facts": [KNEE, BUS]})["steps"]
    assert again == steps


def test_tree_refinement_keeps_a_valid_tree_and_hangs_new_nodes_under_their_step() -> None:
    initial = ask("pgr_tot_initial", BASE, 0)["nodes"]
    refined = TreePlan.model_validate(
        ask("pgr_tot_refine", {**BASE, "previous_steps": initial, "facts": [KNEE, BUS]})
    )
    parsed = parse_tree(refined.nodes, repair=False)
    by_id = {s.step_id: s for s in parsed.steps}
    new = [s for s in parsed.steps if s.step_id not in {n["id"] for n in initial}]
    assert new and len(parsed.steps) <= MAX_TREE_NODES
    knee = next(s for s in new if "knee" in s.action)
    assert "walking" in knee.action
    for step in new:
        assert step.parent is not None
        assert step.parent == parsed.root or by_id[step.parent].parent == parsed.root
    body_branch = [
        b for b in by_id[parsed.root].children if "playing or watching the match" in by_id[b].action
    ]
    if body_branch:
        assert knee.parent == body_branch[0]
    nodes = [
        TreeNode(
            id=s.step_id,
            action=s.action,
            constraints=s.constraints,
            parent=s.parent,
            children=s.children,
        )
        for s in parsed.steps
    ]
    parse_tree(nodes, repair=False)


# --------------------------------------------------------------------------- augmentation, summary, answer


def test_augmentation_spells_out_the_steps_and_keeps_only_relevant_context() -> None:
    text = ask(
        "pgr_augment",
        {"query": QUERY, "query_date": "2024-04-10", "context_facts": [BUS, KNEE, NUTS]},
    )["augmented_query"]
    assert text.startswith(QUERY)
    assert "getting to the ground" in text and "Strained left knee" in text and "Sold car" in text
    assert "tree nuts" not in text
    bare = ask("pgr_augment", {"query": QUERY, "query_date": "2024-04-10", "context_facts": []})[
        "augmented_query"
    ]
    assert bare.startswith(QUERY) and "Known from earlier" not in bare


def test_summary_and_answer_cite_the_facts() -> None:
    steps = ask(
        "pgr_cot_refine",
        {**BASE, "previous_steps": ask("pgr_cot_initial", BASE)["steps"], "facts": [KNEE, BUS]},
    )["steps"]
    summary = ask("pgr_summary", {**BASE, "steps": steps, "facts": [KNEE, BUS]})["summary"]
    assert "Strained left knee" in summary and "2024-03-28" in summary
    reply = ask(
        "pgr_answer",
        {"query": QUERY, "query_date": "2024-04-10", "facts": [KNEE, BUS], "summary": summary},
    )
    assert "Sold car in March" in reply["answer"] and "(noted 2024-03-04)" in reply["answer"]


# --------------------------------------------------------------------------- judges


def test_reference_judge_overlap_rule() -> None:
    assert JUDGE_OVERLAP == 0.4
    # Stems of the reference: strain, left, knee, march, physiotherapist (five).
    reference = "Strained the left knee in March, with a physiotherapist"
    variables: dict[str, Any] = {
        "query": QUERY,
        "query_date": "2024-04-10",
        "references": [{"number": 1, "date": "2024-03-04", "text": reference}],
        "retrieved": [],
    }

    def verdict(info: str) -> dict[str, Any]:
        variables["retrieved"] = [
            {"number": 1, "date": "2024-03-05", "info": "Enjoys science fiction"},
            {"number": 2, "date": "2024-03-05", "info": info},
        ]
        return ask("judge_references", variables)["verdicts"][0]

    assert verdict("Knee strained badly")["memories"] == [2]  # 2 of 5 = 40%
    assert verdict("Badly strained knee in early March")["memories"] == [2]  # 3 of 5
    low = verdict("Knee feels fine")  # 1 of 5
    assert low["memories"] == [] and "20%" in low["reason"]
    assert verdict("Enjoys reading")["memories"] == []


def test_pairwise_judge_prefers_the_more_specific_answer_unless_shown_the_references() -> None:
    variables: dict[str, object] = {
        "query": QUERY,
        "query_date": "2024-04-10",
        "persona": "age: 25-34; interested in: Sports, Buses",
        "references": [],
        "first_label": "KQT",
        "first_response": "Bring water and arrive early.",
        "second_label": "MZB",
        "second_response": f"Because you {BUS['info'].lower()}, pick a league near a streetcar line.",
    }
    assert ask("judge_pairwise", variables)["choice"] == "MZB"
    variables["references"] = [KNEE["info"]]
    variables["first_response"] = f"Since you {KNEE['info'].lower()}, start slowly."
    assert ask("judge_pairwise", variables)["choice"] == "KQT"
    variables["first_response"] = variables["second_response"]
    assert ask("judge_pairwise", variables)["choice"] == "tie"


def test_tree_refinement_makes_room_and_settles() -> None:
    """Probes asked from every side without a fact make room for unasked needs; the tree then stops changing."""
    nodes = ask("pgr_tot_initial", BASE, 0)["nodes"]
    seen_needs: set[str] = set()
    history = []
    for _ in range(8):
        nodes = ask("pgr_tot_refine", {**BASE, "previous_steps": nodes, "facts": [KNEE]})["nodes"]
        parse_tree(TreePlan.model_validate({"nodes": nodes}).nodes, repair=False)
        assert len(nodes) <= MAX_TREE_NODES
        root = next(n for n in nodes if n["parent"] is None)
        assert " | checked: " in root["constraints"]
        seen_needs |= {n.strip() for n in root["constraints"].split(" | checked: ")[1].split(",")}
        history.append(json.dumps(nodes))
    assert history[-1] == history[-2]  # settled
    assert {
        "health",
        "comfort",
        "vouchers",
        "budget",
        "schedule",
        "transport",
    } <= seen_needs  # every need got asked
