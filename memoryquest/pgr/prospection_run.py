"""One PGR run for one query, as in the paper (§3.3): augmentation, Phase 1 (a chain or tree
of steps, each retrieving), Phase 2 (re-plan until a round adds fewer than δ facts), the
prospection summary and, optionally, an answer (PAG). The query's LLM calls are counted
here; its embedding requests by the :class:`~memoryquest.pgr.retrieval.Retriever`."""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import TypeVar

from pydantic import BaseModel

from memoryquest.contracts import ProspectionIteration, ProspectionStep, Query, RetrievalMethod
from memoryquest.llm.client import ModelClient
from memoryquest.memory.snapshot import MemoryItem
from memoryquest.pgr.outcomes import PGRError, RetrievalOutcome, RetrievedSet, searched
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
from memoryquest.pgr.retrieval import Hit, MemoryIndex, Retriever
from memoryquest.prompt_inputs import PromptInputs
from memoryquest.settings import PGRSettings

log = logging.getLogger(__name__)


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


class QueryCalls:
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


def chronological(index: MemoryIndex, fids: Iterable[str]) -> list[MemoryItem]:
    return sorted((index.item(fid) for fid in fids), key=lambda item: (item.date, item.fid))


async def run_pgr(
    query: Query,
    index: MemoryIndex,
    method: RetrievalMethod,
    retriever: Retriever,
    calls: QueryCalls,
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
    facts_in_time = chronological(index, (f.fid for f in ranked))
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
        answer = await generate_answer(calls, query, facts_in_time, summary.summary)
    return RetrievalOutcome(
        **searched(query, retriever),
        method=method,
        ranked=ranked,
        budget=len(ranked),
        iterations=iterations,
        llm_calls=calls.count,
        augmented_query=common.augmented_query,
        summary=summary.summary,
        answer=answer,
        repairs=repairs,
    )


async def generate_answer(
    calls: QueryCalls, query: Query, facts: list[MemoryItem], summary: str
) -> str:
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
