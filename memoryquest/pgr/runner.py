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
"""

from __future__ import annotations

import asyncio
import datetime as dt
import logging
from collections.abc import Awaitable, Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

from pydantic import BaseModel

from memoryquest.contracts import (
    Fact,
    JudgeKind,
    ProspectionIteration,
    ProspectionStep,
    Query,
    ReferenceJudgement,
    RejectedCandidate,
    RejectionReason,
    RetrievalMethod,
    Stage,
    ValidationResult,
)
from memoryquest.generation.common import failure_reason, rejected
from memoryquest.ids import make_id
from memoryquest.llm.client import LLMOutputError, ModelClient
from memoryquest.memory.snapshot import MemoryItem
from memoryquest.pgr.baselines import (
    BASELINE_METHODS,
    EXPANSIONS,
    LexicalCache,
    budget_hits,
    parse_baselines,
)
from memoryquest.pgr.judges import Judge, build_judges
from memoryquest.pgr.metrics import (
    PGRSummary,
    PGRSummaryRow,
    ndcg,
    recall,
    recall_exact,
    relevant_fids,
    summarise,
    summary_markdown,
)
from memoryquest.pgr.prospection import (
    PlanShape,
    ProspectionTreeError,
    chain_steps,
    facts_view,
    parse_tree,
    probe_text,
    steps_view,
)
from memoryquest.pgr.prospection_contracts import (
    AnswerInputs,
    AugmentedQuery,
    AugmentInputs,
    ChainPlan,
    CotInitialInputs,
    CotRefineInputs,
    GeneratedAnswer,
    PlanInputs,
    ProspectionSummary,
    SummaryInputs,
    TotInitialInputs,
    TotRefineInputs,
    TreePlan,
)
from memoryquest.pgr.retrieval import Hit, IndexCache, MemoryIndex, Retriever
from memoryquest.prompt_inputs import PromptInputs
from memoryquest.settings import PGRSettings

__all__ = [
    "PGRError",
    "PGRSummary",
    "PGRSummaryRow",
    "RankedFact",
    "RetrievalOutcome",
    "RetrievedSet",
    "parse_methods",
    "refine_until_converged",
    "result_id",
    "run_baseline",
    "run_query",
    "summarise",
    "summary_markdown",
    "validate_queries",
]

log = logging.getLogger(__name__)

STAGE = Stage.PGR


@dataclass(frozen=True)
class Planning:
    """How a PGR method plans: the shape of its plan and the inputs of its two prompts
    (whose ``output_model`` is the plan it answers with)."""

    shape: PlanShape
    initial: type[CotInitialInputs] | type[TotInitialInputs]
    refine: type[CotRefineInputs] | type[TotRefineInputs]


PLANNING: dict[RetrievalMethod, Planning] = {
    RetrievalMethod.PGR_COT: Planning("chain", CotInitialInputs, CotRefineInputs),
    RetrievalMethod.PGR_TOT: Planning("tree", TotInitialInputs, TotRefineInputs),
}

ModelT = TypeVar("ModelT", bound=BaseModel)
TREE_ATTEMPTS = 2  # a tree with duplicate ids or a cycle is asked for once more, with another seed


class PGRError(RuntimeError):
    """A query could not be run; the message names the query, method and round."""


class RankedFact(BaseModel):
    fid: str
    score: float
    iteration: int  # 0 = query / augmentation / Phase 1 (and query-only); 1.. = refinements


class RetrievalOutcome(BaseModel):
    """What one method retrieved for one query, and how."""

    query_id: str
    persona_id: str
    method: RetrievalMethod
    memory_as_of: dt.date
    memory_size: int
    ranked: list[RankedFact]
    budget: int = (
        0  # facts the method was allowed to return (query-only: K; PGR: what it retrieved)
    )
    baseline_for: RetrievalMethod | None = None  # the PGR method whose budget a baseline was given
    iterations: list[ProspectionIteration] = []
    llm_calls: int = 0
    embedding_calls: int = 0
    augmented_query: str | None = None
    summary: str | None = None
    answer: str | None = None
    repairs: list[str] = []

    @property
    def retrieved_fids(self) -> list[str]:
        return [fact.fid for fact in self.ranked]


class RetrievedSet:
    """R: the accumulated facts, ranked by the round that first found them, then by best cosine."""

    def __init__(self) -> None:
        self._first: dict[str, tuple[int, float]] = {}

    def __contains__(self, fid: object) -> bool:
        return fid in self._first

    def __len__(self) -> int:
        return len(self._first)

    def add(self, iteration: int, hits: Iterable[Hit]) -> list[str]:
        """Add one round's hits; return the facts new to R, best first (Δ)."""
        best: dict[str, float] = {}
        for fid, score in hits:
            if fid not in self._first and score > best.get(fid, float("-inf")):
                best[fid] = score
        new = sorted(best, key=lambda fid: (-best[fid], fid))
        for fid in new:
            self._first[fid] = (iteration, best[fid])
        return new

    def ranked(self) -> list[RankedFact]:
        order = sorted(self._first.items(), key=lambda kv: (kv[1][0], -kv[1][1], kv[0]))
        return [RankedFact(fid=fid, score=score, iteration=it) for fid, (it, score) in order]


