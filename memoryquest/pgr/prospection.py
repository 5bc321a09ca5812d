"""Prospection plans: what the model answers, and how a plan becomes retrieval probes.

A chain (CoT) is an ordered list of steps; a tree (ToT) is a list of nodes
linked by ``parent``/``children``. Trees from a model are often slightly
inconsistent, so :func:`parse_tree` repairs what has one obvious fix (a
missing parent, several roots, children lists that disagree with the parent
links) and rejects what has none (duplicate ids, cycles), always saying which
node is at fault.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from memoryquest.contracts import ProspectionStep
from memoryquest.memory.snapshot import MemoryItem
from memoryquest.pgr.prospection_contracts import (
    ChainPlan,
    TreeNode,
    TreePlan,
)

# --------------------------------------------------------------------------- model answers


PlanShape = Literal["chain", "tree"]

# --------------------------------------------------------------------------- parsing


class ProspectionTreeError(ValueError):
    """A prospection tree that cannot be repaired without guessing."""


@dataclass(frozen=True)
class ParsedTree:
    steps: list[ProspectionStep]
    root: str
    repairs: list[str] = field(default_factory=list)


def chain_steps(plan: ChainPlan) -> list[ProspectionStep]:
    """Steps S1..Sn, each the child of the one before."""
    ids = [f"S{i}" for i in range(1, len(plan.steps) + 1)]
    return [
        ProspectionStep(
            step_id=ids[i],
            action=step.action.strip(),
            constraints=step.constraints.strip(),
            parent=ids[i - 1] if i > 0 else None,
            children=[ids[i + 1]] if i + 1 < len(ids) else [],
        )
        for i, step in enumerate(plan.steps)
    ]


def parse_tree(nodes: Sequence[TreeNode], *, repair: bool = True) -> ParsedTree:
    """Check a tree (unique ids, parents exist, one root, no cycle, children match parents).

    With ``repair`` the fixable faults are fixed and listed in ``repairs``;
    without it every fault raises :class:`ProspectionTreeError`.
    """
    if not nodes:
        raise ProspectionTreeError("the prospection tree has no nodes")
    repairs: list[str] = []

    def fault(message: str) -> None:
        if not repair:
            raise ProspectionTreeError(message)
        repairs.append(message)

    ids: list[str] = []
    for position, node in enumerate(nodes, start=1):
        node_id = node.id.strip()
        if not node_id:
            node_id = _fresh_id(position, ids, [n.id.strip() for n in nodes])
            fault(f"node {position} has no id; named it {node_id!r}")
        ids.append(node_id)
    seen: dict[str, int] = {}
    for position, node_id in enumerate(ids, start=1):
        if node_id in seen:
            raise ProspectionTreeError(
                f"node id {node_id!r} is used by nodes {seen[node_id]} and {position}"
            )
        seen[node_id] = position

    known = set(ids)
    parents: dict[str, str | None] = {}
    missing: list[str] = []
    for node_id, node in zip(ids, nodes, strict=True):
        parent = (node.parent or "").strip() or None
        if parent == node_id:
            raise ProspectionTreeError(f"node {node_id!r} is its own parent")
        if parent is not None and parent not in known:
            missing.append(node_id)
            parent = None
        parents[node_id] = parent
    _reject_cycles(ids, parents)

    original_roots = [
        node_id for node_id in ids if parents[node_id] is None and node_id not in missing
    ]
    root = original_roots[0] if original_roots else missing[0]
    for node_id in missing:
        if node_id == root:
            fault(
                f"node {node_id!r} names a parent that does not exist and no node is a root; made it the root"
            )
            continue
        given = (nodes[seen[node_id] - 1].parent or "").strip()
        fault(
            f"node {node_id!r} names parent {given!r}, which does not exist; attached it to root {root!r}"
        )
        parents[node_id] = root
    if len(original_roots) > 1:
        extra = original_roots[1:]
        fault(
            f"the tree has {len(original_roots)} roots ({', '.join(original_roots)}); "
            f"attached {', '.join(extra)} under {root!r}"
        )
        for node_id in extra:
            parents[node_id] = root

    children: dict[str, list[str]] = {node_id: [] for node_id in ids}
    for node_id in ids:
        parent = parents[node_id]
        if parent is not None:
            children[parent].append(node_id)
    for node_id, node in zip(ids, nodes, strict=True):
        listed = [c.strip() for c in node.children]
        if sorted(listed) != sorted(children[node_id]):
            fault(
                f"node {node_id!r} lists children {listed} but the nodes naming it as parent are "
                f"{children[node_id]}; children rebuilt from the parent links"
            )

    steps = [
        ProspectionStep(
            step_id=node_id,
            action=node.action.strip(),
            constraints=node.constraints.strip(),
            parent=parents[node_id],
            children=children[node_id],
        )
        for node_id, node in zip(ids, nodes, strict=True)
    ]
    return ParsedTree(steps=steps, root=root, repairs=repairs)


def _fresh_id(position: int, taken: list[str], all_ids: list[str]) -> str:
    candidate = f"N{position}"
    while candidate in taken or candidate in all_ids:
        candidate += "'"
    return candidate


def _reject_cycles(ids: list[str], parents: dict[str, str | None]) -> None:
    settled: set[str] = set()
    for start in ids:
        path: list[str] = []
        on_path: set[str] = set()
        node: str | None = start
        while node is not None and node not in settled:
            if node in on_path:
                loop = path[path.index(node) :] + [node]
                raise ProspectionTreeError(f"the parent links form a cycle: {' -> '.join(loop)}")
            path.append(node)
            on_path.add(node)
            node = parents[node]
        settled.update(path)


def tree_steps(plan: TreePlan, *, repair: bool = True) -> ParsedTree:
    return parse_tree(plan.nodes, repair=repair)


# --------------------------------------------------------------------------- probes and prompt views


def probe_text(step: ProspectionStep) -> str:
    """The sub-query for one step: its action, then its constraints."""
    action = step.action.strip()
    constraints = step.constraints.strip()
    if not constraints:
        return action
    return f"{action} — {constraints}"


def steps_view(steps: Sequence[ProspectionStep], shape: PlanShape) -> list[dict[str, Any]]:
    """Steps as the prompt shows them (no retrieval bookkeeping)."""
    if shape == "chain":
        return [{"action": s.action, "constraints": s.constraints} for s in steps]
    return [
        {
            "id": s.step_id,
            "action": s.action,
            "constraints": s.constraints,
            "parent": s.parent,
            "children": s.children,
        }
        for s in steps
    ]


def facts_view(items: Sequence[MemoryItem]) -> list[dict[str, Any]]:
    """Facts as a prompt shows them: text, type, date and entities — never their provenance or id."""
    return [
        {
            "date": item.date.isoformat(),
            "type": item.type.value,
            "info": item.info,
            "related_entities": list(item.related_entities),
        }
        for item in items
    ]
