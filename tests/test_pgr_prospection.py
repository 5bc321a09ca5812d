"""Chains and trees from the model: parsing, validation, repairs and clear errors."""

from __future__ import annotations

import pytest

from memoryquest.contracts import ProspectionStep
from memoryquest.pgr.prospection import (
    ProspectionTreeError,
    chain_steps,
    parse_tree,
    probe_text,
    steps_view,
)
from memoryquest.pgr.prospection_contracts import (
    ChainPlan,
    PlannedStep,
    TreeNode,
)


def node(node_id: str, parent: str | None, children: list[str], action: str = "") -> TreeNode:
    return TreeNode(
        id=node_id,
        action=action or f"step {node_id}",
        constraints=f"limits of {node_id}",
        parent=parent,
        children=children,
    )


VALID = [
    node("A1", None, ["A2", "A3"]),
    node("A2", "A1", ["A4"]),
    node("A3", "A1", []),
    node("A4", "A2", []),
]


def test_chain_steps_link_each_step_to_the_previous_one() -> None:
    plan = ChainPlan(
        steps=[
            PlannedStep(action="Which evenings are free", constraints="work meetings"),
            PlannedStep(action="How to get to the pitch", constraints="no car"),
            PlannedStep(action="Whether the knee holds up", constraints="physiotherapy"),
        ]
    )
    steps = chain_steps(plan)
    assert [s.step_id for s in steps] == ["S1", "S2", "S3"]
    assert [s.parent for s in steps] == [None, "S1", "S2"]
    assert [s.children for s in steps] == [["S2"], ["S3"], []]
    assert probe_text(steps[1]) == "How to get to the pitch — no car"


def test_empty_chain_is_rejected_by_the_response_model() -> None:
    with pytest.raises(ValueError, match="at least 1"):
        ChainPlan(steps=[])


def test_valid_tree_parses_strictly_without_repairs() -> None:
    parsed = parse_tree(VALID, repair=False)
    assert parsed.root == "A1" and parsed.repairs == []
    assert {s.step_id: s.parent for s in parsed.steps} == {
        "A1": None,
        "A2": "A1",
        "A3": "A1",
        "A4": "A2",
    }
    assert {s.step_id: s.children for s in parsed.steps}["A1"] == ["A2", "A3"]


@pytest.mark.parametrize("repair", [True, False])
def test_duplicate_ids_are_rejected(repair: bool) -> None:
    nodes = [*VALID, node("A3", "A2", [])]
    with pytest.raises(ProspectionTreeError, match="node id 'A3' is used by nodes 3 and 5"):
        parse_tree(nodes, repair=repair)


@pytest.mark.parametrize("repair", [True, False])
def test_cycles_are_rejected_naming_the_loop(repair: bool) -> None:
    nodes = [
        node("A1", None, ["A2"]),
        node("A2", "A4", ["A3"]),
        node("A3", "A2", ["A4"]),
        node("A4", "A3", ["A2"]),
    ]
    with pytest.raises(ProspectionTreeError, match=r"cycle: A2 -> A4 -> A3 -> A2"):
        parse_tree(nodes, repair=repair)


def test_self_parent_is_rejected() -> None:
    with pytest.raises(ProspectionTreeError, match="'A2' is its own parent"):
        parse_tree([node("A1", None, ["A2"]), node("A2", "A2", [])])


def test_missing_parent_is_repaired_by_attaching_to_the_root() -> None:
    nodes = [node("A1", None, ["A2"]), node("A2", "A1", []), node("A3", "A9", [])]
    with pytest.raises(ProspectionTreeError, match="parent 'A9', which does not exist"):
        parse_tree(nodes, repair=False)
    parsed = parse_tree(nodes)
    assert {s.step_id: s.parent for s in parsed.steps}["A3"] == "A1"
    assert {s.step_id: s.children for s in parsed.steps}["A1"] == ["A2", "A3"]
    assert any("attached it to root 'A1'" in r for r in parsed.repairs)


def test_several_roots_are_joined_under_the_first() -> None:
    nodes = [
        node("A1", None, ["A2"]),
        node("A2", "A1", []),
        node("B1", None, ["B2"]),
        node("B2", "B1", []),
    ]
    with pytest.raises(ProspectionTreeError, match="2 roots"):
        parse_tree(nodes, repair=False)
    parsed = parse_tree(nodes)
    assert parsed.root == "A1"
    assert {s.step_id: s.parent for s in parsed.steps}["B1"] == "A1"
    assert sum(s.parent is None for s in parsed.steps) == 1


def test_children_lists_are_rebuilt_from_parent_links() -> None:
    nodes = [node("A1", None, ["A2", "A7"]), node("A2", "A1", []), node("A3", "A1", [])]
    with pytest.raises(ProspectionTreeError, match=r"node 'A1' lists children \['A2', 'A7'\]"):
        parse_tree(nodes, repair=False)
    parsed = parse_tree(nodes)
    assert {s.step_id: s.children for s in parsed.steps}["A1"] == ["A2", "A3"]
    assert len(parsed.repairs) == 1


def test_no_root_at_all_makes_the_orphan_the_root() -> None:
    nodes = [node("A2", "A0", ["A3"]), node("A3", "A2", [])]
    parsed = parse_tree(nodes)
    assert parsed.root == "A2"
    assert [s.parent for s in parsed.steps] == [None, "A2"]


def test_blank_id_gets_a_name() -> None:
    parsed = parse_tree([node("A1", None, ["N2"]), node(" ", "A1", [])])
    assert [s.step_id for s in parsed.steps] == ["A1", "N2"]
    assert parsed.repairs and "has no id" in parsed.repairs[0]


def test_empty_tree_is_an_error() -> None:
    with pytest.raises(ProspectionTreeError, match="no nodes"):
        parse_tree([])


def test_steps_view_hides_retrieval_bookkeeping() -> None:
    step = ProspectionStep(
        step_id="A1", action="a", constraints="c", retrieved_fids=["f_0123456789abcdef"]
    )
    assert steps_view([step], "chain") == [{"action": "a", "constraints": "c"}]
    assert steps_view([step], "tree") == [
        {"id": "A1", "action": "a", "constraints": "c", "parent": None, "children": []}
    ]
