"""User-disjoint train/validation/test splits.

Every row of every table follows its persona's split, so no user's history,
queries or memory leak from train into evaluation.

How users are assigned (deterministic, independent of input order):

1. Users are ordered by ``sha256(f"{split_seed}:{persona_id}")`` (ties, which
   do not happen in practice, by the id itself).
2. Split sizes come from the ratios by the largest-remainder method: each split
   first gets ``floor(n * ratio)`` users; the users left over go one by one to
   the splits with the largest fractional parts (ties: train, validation, test).
3. A split with a positive ratio that got no user takes one from the currently
   largest split, as long as that split keeps at least one (checked in the order
   train, validation, test). So at 0.8/0.1/0.1, 6 users give 4/1/1, 3 users
   1/1/1, 2 users 1/1/0 and 1 user goes to train.
4. The ordered users are cut into train, then validation, then test.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Iterable

from memoryquest.settings import PublishSettings

SPLITS: tuple[str, ...] = ("train", "validation", "test")


def _ratios(settings: PublishSettings) -> dict[str, float]:
    return {"train": settings.train, "validation": settings.validation, "test": settings.test}


def split_sizes(users: int, settings: PublishSettings) -> dict[str, int]:
    """How many users each split gets (see the module docstring for the rounding)."""
    ratios = _ratios(settings)
    exact = {split: users * ratio for split, ratio in ratios.items()}
    sizes = {split: math.floor(value + 1e-9) for split, value in exact.items()}
    while sum(sizes.values()) > users:  # ratios may sum to 1 + 1e-6
        sizes[max(SPLITS, key=lambda s: sizes[s])] -= 1
    leftover = users - sum(sizes.values())
    by_remainder = sorted(
        SPLITS, key=lambda split: (-(exact[split] - sizes[split]), SPLITS.index(split))
    )
    for split in by_remainder[:leftover]:
        sizes[split] += 1
    for split in SPLITS:
        if ratios[split] > 0 and sizes[split] == 0:
            donor = max(SPLITS, key=lambda s: (sizes[s], -SPLITS.index(s)))
            if sizes[donor] > 1:
                sizes[donor] -= 1
                sizes[split] += 1
    return sizes


def _order_key(seed: int, persona_id: str) -> tuple[str, str]:
    return hashlib.sha256(f"{seed}:{persona_id}".encode()).hexdigest(), persona_id


def assign_splits(persona_ids: Iterable[str], settings: PublishSettings) -> dict[str, str]:
    """persona_id -> split name, for every distinct id given."""
    ordered = sorted(set(persona_ids), key=lambda pid: _order_key(settings.split_seed, pid))
    sizes = split_sizes(len(ordered), settings)
    assignment: dict[str, str] = {}
    start = 0
    for split in SPLITS:
        for persona_id in ordered[start : start + sizes[split]]:
            assignment[persona_id] = split
        start += sizes[split]
    return assignment
