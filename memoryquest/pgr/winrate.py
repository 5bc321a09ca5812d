"""Pairwise answer comparison from the user's point of view, in both orders.

Position bias is real in model judges, so every pair is judged twice with the
answers swapped; a win counts 1, a tie 0.5, a loss 0, and the two scores are
averaged. The win rate of A over B is the mean of that score over queries. The
judge sees each response under an opaque label, never "first" or a method's name.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from statistics import fmean
from typing import Literal

from pydantic import BaseModel, Field

from memoryquest.contracts import Query
from memoryquest.llm.client import ModelClient
from memoryquest.memory.snapshot import MemoryItem
from memoryquest.pgr.judges import JudgeOutputError
from memoryquest.pgr.winrate_contracts import TIE, PairwiseInputs, PairwiseVerdict

Side = Literal["a", "b", "tie"]


class PairwiseOutcome(BaseModel):
    query_id: str
    a_first: Side = Field(description="Winner when answer A was shown first.")
    b_first: Side = Field(description="Winner when answer B was shown first.")
    score_a: float = Field(
        ge=0.0, le=1.0, description="Mean of both orders: win 1, tie 0.5, loss 0."
    )
    llm_calls: int = 2


def opaque_labels(query_id: str) -> tuple[str, str]:
    """Two labels for a query's responses that say nothing of order or method (fixed per query)."""
    digest = hashlib.sha256(query_id.encode()).digest()
    letters = "BCDFGHJKLMNPQRSTVWXZ"
    first = "".join(letters[b % len(letters)] for b in digest[:3])
    second = "".join(letters[b % len(letters)] for b in digest[3:6])
    return (first, second) if first != second else (first, second + "Y")


def _side(verdict: PairwiseVerdict, label_a: str, label_b: str, query_id: str) -> Side:
    choice = verdict.choice.strip().strip('"').strip()
    if choice.lower() == TIE:
        return "tie"
    if choice == label_a:
        return "a"
    if choice == label_b:
        return "b"
    raise JudgeOutputError(
        f"judge_pairwise for query {query_id}: choice {verdict.choice!r} is neither "
        f"{label_a!r}, {label_b!r} nor 'tie'"
    )


def _points(side: Side) -> float:
    return {"a": 1.0, "tie": 0.5, "b": 0.0}[side]


async def pairwise_winrate(
    query: Query,
    answer_a: str,
    answer_b: str,
    user_facts: Sequence[MemoryItem],
    client: ModelClient,
    *,
    include_references: bool = True,
) -> PairwiseOutcome:
    """Judge A against B twice (A first, then B first) and average the two verdicts."""
    base = {
        "query": query.text,
        "query_date": query.query_date.isoformat(),
        "user_facts": [{"date": item.date.isoformat(), "info": item.info} for item in user_facts],
        "references": [r.text for r in query.references] if include_references else [],
    }
    label_a, label_b = opaque_labels(query.query_id)
    shown = ((label_a, answer_a), (label_b, answer_b))
    requests = [
        PairwiseInputs(
            **base,
            first_label=first[0],
            first_response=first[1],
            second_label=second[0],
            second_response=second[1],
        ).request()
        for first, second in (shown, shown[::-1])
    ]
    a_first, b_first = await client.complete_all(requests)
    side_a_first = _side(a_first, label_a, label_b, query.query_id)
    side_b_first = _side(b_first, label_a, label_b, query.query_id)
    return PairwiseOutcome(
        query_id=query.query_id,
        a_first=side_a_first,
        b_first=side_b_first,
        score_a=(_points(side_a_first) + _points(side_b_first)) / 2,
    )


def win_rate(outcomes: Sequence[PairwiseOutcome]) -> float:
    """Mean score of A over the queries (0..1)."""
    if not outcomes:
        raise ValueError("win_rate needs at least one pairwise outcome")
    return fmean(o.score_a for o in outcomes)
