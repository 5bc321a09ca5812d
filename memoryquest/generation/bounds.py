"""A count held to a setting's bounds (references per query, events per timeline, turns per
session): checked and worded once, for the stages that refuse a candidate and for the
dataset's invariants (:mod:`memoryquest.invariants`) alike."""

from __future__ import annotations


def count_problem(n: int, bounds: tuple[int, int], what: str) -> str | None:
    """``"3 turns; need 5-30"`` when ``n`` (of ``what``) lies outside ``bounds``, both ends
    included; None when it lies within."""
    low, high = bounds
    return None if low <= n <= high else f"{n} {what}; need {low}-{high}"


__all__ = ["count_problem"]
