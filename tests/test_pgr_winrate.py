"""Pairwise win rate: both orders are judged and averaged (win 1, tie 0.5, loss 0); over a run's
results, each PGR answer against each budget-matched baseline's, with a bootstrap interval."""

from __future__ import annotations

import asyncio
import datetime as dt
import json

import numpy as np
import pytest

from memoryquest.contracts import (
    Domain,
    Fact,
    JudgeKind,
    Persona,
    Query,
    Reference,
    RetrievalMethod,
    ValidationResult,
)
from memoryquest.ids import make_id
from memoryquest.llm.backends import ChatCall, ChatResult
from memoryquest.llm.client import ModelClient
from memoryquest.llm.factory import shared_local_embedder
from memoryquest.llm.simulated import SimulatedChatBackend
from memoryquest.memory.snapshot import memory_as_of
from memoryquest.pgr.judges import JudgeOutputError
from memoryquest.pgr.runner import validate_queries
from memoryquest.pgr.sample import make_fact, sample_dataset
from memoryquest.pgr.winrate import (
    answer_level,
    length_controlled_win_rate,
    opaque_labels,
    pairwise_winrate,
    win_rate,
    win_rate_report,
)
from memoryquest.pgr.winrate_contracts import ScoredPair
from memoryquest.settings import PGRSettings

PID = make_id("persona", "winrate-test")
DAY = dt.date(2024, 3, 1)
QUERY = Query(
    query_id=make_id("query", PID, "dinner"),
    persona_id=PID,
    query_date=dt.date(2024, 5, 24),
    text="Help me organise a dinner party for my coworkers next Friday.",
    reasoning="diet, flat and guests matter",
    domain=Domain.RESTAURANTS,
    references=[
        Reference(
            reference_id=make_id("reference", "dinner", 0),
            date=DAY,
            text="Was diagnosed with coeliac disease and buys only gluten-free groceries",
            domain=Domain.SHOPPING,
            cosine=0.1,
        )
    ],
    gamma=0.1,
    embedder="all-MiniLM-L6-v2-onnx-int8",
    rank=0,
)
PROFILE = "age: 35-44; gender: female; interested in: Restaurants, Books"
USER_FACTS = memory_as_of(
    [
        make_fact(
            PID,
            "coeliac",
            [(DAY, "Diagnosed with coeliac disease; buys only gluten-free groceries")],
        ),
        make_fact(PID, "flat", [(DAY, "Moved into a one-bedroom apartment with a tiny kitchen")]),
        make_fact(
            PID, "priya", [(DAY, "Coworker Priya is vegetarian and runs the team book club")]
        ),
    ],
    QUERY.query_date,
)
PERSONAL = (
    "Since you were diagnosed with coeliac disease and buy only gluten-free groceries, cook a gluten-free menu; "
    "your coworker Priya is vegetarian, and the tiny kitchen of your one-bedroom apartment suits a simple buffet."
)
GENERIC = "Send invitations, pick a menu, and clean the house before Friday."
ALSO_GENERIC = "Choose a date, buy some drinks and set the table early."


class PositionBiased:
    """A stand-in model that always prefers whichever response it is shown first."""

    name = "position-biased"
    model = "position-biased"
    base_url: str | None = None
    simulated = True
    seed = 0

    def __init__(self) -> None:
        self.calls = 0
        self.templates: set[str] = set()
        self.all_judge_requests = True

    async def chat(self, call: ChatCall) -> ChatResult:
        self.calls += 1
        self.templates.add(call.request.template_id)
        self.all_judge_requests &= call.request.judge
        shown_first = call.request.variables["first_label"]
        return ChatResult(
            text=json.dumps({"reasoning": "the first one reads better", "choice": shown_first})
        )


@pytest.fixture
def client() -> ModelClient:
    return ModelClient(SimulatedChatBackend(), shared_local_embedder())


async def test_the_more_specific_answer_wins_in_both_orders(client: ModelClient) -> None:
    outcome = await pairwise_winrate(QUERY, PERSONAL, GENERIC, PROFILE, client)
    assert (outcome.a_first, outcome.b_first, outcome.score_a) == ("a", "a", 1.0)
    reverse = await pairwise_winrate(QUERY, GENERIC, PERSONAL, PROFILE, client)
    assert (reverse.a_first, reverse.b_first, reverse.score_a) == ("b", "b", 0.0)
    assert outcome.llm_calls == 2