Propose = Callable[[list[ProspectionStep], int], Awaitable[list[ProspectionStep]]]
RetrieveSteps = Callable[[list[ProspectionStep]], Awaitable[list[list[Hit]]]]


def with_retrieved(
    steps: Sequence[ProspectionStep], hits: Sequence[Sequence[Hit]]
) -> list[ProspectionStep]:
    return [
        step.model_copy(update={"retrieved_fids": [hit.fid for hit in step_hits]})
        for step, step_hits in zip(steps, hits, strict=True)
    ]


async def refine_until_converged(
    previous: list[ProspectionStep],
    found: RetrievedSet,
    propose: Propose,
    retrieve: RetrieveSteps,
    *,
    delta: int,
    max_iterations: int,
) -> list[ProspectionIteration]:
    """Phase 2: re-plan, retrieve, add Δ to R; stop once |Δ| < delta or after max_iterations rounds."""
    iterations: list[ProspectionIteration] = []
    for iteration in range(1, max_iterations + 1):
        steps = await propose(previous, iteration)
        hits = await retrieve(steps)
        new = found.add(iteration, (hit for step_hits in hits for hit in step_hits))
        iterations.append(
            ProspectionIteration(
                iteration=iteration, steps=with_retrieved(steps, hits), new_fids=new
            )
        )
        previous = steps
        if len(new) < delta:
            break
    return iterations


class _Calls:
    """Counts the LLM calls of one query run; they share one prompt-cache scope, the query's,
    since only its own calls repeat its prompts' request and facts."""

    def __init__(self, client: ModelClient, query: Query) -> None:
        self.client = client
        self.count = 0
        self.cache_scope = f"query:{query.query_id}"

    async def ask(
        self,
        inputs: PromptInputs,
        model: type[ModelT],
        seed: int = 0,
    ) -> ModelT:
        """The answer to ``inputs``'s template (``model``, its output model, types the answer)."""
        self.count += 1
        answer: ModelT = await self.client.complete(
            inputs.request(seed=seed, cache_scope=self.cache_scope)
        )
        return answer


def _chronological(index: MemoryIndex, fids: Iterable[str]) -> list[MemoryItem]:
    return sorted((index.item(fid) for fid in fids), key=lambda item: (item.date, item.fid))


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
        calls = _Calls(client, query)
        answer = await _answer(calls, query, _chronological(index, outcome.retrieved_fids), "")
        return outcome.model_copy(update={"answer": answer, "llm_calls": calls.count})
    return await _run_pgr(
        query, index, method, Retriever(index, client), _Calls(client, query), settings
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
        query_id=query.query_id,
        persona_id=query.persona_id,
        method=method,
        memory_as_of=index.as_of,
        memory_size=len(index),
        ranked=[RankedFact(fid=h.fid, score=h.score, iteration=0) for h in hits],
        budget=budget,
        baseline_for=baseline_for,
        llm_calls=1 if method in EXPANSIONS and budget > 0 and len(index) else 0,
        embedding_calls=retriever.embedding_requests,
    )


