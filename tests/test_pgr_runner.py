"""The PGR loop: convergence rule, traces, call counts, batching and determinism."""

from __future__ import annotations

import asyncio
import json

import numpy as np
import pytest

from memoryquest.contracts import ProspectionStep, RetrievalMethod
from memoryquest.dataset import GeneratedDataset
from memoryquest.ids import make_id
from memoryquest.llm.backends import ChatCall, ChatResult
from memoryquest.llm.client import ModelClient
from memoryquest.llm.factory import shared_local_embedder
from memoryquest.llm.local_embedder import LocalEmbedder
from memoryquest.llm.simulated import SimulatedChatBackend
from memoryquest.pgr.outcomes import PGRError, RetrievedSet
from memoryquest.pgr.prospection import TreeNode, parse_tree, probe_text
from memoryquest.pgr.prospection_run import refine_until_converged
from memoryquest.pgr.retrieval import Hit, IndexCache
from memoryquest.pgr.runner import run_query, validate_queries
from memoryquest.pgr.sample import LATE_FACT, sample_dataset
from memoryquest.settings import PGRSettings


class CountingEmbedder:
    remote = False
    base_url: str | None = None

    def __init__(self, inner: LocalEmbedder) -> None:
        self.inner = inner
        self.name = inner.name
        self.dimension = inner.dimension
        self.requests: list[list[str]] = []

    async def embed(self, texts: list[str]) -> np.ndarray:
        self.requests.append(list(texts))
        return await self.inner.embed(texts)


@pytest.fixture(scope="module")
def sample() -> GeneratedDataset:
    client = ModelClient(SimulatedChatBackend(), shared_local_embedder())
    return asyncio.run(sample_dataset(client, background=40))


@pytest.fixture(scope="module")
def cache() -> IndexCache:
    """Snapshots shared by the tests of this module (the memory does not depend on the method)."""
    return IndexCache()


@pytest.fixture
def embedder() -> CountingEmbedder:
    return CountingEmbedder(shared_local_embedder())


@pytest.fixture
def client(embedder: CountingEmbedder) -> ModelClient:
    return ModelClient(SimulatedChatBackend(), embedder)


# --------------------------------------------------------------------------- the convergence rule


def fid(n: int) -> str:
    return make_id("fact", "convergence", n)


def scripted(rounds: list[list[int]]):
    """A propose/retrieve pair whose round i retrieves exactly the facts listed in rounds[i-1]."""
    calls: list[int] = []

    async def propose(previous: list[ProspectionStep], iteration: int) -> list[ProspectionStep]:
        calls.append(iteration)
        return [
            ProspectionStep(step_id=f"S{iteration}", action=f"round {iteration}", constraints="")
        ]

    async def retrieve(steps: list[ProspectionStep]) -> list[list[Hit]]:
        wanted = rounds[calls[-1] - 1] if calls[-1] <= len(rounds) else rounds[-1]
        return [[Hit(fid(n), 0.5) for n in wanted]]

    return propose, retrieve, calls


async def refine(
    rounds: list[list[int]], *, start: list[int], delta: int = 5, max_iterations: int = 10
):
    found = RetrievedSet()
    found.add(0, [Hit(fid(n), 0.9) for n in start])
    propose, retrieve, calls = scripted(rounds)
    iterations = await refine_until_converged(
        [], found, propose, retrieve, delta=delta, max_iterations=max_iterations
    )
    return iterations, calls, found


async def test_stops_at_the_first_round_that_adds_fewer_than_delta() -> None:
    # Δ sizes: 7, then 5 (two of the seven are old), then 3 < δ = 5 -> stop after round 3.
    rounds = [
        list(range(10, 17)),
        [10, 11, *range(20, 25)],
        [20, *range(30, 33)],
        list(range(40, 60)),
    ]
    iterations, calls, found = await refine(rounds, start=[1, 2, 3])
    assert [len(it.new_fids) for it in iterations] == [7, 5, 3]
    assert calls == [1, 2, 3]
    assert len(found) == 3 + 7 + 5 + 3
    assert iterations[1].new_fids == sorted(fid(n) for n in range(20, 25))