async def test_shown_the_references_the_answer_taking_them_up_wins(client: ModelClient) -> None:
    """A short answer that takes up the reference beats a longer one that does not, once the
    judge is shown the references; without them the longer, more detailed one wins."""
    short = "Keep the menu gluten-free: you were diagnosed with coeliac disease."
    long = GENERIC + " " + ALSO_GENERIC + " Hire a florist and print place cards for everyone."
    references = [r.text for r in QUERY.references]
    shown = await pairwise_winrate(QUERY, short, long, PROFILE, client, references=references)
    blind = await pairwise_winrate(QUERY, short, long, PROFILE, client)
    assert (shown.score_a, blind.score_a) == (1.0, 0.0)


async def test_the_same_answer_on_both_sides_is_a_tie(client: ModelClient) -> None:
    outcome = await pairwise_winrate(QUERY, GENERIC, GENERIC, PROFILE, client)
    assert (outcome.a_first, outcome.b_first, outcome.score_a) == ("tie", "tie", 0.5)


async def test_position_bias_cancels_out() -> None:
    backend = PositionBiased()
    biased = ModelClient(backend, shared_local_embedder())
    outcome = await pairwise_winrate(QUERY, PERSONAL, GENERIC, PROFILE, biased)
    assert backend.calls == 2
    assert (outcome.a_first, outcome.b_first, outcome.score_a) == ("a", "b", 0.5)


async def test_win_rate_is_the_mean_score(client: ModelClient) -> None:
    outcomes = [
        await pairwise_winrate(QUERY, PERSONAL, GENERIC, PROFILE, client),
        await pairwise_winrate(QUERY, GENERIC, GENERIC, PROFILE, client),
    ]
    assert win_rate(outcomes) == pytest.approx(0.75)
    with pytest.raises(ValueError, match="at least one"):
        win_rate([])


def test_the_judge_sees_opaque_labels_and_a_choice_outside_them_is_refused() -> None:
    label_a, label_b = opaque_labels(QUERY.query_id)
    assert label_a != label_b and not {label_a, label_b} & {"first", "second", "A", "B"}
    assert opaque_labels(QUERY.query_id) == (label_a, label_b)  # fixed per query: cacheable

    class Answers:
        name = model = "fixed"
        base_url: str | None = None
        simulated = True
        seed = 0

        def __init__(self, choice: str) -> None:
            self.choice = choice
            self.prompts: list[str] = []

        async def chat(self, call: ChatCall) -> ChatResult:
            self.prompts.append(call.messages[-1]["content"])
            return ChatResult(text=json.dumps({"reasoning": "compared", "choice": self.choice}))

    return_first = Answers("first")
    with pytest.raises(JudgeOutputError, match="neither"):
        asyncio.run(
            pairwise_winrate(
                QUERY,
                PERSONAL,
                GENERIC,
                PROFILE,
                ModelClient(return_first, shared_local_embedder()),
            )
        )
    prompt = return_first.prompts[0]
    assert f"Response {label_a}:" in prompt and f"Response {label_b}:" in prompt
    assert "First response" not in prompt


# --------------------------------------------------------------------------- a run's answers, judged


Run = tuple[list[Query], list[Fact], list[ValidationResult], list[Persona]]


@pytest.fixture(scope="module")
def run() -> Run:
    """user0's two sample queries, retrieved by PGR-ToT and its budget-matched baselines on the simulator."""
    client = ModelClient(SimulatedChatBackend(), shared_local_embedder())
    dataset = asyncio.run(sample_dataset(client, background=40))
    settings = PGRSettings(methods=["pgr_tot"], judges=["provenance"], max_iterations=2)
    results = asyncio.run(validate_queries(dataset.queries, dataset.facts, client, settings))
    return dataset.queries, dataset.facts, results, dataset.personas


def judged_by(judge: PositionBiased | Recording) -> ModelClient:
    """The simulator writes the answers; ``judge`` answers the judges' requests."""
    author = ModelClient(SimulatedChatBackend(), shared_local_embedder())
    author.judge_client = ModelClient(judge, shared_local_embedder())
    return author


class Recording:
    """A judge model that keeps every prompt it is shown and calls a tie."""

    name = model = "recording-judge"
    base_url: str | None = None
    simulated = True
    seed = 0

    def __init__(self) -> None:
        self.prompts: list[str] = []

    async def chat(self, call: ChatCall) -> ChatResult:
        self.prompts.append("\n".join(m["content"] for m in call.messages))
        return ChatResult(text=json.dumps({"reasoning": "alike", "choice": "tie"}))


