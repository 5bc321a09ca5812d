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
        (lambda info, q: f"{info}; {q.text}", "word_overlap"),
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


async def test_gamma_over_the_credited_facts_is_held_to_gamma_max(
    memory: tuple[Query, list[Fact]],
) -> None:
    """Per reference the mean cosine of its credited facts to the request, averaged: above
    ``gamma_max`` the query goes as ``similarity``, at or below it stays."""
    query, facts = memory
    client = simulated_client()
    per_reference = []
    for reference in query.references:
        infos = [f.info for f in facts if reference.reference_id in f.source_reference_ids]
        vectors = await client.embed([query.text, *infos], stage="memory")
        per_reference.append(float((vectors[1:] @ vectors[0]).mean()))
    gamma = sum(per_reference) / len(per_reference)
    assert 0 < gamma <= GenerationSettings().gamma_max
    strict = GenerationSettings(gamma_max=gamma - 0.001)
    withdrawn, (rejection,) = await withdraw_leaking([query], facts, client, strict)
    assert withdrawn == [query.query_id] and rejection.reason is RejectionReason.SIMILARITY
    loose = GenerationSettings(gamma_max=gamma + 0.001)
    assert await withdraw_leaking([query], facts, client, loose) == ([], [])


async def test_gamma_as_said_is_the_mean_cosine_of_the_sentences_the_references_are_said_with(
    run: GeneratedRun,
) -> None:
    from memoryquest.stages.conversations import gamma_said

    query = run.kept()[0]
    sessions = [s for s in run.dataset.sessions if s.reference_id and s.reference_spans]
    client = simulated_client()
    (value,) = (await gamma_said([query], sessions, client)).values()
    said = []
    for reference in query.references:
        session = next(s for s in sessions if s.reference_id == reference.reference_id)
        span = session.reference_spans[0]
        said.append(session.turns[span.turn_index].content[span.start : span.end])
    vectors = await client.embed([query.text, *said], stage="memory")
    assert value == pytest.approx(float((vectors[1:] @ vectors[0]).mean()), abs=1e-6)
    assert value != pytest.approx(query.gamma, abs=1e-6)  # the said text is not the draft
    # Without a sentence said for any of its references, a query has no γ as said.
    assert await gamma_said([query], [], client) == {}
