"""Budget-matched baselines: dense query-only, BM25 and random retrieval at each PGR run's own budget."""

from __future__ import annotations

import asyncio
import datetime as dt
import json
from pathlib import Path

import numpy as np
import pytest

from memoryquest.cli.main import main
from memoryquest.contracts import (
    FactType,
    JudgeKind,
    RejectedCandidate,
    RetrievalMethod,
    ValidationResult,
)
from memoryquest.dataset import GeneratedDataset
from memoryquest.ids import make_id
from memoryquest.llm.backends import ChatCall, ChatResult
from memoryquest.llm.client import ModelClient
from memoryquest.llm.factory import shared_local_embedder
from memoryquest.llm.simulated import SimulatedChatBackend
from memoryquest.memory.snapshot import memory_as_of
from memoryquest.pgr.baselines import (
    EXPANSIONS,
    LexicalCache,
    bm25_hits,
    fused_hits,
    parse_baselines,
    random_hits,
    recency_hits,
)
from memoryquest.pgr.lexical import BM25Index
from memoryquest.pgr.retrieval import Hit, IndexCache, MemoryIndex
from memoryquest.pgr.runner import run_baseline, run_query, validate_queries
from memoryquest.pgr.sample import LATE_FACT, make_fact, sample_dataset
from memoryquest.settings import PGRSettings

PGR = (RetrievalMethod.PGR_COT, RetrievalMethod.PGR_TOT)
BASELINES = (
    RetrievalMethod.QUERY_ONLY,
    RetrievalMethod.BM25,
    RetrievalMethod.RANDOM,
    RetrievalMethod.RECENCY,
    RetrievalMethod.MULTI_QUERY,
    RetrievalMethod.HYPOTHETICAL_FACTS,
)


@pytest.fixture(scope="module")
def client() -> ModelClient:
    return ModelClient(SimulatedChatBackend(), shared_local_embedder())


@pytest.fixture(scope="module")
def sample(client: ModelClient) -> GeneratedDataset:
    return asyncio.run(sample_dataset(client, background=40))


@pytest.fixture(scope="module")
def cache() -> IndexCache:
    return IndexCache()


@pytest.fixture(scope="module")
def results(
    sample: GeneratedDataset, client: ModelClient, cache: IndexCache
) -> list[ValidationResult]:
    settings = PGRSettings(max_iterations=1)
    return asyncio.run(
        validate_queries(
            sample.queries,
            sample.facts,
            client,
            settings,
            judges=["provenance", "embedding"],
            index_cache=cache,
        )
    )


def own_row(
    results: list[ValidationResult], row: ValidationResult, method: RetrievalMethod
) -> ValidationResult:
    return next(
        r
        for r in results
        if r.query_id == row.query_id
        and r.method is method
        and r.judge is row.judge
        and r.baseline_for is None
    )


# --------------------------------------------------------------------------- the runner's rows


def test_every_baseline_gets_exactly_the_pgr_budget(
    sample: GeneratedDataset, results: list[ValidationResult]
) -> None:
    matched = [r for r in results if r.baseline_for is not None]
    # 2 queries × 2 PGR methods × 6 baselines × 2 judges
    assert len(matched) == len(sample.queries) * 2 * 6 * 2
    assert {(r.baseline_for, r.method) for r in matched} == {(p, b) for p in PGR for b in BASELINES}
    late = next(f.fid for f in sample.facts if f.info == LATE_FACT[1])
    for row in matched:
        assert row.baseline_for is not None
        pgr = own_row(results, row, row.baseline_for)
        expected = min(len(pgr.retrieved_fids), row.memory_size)
        assert row.budget == len(pgr.retrieved_fids) == pgr.budget
        assert len(row.retrieved_fids) == expected, (row.method, row.baseline_for)
        assert len(set(row.retrieved_fids)) == len(row.retrieved_fids)
        assert late not in row.retrieved_fids
        assert row.memory_as_of == pgr.memory_as_of and row.memory_size == pgr.memory_size
        expanded = row.method in EXPANSIONS  # one model call, then one embedding request
        assert row.llm_calls == int(expanded) and row.iterations == [] and row.summary is None
        dense = row.method is RetrievalMethod.QUERY_ONLY or expanded
        assert row.embedding_calls == int(dense)
    for row in results:
        if row.baseline_for is None:
            expected_budget = (
                20 if row.method is RetrievalMethod.QUERY_ONLY else len(row.retrieved_fids)
            )
            assert row.budget == expected_budget