async def test_stops_at_i_max_when_every_round_keeps_adding() -> None:
    rounds = [list(range(100 * i, 100 * i + 6)) for i in range(1, 20)]
    iterations, calls, _ = await refine(rounds, start=[1], max_iterations=4)
    assert calls == [1, 2, 3, 4]
    assert [len(it.new_fids) for it in iterations] == [6, 6, 6, 6]


async def test_exactly_delta_new_facts_keeps_refining() -> None:
    rounds = [list(range(10, 15)), list(range(20, 24))]
    iterations, _, _ = await refine(rounds, start=[], delta=5)
    assert [len(it.new_fids) for it in iterations] == [5, 4]


async def test_no_refinement_when_i_max_is_zero() -> None:
    iterations, calls, _ = await refine([[1, 2, 3, 4, 5, 6]], start=[], max_iterations=0)
    assert iterations == [] and calls == []


def test_retrieved_set_ranks_by_first_round_then_score() -> None:
    found = RetrievedSet()
    assert found.add(0, [Hit("f_b", 0.4), Hit("f_a", 0.9), Hit("f_b", 0.7)]) == ["f_a", "f_b"]
    assert found.add(1, [Hit("f_a", 0.99), Hit("f_d", 0.3), Hit("f_c", 0.3)]) == ["f_c", "f_d"]
    ranked = found.ranked()
    assert [(r.fid, r.iteration) for r in ranked] == [
        ("f_a", 0),
        ("f_b", 0),
        ("f_c", 1),
        ("f_d", 1),
    ]
    assert ranked[1].score == pytest.approx(0.7)


# --------------------------------------------------------------------------- full runs


@pytest.mark.parametrize("method", [RetrievalMethod.PGR_COT, RetrievalMethod.PGR_TOT])
async def test_pgr_trace_counts_and_one_embedding_request_per_phase(
    sample: GeneratedDataset,
    client: ModelClient,
    embedder: CountingEmbedder,
    method: RetrievalMethod,
    cache: IndexCache,
) -> None:
    settings = PGRSettings()
    query = sample.queries[0]
    index = await cache.get(query.persona_id, query.query_date, sample.facts, client)
    embedder.requests.clear()
    outcome = await run_query(query, sample.facts, method, client, settings, index_cache=cache)

    iterations = outcome.iterations
    refinements = len(iterations) - 1
    assert [it.iteration for it in iterations] == list(range(len(iterations)))
    assert 0 <= refinements <= settings.max_iterations
    sizes = [len(it.new_fids) for it in iterations[1:]]
    assert all(size >= settings.delta for size in sizes[:-1])
    assert not sizes or sizes[-1] < settings.delta or refinements == settings.max_iterations

    # augmentation + Phase 1 + each refinement + summary; answers are off by default.
    assert outcome.llm_calls == 3 + refinements
    assert outcome.answer is None and outcome.summary and outcome.augmented_query
    # One request for the query, then one per phase carrying every probe of that phase.
    assert outcome.embedding_calls == 2 + refinements == len(embedder.requests)
    assert embedder.requests[0] == [query.text]
    for request, iteration in zip(embedder.requests[1:], iterations, strict=True):
        assert request == [probe_text(s) for s in iteration.steps]

    retrieved = outcome.retrieved_fids
    assert len(retrieved) == len(set(retrieved))
    assert set(retrieved) == {f for it in iterations for f in it.new_fids}
    assert sum(len(it.new_fids) for it in iterations) == len(retrieved)
    assert [r.iteration for r in outcome.ranked] == sorted(r.iteration for r in outcome.ranked)
    visible = {item.fid for item in index.items}
    assert set(retrieved) <= visible
    for iteration in iterations:
        for step in iteration.steps:
            assert len(step.retrieved_fids) <= settings.step_k
            assert set(step.retrieved_fids) <= set(retrieved)

    if method is RetrievalMethod.PGR_COT:
        for iteration in iterations:
            assert [s.parent for s in iteration.steps] == [None] + [
                s.step_id for s in iteration.steps[:-1]
            ]
    else:
        for iteration in iterations:
            nodes = [
                TreeNode(
                    id=s.step_id,
                    action=s.action,
                    constraints=s.constraints,
                    parent=s.parent,
                    children=s.children,
                )
                for s in iteration.steps
            ]
            parse_tree(nodes, repair=False)
        assert 2 <= len(iterations[0].steps[0].children) <= 3


