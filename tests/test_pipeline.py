"""The stage groups declared once (memoryquest.pipeline): their order, names, and what each adds to a persona.

Every way of running (in process, the Prefect flow, Dask, shards) executes
:data:`memoryquest.pipeline.STAGE_GROUPS` through :func:`memoryquest.pipeline.run_persona`;
here an ``execute`` that hands back canned outputs shows what the declaration
does with them, without running a model.
"""

from __future__ import annotations

import asyncio
from typing import Any

from pydantic import BaseModel

from memoryquest.contracts import JudgeKind, RetrievalMethod, Stage
from memoryquest.dataset import GeneratedDataset
from memoryquest.fingerprint import STAGE_ENTRIES
from memoryquest.memory.extraction import MemoryStageResult
from memoryquest.pgr.metrics import query_difficulty
from memoryquest.pipeline import STAGE_GROUPS, StageGroup, group_named, run_persona
from memoryquest.settings import Settings
from memoryquest.stages.conversations import ConversationsResult
from memoryquest.stages.pgr_validation import ValidationStageResult
from memoryquest.stages.queries import QueryStageResult
from memoryquest.stages.state import PersonaState

try:
    from tests.publish_fixture import build_publish_fixture
except ModuleNotFoundError:  # tests/ is not a package: pytest puts it on sys.path
    from publish_fixture import build_publish_fixture


def test_the_stage_groups_in_order_are_the_fingerprinted_ones() -> None:
    assert [s.name for s in STAGE_GROUPS] == [
        "queries",
        "conversations",
        "memory",
        "pgr-validation",
    ]
    assert list(STAGE_ENTRIES) == [s.name for s in STAGE_GROUPS]
    for stage in STAGE_GROUPS:
        assert STAGE_ENTRIES[stage.name] == (stage.module,)
        assert stage.module.startswith("memoryquest.stages."), stage.module
        assert group_named(stage.name) is stage


def test_every_stage_runs_in_exactly_one_group_in_pipeline_order() -> None:
    """One vocabulary: the stages named by rejected and usage rows are the groups' stages, and
    the embeddings made outside the pipeline (the PGR sample scenario, the invariant checks)."""
    outside = {Stage.PGR_SAMPLE, Stage.INVARIANTS}
    ran = [stage for group in STAGE_GROUPS for stage in group.stages]
    assert ran == [stage for stage in Stage if stage not in outside]


class Canned:
    """An ``execute`` that records what each stage group was given and answers from one persona's rows."""

    def __init__(self, rows: GeneratedDataset) -> None:
        self.rows = rows
        self.seen: list[tuple[str, list[str]]] = []
        first, second, third = (q.query_id for q in rows.queries[:3])
        self.dropped, self.withdrawn, self.kept = first, second, third

    async def __call__(self, stage: StageGroup[Any], state: PersonaState) -> BaseModel:
        self.seen.append((stage.name, [q.query_id for q in state.queries]))
        rows = self.rows
        if stage.name == "queries":
            return QueryStageResult(queries=rows.queries[:3], rejected=[])
        if stage.name == "conversations":
            return ConversationsResult(
                timelines=[t for t in rows.timelines if t.query_id != self.dropped],
                sessions=rows.sessions,
                dropped_query_ids=[self.dropped],
            )
        if stage.name == "memory":
            return MemoryStageResult(facts=rows.facts, withdrawn_query_ids=[self.withdrawn])
        return ValidationStageResult(
            results=[r for r in rows.validation if r.query_id == state.queries[0].query_id]
        )


def test_each_group_sees_the_queries_still_standing_and_the_dataset_keeps_what_assemble_kept() -> (
    None
):
    rows = build_publish_fixture(users=1, queries_per_user=3)
    assert len(rows.queries) == 3 and rows.validation
    canned = Canned(rows)
    persona = rows.personas[0]
    dataset = asyncio.run(run_persona(persona, None, Settings(), execute=canned))  # type: ignore[arg-type]

    every = [q.query_id for q in rows.queries]
    assert canned.seen == [
        ("queries", []),
        ("conversations", every),
        ("memory", [canned.withdrawn, canned.kept]),  # the dropped query is gone
        ("pgr-validation", [canned.kept]),  # and the withdrawn one
    ]
    assert [q.query_id for q in dataset.queries] == [canned.kept]
    # A withdrawn query's timeline and sessions stay in the history; a dropped one had none.
    assert {t.query_id for t in dataset.timelines} == {canned.withdrawn, canned.kept}
    assert dataset.sessions == rows.sessions and dataset.facts == rows.facts
    expected = query_difficulty(dataset.validation)[canned.kept]
    assert dataset.queries[0].difficulty == expected
    assert any(
        r.method is RetrievalMethod.QUERY_ONLY and r.judge is JudgeKind.PROVENANCE
        for r in dataset.validation
    )
    assert dataset.personas == [persona] and dataset.manifest is None


def test_without_pgr_methods_the_validation_group_does_not_run() -> None:
    rows = build_publish_fixture(users=1, queries_per_user=3)
    canned = Canned(rows)
    settings = Settings(pgr={"methods": []})
    dataset = asyncio.run(run_persona(rows.personas[0], None, settings, execute=canned))  # type: ignore[arg-type]
    assert [name for name, _ in canned.seen] == ["queries", "conversations", "memory"]
    assert dataset.validation == []
    assert dataset.queries == [
        q for q in rows.queries if q.query_id == canned.kept
    ]  # difficulty untouched
