from __future__ import annotations

from memoryquest.ids import make_id
from memoryquest.publish.splits import SPLITS, assign_splits, split_sizes
from memoryquest.settings import PublishSettings


def test_sizes_follow_ratios_with_every_split_populated() -> None:
    settings = PublishSettings()
    assert split_sizes(0, settings) == {"train": 0, "validation": 0, "test": 0}
    assert split_sizes(1, settings) == {"train": 1, "validation": 0, "test": 0}
    assert split_sizes(2, settings) == {"train": 1, "validation": 1, "test": 0}
    assert split_sizes(3, settings) == {"train": 1, "validation": 1, "test": 1}
    assert split_sizes(6, settings) == {"train": 4, "validation": 1, "test": 1}
    assert split_sizes(30, settings) == {"train": 24, "validation": 3, "test": 3}
    assert split_sizes(1500, settings) == {"train": 1200, "validation": 150, "test": 150}
    for users in range(0, 60):
        assert sum(split_sizes(users, settings).values()) == users


def test_zero_ratio_split_stays_empty() -> None:
    settings = PublishSettings(train=0.5, validation=0.5, test=0.0)
    assert split_sizes(7, settings) == {"train": 4, "validation": 3, "test": 0}


def test_assignment_is_deterministic_and_order_independent() -> None:
    ids = [make_id("persona", "personalens", f"user{n}") for n in range(20)]
    settings = PublishSettings(split_seed=13)
    first = assign_splits(ids, settings)
    assert first == assign_splits(list(reversed(ids)), settings)
    assert set(first) == set(ids)
    assert sorted(first.values()) == sorted(["train"] * 16 + ["validation"] * 2 + ["test"] * 2)
    other_seed = assign_splits(ids, PublishSettings(split_seed=14))
    assert other_seed != first  # the seed matters
    assert set(first.values()) <= set(SPLITS)