def test_baselines_are_scored_by_every_judge_like_other_rows(
    sample: GeneratedDataset, results: list[ValidationResult]
) -> None:
    queries = {q.query_id: q for q in sample.queries}
    for row in (
        r for r in results if r.baseline_for is not None and r.judge is JudgeKind.PROVENANCE
    ):
        query = queries[row.query_id]
        credited = {f.fid: set(f.source_reference_ids) for f in sample.facts}
        found = [
            any(ref.reference_id in credited[fid] for fid in row.retrieved_fids)
            for ref in query.references
        ]
        assert [j.found for j in row.judgements] == found
        assert row.recall == pytest.approx(sum(found) / len(found))
    judges = {(r.query_id, r.method, r.baseline_for): set() for r in results}
    for r in results:
        judges[(r.query_id, r.method, r.baseline_for)].add(r.judge)
    assert all(seen == {JudgeKind.PROVENANCE, JudgeKind.EMBEDDING} for seen in judges.values())


def test_dense_baseline_is_the_query_only_ranking_cut_at_the_budget(
    results: list[ValidationResult],
) -> None:
    for row in results:
        if row.method is RetrievalMethod.QUERY_ONLY and row.baseline_for is not None:
            top20 = own_row(results, row, RetrievalMethod.QUERY_ONLY).retrieved_fids
            shared = min(len(top20), len(row.retrieved_fids))
            assert row.retrieved_fids[:shared] == top20[:shared]


def test_result_ids_are_unique_and_name_the_budget_owner(results: list[ValidationResult]) -> None:
    ids = [r.result_id for r in results]
    assert len(set(ids)) == len(ids)
    for row in results:
        parts: list[str] = [row.query_id, row.method.value, row.judge.value]
        if row.baseline_for is not None:
            parts += ["budget_of", row.baseline_for.value]
        assert row.result_id == make_id("result", *parts)


async def test_no_baselines_when_none_are_configured(
    sample: GeneratedDataset, client: ModelClient, cache: IndexCache
) -> None:
    settings = PGRSettings(max_iterations=0, budget_baselines=[])
    rows = await validate_queries(
        sample.queries[:1],
        sample.facts,
        client,
        settings,
        methods=["pgr_cot"],
        judges=["provenance"],
        index_cache=cache,
    )
    assert [r.baseline_for for r in rows] == [None]


def test_baseline_names_are_checked() -> None:
    assert parse_baselines(["bm25", "random", "bm25"]) == [
        RetrievalMethod.BM25,
        RetrievalMethod.RANDOM,
    ]
    with pytest.raises(ValueError, match="unknown budget baseline 'pgr_tot'"):
        parse_baselines(["pgr_tot"])
    with pytest.raises(ValueError, match="unknown budget baseline 'tfidf'"):
        parse_baselines(["tfidf"])


# --------------------------------------------------------------------------- random


