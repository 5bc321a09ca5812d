"""Pairwise win rate: both orders are judged and averaged (win 1, tie 0.5, loss 0)."""

from __future__ import annotations

import asyncio
import datetime as dt
import json

import pytest

from memoryquest.contracts import Domain, Query, Reference
from memoryquest.ids import make_id
from memoryquest.llm.backends import ChatCall, ChatResult
from memoryquest.llm.client import ModelClient
from memoryquest.llm.factory import shared_local_embedder
from memoryquest.llm.simulated import SimulatedChatBackend
from memoryquest.memory.snapshot import memory_as_of
from memoryquest.pgr.judges import JudgeOutputError
from memoryquest.pgr.sample import make_fact
from memoryquest.pgr.winrate import opaque_labels, pairwise_winrate, win_rate

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

    async def chat(self, call: ChatCall) -> ChatResult:
        self.calls += 1
        shown_first = call.request.variables["first_label"]
        return ChatResult(
            text=json.dumps({"reasoning": "the first one reads better", "choice": shown_first})
        )


@pytest.fixture
def client() -> ModelClient:
    return ModelClient(SimulatedChatBackend(), shared_local_embedder())


async def test_the_answer_citing_the_users_facts_wins_in_both_orders(client: ModelClient) -> None:
    outcome = await pairwise_winrate(QUERY, PERSONAL, GENERIC, USER_FACTS, client)
    assert (outcome.a_first, outcome.b_first, outcome.score_a) == ("a", "a", 1.0)
    reverse = await pairwise_winrate(QUERY, GENERIC, PERSONAL, USER_FACTS, client)
    assert (reverse.a_first, reverse.b_first, reverse.score_a) == ("b", "b", 0.0)
    assert outcome.llm_calls == 2


async def test_equal_citations_are_a_tie(client: ModelClient) -> None:
    outcome = await pairwise_winrate(QUERY, GENERIC, ALSO_GENERIC, USER_FACTS, client)
    assert (outcome.a_first, outcome.b_first, outcome.score_a) == ("tie", "tie", 0.5)


async def test_position_bias_cancels_out() -> None:
    backend = PositionBiased()
    biased = ModelClient(backend, shared_local_embedder())
    outcome = await pairwise_winrate(QUERY, PERSONAL, GENERIC, USER_FACTS, biased)
    assert backend.calls == 2
    assert (outcome.a_first, outcome.b_first, outcome.score_a) == ("a", "b", 0.5)


async def test_win_rate_is_the_mean_score(client: ModelClient) -> None:
    outcomes = [
        await pairwise_winrate(QUERY, PERSONAL, GENERIC, USER_FACTS, client),
        await pairwise_winrate(QUERY, GENERIC, ALSO_GENERIC, USER_FACTS, client),
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
                USER_FACTS,
                ModelClient(return_first, shared_local_embedder()),
            )
        )
    prompt = return_first.prompts[0]
    assert f"Response {label_a}:" in prompt and f"Response {label_b}:" in prompt
    assert "First response" not in prompt
