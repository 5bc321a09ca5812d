"""Coverage and leakage of the facts that carry references: a query is withdrawn when memory
cannot serve it, or when a fact credited to one of its references gives the request away."""

from __future__ import annotations

import pytest

from memoryquest.contracts import Fact, Query, RejectionReason
from memoryquest.memory.coverage import withdraw_leaking
from memoryquest.memory.extraction import build_memory
from memoryquest.settings import GenerationSettings

try:
    from tests.generation_fixture import GeneratedRun, generated, simulated_client
except ModuleNotFoundError:  # tests/ is not a package: pytest puts it on sys.path
    from generation_fixture import GeneratedRun, generated, simulated_client


@pytest.fixture(scope="module")
def run() -> GeneratedRun:
    return generated()


@pytest.fixture
async def memory(run: GeneratedRun) -> tuple[Query, list[Fact]]:
    """The first kept query of the fixture and the facts the simulator extracts from its history."""
    query = run.kept()[0]
    persona = next(p for p in run.personas if p.persona_id == query.persona_id)
    sessions = [s for s in run.dataset.sessions if s.persona_id == persona.persona_id]
    result = await build_memory(persona, sessions, simulated_client(), GenerationSettings())
    return query, result.facts


def credited(query: Query, facts: list[Fact]) -> Fact:
    ids = {r.reference_id for r in query.references}
    return next(f for f in facts if ids & set(f.source_reference_ids))


async def test_real_credited_facts_give_nothing_away(memory: tuple[Query, list[Fact]]) -> None:
    query, facts = memory
    assert await withdraw_leaking([query], facts, simulated_client(), GenerationSettings()) == (
        [],
        [],
    )


@pytest.mark.parametrize(
    ("mutate", "reason"),
    [
        (lambda info, q: f"{info}, ahead of {q.query_date:%B} {q.query_date.day}", "foreshadow"),
        (lambda info, q: f"{info}; {q.text}", "reference_leak"),
    ],
    ids=["names-the-date", "repeats-the-request"],
)
async def test_a_credited_fact_that_gives_the_request_away_withdraws_its_query(
    memory: tuple[Query, list[Fact]], mutate, reason: str
) -> None:
    query, facts = memory
    fact = credited(query, facts)
    leaky = fact.model_copy(update={"info": mutate(fact.info, query)})
    others = [f for f in facts if f.fid != fact.fid]
    withdrawn, rejections = await withdraw_leaking(
        [query], [*others, leaky], simulated_client(), GenerationSettings()
    )
    assert withdrawn == [query.query_id]
    (rejection,) = rejections
    assert rejection.reason is RejectionReason(reason) and fact.fid in rejection.detail