async def test_random_baseline_is_deterministic_per_seed(
    sample: GeneratedDataset, client: ModelClient, cache: IndexCache
) -> None:
    query = sample.queries[0]
    index = await cache.get(query.persona_id, query.query_date, sample.facts, client)
    first = random_hits(index, 15, seed=0, query_id=query.query_id)
    assert first == random_hits(index, 15, seed=0, query_id=query.query_id)
    assert [h.fid for h in first] != [
        h.fid for h in random_hits(index, 15, seed=1, query_id=query.query_id)
    ]
    assert first != random_hits(index, 15, seed=0, query_id=sample.queries[1].query_id)
    assert len({h.fid for h in first}) == 15
    assert (
        random_hits(index, 5, seed=0, query_id=query.query_id) == first[:5]
    )  # a smaller budget is a prefix
    everything = random_hits(index, len(index) + 10, seed=0, query_id=query.query_id)
    assert sorted(h.fid for h in everything) == sorted(item.fid for item in index.items)
    assert random_hits(index, 0, seed=0, query_id=query.query_id) == []

    # Through the runner, the seed comes from the settings.
    seeded = [
        await run_baseline(
            query, index, RetrievalMethod.RANDOM, 10, client, PGRSettings(baseline_seed=seed)
        )
        for seed in (0, 0, 1)
    ]
    assert seeded[0].retrieved_fids == seeded[1].retrieved_fids != seeded[2].retrieved_fids
    assert seeded[0].retrieved_fids == [h.fid for h in first[:10]]


# --------------------------------------------------------------------------- recency


async def test_recency_returns_the_latest_facts_newest_first(
    sample: GeneratedDataset, client: ModelClient, cache: IndexCache
) -> None:
    query = sample.queries[0]
    index = await cache.get(query.persona_id, query.query_date, sample.facts, client)
    hits = recency_hits(index, 12)
    dates = {item.fid: item.date for item in index.items}
    picked = [dates[h.fid] for h in hits]
    assert len(hits) == 12 and picked == sorted(picked, reverse=True)
    # Nothing left out is newer than the oldest fact taken.
    left = [d for fid, d in dates.items() if fid not in {h.fid for h in hits}]
    assert max(left) <= min(picked)
    assert [h.score for h in hits] == [float((d - index.as_of).days) for d in picked]
    assert recency_hits(index, 5) == hits[:5] and recency_hits(index, 0) == []
    assert len(recency_hits(index, len(index) + 3)) == len(index)
    through_runner = await run_baseline(
        query, index, RetrievalMethod.RECENCY, 12, client, PGRSettings()
    )
    assert through_runner.retrieved_fids == [h.fid for h in hits]


# --------------------------------------------------------------------------- BM25

DAY = dt.date(2024, 3, 1)
PID = make_id("persona", "bm25-test")


def tiny_store() -> list:
    texts = [
        "Prefers window seats on long flights",
        "Signed up for a Saturday pottery class at a studio on Queen Street",
        "Listens to jazz while cooking dinner",
        "It is what it is",  # no content word at all
        "Walks the dog every morning before work",
    ]
    return [
        make_fact(PID, f"tiny-{i}", [(DAY, text)], type=FactType.ACTIVITY)
        for i, text in enumerate(texts)
    ]


def vectorless_index(facts: list) -> MemoryIndex:
    items = tuple(memory_as_of(facts, DAY))
    return MemoryIndex(PID, DAY, items, np.zeros((len(items), 4), dtype=np.float32), "none")


def test_bm25_puts_the_lexically_matching_fact_first() -> None:
    facts = tiny_store()
    index = vectorless_index(facts)
    lexical = BM25Index([item.info for item in index.items])
    pottery = make_id("fact", PID, "tiny-1")
    hits = bm25_hits(lexical, index, "Which pottery studio should I pick for my Saturday class?", 3)
    assert [h.fid for h in hits][0] == pottery
    assert hits[0].score > 0 and all(h.score == 0 for h in hits[1:])
    assert len(hits) == 3  # padded to the budget with facts that share no word
    assert len(bm25_hits(lexical, index, "pottery", 50)) == len(
        index
    )  # never more than the snapshot
    assert bm25_hits(lexical, index, "pottery", 0) == []
    # A query without content words ranks nothing first, but the budget is still met, in fid order.
    empty = bm25_hits(lexical, index, "what is it", 2)
    assert [h.fid for h in empty] == [item.fid for item in index.items[:2]]


