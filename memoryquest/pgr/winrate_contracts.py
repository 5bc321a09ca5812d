"""Contracts of the answer-level comparison: the pairwise judge's prompt, and the Win Rate report.

The inputs model is what :func:`memoryquest.pgr.winrate.pairwise_winrate`
sends (and the offline simulator answers from); the output model is the
answer's shape. See :mod:`memoryquest.prompt_inputs` for the convention.
The report models are what ``memoryquest pgr run --win-rate`` writes and the
card and explorer read, so they live here, away from the client.
"""

from __future__ import annotations

from typing import ClassVar, Literal

from pydantic import BaseModel, Field

from memoryquest.contracts import JudgeKind, RetrievalMethod, Stage
from memoryquest.prompt_inputs import JudgeInputs, one_of, says, stated

TIE = "tie"

# --------------------------------------------------------------------------- what the model answers

WIN_RATE_SUFFIX = ".winrate.json"  # beside a results file: pgr.jsonl -> pgr.winrate.json
WIN_RATE_FILE = "pgr" + WIN_RATE_SUFFIX  # beside a dataset: where publish and explore look


class PairwiseVerdict(BaseModel):
    """The comparison comes before the choice, so the choice follows from it."""

    reasoning: str = Field(description="A short comparison of the two responses.")
    choice: str = Field(description="The label of the more useful response, or 'tie'.")


# --------------------------------------------------------------------------- what the model is given


class PairwiseInputs(JudgeInputs):
    """Two responses to one request, and what the judge may know of the user.

    The judge plays the user from their profile alone: shown the references (the answer key) or
    the memory they were drawn from, it would reward the response that repeats them, and the Win
    Rate would restate recall. ``references`` stays empty unless the evaluation asks for it
    (``--judge-sees-references``), and the report then says so.

    Each response carries an opaque label (no order, no method name) that the
    choice names: a label such as "first" or "A" invites position bias.
    """

    template_id: ClassVar[str] = "judge_pairwise"
    stage: ClassVar[Stage] = Stage.PGR_JUDGE
    output_model: ClassVar[type[BaseModel]] = PairwiseVerdict

    persona: str
    references: list[str]
    first_label: str
    first_response: str
    second_label: str
    second_response: str

    def answer_model(self) -> type[BaseModel]:
        """The choice names one of the two labels, or a tie."""
        labels = (self.first_label, self.second_label, TIE)
        return stated(PairwiseVerdict, choice=says(**one_of(labels)))


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
    pgr_words: int = Field(0, ge=0, description="Length of PGR's answer, in words.")
    baseline_words: int = Field(0, ge=0, description="Length of the baseline's answer, in words.")

    @property
    def flipped(self) -> bool:
        """The verdict changed with the order the answers were shown in."""
        return self.pgr_first != self.baseline_first


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
    flip_rate: float = Field(
        0.0,
        ge=0.0,
        le=1.0,
        description="Share of queries whose verdict changed when the answers swapped places.",
    )
    pgr_words: float = Field(0.0, description="Mean length of PGR's answers, in words.")
    baseline_words: float = Field(
        0.0, description="Mean length of the baseline's answers, in words."
    )
    length_controlled: float = Field(
        0.5,
        ge=0.0,
        le=1.0,
        description="Win Rate with the answers' length difference regressed out: the fitted chance "
        "that PGR wins when both answers are equally long (see LENGTH_CONTROL).",
    )
    length_controlled_low: float = Field(0.5, description="Lower bound of its 95% interval.")
    length_controlled_high: float = Field(0.5, description="Upper bound of its 95% interval.")


LENGTH_CONTROL = (
    "logistic regression of each query's score on tanh(length difference / its standard deviation), "
    "read at a difference of 0"
)
"""How the length-controlled Win Rate is taken: judges favour the longer answer, so the raw rate
mixes what an answer says with how much of it there is."""

ANSWER_CONTEXT = "retrieved facts only (no prospection summary on either side)"
"""What each side's answer is generated from. PGR's prospection summary is a second model product
that no baseline has a counterpart of, outside the retrieval budget: given to PGR alone it would
make the comparison one of context, not of retrieval."""


class WinRateReport(BaseModel):
    """What ``memoryquest pgr run --win-rate`` writes next to its results (``*.winrate.json``)."""

    interval: str = WIN_RATE_INTERVAL
    bootstrap_samples: int
    judge_model: str = Field("", description="The model that judged the pairs.")
    generator_model: str = Field(
        "", description="The model that wrote the dataset, when its manifest names one."
    )
    judge_sees_references: bool = Field(
        False, description="The judge was shown each query's references (--judge-sees-references)."
    )
    answer_context: str = ANSWER_CONTEXT
    length_control: str = LENGTH_CONTROL
    rows: list[WinRateRow]
    pairs: list[ScoredPair] = Field(description="Every judged pair, query by query.")
    unjudged: list[str] = Field(
        default_factory=list,
        description="Pairs left out: an answer or a verdict that could not be used, and why.",
    )

    @property
    def judge_is_generator(self) -> bool:
        """The judge grades text written by its own model: a known source of bias."""
        return bool(self.judge_model) and self.judge_model == self.generator_model
