"""The needs model and the life-update bank behind simulated references, relevance and prospection.

* :mod:`.model` — plan steps per domain, need categories, and reading a
  request's steps or a statement's need from its wording;
* :mod:`.world` — the persona as the bank sees it, and where slot values come from;
* :mod:`.bank` — how a generator becomes one dated, persona-grounded update,
  how a text is read back, and distractor updates;
* :mod:`.sayings` — saying an update in the first person, never verbatim;
* :mod:`.updates` — the bank (``data/updates.json``): what can change in a user's life.
"""

# ruff: noqa: F401  (the package names what its modules define)
from __future__ import annotations

from memoryquest.simulator.needs.bank import (
    BOUNDED_WINDOW_DAYS,
    REFERENCE_LEAD_DAYS_MIN,
    TIME_SLOTS,
    LifeUpdate,
    bank,
    bridge_to_request,
    candidates,
    distractor_update,
    fill,
    groups_of,
    parse_update,
    with_domain,
)
from memoryquest.simulator.needs.model import (
    Need,
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
from memoryquest.simulator.needs.updates import Generator
from memoryquest.simulator.needs.world import World
