"""Run query-only retrieval and PGR for queries, then score them with the judges.

PGR, as in the paper (§3.3):

1. augmentation: q_A = LLM(q, φ(q; K_o, τ_o));
2. Phase 1: a chain or tree of steps from q_A; R = φ(q) ∪ ⋃ φ(step);
3. Phase 2: re-plan from q_A, R and the previous steps; Δ = ⋃ φ(step) \\ R;
   R ← R ∪ Δ; stop when |Δ| < δ or after I_max refinements;
4. a prospection summary, and optionally an answer conditioned on R and the
   summary (PAG).

Every retrieval runs over the memory as it stood on the query date. The
trace (steps, what each retrieved, what each round added) and the number of
LLM calls and embedding requests are kept per query. Counts are method cost:
the query's own requests (augmentation, plans, summary, answer; one embedding
request for the query and one per retrieval phase). Embedding the memory
snapshot is shared by every query on that date and judge calls are
evaluation cost, so neither is counted.

Recall grows with the number of facts returned, so each PGR run is also
compared with baselines at its own budget (:mod:`memoryquest.pgr.baselines`):
for every query, dense query-only, BM25 and random retrieval are asked for
exactly as many facts as the PGR method returned, over the same snapshot, and
scored by the same judges. Their rows carry ``baseline_for`` (the PGR method)
and ``budget``; every row carries ``budget``.

The PGR run itself is :mod:`~memoryquest.pgr.prospection_run`; what a method retrieved is a
:class:`~memoryquest.pgr.outcomes.RetrievalOutcome`, scored into validation rows by
:mod:`~memoryquest.pgr.scoring`.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable, Sequence
from typing import Any, Final

from memoryquest.contracts import (
    Fact,
    JudgeKind,
    Query,
    RejectedCandidate,
    RejectionReason,
    RetrievalMethod,
    Stage,
    ValidationResult,
)
from memoryquest.generation.common import failure_reason, rejected
from memoryquest.llm.client import LLMOutputError, ModelClient
from memoryquest.pgr.baselines import (
    BASELINE_METHODS,
    EXPANSIONS,
    LexicalCache,
    budget_hits,
    parse_baselines,
)
from memoryquest.pgr.judges import Judge, build_judges
from memoryquest.pgr.metrics import PGRSummary, PGRSummaryRow, summarise, summary_markdown
from memoryquest.pgr.outcomes import PGRError, RankedFact, RetrievalOutcome, searched
from memoryquest.pgr.prospection_run import (
    PLANNING,
    QueryCalls,
    chronological,
    generate_answer,
    run_pgr,
)
from memoryquest.pgr.retrieval import IndexCache, MemoryIndex, Retriever
from memoryquest.pgr.scoring import score_outcomes
from memoryquest.settings import PGRSettings

__all__ = [
    "PGRSummary",
    "PGRSummaryRow",
    "parse_methods",
    "run_baseline",
    "run_query",
    "summarise",
    "summary_markdown",
    "validate_queries",
]


STAGE: Final = Stage.PGR


def parse_methods(methods: Iterable[RetrievalMethod | str]) -> list[RetrievalMethod]:
    parsed = []
    for method in methods:
        try:
            parsed.append(RetrievalMethod(method))
        except ValueError:
            choices = ", ".join(m.value for m in RetrievalMethod)
            raise ValueError(
                f"unknown retrieval method {method!r}; choose from {choices}"
            ) from None
    return parsed


async def run_query(
    query: Query,
    facts: list[Fact],
    method: RetrievalMethod,
    client: ModelClient,
    settings: PGRSettings,
    *,
    index_cache: IndexCache | None = None,
    lexical: LexicalCache | None = None,
) -> RetrievalOutcome:
    """Retrieve for one query with one method over the memory as of the query date.

    ``facts`` may hold every persona's facts; only the query's persona's are searched.
    Query-only, BM25 and random retrieve K = ``query_only_k`` facts here.
    """
    method = parse_methods([method])[0]
    cache = index_cache if index_cache is not None else IndexCache()
    index = await cache.get(query.persona_id, query.query_date, facts, client)
    if method in BASELINE_METHODS:
        # Query-only, or BM25 / random on their own, at the query-only budget K.
        outcome = await run_baseline(
            query, index, method, settings.query_only_k, client, settings, lexical=lexical
        )
        if not settings.generate_answers:
            return outcome
        calls = QueryCalls(client, query)
        answer = await generate_answer(
            calls, query, chronological(index, outcome.retrieved_fids), ""
        )
        return outcome.model_copy(update={"answer": answer, "llm_calls": calls.count})
    return await run_pgr(
        query, index, method, Retriever(index, client), QueryCalls(client, query), settings
    )


async def run_baseline(
    query: Query,
    index: MemoryIndex,
    method: RetrievalMethod,
    budget: int,
    client: ModelClient,
    settings: PGRSettings,
    *,
    baseline_for: RetrievalMethod | None = None,
    lexical: LexicalCache | None = None,
) -> RetrievalOutcome:
    """A budget baseline's retrieval of ``budget`` facts over ``index`` (one LLM call for the
    query expansions, none for the others)."""
    retriever = Retriever(index, client)
    hits = await budget_hits(
        method,
        query,
        retriever,
        budget,
        tau=settings.query_only_tau,
        seed=settings.baseline_seed,
        lexical=lexical if lexical is not None else LexicalCache(),
        expansion=settings.expansion_texts,
    )
    return RetrievalOutcome(
        **searched(query, retriever),
        method=method,
        ranked=[RankedFact(fid=h.fid, score=h.score, iteration=0) for h in hits],
        budget=budget,
        baseline_for=baseline_for,
        llm_calls=1 if method in EXPANSIONS and budget > 0 and len(index) else 0,
    )


async def validate_queries(
    queries: list[Query],
    facts: list[Fact],
    client: ModelClient,
    settings: PGRSettings,
    *,
    methods: Sequence[RetrievalMethod | str] | None = None,
    judges: Sequence[JudgeKind | str | Judge] | None = None,
    baselines: Sequence[RetrievalMethod | str] | None = None,
    index_cache: IndexCache | None = None,
    failures: list[RejectedCandidate] | None = None,
) -> list[ValidationResult]:
    """One result per query × method × judge, in that order; after each PGR method's
    rows, its budget-matched baselines (``baselines``, default ``settings.budget_baselines``),
    one result per baseline × judge.

    ``failures``: when given, a query × method whose model answers cannot be used
    (or do not fit the model's window), or a query the LLM judge cannot score, is
    recorded there with its reason and leaves no rows; the other queries go on.
    Without it the first such error is raised.

    ``llm_calls`` and ``embedding_calls`` count retrieval and generation only;
    judge calls are evaluation cost, not method cost.
    """
    method_list = parse_methods(methods if methods is not None else settings.methods)
    judge_list = build_judges(
        list(judges) if judges is not None else list(settings.judges), settings
    )
    baseline_list = parse_baselines(
        baselines if baselines is not None else settings.budget_baselines
    )
    cache = index_cache if index_cache is not None else IndexCache()
    lexical = LexicalCache()
    by_persona: dict[str, list[Fact]] = {}
    for fact in facts:
        by_persona.setdefault(fact.persona_id, []).append(fact)
    # Snapshots first, in query order: each costs at most one batched request, and none is built twice.
    indexes: dict[str, MemoryIndex] = {}
    for query in queries:
        indexes[query.query_id] = await cache.get(
            query.persona_id, query.query_date, by_persona.get(query.persona_id, []), client
        )

    def failed(query: Query, what: str, exc: Exception) -> list[Any]:
        if failures is None:
            raise exc
        reason = RejectionReason.INVARIANT if isinstance(exc, PGRError) else failure_reason(exc)
        failures.append(
            rejected(
                query.persona_id,
                STAGE,
                reason,
                f"query {query.query_id}, {what}: {exc}",
                {"query_id": query.query_id, "what": what, "error": str(exc)},
                query.query_id,
                what,
            )
        )
        return []

    async def one(query: Query, method: RetrievalMethod) -> list[RetrievalOutcome]:
        persona_facts = by_persona.get(query.persona_id, [])
        index = indexes[query.query_id]
        try:
            outcome = await run_query(
                query, persona_facts, method, client, settings, index_cache=cache, lexical=lexical
            )
        except (LLMOutputError, PGRError) as exc:
            return failed(query, method.value, exc)
        outcomes = [outcome]
        if method in PLANNING:
            for baseline in baseline_list:
                try:
                    outcomes.append(
                        await run_baseline(
                            query,
                            index,
                            baseline,
                            outcome.budget,
                            client,
                            settings,
                            baseline_for=method,
                            lexical=lexical,
                        )
                    )
                except LLMOutputError as exc:  # an expansion the model got wrong: that row alone
                    failed(query, f"{baseline.value} at {method.value}'s budget", exc)
        return outcomes

    async def scored(query: Query) -> list[ValidationResult]:
        per_method = await asyncio.gather(*(one(query, m) for m in method_list))
        outcomes = [o for group in per_method for o in group]
        try:
            return await score_outcomes(
                query, outcomes, indexes[query.query_id], judge_list, client
            )
        except LLMOutputError as exc:
            return failed(query, "judges", exc)

    groups = await asyncio.gather(*(scored(q) for q in queries))
    return [result for group in groups for result in group]