@pytest.mark.parametrize("sees_references", [False, True])
def test_the_judge_is_shown_the_references_only_when_asked(run: Run, sees_references: bool) -> None:
    """The rendered pairwise prompt holds no reference text and no memory fact by default; with
    --judge-sees-references it holds the references, and the report says so."""
    queries, facts, results, personas = run
    judge = Recording()
    judged = asyncio.run(
        answer_level(
            queries,
            personas,
            facts,
            results,
            judged_by(judge),
            samples=50,
            judge_sees_references=sees_references,
        )
    )
    assert judge.prompts and judged.report.judge_sees_references is sees_references
    references = [r.text for q in queries for r in q.references]
    memory = [f.info for f in facts]
    for prompt in judge.prompts:
        assert any(ref in prompt for ref in references) is sees_references
        assert "age: " in prompt or "interested in" in prompt  # the user's profile is shown
    if not sees_references:
        # no fact's text either, beyond what an answer itself quotes
        answers_shown = "\n".join(r.answer or "" for r in judged.results)
        leaked = [f for f in memory if f in "\n".join(judge.prompts) and f not in answers_shown]
        assert not leaked


def test_a_judge_that_always_picks_the_first_position_gives_fifty_percent(
    run: Run,
) -> None:
    """Answers come from the author (the simulator), verdicts from the judge model
    (endpoint.judge_model): a judge biased to the first position cancels out to 50% exactly."""
    queries, facts, results, personas = run
    judge = PositionBiased()
    judged = asyncio.run(
        answer_level(
            queries,
            personas,
            facts,
            results,
            judged_by(judge),
            samples=200,
            generator_model="position-biased",
        )
    )
    report = judged.report
    # The report names its judge, and warns that it also wrote the data.
    assert report.judge_model == "position-biased" and report.judge_is_generator
    # Every verdict flipped with the order: the flip rate says so.
    assert all(r.flip_rate == 1.0 for r in report.rows)
    assert [(r.method, r.baseline) for r in report.rows] == [
        (RetrievalMethod.PGR_TOT, b)
        for b in (
            RetrievalMethod.QUERY_ONLY,
            RetrievalMethod.BM25,
            RetrievalMethod.RANDOM,
            RetrievalMethod.RECENCY,
            RetrievalMethod.MULTI_QUERY,
            RetrievalMethod.HYPOTHETICAL_FACTS,
        )
    ]
    assert all(
        r.n == 2 and r.win_rate == 0.5 and (r.wins, r.ties, r.losses) == (0, 2, 0)
        for r in report.rows
    )
    assert all((r.win_rate_low, r.win_rate_high) == (0.5, 0.5) for r in report.rows)
    # Both orders of every pair reached the judge, flagged as judge requests; nothing else did.
    assert len(report.pairs) == 2 * 6 and judge.calls == 2 * len(report.pairs)
    assert all((p.pgr_first, p.baseline_first) == ("pgr", "baseline") for p in report.pairs)
    assert judge.templates == {"judge_pairwise"} and judge.all_judge_requests
    # Every retrieval compared carries the answer it was judged by.
    assert all(r.answer for r in judged.results)


def test_the_win_rate_has_a_bootstrap_interval_beside_both_recalls(
    run: Run,
) -> None:
    _, _, results, _ = run
    query_ids = sorted({r.query_id for r in results})
    scores = {query_ids[0]: 1.0, query_ids[1]: 0.5}
    pairs = [
        ScoredPair(
            query_id=q,
            method=RetrievalMethod.PGR_TOT,
            baseline=RetrievalMethod.RANDOM,
            pgr_first="pgr",
            baseline_first="pgr" if score == 1.0 else "baseline",
            score=score,
        )
        for q, score in scores.items()
    ]
    (row,) = win_rate_report(pairs, results, samples=500).rows
    assert (row.n, row.win_rate, row.wins, row.ties, row.losses) == (2, 0.75, 1, 1, 0)
    assert row.win_rate_low == 0.5 and row.win_rate_high == 1.0
    own = [
        r
        for r in results
        if r.method is RetrievalMethod.PGR_TOT
        and r.baseline_for is None
        and r.judge is JudgeKind.PROVENANCE
    ]
    theirs = [
        r for r in results if r.method is RetrievalMethod.RANDOM and r.baseline_for is not None
    ]
    assert row.judge is JudgeKind.PROVENANCE
    assert row.recall == pytest.approx(sum(r.recall for r in own) / 2)
    assert row.baseline_recall == pytest.approx(sum(r.recall for r in theirs) / 2)
    assert row.baseline_recall_exact == sum(r.recall_exact for r in theirs) / 2


