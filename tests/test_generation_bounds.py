"""The count rule the stages refuse by and the invariants check: bounds included, one wording."""

from __future__ import annotations

from memoryquest.generation.bounds import count_problem
from memoryquest.settings import GenerationSettings


def test_both_bounds_are_within() -> None:
    settings = GenerationSettings()
    bounds = (settings.turns_min, settings.turns_max)
    assert count_problem(settings.turns_min, bounds, "turns") is None
    assert count_problem(settings.turns_max, bounds, "turns") is None


def test_a_count_outside_names_itself_and_the_bounds() -> None:
    assert count_problem(4, (5, 30), "turns") == "4 turns; need 5-30"
    assert count_problem(31, (5, 30), "turns") == "31 turns; need 5-30"
    assert count_problem(0, (1, 4), "references") == "0 references; need 1-4"
