"""Judges on constructed cases whose answers are known, and the metrics built on them."""

from __future__ import annotations

import datetime as dt
import math

import pytest

from memoryquest.contracts import (
    Domain,
    JudgeKind,
    ProspectionIteration,
    Query,
    Reference,
    ReferenceJudgement,
    RetrievalMethod,
    ValidationResult,
)
from memoryquest.ids import make_id
from memoryquest.llm.client import ModelClient
from memoryquest.llm.factory import shared_local_embedder
from memoryquest.llm.simulated import SimulatedChatBackend
from memoryquest.pgr.judges import (
    EmbeddingJudge,
    JudgeOutputError,
    LLMJudge,
    ProvenanceJudge,
    build_judge,
    judge_request,
    verdicts_by_number,
)
from memoryquest.pgr.judges_contracts import ReferenceVerdicts
from memoryquest.pgr.metrics import (
    ndcg,
    provenance_support,
    recall,
    recall_at_k,
    recall_exact,
    relevant_fids,
    summarise,
    summary_markdown,
)
from memoryquest.pgr.retrieval import IndexCache, MemoryIndex
from memoryquest.pgr.sample import make_fact
from memoryquest.settings import PGRSettings
from memoryquest.simulator import simulate

PID = make_id("persona", "judges-test")
QID = make_id("query", PID, "league")
DAY = dt.date(2024, 3, 1)
R_KNEE, R_BUS, R_MONEY = (make_id("reference", QID, n) for n in range(3))

QUERY = Query(
    query_id=QID,
    persona_id=PID,
    query_date=dt.date(2024, 4, 10),
    text="Can you help me plan joining a recreational soccer league in Toronto this spring?",
    reasoning="fitness, transport and money all matter",
    domain=Domain.SPORTS,
    references=[
        Reference(
            reference_id=R_KNEE,
            date=DAY,
            text="Strained his left knee while running in early March",
            domain=Domain.SERVICES,
            cosine=0.1,
        ),
        Reference(
            reference_id=R_BUS,
            date=DAY,
            text="Sold his car and now takes the bus around Toronto",
            domain=Domain.BUSES,
            cosine=0.2,
        ),
        Reference(
            reference_id=R_MONEY,
            date=DAY,
            text="Keeps discretionary spending under 200 dollars a month",
            domain=Domain.FINANCE,
            cosine=0.1,
        ),
    ],
    gamma=0.13,
    embedder="all-MiniLM-L6-v2-onnx-int8",
    rank=0,
)
FACTS = [
    make_fact(
        PID,
        "knee",
        [(DAY, "Strained left knee while running in early March")],
        reference_ids=[R_KNEE],
    ),
    make_fact(
        PID,
        "bus",
        [(DAY, "Sold car and takes the bus or streetcar around Toronto")],
        reference_ids=[R_BUS],
    ),
    make_fact(
        PID,
        "money",
        [(DAY, "Keeps discretionary spending under 200 dollars a month")],
        reference_ids=[R_MONEY],
    ),
    make_fact(PID, "books", [(DAY, "Enjoys reading science fiction in the evening")]),
    make_fact(PID, "alarm", [(DAY, "Wakes up at 7:00 AM on weekdays to upbeat music")]),
]
FID = {name: make_id("fact", PID, name) for name in ("knee", "bus", "money", "books", "alarm")}


@pytest.fixture
def client() -> ModelClient:
    return ModelClient(SimulatedChatBackend(), shared_local_embedder())


async def snapshot(client: ModelClient) -> MemoryIndex:
    return await IndexCache().get(PID, QUERY.query_date, FACTS, client)


async def test_provenance_judge_is_exact(client: ModelClient) -> None:
    index = await snapshot(client)
    retrieved = [index.item(FID["books"]), index.item(FID["knee"]), index.item(FID["alarm"])]
    verdicts = await ProvenanceJudge().judge(QUERY, retrieved, index, client)
    assert [v.found for v in verdicts] == [True, False, False]
    assert verdicts[0].supporting_fids == [FID["knee"]]
    assert verdicts[1].reason == "no retrieved fact descends from it"


