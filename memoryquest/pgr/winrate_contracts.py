"""Contracts of the answer-level comparison: the pairwise judge's prompt, and the Win Rate report.

The inputs model is what :func:`memoryquest.pgr.winrate.pairwise_winrate`
sends (and the offline simulator answers from); the output model is the
answer's shape. See :mod:`memoryquest.prompt_inputs` for the convention.
The report models are what ``memoryquest pgr run --win-rate`` writes and the
card and explorer read, so they live here, away from the client.
"""

from __future__ import annotations

from typing import ClassVar, Literal

from pydantic import BaseModel, Field, with_config
from typing_extensions import TypedDict

from memoryquest.contracts import JudgeKind, RetrievalMethod
from memoryquest.prompt_inputs import ROW, JudgeInputs

TIE = "tie"

# --------------------------------------------------------------------------- what the model answers

WIN_RATE_SUFFIX = ".winrate.json"  # beside a results file: pgr.jsonl -> pgr.winrate.json
WIN_RATE_FILE = "pgr" + WIN_RATE_SUFFIX  # beside a dataset: where publish and explore look


class PairwiseVerdict(BaseModel):
    """The comparison comes before the choice, so the choice follows from it."""

    reasoning: str = Field(description="A short comparison of the two responses.")
    choice: str = Field(description="The label of the more useful response, or 'tie'.")


# --------------------------------------------------------------------------- what the model is given


@with_config(ROW)
class UserFact(TypedDict):
    date: str
    info: str


class PairwiseInputs(JudgeInputs):
    """Two responses to one request, and what the judge may know of the user.

    Each response carries an opaque label (no order, no method name) that the
    choice names: a label such as "first" or "A" invites position bias.
    """

    template_id: ClassVar[str] = "judge_pairwise"
    stage: ClassVar[str] = "pgr_judge"
    output_model: ClassVar[type[BaseModel]] = PairwiseVerdict

    user_facts: list[UserFact]
    references: list[str]
    first_label: str
    first_response: str
    second_label: str
    second_response: str


# --------------------------------------------------------------------------- what `pgr run --win-rate` reports

Side = Literal["a", "b", "tie"]
Preferred = Literal["pgr", "baseline", "tie"]

WIN_RATE_INTERVAL = "95% percentile bootstrap over queries"
"""How the Win Rate's interval is taken. Each query's score is 0, 0.5 or 1 (ties and split
orders are common), not a yes/no, so a binomial (Wilson) interval would not fit it."""


class PairwiseOutcome(BaseModel):
    query_id: str
    a_first: Side = Field(description="Winner when answer A was shown first.")
    b_first: Side = Field(description="Winner when answer B was shown first.")
    score_a: float = Field(
        ge=0.0, le=1.0, description="Mean of both orders: win 1, tie 0.5, loss 0."
    )
    llm_calls: int = 2


class ScoredPair(BaseModel):
    """One query: a PGR method's answer against one budget-matched baseline's, judged in both orders."""

    query_id: str
    method: RetrievalMethod = Field(description="The PGR method.")
    baseline: RetrievalMethod = Field(description="The baseline given the PGR method's budget.")
    pgr_first: Preferred = Field(description="The judge's choice when PGR's answer came first.")
    baseline_first: Preferred = Field(
        description="The judge's choice when the baseline's answer came first."
    )
    score: float = Field(
        ge=0.0, le=1.0, description="PGR's points: win 1, tie 0.5, loss 0, mean of both orders."
    )


class WinRateRow(BaseModel):
    """A PGR method against one baseline at the same budget: recall beside answer-level Win Rate."""

    method: RetrievalMethod
    baseline: RetrievalMethod
    judge: JudgeKind = Field(description="The recall judge of the Recall columns.")
    n: int = Field(description="Queries whose pair of answers was judged.")
    recall: float = Field(description="The PGR method's mean Recall over those queries.")
    recall_exact: float = Field(description="The PGR method's RecallExact over those queries.")
    baseline_recall: float
    baseline_recall_exact: float
    win_rate: float = Field(ge=0.0, le=1.0, description="PGR's mean score over the queries.")
    win_rate_low: float = Field(description="Lower bound of the 95% interval of the Win Rate.")
    win_rate_high: float = Field(description="Upper bound of the 95% interval of the Win Rate.")
    wins: int = Field(description="Queries PGR won (score above 0.5).")
    ties: int = Field(description="Queries scored exactly 0.5 (a tie, or one order each).")
    losses: int = Field(description="Queries the baseline won.")


class WinRateReport(BaseModel):
    """What ``memoryquest pgr run --win-rate`` writes next to its results (``*.winrate.json``)."""

    interval: str = WIN_RATE_INTERVAL
    bootstrap_samples: int
    rows: list[WinRateRow]
    pairs: list[ScoredPair] = Field(description="Every judged pair, query by query.")
    unjudged: list[str] = Field(
        default_factory=list,
        description="Pairs left out: an answer or a verdict that could not be used, and why.",
    )
