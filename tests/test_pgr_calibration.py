"""The judges' error, measured on facts whose answer the provenance judge knows."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from memoryquest.cli.main import main
from memoryquest.contracts import Domain, JudgeKind
from memoryquest.dataset import GeneratedDataset
from memoryquest.llm.client import ModelClient
from memoryquest.llm.factory import shared_local_embedder
from memoryquest.llm.simulated import SimulatedChatBackend
from memoryquest.pgr.calibration import (
    NEAR_MISS,
    OTHER_QUERY,
    RIGHT,
    calibrate_queries,
    calibration_items,
    calibration_report,
    cohen_kappa,
    wilson_interval,
)
from memoryquest.pgr.judges import EmbeddingJudge, LLMJudge
from memoryquest.pgr.retrieval import IndexCache, MemoryIndex
from memoryquest.pgr.sample import sample_dataset


@pytest.fixture(scope="module")
def client() -> ModelClient:
    return ModelClient(SimulatedChatBackend(), shared_local_embedder())


@pytest.fixture(scope="module")
def sample(client: ModelClient) -> GeneratedDataset:
    return asyncio.run(sample_dataset(client, background=40))


@pytest.fixture(scope="module")
def indexes(sample: GeneratedDataset, client: ModelClient) -> dict[str, MemoryIndex]:
    cache = IndexCache()
    return {
        q.query_id: asyncio.run(cache.get(q.persona_id, q.query_date, sample.facts, client))
        for q in sample.queries
    }


def domains_for(sample: GeneratedDataset, indexes: dict[str, MemoryIndex]) -> dict[str, Domain]:
    """The sample has no sessions: put the uncredited facts' sessions in the first query's
    reference domains, a few each, so that every reference has near misses."""
    query = max(sample.queries, key=lambda q: q.query_date)
    loose = [i for i in indexes[query.query_id].items if not i.source_reference_ids]
    domains: dict[str, Domain] = {}
    for n, item in enumerate(loose):
        for session in item.session_ids:
            domains[session] = query.references[n % len(query.references)].domain
    return domains


def test_the_calibration_facts_are_what_their_kind_says(
    sample: GeneratedDataset, indexes: dict[str, MemoryIndex]
) -> None:
    other, query = sorted(sample.queries, key=lambda q: q.query_date)  # the later one sees both
    index = indexes[query.query_id]
    domains = domains_for(sample, indexes)
    picked = calibration_items(query, index.items, domains, per_kind=2)
    assert picked == calibration_items(query, index.items, domains, per_kind=2)  # reproducible
    own = {r.reference_id for r in query.references}
    theirs = {r.reference_id for r in other.references}
    by_reference = {r.reference_id: r for r in query.references}
    for reference_id, kind, item in picked:
        credited = set(item.source_reference_ids)
        if kind == RIGHT:
            assert reference_id in credited
        elif kind == OTHER_QUERY:
            assert credited and credited <= theirs and not credited & own
        else:
            assert kind == NEAR_MISS and not credited
            wanted = by_reference[reference_id].domain
            assert wanted in {domains.get(s) for s in item.session_ids}
    kinds = {kind for _, kind, _ in picked}
    assert kinds == {RIGHT, OTHER_QUERY, NEAR_MISS}
    for reference_id in own:
        for kind in (RIGHT, OTHER_QUERY, NEAR_MISS):
            assert sum(1 for r, k, _ in picked if (r, k) == (reference_id, kind)) <= 2


@pytest.mark.parametrize(
    ("threshold", "false_accept", "false_reject"),
    [(-1.0, 1.0, 0.0), (1.01, 0.0, 1.0)],
    ids=["accepts everything", "accepts nothing"],
)
def test_the_rates_measure_the_judge(
    sample: GeneratedDataset,
    indexes: dict[str, MemoryIndex],
    client: ModelClient,
    threshold: float,
    false_accept: float,
    false_reject: float,
) -> None:
    """An embedding judge that accepts any fact, or none, gets the error rates that say so."""
    items, unjudged = asyncio.run(
        calibrate_queries(
            sample.queries,
            indexes,
            [EmbeddingJudge(threshold)],
            client,
            domains_for(sample, indexes),
            per_kind=2,
        )
    )
    (row,) = calibration_report(items, [], per_kind=2).judges
    assert not unjudged and row.judge is JudgeKind.EMBEDDING
    assert row.right > 0 and row.other_query > 0 and row.near_miss > 0
    assert (row.false_accept, row.false_reject) == (false_accept, false_reject)
    assert row.false_accept_low <= row.false_accept <= row.false_accept_high


def test_the_model_judge_is_calibrated_in_one_call_per_query(
    sample: GeneratedDataset, indexes: dict[str, MemoryIndex], client: ModelClient
) -> None:
    judge = LLMJudge()
    items, _ = asyncio.run(
        calibrate_queries(
            sample.queries, indexes, [judge], client, domains_for(sample, indexes), per_kind=2
        )
    )
    assert judge.llm_calls == len(sample.queries)
    (row,) = calibration_report(items, [], per_kind=2).judges
    # The simulator's judge reads content words: it finds the facts that state a reference.
    assert row.judge is JudgeKind.LLM and row.false_reject < 0.5


def test_wilson_interval_and_kappa() -> None:
    low, high = wilson_interval(0, 10)
    assert low == 0.0 and high == pytest.approx(0.2775, abs=1e-4)
    low, high = wilson_interval(5, 10)
    assert (low, high) == (pytest.approx(0.2366, abs=1e-4), pytest.approx(0.7634, abs=1e-4))
    assert wilson_interval(0, 0) == (0.0, 1.0)
    same = [True, False, True, True, False]
    assert cohen_kappa(same, same) == pytest.approx(1.0)
    assert cohen_kappa(same, [not v for v in same]) < -0.5
    assert cohen_kappa([True, True, False, False], [True, False, True, False]) == pytest.approx(0.0)
    assert cohen_kappa([True, True], [True, True]) is None
    with pytest.raises(ValueError):
        cohen_kappa([], [])


def test_pgr_run_prints_and_writes_the_judges_error(
    sample: GeneratedDataset,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    clean_settings_env: pytest.MonkeyPatch,
) -> None:
    source = sample.save(tmp_path / "dataset")
    out = tmp_path / "pgr.jsonl"
    code = main(
        [
            "pgr", "run", str(source), "--method", "query_only",
            "--judge", "provenance", "--judge", "embedding",
            "--set", f"cache.directory={tmp_path / 'cache'}", "--output", str(out),
        ]
    )  # fmt: skip
    assert code == 0
    printed = capsys.readouterr().out
    assert "Judges' error on known facts" in printed
    assert "provenance vs embedding" in printed or "embedding vs provenance" in printed
    report = json.loads((tmp_path / "pgr.calibration.json").read_text(encoding="utf-8"))
    assert [row["judge"] for row in report["judges"]] == ["embedding"]
    assert report["agreement"] and report["agreement"][0]["verdicts"] > 0
