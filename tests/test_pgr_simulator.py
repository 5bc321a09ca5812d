"""The simulator's PGR answers: grounded in the request variables only, deterministic, well-formed."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest

from memoryquest.contracts import RetrievalMethod
from memoryquest.dataset import GeneratedDataset
from memoryquest.llm.client import ModelClient
from memoryquest.llm.factory import shared_local_embedder
from memoryquest.llm.simulated import SimulatedChatBackend
from memoryquest.pgr.prospection import ChainPlan, TreeNode, TreePlan, parse_tree
from memoryquest.pgr.retrieval import IndexCache
from memoryquest.pgr.runner import run_query
from memoryquest.pgr.sample import sample_dataset
from memoryquest.settings import PGRSettings
from memoryquest.simulator import simulate
from memoryquest.simulator.pgr import JUDGE_OVERLAP, KNOWN

QUERY = "Can you help me plan joining a recreational soccer league in Toronto this spring?"
BASE = {"query": QUERY, "query_date": "2024-04-10", "augmented_query": QUERY}
KNEE: dict[str, Any] = {
    "fid": "f_00000000000000a1",
    "date": "2024-03-04",
    "type": "Event",
    "info": "Strained left knee while running in early March; sees a physiotherapist every week",
    "related_entities": ["knee", "physiotherapist", "running"],
}
BUS: dict[str, Any] = {
    "fid": "f_00000000000000a2",
    "date": "2024-03-28",
    "type": "Event",
    "info": "Sold car in March and now takes the bus or streetcar around Toronto",
    "related_entities": ["bus", "streetcar", "Toronto"],
}
THINKING_VERBS = ("imagine", "anticipate", "think", "plan", "decide", "evaluate", "review", "verify", "consider")


def ask(template: str, variables: dict[str, Any], seed: int = 0) -> Any:
    return json.loads(simulate(template, variables, seed=seed))


@pytest.fixture(scope="module")
def sample() -> GeneratedDataset:
    client = ModelClient(SimulatedChatBackend(), shared_local_embedder())
    return asyncio.run(sample_dataset(client, background=40))


async def test_prospection_never_sees_the_required_references(sample: GeneratedDataset) -> None:
    client = ModelClient(SimulatedChatBackend(), shared_local_embedder())
    query = sample.queries[0]
    rewritten = query.model_copy(
        update={"references": [r.model_copy(update={"text": f"unrelated statement {i}"}) for i, r in enumerate(query.references)]}
    )
    settings = PGRSettings(max_iterations=2)
    cache = IndexCache()
    original = await run_query(query, sample.facts, RetrievalMethod.PGR_TOT, client, settings, index_cache=cache)
    changed = await run_query(rewritten, sample.facts, RetrievalMethod.PGR_TOT, client, settings, index_cache=cache)
    assert changed.model_dump() == original.model_dump()


def test_answers_are_deterministic_for_a_seed() -> None:
    assert simulate("pgr_tot_initial", BASE, seed=3) == simulate("pgr_tot_initial", BASE, seed=3)
    trees = {simulate("pgr_tot_initial", BASE, seed=s) for s in range(8)}
    assert len(trees) > 1  # the rng does shape the tree


@pytest.mark.parametrize("seed", range(6))
def test_initial_chain_covers_distinct_concrete_dimensions(seed: int) -> None:
    plan = ChainPlan.model_validate(ask("pgr_cot_initial", BASE, seed))
    assert 5 <= len(plan.steps) <= 7
    actions = [s.action for s in plan.steps]
    assert len(set(actions)) == len(actions)
    assert not any(a.lower().startswith(tuple(THINKING_VERBS)) for a in actions)
    assert all("recreational soccer league" in a or "Toronto" in a for a in actions)
    assert any("Toronto" in s.constraints or "spring" in s.constraints for s in plan.steps)
    # Physical effort is the obvious aspect of joining a sports league.
    assert any("injury" in a for a in actions)


@pytest.mark.parametrize("seed", range(6))
def test_initial_tree_is_a_real_tree(seed: int) -> None:
    plan = TreePlan.model_validate(ask("pgr_tot_initial", BASE, seed))
    parsed = parse_tree(plan.nodes, repair=False)
    children = {s.step_id: s.children for s in parsed.steps}
    branches = children[parsed.root]
    assert 2 <= len(branches) <= 3
    assert all(1 <= len(children[b]) <= 2 for b in branches)
    assert len(parsed.steps) == 1 + len(branches) + sum(len(children[b]) for b in branches)


def test_refinement_folds_in_facts_and_opens_the_dimensions_they_imply() -> None:
    initial = ask("pgr_cot_initial", BASE, 1)["steps"]
    refined = ask("pgr_cot_refine", {**BASE, "previous_steps": initial, "facts": [KNEE, BUS]})["steps"]
    added = refined[len(initial) :]
    knee_step = next(s for s in added if "knee" in s["action"])
    assert "lower-impact" in knee_step["action"]
    assert "physiotherapist" in knee_step["constraints"]
    assert any("bus" in s["action"] for s in added)
    # Existing steps keep their action and gain the facts of their own aspect.
    for before, after in zip(initial, refined[: len(initial)], strict=True):
        assert after["action"] == before["action"]
        assert after["constraints"].startswith(before["constraints"])
    health = next(s for s in refined[: len(initial)] if "injury" in s["action"])
    assert f"{KNOWN}knee (2024-03-04)" in health["constraints"]
    # A second round with no new facts adds nothing more.
    again = ask("pgr_cot_refine", {**BASE, "previous_steps": refined, "facts": [KNEE, BUS]})["steps"]
    assert len(again) == len(refined)


def test_tree_refinement_keeps_a_valid_tree_and_hangs_new_nodes_under_their_branch() -> None:
    initial = ask("pgr_tot_initial", BASE, 0)["nodes"]
    refined = TreePlan.model_validate(ask("pgr_tot_refine", {**BASE, "previous_steps": initial, "facts": [KNEE, BUS]}))
    parsed = parse_tree(refined.nodes, repair=False)
    by_id = {s.step_id: s for s in parsed.steps}
    new = [s for s in parsed.steps if s.step_id not in {n["id"] for n in initial}]
    assert len(new) == 2
    knee = next(s for s in new if "knee" in s.action)
    assert "lower-impact" in knee.action
    assert any("bus" in s.action for s in new)
    for step in new:
        # Under the branch of the same theme when the tree has one, else under the root.
        assert step.parent is not None
        assert step.parent == parsed.root or by_id[step.parent].parent == parsed.root
    wellbeing_branch = [b for b in by_id[parsed.root].children if "injury" in by_id[b].action]
    if wellbeing_branch:
        assert knee.parent == wellbeing_branch[0]
    # Round-trip the refined tree again: ids stay unique and children consistent.
    nodes = [TreeNode(id=s.step_id, action=s.action, constraints=s.constraints, parent=s.parent, children=s.children) for s in parsed.steps]
    parse_tree(nodes, repair=False)


def test_augmentation_adds_the_context_entities() -> None:
    answer = ask("pgr_augment", {"query": QUERY, "query_date": "2024-04-10", "context_facts": [BUS, KNEE]})
    text = answer["augmented_query"]
    assert text.startswith(QUERY) and "streetcar" in text and "knee" in text
    bare = ask("pgr_augment", {"query": QUERY, "query_date": "2024-04-10", "context_facts": []})
    assert bare["augmented_query"] == f"{QUERY} (asked on 2024-04-10)"


def test_summary_and_answer_cite_the_facts() -> None:
    steps = ask("pgr_cot_refine", {**BASE, "previous_steps": ask("pgr_cot_initial", BASE)["steps"], "facts": [KNEE, BUS]})["steps"]
    summary = ask("pgr_summary", {**BASE, "steps": steps, "facts": [KNEE, BUS]})["summary"]
    assert "Strained left knee" in summary and "2024-03-28" in summary
    reply = ask("pgr_answer", {"query": QUERY, "query_date": "2024-04-10", "facts": [KNEE, BUS], "summary": summary})
    assert "Sold car in March" in reply["answer"] and "(noted 2024-03-04)" in reply["answer"]


def test_reference_judge_overlap_rule() -> None:
    assert JUDGE_OVERLAP == 0.4
    # Stems of the reference: strain, left, kne, march, physiotherapist (five).
    reference = "Strained the left knee in March, with a physiotherapist"
    variables: dict[str, Any] = {
        "query": QUERY,
        "query_date": "2024-04-10",
        "references": [{"number": 1, "date": "2024-03-04", "text": reference}],
        "retrieved": [],
    }

    def verdict(info: str) -> dict[str, Any]:
        variables["retrieved"] = [{"date": "2024-03-05", "info": "Enjoys science fiction"}, {"date": "2024-03-05", "info": info}]
        return ask("judge_references", variables)["verdicts"][0]

    assert verdict("Knee strained badly")["found"] is True  # 2 of 5 = 40%
    assert verdict("Badly strained knee in early March")["found"] is True  # 3 of 5, 'strained' ~ 'strain'
    low = verdict("Knee feels fine")  # 1 of 5
    assert low["found"] is False and "20%" in low["reason"]
    assert verdict("Enjoys reading")["found"] is False


def test_pairwise_judge_prefers_more_cited_facts() -> None:
    variables = {
        "query": QUERY,
        "query_date": "2024-04-10",
        "user_facts": [{"date": KNEE["date"], "info": KNEE["info"]}, {"date": BUS["date"], "info": BUS["info"]}],
        "references": [],
        "first_response": "Bring water and arrive early.",
        "second_response": f"Because you {BUS['info'].lower()}, pick a league near a streetcar line.",
    }
    assert ask("judge_pairwise", variables)["choice"] == "second"
    variables["first_response"] = variables["second_response"]
    assert ask("judge_pairwise", variables)["choice"] == "tie"
