"""When a reference item stands out: the filter's rule on out-of-fold scores with known answers."""

from __future__ import annotations

import numpy as np
import pytest

from memoryquest.audit.detectability import OutOfFold
from memoryquest.audit.filtering import mean_rank_limit, standing_out
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


OTHERS = [float(i) for i in range(100)]  # the other items of a fold score 0..99


def test_an_item_above_the_percentile_of_its_fold_stands_out_alone() -> None:
    scored = material([(OTHERS, [(150.0, "r1"), (50.0, "r2")])])
    owners = {"r1": "q1", "r2": "q2"}
    found = standing_out(scored, 99, owners)
    assert [(i.reference_id, i.score) for i in found] == [("r1", 150.0)]
    assert found[0].threshold == pytest.approx(np.percentile(OTHERS, 99))
    assert standing_out(scored, 100, owners)[0].reference_id == "r1"  # above every other item


def test_each_fold_is_its_own_yardstick() -> None:
    # 150 stands out among items scoring 0..99, not among items scoring 1000..1099
    scored = material([(OTHERS, [(150.0, "r1")]), ([1000.0 + s for s in OTHERS], [(150.0, "r2")])])
    found = standing_out(scored, 99, {"r1": "q1", "r2": "q2"})
    assert [i.reference_id for i in found] == ["r1"]


def test_a_query_whose_items_are_all_high_stands_out_together() -> None:
    # four references each at rank 0.955: none above the 99th percentile alone, together well above
    together = [(95.5, f"a{i}") for i in range(4)]
    middling = [(60.5, f"b{i}") for i in range(4)]
    scored = material([(OTHERS, together + middling)])
    owners = {**{f"a{i}": "qa" for i in range(4)}, **{f"b{i}": "qb" for i in range(4)}}
    found = standing_out(scored, 99, owners)
    assert sorted(i.reference_id for i in found) == ["a0", "a1", "a2", "a3"]
    # one high item among middling ones of the same query does not carry them
    mixed = material([(OTHERS, [(95.5, "c0"), (40.5, "c1"), (50.5, "c2"), (45.5, "c3")])])
    assert standing_out(mixed, 99, {f"c{i}": "qc" for i in range(4)}) == []


def test_the_limit_on_a_mean_rank_narrows_with_more_items() -> None:
    assert mean_rank_limit(1, 99) == pytest.approx(0.99)
    assert mean_rank_limit(4, 99) == pytest.approx(0.5 + 2.3263 * (1 / 48) ** 0.5, abs=1e-3)
    assert 0.5 < mean_rank_limit(9, 99) < mean_rank_limit(4, 99) < mean_rank_limit(2, 99)
    # and it holds: the mean rank of four items drawn from the rest exceeds it about 1% of the time
    draws = np.random.default_rng(0).uniform(size=(200_000, 4)).mean(axis=1)
    assert float(np.mean(draws > mean_rank_limit(4, 99))) == pytest.approx(0.01, abs=0.003)


def test_items_not_scored_in_any_fold_are_left_alone() -> None:
    scored = material([(OTHERS, [(150.0, "r1")])])
    oof = scored.out_of_fold
    unscored = OutOfFold(oof.rows, oof.labels, np.full(len(oof.rows), -1), oof.scores)
    assert standing_out(ScoredMaterial("facts", unscored, scored.references), 99, {}) == []
