"""The needs model and the life-update bank behind simulated references, relevance and prospection.

:mod:`.model` (plan steps and need categories), :mod:`.world` (the persona as the bank
sees it), :mod:`.updates` (the bank), :mod:`.bank` (an update made concrete and read
back, distractors) and :mod:`.sayings` (an update said in the first person).
"""

# ruff: noqa: F401  (the package names what its modules define)
from __future__ import annotations

from memoryquest.simulator.needs.bank import (
    BOUNDED_WINDOW_DAYS,
    REFERENCE_LEAD_DAYS_MIN,
    TIME_SLOTS,
    LifeUpdate,
    bridge_to_request,
    candidates,
    distractor_update,
    fill,
    groups_of,
    parse_update,
    with_domain,
)
from memoryquest.simulator.needs.model import (
    PlanStep,
    breadth,
    classify_need,
    cue_words,
    domain_needs,
    domain_plans,
    infer_domains,
    need_categories,
    need_scores,
    needs_of_request,
    request_needs,
    step_for,
)
from memoryquest.simulator.needs.sayings import say_update
from memoryquest.simulator.needs.updates import Generator, generators
from memoryquest.simulator.needs.world import World