def test_a_row_reads_recall_only_from_its_own_queries_and_methods(run: Run) -> None:
    _, _, results, _ = run
    query = sorted({r.query_id for r in results})[1]
    pair = ScoredPair(
        query_id=query,
        method=RetrievalMethod.PGR_TOT,
        baseline=RetrievalMethod.RANDOM,
        pgr_first="tie",
        baseline_first="baseline",
        score=0.25,
    )
    (row,) = win_rate_report([pair], results, samples=50).rows
    ours = [r for r in results if r.query_id == query]
    (own,) = [r for r in ours if r.method is RetrievalMethod.PGR_TOT and r.baseline_for is None]
    (theirs,) = [r for r in ours if r.method is RetrievalMethod.RANDOM]
    assert (row.recall, row.baseline_recall) == (own.recall, theirs.recall)
    assert (row.wins, row.ties, row.losses) == (0, 0, 1)  # a quarter point is a loss, not a tie


# --------------------------------------------------------------------------- length control


def test_a_judge_that_only_rewards_length_is_length_controlled_to_about_half() -> None:
    """A judge whose only preference is length (its chance of picking PGR rises with PGR's extra
    words, and is even at equal length), over 400 queries where PGR's answers are mostly the
    longer: the raw rate is far above 50%, the length-controlled one is not."""
    rng = np.random.default_rng(7)
    differences = rng.normal(40.0, 60.0, size=400)
    chance = 1.0 / (1.0 + np.exp(-3.0 * np.tanh(differences / differences.std())))
    scores = (rng.random(400) < chance).astype(float)
    estimate, low, high = length_controlled_win_rate(list(scores), list(differences), samples=200)
    assert scores.mean() > 0.65
    assert low < 0.5 < high and abs(estimate - 0.5) < 0.08


def test_a_preference_that_does_not_follow_length_survives_length_control() -> None:
    """PGR wins 27 of 30 queries whatever the lengths: the controlled rate stays high."""
    differences = [(-1) ** i * float(10 + i) for i in range(30)]
    scores = [0.0 if i in (3, 14, 25) else 1.0 for i in range(30)]
    estimate, low, high = length_controlled_win_rate(scores, differences, samples=300)
    assert estimate > 0.8 and low > 0.6 and high <= 1.0


def test_the_report_controls_each_row_for_the_answers_length_difference(run: Run) -> None:
    """PGR wins the 8 queries where its answer is the longer and loses the 2 where it is the
    shorter: the row's length-controlled rate is the fit on PGR's extra words, below the raw 80%."""
    _, _, results, _ = run
    lengths = [(150, 60), (140, 70), (160, 65), (130, 75), (170, 60), (155, 80), (145, 70)]
    lengths += [(135, 65), (50, 120), (55, 130)]
    pairs = [
        ScoredPair(
            query_id=f"q{i}",
            method=RetrievalMethod.PGR_TOT,
            baseline=RetrievalMethod.RANDOM,
            pgr_first="pgr" if ours > theirs else "baseline",
            baseline_first="pgr" if ours > theirs else "baseline",
            score=1.0 if ours > theirs else 0.0,
            pgr_words=ours,
            baseline_words=theirs,
        )
        for i, (ours, theirs) in enumerate(lengths)
    ]
    (row,) = win_rate_report(pairs, results, samples=200, seed=5).rows
    expected = length_controlled_win_rate(
        [p.score for p in pairs], [ours - theirs for ours, theirs in lengths], 200, seed=5
    )
    assert (row.length_controlled, row.length_controlled_low, row.length_controlled_high) == (
        expected
    )
    assert row.win_rate == 0.8 and row.length_controlled < row.win_rate - 0.1
    assert (row.pgr_words, row.baseline_words) == (
        sum(o for o, _ in lengths) / 10,
        sum(t for _, t in lengths) / 10,
    )


def test_length_control_is_reproducible_and_checks_its_input() -> None:
    scores, differences = [1.0, 0.5, 0.0, 0.75], [10.0, 0.0, -5.0, 3.0]
    assert length_controlled_win_rate(scores, differences, 100, seed=3) == (
        length_controlled_win_rate(scores, differences, 100, seed=3)
    )
    with pytest.raises(ValueError, match="one length difference per score"):
        length_controlled_win_rate([1.0], [1.0, 2.0])
