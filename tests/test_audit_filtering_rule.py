"""When a reference item stands out: the filter's rule on out-of-fold scores with known answers."""

from __future__ import annotations

import numpy as np
import pytest

from memoryquest.audit.detectability import OutOfFold
from memoryquest.audit.filtering import (
    cauchy_combination,
    fdr_cutoff,
    mean_rank_p_value,
    standing_out,
)
from memoryquest.audit.run import ScoredMaterial


def material(
    folds: list[tuple[list[float], list[tuple[float, str]]]],
) -> ScoredMaterial:
    """Per fold: the other items' scores, and (score, reference id) of the reference items."""
    scores: list[float] = []
    labels: list[bool] = []
    fold_of: list[int] = []
    references: list[tuple[str, ...]] = []
    for number, (others, items) in enumerate(folds):
        for score in others:
            scores.append(score)
            labels.append(False)
            fold_of.append(number)
            references.append(())
        for score, reference in items:
            scores.append(score)
            labels.append(True)
            fold_of.append(number)
            references.append((reference,))
    rows = np.arange(len(scores))
    out_of_fold = OutOfFold(rows, np.array(labels), np.array(fold_of), np.array(scores))
    return ScoredMaterial("user_turns", out_of_fold, references)


OTHERS = [float(i) for i in range(1000)]  # the other items of a fold score 0..999


def test_an_item_above_every_other_item_of_its_fold_stands_out_alone() -> None:
    scored = material([(OTHERS, [(1500.0, "r1"), (500.0, "r2")])])
    owners = {"r1": "q1", "r2": "q2"}
    found = standing_out(scored, 0.05, owners)
    assert [i.reference_id for i in found] == ["r1"]
    assert found[0].p_value == pytest.approx(1 / 1001) == found[0].query_p_value
    assert found[0].query_p_value <= found[0].cutoff


def test_each_fold_is_its_own_yardstick() -> None:
    # 1500 stands out among items scoring 0..999, not among items scoring 10000..10999
    scored = material(
        [(OTHERS, [(1500.0, "r1")]), ([10000.0 + s for s in OTHERS], [(1500.0, "r2")])]
    )
    found = standing_out(scored, 0.05, {"r1": "q1", "r2": "q2"})
    assert [i.reference_id for i in found] == ["r1"]


def test_a_query_whose_items_are_all_high_stands_out() -> None:
    # four references each at rank 0.955: none stands out alone, together they do
    together = [(955.5, f"a{i}") for i in range(4)]
    middling = [(605.5, f"b{i}") for i in range(4)]
    scored = material([(OTHERS, together + middling)])
    owners = {**{f"a{i}": "qa" for i in range(4)}, **{f"b{i}": "qb" for i in range(4)}}
    found = standing_out(scored, 0.05, owners)
    assert sorted(i.reference_id for i in found) == ["a0", "a1", "a2", "a3"]
    assert all(i.query_p_value < i.p_value for i in found)
    # one high item among middling ones of the same query does not carry them
    mixed = material([(OTHERS, [(955.5, "c0"), (405.5, "c1"), (505.5, "c2"), (455.5, "c3")])])
    assert standing_out(mixed, 0.05, {f"c{i}": "qc" for i in range(4)}) == []


def test_without_a_tell_next_to_nothing_stands_out() -> None:
    """Reference items scored like the others: a fixed 99th percentile would flag about 1% of
    them, the false-discovery control flags none in nearly every draw."""
    rng = np.random.default_rng(0)
    flagged = []
    for _ in range(40):
        others = list(rng.normal(size=900))
        items = [(float(v), f"r{i}") for i, v in enumerate(rng.normal(size=90))]
        owners = {f"r{i}": f"q{i // 3}" for i in range(90)}
        flagged.append(len(standing_out(material([(others, items)]), 0.05, owners)))
    assert sum(1 for n in flagged if n) <= 4  # at most ~5% of clean draws flag anything


def test_a_tell_in_a_third_of_the_queries_is_found() -> None:
    rng = np.random.default_rng(1)
    others = list(rng.normal(size=900))
    items = [
        (float(v) + (3.0 if i < 30 else 0.0), f"r{i}") for i, v in enumerate(rng.normal(size=90))
    ]
    owners = {f"r{i}": f"q{i // 3}" for i in range(90)}
    found = {i.reference_id for i in standing_out(material([(others, items)]), 0.05, owners)}
    planted = {f"r{i}" for i in range(30)}
    assert len(found & planted) >= 24 and len(found - planted) <= 3


def test_the_benjamini_hochberg_cutoff() -> None:
    assert fdr_cutoff([0.001, 0.01, 0.03, 0.5], 0.05) == 0.03  # 0.03 <= 3/4 * 0.05
    assert fdr_cutoff([0.2, 0.5], 0.05) is None
    assert fdr_cutoff([0.02, 0.04], 0.05) == 0.04
    assert fdr_cutoff([0.025, 0.5], 0.05) == 0.025  # at k / m * rate exactly: rejected
    assert fdr_cutoff([0.04, 0.5], 0.05) is None  # the smallest is held to 1 / m * rate


def test_the_cauchy_combination_lets_one_strong_signal_through() -> None:
    assert cauchy_combination([0.3]) == pytest.approx(0.3)
    assert cauchy_combination([0.001, 0.5, 0.5]) < 0.005
    # a p-value of 1 does not cancel the others (capped), and it holds under the null
    assert cauchy_combination([0.001, 1.0, 1.0]) < 0.01
    draws = np.random.default_rng(0).uniform(size=(20_000, 3))
    combined = np.array([cauchy_combination(row) for row in draws])
    assert float(np.mean(combined <= 0.05)) <= 0.05 + 3 * np.sqrt(0.05 * 0.95 / len(draws))


def test_the_p_value_of_a_mean_rank_narrows_with_more_items() -> None:
    assert mean_rank_p_value([0.5, 0.5]) == pytest.approx(0.5)
    assert (
        mean_rank_p_value([0.9] * 9) < mean_rank_p_value([0.9] * 4) < mean_rank_p_value([0.9] * 2)
    )
    # and it holds: the mean rank of four items drawn from the rest is that high that often
    draws = np.random.default_rng(0).uniform(size=(200_000, 4)).mean(axis=1)
    limit = 0.75  # measured: 0.0422 drawn, 0.0416 approximated (0.0357 with a 1/13 variance)
    assert float(np.mean(draws >= limit)) == pytest.approx(
        mean_rank_p_value([limit] * 4), abs=0.002
    )


def test_items_not_scored_in_any_fold_are_left_alone() -> None:
    scored = material([(OTHERS, [(1500.0, "r1")])])
    oof = scored.out_of_fold
    unscored = OutOfFold(oof.rows, oof.labels, np.full(len(oof.rows), -1), oof.scores)
    assert standing_out(ScoredMaterial("facts", unscored, scored.references), 0.05, {}) == []