async def test_embedding_judge_counts_a_reference_at_the_threshold(client: ModelClient) -> None:
    index = await snapshot(client)
    retrieved = [index.item(FID["money"]), index.item(FID["books"]), index.item(FID["bus"])]
    verdicts = await EmbeddingJudge(0.6).judge(QUERY, retrieved, index, client)
    # R_MONEY is word-for-word a retrieved fact; nothing retrieved is about the knee.
    assert [v.found for v in verdicts] == [False, True, True]
    assert (
        verdicts[2].supporting_fids[0] == FID["money"] and "best cosine 1.000" in verdicts[2].reason
    )
    # The threshold decides: set it just above / at the bus reference's best cosine.
    ref = (await client.embed([QUERY.references[1].text], "pgr_judge"))[0]
    best = float(max(ref @ index.vector(item.fid) for item in retrieved))
    above = await EmbeddingJudge(best + 1e-4).judge(QUERY, retrieved, index, client)
    at = await EmbeddingJudge(best - 1e-6).judge(QUERY, retrieved, index, client)
    assert above[1].found is False and at[1].found is True


async def test_llm_judge_reads_every_set_of_a_query_in_one_call(client: ModelClient) -> None:
    index = await snapshot(client)
    everything = [index.item(FID["knee"]), index.item(FID["books"]), index.item(FID["bus"])]
    without_knee = [index.item(FID["books"]), index.item(FID["alarm"])]
    judge = LLMJudge()
    first, second = await judge.judge_sets(QUERY, [everything, without_knee], index, client)
    assert judge.llm_calls == 1
    assert [v.found for v in first] == [True, True, False]
    assert first[0].supporting_fids == [FID["knee"]] and first[1].supporting_fids == [FID["bus"]]
    assert all(v.reason for v in first) and all("\n" not in v.reason for v in first)
    assert [v.reference_id for v in first] == [R_KNEE, R_BUS, R_MONEY]
    # The knee memory stated R_KNEE in the union, but this set did not retrieve it.
    assert [v.found for v in second] == [False, False, False]
    assert "did not retrieve" in second[0].reason and second[0].supporting_fids == []


async def test_a_verdict_must_cover_every_reference_and_cite_only_memories_shown(
    client: ModelClient,
) -> None:
    index = await snapshot(client)
    request = judge_request(QUERY, [index.item(FID["knee"])])
    answer = ReferenceVerdicts.model_validate_json(
        simulate(request.template_id, request.variables, seed=0)
    )
    assert set(verdicts_by_number(answer, 3, 1, "q")) == {1, 2, 3}
    cites_too_far = answer.model_copy(deep=True)
    cites_too_far.verdicts[0].memories = [2]
    with pytest.raises(JudgeOutputError, match=r"memory number\(s\) \[2\] outside 1..1"):
        verdicts_by_number(cites_too_far, 3, 1, "q")
    one_short = answer.model_copy(update={"verdicts": answer.verdicts[:2]})
    with pytest.raises(JudgeOutputError, match=r"no verdict for reference number\(s\) \[3\]"):
        verdicts_by_number(one_short, 3, 1, "q")


async def test_judges_find_nothing_in_an_empty_retrieval(client: ModelClient) -> None:
    index = await snapshot(client)
    for kind in JudgeKind:
        judge = build_judge(kind, PGRSettings())
        (verdicts,) = await judge.judge_sets(QUERY, [[]], index, client)
        assert [v.found for v in verdicts] == [False, False, False], kind


def test_unknown_judge_is_a_clear_error() -> None:
    with pytest.raises(
        ValueError, match="unknown judge 'vibes'; choose from provenance, llm, embedding"
    ):
        build_judge("vibes", PGRSettings())


# --------------------------------------------------------------------------- metrics


def judged(*found: bool) -> list[ReferenceJudgement]:
    return [
        ReferenceJudgement(reference_id=make_id("reference", "m", i), found=f)
        for i, f in enumerate(found)
    ]


def test_recall_and_recall_exact() -> None:
    assert recall(judged(True, False, True, False)) == 0.5
    assert recall_exact(judged(True, True, True)) is True
    assert recall_exact(judged(True, False, True)) is False
    with pytest.raises(ValueError, match="at least one"):
        recall([])


