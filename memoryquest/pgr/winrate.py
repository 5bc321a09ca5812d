"""Pairwise answer comparison from the user's point of view, in both orders.

Position bias is real in model judges, so every pair is judged twice with the
answers swapped; a win counts 1, a tie 0.5, a loss 0, and the two scores are
averaged. The win rate of A over B is the mean of that score over queries. The
judge sees each response under an opaque label, never "first" or a method's name,
and knows the user by their profile only: not the references, nor the memory they
were drawn from, unless the evaluation asks (and then the report says so).

:func:`answer_level` is the paper's response-level evaluation over a run's
results: an answer from each PGR retrieval and from each baseline given the same
budget, both from the retrieved facts alone by the same prompt, each PGR answer
judged against each baseline's, and the Win Rate per pair of methods with a 95%
bootstrap interval beside their Recall and RecallExact, the share of verdicts
that flipped with the order, each side's answer length, and a length-controlled
Win Rate (judges favour longer answers).
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from statistics import fmean

import numpy as np

from memoryquest.contracts import (
    Fact,
    JudgeKind,
    Persona,
    Query,
    RetrievalMethod,
    ValidationResult,
)
from memoryquest.llm.client import LLMOutputError, ModelClient
from memoryquest.memory.snapshot import MemoryItem, memory_as_of
from memoryquest.pgr.judges import JudgeOutputError
from memoryquest.pgr.metrics import CONFIDENCE, DEFAULT_BOOTSTRAP_SAMPLES, bootstrap_ci
from memoryquest.pgr.prospection import facts_view
from memoryquest.pgr.prospection_contracts import AnswerInputs, GeneratedAnswer
from memoryquest.pgr.winrate_contracts import (
    TIE,
    PairwiseInputs,
    PairwiseOutcome,
    PairwiseVerdict,
    Preferred,
    ScoredPair,
    Side,
    WinRateReport,
    WinRateRow,
)

__all__ = [
    "AnswerLevel",
    "PairwiseOutcome",
    "answer_level",
    "generate_answer",
    "length_controlled_win_rate",
    "opaque_labels",
    "pairwise_winrate",
    "persona_profile",
    "recall_judge",
    "win_rate",
    "win_rate_report",
]

log = logging.getLogger(__name__)


def opaque_labels(query_id: str) -> tuple[str, str]:
    """Two labels for a query's responses that say nothing of order or method (fixed per query)."""
    digest = hashlib.sha256(query_id.encode()).digest()
    letters = "BCDFGHJKLMNPQRSTVWXZ"
    first = "".join(letters[b % len(letters)] for b in digest[:3])
    second = "".join(letters[b % len(letters)] for b in digest[3:6])
    return (first, second) if first != second else (first, second + "Y")


def _side(verdict: PairwiseVerdict, label_a: str, label_b: str, query_id: str) -> Side:
    choice = verdict.choice.strip().strip('"').strip()
    if choice.lower() == TIE:
        return "tie"
    if choice == label_a:
        return "a"
    if choice == label_b:
        return "b"
    raise JudgeOutputError(
        f"judge_pairwise for query {query_id}: choice {verdict.choice!r} is neither "
        f"{label_a!r}, {label_b!r} nor 'tie'"
    )


def _points(side: Side) -> float:
    return {"a": 1.0, "tie": 0.5, "b": 0.0}[side]


def persona_profile(persona: Persona | None) -> str:
    """Who the judge plays: demographics and interests, nothing a query's answer key is drawn from."""
    if persona is None:
        return "(no profile)"
    facts = [
        f"{name.replace('_', ' ')}: {value}"
        for name, value in persona.demographics.model_dump().items()
        if value
    ]
    if persona.interests:
        facts.append("interested in: " + ", ".join(d.value for d in persona.interests))
    return "; ".join(facts) or "(no profile)"