async def test_bm25_through_the_runner_over_the_query_date_snapshot(client: ModelClient) -> None:
    facts = tiny_store()
    later = make_fact(
        PID, "later", [(DAY + dt.timedelta(days=30), "Bought pottery glaze on Queen Street")]
    )
    sample_query = (await sample_dataset(client, background=5)).queries[0]
    query = sample_query.model_copy(
        update={
            "persona_id": PID,
            "query_date": DAY,
            "text": "Plan my pottery weekend on Queen Street",
        }
    )
    index = await IndexCache().get(PID, DAY, [*facts, later], client)
    outcome = await run_baseline(
        query,
        index,
        RetrievalMethod.BM25,
        2,
        client,
        PGRSettings(),
        baseline_for=RetrievalMethod.PGR_TOT,
        lexical=LexicalCache(),
    )
    assert outcome.retrieved_fids[0] == make_id("fact", PID, "tiny-1")
    assert later.fid not in outcome.retrieved_fids  # learnt after the query date
    assert outcome.budget == 2 == len(outcome.retrieved_fids)
    assert outcome.baseline_for is RetrievalMethod.PGR_TOT and outcome.llm_calls == 0


async def test_bm25_and_random_run_alone_at_the_query_only_k(
    sample: GeneratedDataset, client: ModelClient, cache: IndexCache
) -> None:
    query = sample.queries[1]
    for method in (RetrievalMethod.BM25, RetrievalMethod.RANDOM):
        outcome = await run_query(
            query, sample.facts, method, client, PGRSettings(), index_cache=cache
        )
        assert outcome.budget == 20 == len(outcome.retrieved_fids)
        assert (
            outcome.baseline_for is None and outcome.llm_calls == 0 and outcome.embedding_calls == 0
        )


# --------------------------------------------------------------------------- pgr run


def test_pgr_run_prints_the_budget_matched_table_and_writes_baseline_rows(
    sample: GeneratedDataset,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    clean_settings_env: pytest.MonkeyPatch,
) -> None:
    dataset_dir = sample.save(tmp_path / "dataset")
    out = tmp_path / "pgr.jsonl"
    code = main(
        [
            "pgr", "run", str(dataset_dir),
            "--set", f"cache.directory={tmp_path / 'cache'}", "--set", "pgr.max_iterations=1",
            "--set", "pgr.bootstrap_samples=200",
            "--method", "query_only", "--method", "pgr_tot", "--judge", "provenance",
            "--output", str(out),
        ]
    )  # fmt: skip
    assert code == 0
    printed = capsys.readouterr().out
    assert "Budget-matched" in printed and "200 resamples" in printed
    compared = [line.split() for line in printed.splitlines() if line.startswith("  pgr_tot ")]
    assert [(cols[1], cols[2]) for cols in compared] == [
        ("query_only", "provenance"), ("bm25", "provenance"), ("random", "provenance"),
        ("recency", "provenance"), ("multi_query", "provenance"),
        ("hypothetical_facts", "provenance"),
    ]  # fmt: skip
    lines = [json.loads(line) for line in out.read_text(encoding="utf-8").splitlines()]
    assert len(lines) == 2 * (1 + 1 + 6)
    own = {(r["query_id"], r["method"]): r for r in lines if r["baseline_for"] is None}
    for row in lines:
        if row["baseline_for"] is not None:
            assert row["baseline_for"] == "pgr_tot"
            assert (
                row["budget"]
                == len(row["retrieved_fids"])
                == len(own[(row["query_id"], "pgr_tot")]["retrieved_fids"])
            )
        assert row["difficulty"] == own[(row["query_id"], "query_only")]["recall"]


# --------------------------------------------------------------------------- query expansions


