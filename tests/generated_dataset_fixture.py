"""A small dataset from the real pipeline, for the publish, reader and explorer tests.

Three bundled PersonaLens users go through every stage group (queries,
conversations, memory, PGR validation with a budget-matched baseline) on the
offline simulator and the real local embedder, two queries each. Built once per
test process; :func:`tests.conftest.generated_dataset` and
:func:`tests.conftest.published_generated` hand it to the tests (publish it once
per session), so a test that changes it must change a copy.

Also reads back the figures a published card states, so a test can check that
another view of the dataset (the explorer) shows the same numbers.
"""

from __future__ import annotations

import asyncio
import functools
import re
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

from memoryquest.dataset import GeneratedDataset
from memoryquest.pipeline import generate_dataset
from memoryquest.settings import GenerationSettings, PGRSettings, Settings

try:
    from tests.generation_fixture import load_users, simulated_client
except ModuleNotFoundError:  # tests/ is not a package: pytest puts it on sys.path
    from generation_fixture import load_users, simulated_client

# Three users, so the by-user splits (0.8 / 0.1 / 0.1) each get one and every split file exists.
GENERATED_USERS = ("user0", "user1", "user3")


def generated_settings() -> Settings:
    """Small but complete: every stage group, one PGR method beside query-only, two judges, a baseline."""
    return Settings(
        generation=GenerationSettings(
            queries_per_user=2, candidates_per_user=6, judge_relevance=False
        ),
        pgr=PGRSettings(
            methods=["query_only", "pgr_cot"],
            judges=["provenance", "embedding"],
            budget_baselines=["bm25"],
        ),
    )


@functools.cache
def build_generated_dataset() -> GeneratedDataset:
    """The pipeline's own output for :data:`GENERATED_USERS` (shared: copy before changing it)."""
    run = functools.partial(
        generate_dataset, load_users(*GENERATED_USERS), simulated_client(), generated_settings()
    )
    # In a thread of its own: the first test to ask may already run an event loop (Playwright's).
    with ThreadPoolExecutor(max_workers=1) as thread:
        dataset = thread.submit(lambda: asyncio.run(run())).result()
    assert {p.source_user_id for p in dataset.personas} == set(GENERATED_USERS)
    assert dataset.queries and dataset.facts and dataset.validation, "the pipeline kept nothing"
    assert any(s.reference_id for s in dataset.sessions)
    return dataset


# --------------------------------------------------------------------------- the card's figures


@dataclass
class CardFigures:
    """What a published README.md states, read from its text (not from the dataset)."""

    users: int
    queries: int
    sessions: int
    facts: int
    rejected: int
    # (method, judge) -> (queries, mean Recall as printed), from the validation table
    recall: dict[tuple[str, str], tuple[int, str]] = field(default_factory=dict)
    # (baseline, method, judge) -> (queries, baseline Recall as printed), budget-matched table
    baseline_recall: dict[tuple[str, str, str], tuple[int, str]] = field(default_factory=dict)


def _table_rows(card: str, header_start: str) -> list[list[str]]:
    """The body rows of the first Markdown table whose header line starts with ``header_start``."""
    lines = card.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith(header_start))
    rows = []
    for line in lines[start + 2 :]:
        if not line.startswith("|"):
            break
        rows.append([cell.strip().strip("`") for cell in line.strip("|").split("|")])
    return rows


def card_figures(published: Path) -> CardFigures:
    card = (published / "README.md").read_text(encoding="utf-8")
    totals = re.search(
        r"^(\d+) users, (\d+) queries, (\d+) sessions, (\d+) facts, (\d+) rejected candidates\.$",
        card,
        flags=re.MULTILINE,
    )
    assert totals, "the card states no totals line"
    users, queries, sessions, facts, rejected = (int(n) for n in totals.groups())
    figures = CardFigures(users, queries, sessions, facts, rejected)
    for method, judge, n, mean, *_ in _table_rows(card, "| method | judge | queries | mean Recall"):
        figures.recall[method, judge] = (int(n), mean)
    for method, baseline, judge, n, _budget, _own, theirs, *_ in _table_rows(
        card, "| method | baseline | judge | queries | budget"
    ):
        figures.baseline_recall[baseline, method, judge] = (int(n), theirs.split(" ")[0])
    return figures