async def pairwise_winrate(
    query: Query,
    answer_a: str,
    answer_b: str,
    profile: str,
    client: ModelClient,
    *,
    references: Sequence[str] = (),
) -> PairwiseOutcome:
    """Judge A against B twice (A first, then B first) and average the two verdicts.

    ``references`` are shown to the judge only when given: by default it knows the user by
    ``profile`` alone (:func:`persona_profile`).
    """
    base = {
        "query": query.text,
        "query_date": query.query_date.isoformat(),
        "persona": profile,
        "references": list(references),
    }
    label_a, label_b = opaque_labels(query.query_id)
    shown = ((label_a, answer_a), (label_b, answer_b))
    requests = [
        PairwiseInputs(
            **base,
            first_label=first[0],
            first_response=first[1],
            second_label=second[0],
            second_response=second[1],
        ).request()
        for first, second in (shown, shown[::-1])
    ]
    a_first, b_first = await client.complete_all(requests)
    side_a_first = _side(a_first, label_a, label_b, query.query_id)
    side_b_first = _side(b_first, label_a, label_b, query.query_id)
    return PairwiseOutcome(
        query_id=query.query_id,
        a_first=side_a_first,
        b_first=side_b_first,
        score_a=(_points(side_a_first) + _points(side_b_first)) / 2,
    )


def win_rate(outcomes: Sequence[PairwiseOutcome]) -> float:
    """Mean score of A over the queries (0..1)."""
    if not outcomes:
        raise ValueError("win_rate needs at least one pairwise outcome")
    return fmean(o.score_a for o in outcomes)


# --------------------------------------------------------------------------- a run's answers, judged

Retrieval = tuple[str, RetrievalMethod, RetrievalMethod | None]  # query, method, baseline_for
_PREFERRED: dict[Side, Preferred] = {"a": "pgr", "b": "baseline", "tie": "tie"}


@dataclass(frozen=True)
class AnswerLevel:
    """The Win Rate report, and the results with the answer each retrieval was judged by."""

    report: WinRateReport
    results: list[ValidationResult]


def _chronological(items: Sequence[MemoryItem]) -> list[MemoryItem]:
    return sorted(items, key=lambda item: (item.date, item.fid))


async def generate_answer(
    query: Query, facts: Sequence[MemoryItem], summary: str, client: ModelClient
) -> str:
    """An answer from ``facts`` (and ``summary``, empty for the Win Rate: ANSWER_CONTEXT says why):
    the runner's own request (same variables, seed and cache scope), so an answer paid for once
    is reused."""
    inputs = AnswerInputs(
        query=query.text,
        query_date=query.query_date.isoformat(),
        facts=facts_view(_chronological(facts)),
        summary=summary,
    )
    reply: GeneratedAnswer = await client.complete(
        inputs.request(cache_scope=f"query:{query.query_id}")
    )
    return reply.answer


def recall_judge(results: Sequence[ValidationResult]) -> JudgeKind | None:
    """The judge whose Recall stands beside the Win Rate: provenance (exact) when it ran."""
    judges = {r.judge for r in results}
    return next((j for j in JudgeKind if j in judges), None)


def _order(method: RetrievalMethod) -> int:
    return list(RetrievalMethod).index(method)


@dataclass(frozen=True)
class _Judging:
    """What every query's pairs are judged with."""

    client: ModelClient
    profiles: dict[str, str]
    judge_sees_references: bool


async def _judge_query(
    query: Query,
    facts: Sequence[Fact],
    rows: Sequence[ValidationResult],
    judging: _Judging,
) -> tuple[list[ScoredPair], dict[Retrieval, str], list[str]]:
    """One query: answers for its PGR retrievals and their budget-matched baselines, then each
    PGR answer against each baseline's in both orders."""
    client = judging.client
    retrievals: dict[tuple[RetrievalMethod, RetrievalMethod | None], ValidationResult] = {}
    for row in rows:
        retrievals.setdefault((row.method, row.baseline_for), row)
    methods = sorted(
        {target for _, target in retrievals if target is not None and (target, None) in retrievals},
        key=_order,
    )
    if not methods:
        return [], {}, []
    memory = {item.fid: item for item in memory_as_of(list(facts), query.query_date)}
    wanted = [
        key for key in retrievals if (key[1] is None and key[0] in methods) or key[1] in methods
    ]
    unjudged: list[str] = []

    async def answer(key: tuple[RetrievalMethod, RetrievalMethod | None]) -> str | None:
        row = retrievals[key]
        if row.answer and not row.summary:  # an answer from facts alone, as this comparison wants
            return row.answer
        try:
            return await generate_answer(
                query, [memory[fid] for fid in row.retrieved_fids], "", client
            )
        except LLMOutputError as exc:
            name = key[0].value if key[1] is None else f"{key[0].value} at {key[1].value}'s budget"
            unjudged.append(f"query {query.query_id}, answer of {name}: {exc}")
            log.warning("%s", unjudged[-1])
            return None

    answers = dict(zip(wanted, await asyncio.gather(*(answer(k) for k in wanted)), strict=True))
    profile = judging.profiles.get(query.persona_id, persona_profile(None))
    shown = [r.text for r in query.references] if judging.judge_sees_references else []
    pairs = [
        (method, baseline, ours, theirs)
        for method in methods
        for baseline in sorted((k[0] for k in wanted if k[1] == method), key=_order)
        if (ours := answers[(method, None)]) and (theirs := answers[(baseline, method)])
    ]

    async def judged(
        method: RetrievalMethod, baseline: RetrievalMethod, ours: str, theirs: str
    ) -> ScoredPair | None:
        try:
            outcome = await pairwise_winrate(query, ours, theirs, profile, client, references=shown)
        except LLMOutputError as exc:
            unjudged.append(f"query {query.query_id}, {method.value} vs {baseline.value}: {exc}")
            log.warning("%s", unjudged[-1])
            return None
        return ScoredPair(
            query_id=query.query_id,
            method=method,
            baseline=baseline,
            pgr_first=_PREFERRED[outcome.a_first],
            baseline_first=_PREFERRED[outcome.b_first],
            score=outcome.score_a,
            pgr_words=len(ours.split()),
            baseline_words=len(theirs.split()),
        )

    scored = await asyncio.gather(*(judged(*pair) for pair in pairs))
    given = {
        (query.query_id, method, target): text
        for (method, target), text in answers.items()
        if text is not None
    }
    return [p for p in scored if p is not None], given, unjudged