async def _run_pgr(
    query: Query,
    index: MemoryIndex,
    method: RetrievalMethod,
    retriever: Retriever,
    calls: _Calls,
    settings: PGRSettings,
) -> RetrievalOutcome:
    planning = PLANNING[method]
    shape = planning.shape
    plan_model: type[ChainPlan] | type[TreePlan] = ChainPlan if shape == "chain" else TreePlan
    repairs: list[str] = []

    async def plan(inputs: PlanInputs, iteration: int) -> list[ProspectionStep]:
        """Ask for a chain or tree; a tree that cannot be repaired is asked for once more."""
        for attempt in range(TREE_ATTEMPTS):
            answer = await calls.ask(inputs, plan_model, seed=attempt)
            if isinstance(answer, ChainPlan):
                return chain_steps(answer)
            try:
                parsed = parse_tree(answer.nodes, repair=True)
            except ProspectionTreeError as exc:
                log.warning(
                    "query %s %s iteration %d: unusable tree (%s)",
                    query.query_id,
                    method.value,
                    iteration,
                    exc,
                )
                if attempt + 1 < TREE_ATTEMPTS:
                    continue
                raise PGRError(
                    f"query {query.query_id}, {method.value}, iteration {iteration}: "
                    f"{TREE_ATTEMPTS} trees were unusable; last: {exc}"
                ) from exc
            repairs.extend(f"iteration {iteration}: {note}" for note in parsed.repairs)
            for note in parsed.repairs:
                log.info(
                    "query %s %s iteration %d: repaired tree: %s",
                    query.query_id,
                    method.value,
                    iteration,
                    note,
                )
            return parsed.steps
        raise AssertionError("unreachable")

    # Augmentation: one embedding of q serves both φ(q; K_o, τ_o) and φ(q; K, τ).
    query_vector = await retriever.embed([query.text])
    context = index.search(query_vector, settings.augment_k, settings.augment_tau)[0]
    query_hits = index.search(query_vector, settings.step_k, settings.step_tau)[0]
    augmented = await calls.ask(
        AugmentInputs(
            query=query.text,
            query_date=query.query_date.isoformat(),
            context_facts=facts_view([index.item(h.fid) for h in context]),
        ),
        AugmentedQuery,
    )
    common = PlanInputs(
        query=query.text,
        query_date=query.query_date.isoformat(),
        augmented_query=augmented.augmented_query.strip(),
    )

    async def retrieve(steps: list[ProspectionStep]) -> list[list[Hit]]:
        return await retriever.retrieve(
            [probe_text(s) for s in steps], settings.step_k, settings.step_tau
        )

    # Phase 1.
    steps = await plan(planning.initial(**common.model_dump()), 0)
    hits = await retrieve(steps)
    found = RetrievedSet()
    new = found.add(0, [*query_hits, *(hit for step_hits in hits for hit in step_hits)])
    iterations = [
        ProspectionIteration(iteration=0, steps=with_retrieved(steps, hits), new_fids=new)
    ]

    # Phase 2.
    async def propose(previous: list[ProspectionStep], iteration: int) -> list[ProspectionStep]:
        inputs = planning.refine(
            **common.model_dump(),
            previous_steps=steps_view(previous, shape),
            # In the order found, not by date: each round's facts then extend the last
            # round's, so the provider caches the prompt up to the new ones.
            facts=facts_view([index.item(f.fid) for f in found.ranked()]),
        )
        return await plan(inputs, iteration)

    iterations += await refine_until_converged(
        steps,
        found,
        propose,
        retrieve,
        delta=settings.delta,
        max_iterations=settings.max_iterations,
    )

    ranked = found.ranked()
    facts_in_time = _chronological(index, (f.fid for f in ranked))
    summary = await calls.ask(
        SummaryInputs(
            **common.model_dump(),
            steps=steps_view(iterations[-1].steps, shape),
            facts=facts_view(facts_in_time),
        ),
        ProspectionSummary,
    )
    answer = None
    if settings.generate_answers:
        answer = await _answer(calls, query, facts_in_time, summary.summary)
    return RetrievalOutcome(
        query_id=query.query_id,
        persona_id=query.persona_id,
        method=method,
        memory_as_of=index.as_of,
        memory_size=len(index),
        ranked=ranked,
        budget=len(ranked),
        iterations=iterations,
        llm_calls=calls.count,
        embedding_calls=retriever.embedding_requests,
        augmented_query=common.augmented_query,
        summary=summary.summary,
        answer=answer,
        repairs=repairs,
    )


async def _answer(calls: _Calls, query: Query, facts: list[MemoryItem], summary: str) -> str:
    """Prospection-augmented generation (PAG): an answer from the facts and, for PGR, the summary."""
    reply = await calls.ask(
        AnswerInputs(
            query=query.text,
            query_date=query.query_date.isoformat(),
            facts=facts_view(facts),
            summary=summary,
        ),
        GeneratedAnswer,
    )
    return reply.answer


def result_id(
    query_id: str,
    method: RetrievalMethod,
    judge: JudgeKind,
    baseline_for: RetrievalMethod | None = None,
) -> str:
    """Stable row id; a budget-matched baseline also names the method whose budget it used."""
    if baseline_for is None:
        return make_id("result", query_id, method.value, judge.value)
    return make_id("result", query_id, method.value, judge.value, "budget_of", baseline_for.value)


async def score_outcomes(
    query: Query,
    outcomes: Sequence[RetrievalOutcome],
    index: MemoryIndex,
    judges: Sequence[Judge],
    client: ModelClient,
) -> list[ValidationResult]:
    """One validation row per outcome × judge, in that order; each judge sees every outcome of
    the query at once (the model judge reads them in one call)."""
    retrieved = [[index.item(fid) for fid in o.retrieved_fids] for o in outcomes]
    verdicts = [await judge.judge_sets(query, retrieved, index, client) for judge in judges]
    relevant = relevant_fids((r.reference_id for r in query.references), index.items)
    return [
        result_row(query, outcome, relevant, judge.kind, verdicts[j][o])
        for o, outcome in enumerate(outcomes)
        for j, judge in enumerate(judges)
    ]


_AS_RETRIEVED = tuple(
    name for name in ValidationResult.model_fields if name in RetrievalOutcome.model_fields
)
"""A validation row's fields that are the outcome's own, the same under every judge."""


def result_row(
    query: Query,
    outcome: RetrievalOutcome,
    relevant: set[str],
    judge: JudgeKind,
    judgements: list[ReferenceJudgement],
) -> ValidationResult:
    """One validation row: the outcome as one judge saw it (``relevant``: the facts that descend
    from the query's references, for nDCG)."""
    return ValidationResult(
        **{name: getattr(outcome, name) for name in _AS_RETRIEVED},
        result_id=result_id(query.query_id, outcome.method, judge, outcome.baseline_for),
        judge=judge,
        retrieved_fids=outcome.retrieved_fids,
        judgements=judgements,
        recall=recall(judgements),
        recall_exact=recall_exact(judgements),
        ndcg=ndcg(outcome.retrieved_fids, relevant),
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