def test_ndcg_hand_computed() -> None:
    # ranks 2 and 4 relevant; 3 relevant facts exist -> ideal has them at ranks 1..3.
    dcg = 1 / math.log2(3) + 1 / math.log2(5)
    idcg = 1 + 1 / math.log2(3) + 1 / math.log2(4)
    assert ndcg(["a", "b", "c", "d"], {"b", "d", "e"}) == pytest.approx(dcg / idcg)
    assert ndcg(["b", "d", "e"], {"b", "d", "e"}) == pytest.approx(1.0)
    # Only two slots: the ideal list holds two relevant facts, and we have one at rank 2.
    assert ndcg(["a", "b"], {"b", "d", "e"}) == pytest.approx(
        (1 / math.log2(3)) / (1 + 1 / math.log2(3))
    )
    assert ndcg([], {"b"}) == 0.0 and ndcg(["a"], set()) == 0.0


def test_recall_at_k_over_the_ranked_list() -> None:
    support = {"r1": ["f3"], "r2": ["f1", "f9"], "r3": []}
    ranked = ["f1", "f2", "f3", "f4"]
    assert recall_at_k(ranked, support, 1) == pytest.approx(1 / 3)
    assert recall_at_k(ranked, support, 3) == pytest.approx(2 / 3)
    assert recall_at_k(ranked, support, 20) == pytest.approx(2 / 3)


async def test_relevance_comes_from_provenance(client: ModelClient) -> None:
    index = await snapshot(client)
    assert relevant_fids([R_KNEE, R_MONEY], index.items) == {FID["knee"], FID["money"]}
    assert provenance_support([R_BUS], index.items) == {R_BUS: [FID["bus"]]}


def result(
    method: RetrievalMethod,
    judge: JudgeKind,
    found: list[bool],
    retrieved: int,
    phases: list[int],
    calls: int,
) -> ValidationResult:
    fids = [make_id("fact", "s", i) for i in range(retrieved)]
    iterations = []
    start = 0
    for number, size in enumerate(phases):
        iterations.append(
            ProspectionIteration(iteration=number, steps=[], new_fids=fids[start : start + size])
        )
        start += size
    judgements = judged(*found)
    return ValidationResult(
        result_id=make_id("result", method, judge, retrieved),
        query_id=make_id("query", retrieved),
        persona_id=PID,
        method=method,
        judge=judge,
        memory_as_of=DAY,
        memory_size=100,
        retrieved_fids=fids,
        judgements=judgements,
        recall=recall(judgements),
        recall_exact=recall_exact(judgements),
        ndcg=0.5,
        llm_calls=calls,
        embedding_calls=calls - 1 if calls else 1,
        iterations=iterations,
    )


def test_summary_means_per_method_and_judge() -> None:
    results = [
        result(
            RetrievalMethod.QUERY_ONLY, JudgeKind.PROVENANCE, [True, False, False, False], 20, [], 0
        ),
        result(RetrievalMethod.QUERY_ONLY, JudgeKind.PROVENANCE, [True, True, True], 20, [], 0),
        result(
            RetrievalMethod.PGR_TOT,
            JudgeKind.PROVENANCE,
            [True, True, False, True],
            30,
            [20, 8, 2],
            5,
        ),
        result(RetrievalMethod.PGR_TOT, JudgeKind.PROVENANCE, [True, True, True], 24, [24], 3),
    ]
    summary = summarise(results)
    baseline = summary.row("query_only", "provenance")
    assert (
        baseline.n == 2
        and baseline.recall == pytest.approx((0.25 + 1.0) / 2)
        and baseline.recall_exact == 0.5
    )
    assert baseline.phase1_facts is None and baseline.facts_retrieved == 20
    tot = summary.row(RetrievalMethod.PGR_TOT, JudgeKind.PROVENANCE)
    assert tot.recall == pytest.approx((0.75 + 1.0) / 2)
    assert tot.llm_calls == 4.0 and tot.facts_retrieved == 27.0
    assert tot.phase1_facts == 22.0 and tot.phase2_new_facts == 5.0 and tot.refinements == 1.0
    markdown = summary_markdown(summary)
    assert "| pgr_tot | provenance | 2 | 0.875 | 0.500 |" in markdown
    assert "| query_only | provenance | 2 | 0.625 | 0.500 |" in markdown
    with pytest.raises(KeyError):
        summary.row("pgr_cot", "llm")
    assert summary_markdown(summarise([])) == "No PGR validation results.\n"