async def answer_level(
    queries: Sequence[Query],
    personas: Sequence[Persona],
    facts: Sequence[Fact],
    results: Sequence[ValidationResult],
    client: ModelClient,
    *,
    samples: int = DEFAULT_BOOTSTRAP_SAMPLES,
    query_done: Callable[[], None] | None = None,
    judge_sees_references: bool = False,
    generator_model: str = "",
) -> AnswerLevel:
    """Win Rate of each PGR method against each of its budget-matched baselines over ``results``.

    A pair that cannot be judged (an answer or a verdict the model got wrong)
    is left out and named in ``report.unjudged``; the other queries go on.
    A retrieval's stored answer is reused only when it came from facts alone.
    ``generator_model`` (the model that wrote the dataset) lets the report warn when it
    judges its own text.
    """
    by_query: dict[str, list[ValidationResult]] = {}
    for row in results:
        by_query.setdefault(row.query_id, []).append(row)
    by_persona: dict[str, list[Fact]] = {}
    for fact in facts:
        by_persona.setdefault(fact.persona_id, []).append(fact)
    judging = _Judging(
        client, {p.persona_id: persona_profile(p) for p in personas}, judge_sees_references
    )

    async def one(query: Query) -> tuple[list[ScoredPair], dict[Retrieval, str], list[str]]:
        outcome = await _judge_query(
            query, by_persona.get(query.persona_id, []), by_query.get(query.query_id, []), judging
        )
        if query_done is not None:
            query_done()
        return outcome

    per_query = await asyncio.gather(*(one(q) for q in queries))
    pairs = [pair for found, _, _ in per_query for pair in found]
    answers = {key: text for _, given, _ in per_query for key, text in given.items()}
    unjudged = [note for _, _, notes in per_query for note in notes]
    with_answers = [
        row.model_copy(update={"answer": answers[key]})
        if row.answer is None and (key := (row.query_id, row.method, row.baseline_for)) in answers
        else row
        for row in results
    ]
    report = win_rate_report(pairs, results, samples, unjudged).model_copy(
        update={
            "judge_model": client.judge_model_name,
            "generator_model": generator_model,
            "judge_sees_references": judge_sees_references,
        }
    )
    return AnswerLevel(report, with_answers)