def test_reciprocal_rank_fusion_rewards_agreement_then_rank() -> None:
    first = [Hit("f_a", 0.9), Hit("f_b", 0.8), Hit("f_c", 0.7)]
    second = [Hit("f_c", 0.9), Hit("f_d", 0.8)]
    fused = fused_hits([first, second], 3)
    assert [h.fid for h in fused] == ["f_c", "f_a", "f_b"]  # in both lists beats first of one
    assert fused[0].score == pytest.approx(1 / 63 + 1 / 61)
    assert fused_hits([first, second], 0) == [] and len(fused_hits([first, second], 10)) == 4


class Expander:
    """A model that answers the expansion prompts with given texts (and nothing else)."""

    name = model = "expander"
    base_url: str | None = None
    simulated = True
    seed = 0

    def __init__(self, texts: list[str]) -> None:
        self.texts = texts
        self.templates: list[str] = []

    async def chat(self, call: ChatCall) -> ChatResult:
        self.templates.append(call.request.template_id)
        key = "queries" if call.request.template_id == "pgr_expand_queries" else "facts"
        return ChatResult(text=json.dumps({key: self.texts}))


@pytest.mark.parametrize(
    "method", [RetrievalMethod.MULTI_QUERY, RetrievalMethod.HYPOTHETICAL_FACTS]
)
async def test_an_expansion_searches_with_what_the_model_wrote(
    sample: GeneratedDataset, cache: IndexCache, method: RetrievalMethod
) -> None:
    """The model's text finds a fact the request alone does not: it is in the fused top K."""
    query = sample.queries[0]
    client = ModelClient(SimulatedChatBackend(), shared_local_embedder())
    index = await cache.get(query.persona_id, query.query_date, sample.facts, client)
    alone = await run_baseline(query, index, RetrievalMethod.QUERY_ONLY, 5, client, PGRSettings())
    target = next(i for i in index.items if i.fid not in alone.retrieved_fids)
    model = Expander([target.info])
    expanded = await run_baseline(
        query, index, method, 5, ModelClient(model, shared_local_embedder()), PGRSettings()
    )
    assert target.fid in expanded.retrieved_fids and len(expanded.retrieved_fids) == 5
    assert expanded.llm_calls == 1 and model.templates == [
        "pgr_expand_queries" if method is RetrievalMethod.MULTI_QUERY else "pgr_hypothetical_facts"
    ]


class EmptyExpansions:
    """The simulator, except that both expansion prompts get an empty list (a schema refusal)."""

    name = model = "empty-expansions"
    base_url: str | None = None
    simulated = True
    seed = 0

    def __init__(self) -> None:
        self.simulator = SimulatedChatBackend()

    async def chat(self, call: ChatCall) -> ChatResult:
        if call.request.template_id in ("pgr_expand_queries", "pgr_hypothetical_facts"):
            key = "queries" if call.request.template_id == "pgr_expand_queries" else "facts"
            return ChatResult(text=json.dumps({key: []}))
        return await self.simulator.chat(call)


async def test_an_expansion_the_model_gets_wrong_loses_only_its_own_rows(
    sample: GeneratedDataset,
) -> None:
    """Empty lists of texts are refused: each expansion row is recorded in ``rejected`` with
    its reason, and the PGR rows and the other baselines stay."""
    failures: list[RejectedCandidate] = []
    client = ModelClient(EmptyExpansions(), shared_local_embedder())
    settings = PGRSettings(methods=["pgr_tot"], judges=["provenance"], max_iterations=1)
    query = sample.queries[0]
    rows = await validate_queries([query], sample.facts, client, settings, failures=failures)
    kept = {r.method for r in rows if r.baseline_for}
    assert kept == set(BASELINES) - set(EXPANSIONS)
    assert any(r.method is RetrievalMethod.PGR_TOT and r.baseline_for is None for r in rows)
    assert sorted(f.reason.value for f in failures) == ["schema", "schema"]
    assert all("at pgr_tot's budget" in f.detail for f in failures)