async def test_query_only_is_top_20_by_cosine(
    sample: GeneratedDataset, client: ModelClient, cache: IndexCache
) -> None:
    query = sample.queries[1]
    outcome = await run_query(
        query, sample.facts, RetrievalMethod.QUERY_ONLY, client, PGRSettings(), index_cache=cache
    )
    assert len(outcome.ranked) == 20
    scores = [r.score for r in outcome.ranked]
    assert scores == sorted(scores, reverse=True)
    assert outcome.llm_calls == 0 and outcome.embedding_calls == 1 and outcome.iterations == []


async def test_answers_cost_one_call_each(
    sample: GeneratedDataset, client: ModelClient, cache: IndexCache
) -> None:
    settings = PGRSettings(generate_answers=True, max_iterations=0)
    query = sample.queries[0]
    pgr = await run_query(
        query, sample.facts, RetrievalMethod.PGR_TOT, client, settings, index_cache=cache
    )
    baseline = await run_query(
        query, sample.facts, RetrievalMethod.QUERY_ONLY, client, settings, index_cache=cache
    )
    assert pgr.llm_calls == 3 + 1
    assert baseline.llm_calls == 1
    assert pgr.answer and baseline.answer and pgr.answer != baseline.answer


async def test_no_phase_two_when_i_max_is_zero(
    sample: GeneratedDataset, client: ModelClient, cache: IndexCache
) -> None:
    outcome = await run_query(
        sample.queries[0],
        sample.facts,
        RetrievalMethod.PGR_COT,
        client,
        PGRSettings(max_iterations=0),
        index_cache=cache,
    )
    assert len(outcome.iterations) == 1 and outcome.llm_calls == 3 and outcome.embedding_calls == 2


async def test_validate_queries_one_result_per_query_method_judge_and_deterministic(
    sample: GeneratedDataset, client: ModelClient, cache: IndexCache
) -> None:
    settings = PGRSettings(max_iterations=1)
    judges = ["provenance", "embedding"]
    baselines = ("query_only", "bm25", "random", "recency", "multi_query", "hypothetical_facts")
    first = await validate_queries(
        sample.queries, sample.facts, client, settings, judges=judges, index_cache=cache
    )
    # Per query: 3 methods × 2 judges, and after each PGR method its 6 budget-matched baselines × 2 judges.
    assert len(first) == len(sample.queries) * (3 * 2 + 2 * 6 * 2)
    expected = []
    for q in sample.queries:
        for m in ("query_only", "pgr_cot", "pgr_tot"):
            expected += [make_id("result", q.query_id, m, j) for j in judges]
            if m != "query_only":
                expected += [
                    make_id("result", q.query_id, b, j, "budget_of", m)
                    for b in baselines
                    for j in judges
                ]
    assert [r.result_id for r in first] == expected
    assert len(set(expected)) == len(expected)
    late = next(f for f in sample.facts if f.info == LATE_FACT[1])
    for result in first:
        query = next(q for q in sample.queries if q.query_id == result.query_id)
        assert result.memory_as_of == query.query_date
        assert late.fid not in result.retrieved_fids
        assert result.memory_size == sum(
            1 for f in sample.facts if f.created_on <= query.query_date
        )
    # A fresh client and a fresh index give the same rows.
    fresh = ModelClient(SimulatedChatBackend(), shared_local_embedder())
    second = await validate_queries(
        sample.queries[:1], sample.facts, fresh, settings, judges=judges
    )
    assert [r.model_dump() for r in second] == [r.model_dump() for r in first[: len(second)]]


async def test_unknown_method_is_a_clear_error(
    sample: GeneratedDataset, client: ModelClient
) -> None:
    with pytest.raises(ValueError, match="unknown retrieval method 'pgr_graph'"):
        await validate_queries(
            sample.queries,
            sample.facts,
            client,
            PGRSettings(),
            methods=["pgr_graph"],
            index_cache=IndexCache(),
        )