def win_rate_report(
    pairs: Sequence[ScoredPair],
    results: Sequence[ValidationResult],
    samples: int = DEFAULT_BOOTSTRAP_SAMPLES,
    unjudged: Sequence[str] = (),
    seed: int = 0,
) -> WinRateReport:
    """One row per PGR method × baseline: Win Rate with its interval, beside both methods' Recall
    and RecallExact under :func:`recall_judge`, over the same queries."""
    judge = recall_judge(results)
    if judge is None:  # no results, so nothing was judged
        return WinRateReport(bootstrap_samples=samples, rows=[], pairs=[], unjudged=list(unjudged))
    scored: dict[tuple[RetrievalMethod, RetrievalMethod], list[ScoredPair]] = {}
    for pair in sorted(pairs, key=lambda p: p.query_id):
        scored.setdefault((pair.method, pair.baseline), []).append(pair)
    rows = []
    for (method, baseline), group in sorted(
        scored.items(), key=lambda kv: (_order(kv[0][0]), _order(kv[0][1]))
    ):
        queries = {p.query_id for p in group}
        ours = [r for r in results if r.query_id in queries and r.judge == judge]
        mine = [r for r in ours if r.method == method and r.baseline_for is None]
        theirs = [r for r in ours if r.method == baseline and r.baseline_for == method]
        scores = [p.score for p in group]
        low, high = bootstrap_ci(scores, samples, seed)
        controlled = length_controlled_win_rate(
            scores, [p.pgr_words - p.baseline_words for p in group], samples, seed
        )
        rows.append(
            WinRateRow(
                method=method,
                baseline=baseline,
                judge=judge,
                n=len(group),
                recall=_mean([r.recall for r in mine]),
                recall_exact=_mean([float(r.recall_exact) for r in mine]),
                baseline_recall=_mean([r.recall for r in theirs]),
                baseline_recall_exact=_mean([float(r.recall_exact) for r in theirs]),
                win_rate=math.fsum(scores) / len(scores),
                win_rate_low=low,
                win_rate_high=high,
                wins=sum(1 for s in scores if s > 0.5),
                ties=sum(1 for s in scores if s == 0.5),
                losses=sum(1 for s in scores if s < 0.5),
                flip_rate=sum(p.flipped for p in group) / len(group),
                pgr_words=_mean([float(p.pgr_words) for p in group]),
                baseline_words=_mean([float(p.baseline_words) for p in group]),
                length_controlled=controlled[0],
                length_controlled_low=controlled[1],
                length_controlled_high=controlled[2],
            )
        )
    return WinRateReport(
        bootstrap_samples=samples,
        rows=rows,
        pairs=sorted(pairs, key=lambda p: (_order(p.method), _order(p.baseline), p.query_id)),
        unjudged=list(unjudged),
    )


def _mean(values: Sequence[float]) -> float:
    return math.fsum(values) / len(values) if values else 0.0


_RIDGE = (
    1e-3  # keeps the fit finite when one side wins every query (and the slope when lengths tie)
)


def _fit_at_equal_length(scores: np.ndarray, spread: np.ndarray) -> float:
    """P(PGR wins | equal lengths) from a logistic fit of the (soft) scores on the spread."""
    design = np.column_stack([np.ones_like(spread), spread])
    beta = np.zeros(2)
    for _ in range(50):
        p = 1.0 / (1.0 + np.exp(-(design @ beta)))
        gradient = design.T @ (p - scores) + _RIDGE * beta
        hessian = (design.T * (p * (1.0 - p))) @ design + _RIDGE * np.eye(2)
        step = np.linalg.solve(hessian, gradient)
        beta -= step
        if float(np.abs(step).max()) < 1e-9:
            break
    return float(1.0 / (1.0 + math.exp(-beta[0])))


def length_controlled_win_rate(
    scores: Sequence[float],
    length_differences: Sequence[float],
    samples: int = DEFAULT_BOOTSTRAP_SAMPLES,
    seed: int = 0,
) -> tuple[float, float, float]:
    """Win Rate with the answers' length difference regressed out, and its 95% interval.

    Each query's score (0, 0.25, ..., 1) is a soft label of a logistic regression on
    tanh(difference / its standard deviation), as length-controlled AlpacaEval does; the
    estimate is the fit at a difference of 0. The interval is a percentile bootstrap over
    queries, refitting each resample (seeded, so the same pairs give the same interval).
    """
    y = np.asarray(scores, dtype=np.float64)
    difference = np.asarray(length_differences, dtype=np.float64)
    if y.size == 0 or y.shape != difference.shape:
        raise ValueError("length_controlled_win_rate needs one length difference per score")
    scale = float(difference.std())
    spread = np.tanh(difference / scale) if scale > 0 else np.zeros_like(difference)
    estimate = _fit_at_equal_length(y, spread)
    rng = np.random.default_rng(seed)
    fits = np.empty(samples, dtype=np.float64)
    for i in range(samples):
        pick = rng.integers(0, y.size, size=y.size)
        fits[i] = _fit_at_equal_length(y[pick], spread[pick])
    tail = (1.0 - CONFIDENCE) / 2.0
    low, high = np.quantile(fits, [tail, 1.0 - tail])
    return estimate, float(low), float(high)
