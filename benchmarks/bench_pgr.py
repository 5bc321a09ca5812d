"""PGR cost and retrieval latency on constructed stores (offline: simulator + local embedder).

1. LLM calls, embedding requests and facts retrieved per query, by method, on
   the sample scenario (two queries over user0's profile-derived memory).
2. Retrieval latency per sub-query over a 2,000-fact memory indexed with the
   local embedder: the top-K search alone, and embed + search when a phase's
   probes go out in one batched request (as the runner does) or one by one.

Run: ``.venv/bin/python benchmarks/bench_pgr.py [--facts 2000] [--rounds 20]``
"""

from __future__ import annotations

import argparse
import asyncio
import datetime as dt
import json
import statistics
import time

from memoryquest.contracts import RetrievalMethod
from memoryquest.llm.client import ModelClient
from memoryquest.llm.factory import shared_local_embedder
from memoryquest.llm.simulated import SimulatedChatBackend
from memoryquest.pgr.metrics import summarise
from memoryquest.pgr.retrieval import IndexCache, Retriever
from memoryquest.pgr.runner import validate_queries
from memoryquest.pgr.sample import SCENARIO, large_store, sample_dataset
from memoryquest.settings import PGRSettings
from memoryquest.simulator import simulate


def client() -> ModelClient:
    return ModelClient(SimulatedChatBackend(), shared_local_embedder())


async def cost_by_method(background: int) -> None:
    model = client()
    dataset = await sample_dataset(model, background=background)
    for answers in (False, True):
        settings = PGRSettings(generate_answers=answers)
        started = time.perf_counter()
        results = await validate_queries(
            dataset.queries, dataset.facts, model, settings, judges=["provenance"]
        )
        seconds = time.perf_counter() - started
        label = "with answers (PAG)" if answers else "retrieval + summary only"
        print(
            f"\n[1] cost per query, {len(dataset.queries)} queries, {len(dataset.facts)} facts, {label} ({seconds:.1f} s)"
        )
        print(
            f"    {'method':<11} {'LLM calls':>9} {'embed req':>9} {'facts':>7} {'Ph-1':>6} {'Ph-2 new':>8} {'refine':>6} {'recall':>7}"
        )
        for row in summarise(results).rows:
            phase1 = "-" if row.phase1_facts is None else f"{row.phase1_facts:.1f}"
            phase2 = "-" if row.phase2_new_facts is None else f"{row.phase2_new_facts:.1f}"
            refine = "-" if row.refinements is None else f"{row.refinements:.1f}"
            print(
                f"    {row.method.value:<11} {row.llm_calls:>9.2f} {row.embedding_calls:>9.2f} {row.facts_retrieved:>7.1f} "
                f"{phase1:>6} {phase2:>8} {refine:>6} {row.recall:>7.3f}"
            )


def phase_probes() -> list[list[str]]:
    """Realistic sub-queries: the simulator's Phase 1 chains and trees for the scenario queries."""
    phases = []
    for scenario in SCENARIO:
        variables = {
            "query": scenario.text,
            "query_date": scenario.date.isoformat(),
            "augmented_query": scenario.text,
        }
        for seed in range(3):
            chain = json.loads(simulate("pgr_cot_initial", variables, seed=seed))["steps"]
            tree = json.loads(simulate("pgr_tot_initial", variables, seed=seed))["nodes"]
            phases.append([f"{s['action']} — {s['constraints']}" for s in chain])
            phases.append([f"{n['action']} — {n['constraints']}" for n in tree])
    return phases


async def latency(n_facts: int, rounds: int) -> None:
    model = client()
    persona_id, facts = large_store(n_facts)
    started = time.perf_counter()
    index = await IndexCache().get(persona_id, dt.date(2100, 1, 1), facts, model)
    build = time.perf_counter() - started
    print(f"\n[2] retrieval latency over {len(index)} facts (embedder {model.embedder_name})")
    print(
        f"    index build: {build:.1f} s for {len(index)} fact texts ({len(index) / build:.0f} texts/s, one batched request)"
    )
    settings = PGRSettings()
    phases = phase_probes()
    probes = [p for phase in phases for p in phase]
    vectors = await model.embed(probes, stage="pgr")
    search_ms = []
    for _ in range(rounds):
        started = time.perf_counter()
        index.search(vectors, settings.step_k, settings.step_tau)
        search_ms.append((time.perf_counter() - started) * 1000 / len(probes))
    print(
        f"    top-K search only: {statistics.median(search_ms):.3f} ms per sub-query (median of {rounds} rounds, {len(probes)} probes)"
    )
    batched_ms = []
    for _ in range(max(1, rounds // 4)):
        for phase in phases:
            retriever = Retriever(index, model)
            started = time.perf_counter()
            await retriever.retrieve(phase, settings.step_k, settings.step_tau)
            batched_ms.append((time.perf_counter() - started) * 1000 / len(phase))
    mean_phase = statistics.mean(len(p) for p in phases)
    print(
        f"    embed + search, one request per phase ({mean_phase:.1f} probes): {statistics.median(batched_ms):.2f} ms per sub-query"
    )
    single_ms = []
    retriever = Retriever(index, model)
    for probe in probes[: min(len(probes), 40)]:
        started = time.perf_counter()
        await retriever.retrieve([probe], settings.step_k, settings.step_tau)
        single_ms.append((time.perf_counter() - started) * 1000)
    print(
        f"    embed + search, one request per probe: {statistics.median(single_ms):.2f} ms per sub-query"
    )


async def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--facts", type=int, default=2000, help="memory size for the latency part")
    parser.add_argument(
        "--rounds", type=int, default=20, help="timing rounds for the search-only figure"
    )
    parser.add_argument(
        "--background", type=int, default=200, help="profile facts in the cost scenario"
    )
    args = parser.parse_args()
    print(
        f"methods: {', '.join(m.value for m in RetrievalMethod)}; defaults {PGRSettings().model_dump()}"
    )
    await cost_by_method(args.background)
    await latency(args.facts, args.rounds)


if __name__ == "__main__":
    asyncio.run(main())