class BrokenTrees:
    """The simulator, except that its first ``bad`` answers to the initial tree prompt contain a cycle."""

    name = "broken-trees"
    model = "broken-trees"
    base_url: str | None = None
    simulated = True
    seed = 0

    def __init__(self, bad: int) -> None:
        self.inner = SimulatedChatBackend()
        self.bad = bad

    async def chat(self, call: ChatCall) -> ChatResult:
        if call.request.template_id == "pgr_tot_initial" and call.request.seed < self.bad:
            nodes = [
                {"id": "A1", "action": "Go", "constraints": "", "parent": None, "children": ["A2"]},
                {
                    "id": "A2",
                    "action": "Pay",
                    "constraints": "",
                    "parent": "A3",
                    "children": ["A3"],
                },
                {
                    "id": "A3",
                    "action": "Ride",
                    "constraints": "",
                    "parent": "A2",
                    "children": ["A2"],
                },
            ]
            return ChatResult(text=json.dumps({"nodes": nodes}))
        return await self.inner.chat(call)


async def test_an_unusable_tree_is_asked_for_once_more(
    sample: GeneratedDataset, cache: IndexCache
) -> None:
    settings = PGRSettings(max_iterations=0)
    query = sample.queries[0]
    healthy = ModelClient(SimulatedChatBackend(), shared_local_embedder())
    once_broken = ModelClient(BrokenTrees(bad=1), shared_local_embedder())
    expected = await run_query(
        query, sample.facts, RetrievalMethod.PGR_TOT, healthy, settings, index_cache=cache
    )
    recovered = await run_query(
        query, sample.facts, RetrievalMethod.PGR_TOT, once_broken, settings, index_cache=cache
    )
    assert recovered.llm_calls == expected.llm_calls + 1
    assert recovered.iterations[0].steps  # the second answer was used


async def test_a_tree_that_stays_unusable_is_a_clear_error(
    sample: GeneratedDataset, cache: IndexCache
) -> None:
    broken = ModelClient(BrokenTrees(bad=2), shared_local_embedder())
    query = sample.queries[0]
    with pytest.raises(
        PGRError,
        match=rf"query {query.query_id}, pgr_tot, iteration 0: 2 trees were unusable; .*cycle",
    ):
        await run_query(
            query, sample.facts, RetrievalMethod.PGR_TOT, broken, PGRSettings(), index_cache=cache
        )


class ScopeRecordingBackend(SimulatedChatBackend):
    """The simulator, noting each call's prompt-cache scope and the facts of each tree refinement."""

    def __init__(self) -> None:
        super().__init__()
        self.scopes: list[str | None] = []
        self.refined_facts: list[list[str]] = []

    async def chat(self, call: ChatCall) -> ChatResult:
        self.scopes.append(call.request.prompt_cache_scope())
        if call.request.template_id == "pgr_tot_refine":
            self.refined_facts.append([f["info"] for f in call.request.variables["facts"]])
        return await super().chat(call)


async def test_a_query_runs_calls_share_one_prompt_cache_scope_and_refinements_extend_their_facts(
    sample: GeneratedDataset, cache: IndexCache
) -> None:
    """Its calls repeat its request and facts, so they go under one key, and each refinement's
    facts list the earlier round's first (in the order found), so the prompt prefix repeats."""
    backend = ScopeRecordingBackend()
    query = sample.queries[0]
    await run_query(
        query,
        sample.facts,
        RetrievalMethod.PGR_TOT,
        ModelClient(backend, shared_local_embedder()),
        PGRSettings(delta=0),
        index_cache=cache,
    )
    assert backend.scopes and set(backend.scopes) == {f"query:{query.query_id}"}
    seen = backend.refined_facts
    assert len(seen) >= 2
    assert any(len(later) > len(earlier) for earlier, later in zip(seen, seen[1:], strict=False))
    for earlier, later in zip(seen, seen[1:], strict=False):
        assert later[: len(earlier)] == earlier
