"""Prompt contracts of PGR: augmentation, the chain and tree plans, the summary, the answer.

The inputs models are what :mod:`memoryquest.pgr.prospection_run` sends (and the
offline simulator answers from); the output models are the answers' shapes.
See :mod:`memoryquest.prompt_inputs` for the convention.
"""

from __future__ import annotations

from typing import ClassVar, Generic, TypeVar

from pydantic import BaseModel, Field, with_config
from typing_extensions import TypedDict

from memoryquest.contracts import Stage
from memoryquest.prompt_inputs import ROW, PromptInputs, says, stated

# --------------------------------------------------------------------------- what the model answers


# The most steps (nodes) each plan's prompt asks for, stated in its schema: a grammar-bound model
# cannot list steps past them until its output allowance cuts the answer off.
CHAIN_STEPS_MAX = 8  # pgr_cot_initial: "Five to eight steps."
REFINED_CHAIN_STEPS_MAX = 10  # pgr_cot_refine: "at most ten steps"
REFINED_TREE_NODES_MAX = 12  # pgr_tot_refine: "at most twelve nodes"


class PlannedStep(BaseModel):
    action: str = Field(min_length=1, description="A concrete situational action or question.")
    constraints: str = Field(
        description="What shapes the action: limits, timing, people, costs ..."
    )


class ChainPlan(BaseModel):
    steps: list[PlannedStep] = Field(min_length=1)


class TreeNode(BaseModel):
    id: str
    action: str = Field(min_length=1)
    constraints: str
    parent: str | None
    children: list[str]


class TreePlan(BaseModel):
    nodes: list[TreeNode] = Field(min_length=1)


class AugmentedQuery(BaseModel):
    augmented_query: str = Field(min_length=1)


class ProspectionSummary(BaseModel):
    summary: str = Field(min_length=1)


class GeneratedAnswer(BaseModel):
    reasoning: str
    answer: str = Field(min_length=1)


# --------------------------------------------------------------------------- what the model is given


@with_config(ROW)
class FactView(TypedDict):
    """A memory fact as a prompt shows it: text, type, date and entities, never its provenance
    (nor its id, which no answer cites: a dozen tokens a fact)."""

    date: str
    type: str
    info: str
    related_entities: list[str]


@with_config(ROW)
class ChainStepView(TypedDict):
    """A step of the previous chain plan."""

    action: str
    constraints: str


@with_config(ROW)
class TreeStepView(TypedDict):
    """A node of the previous tree plan."""

    id: str
    action: str
    constraints: str
    parent: str | None
    children: list[str]


class QueryInputs(PromptInputs):
    """The request and the day it is made; every PGR prompt starts from these, and is billed to
    the ``pgr`` stage."""

    stage: ClassVar[Stage] = Stage.PGR

    query: str
    query_date: str


class AugmentInputs(QueryInputs):
    """The request with the facts closest to it, to be rewritten with what they imply."""

    template_id: ClassVar[str] = "pgr_augment"
    temperature: ClassVar[float] = 0.2
    output_model: ClassVar[type[BaseModel]] = AugmentedQuery

    context_facts: list[FactView]


class PlanInputs(QueryInputs):
    """The request and its augmented form, for the first plan (phase 1)."""

    augmented_query: str


class CotInitialInputs(PlanInputs):
    template_id: ClassVar[str] = "pgr_cot_initial"
    output_model: ClassVar[type[BaseModel]] = ChainPlan

    def answer_model(self) -> type[BaseModel]:
        return stated(ChainPlan, steps=says(maxItems=CHAIN_STEPS_MAX))


class TotInitialInputs(PlanInputs):
    template_id: ClassVar[str] = "pgr_tot_initial"
    output_model: ClassVar[type[BaseModel]] = TreePlan


StepView = TypeVar("StepView", ChainStepView, TreeStepView)


class RefineInputs(PlanInputs, Generic[StepView]):
    """A re-plan's inputs: the previous plan's steps (a chain's or a tree's) and every fact
    retrieved so far."""

    previous_steps: list[StepView]
    facts: list[FactView]


class CotRefineInputs(RefineInputs[ChainStepView]):
    """The previous chain and every fact retrieved so far, for a re-plan (phase 2)."""

    template_id: ClassVar[str] = "pgr_cot_refine"
    output_model: ClassVar[type[BaseModel]] = ChainPlan

    def answer_model(self) -> type[BaseModel]:
        return stated(ChainPlan, steps=says(maxItems=REFINED_CHAIN_STEPS_MAX))


class TotRefineInputs(RefineInputs[TreeStepView]):
    """The previous tree and every fact retrieved so far, for a re-plan (phase 2)."""

    template_id: ClassVar[str] = "pgr_tot_refine"
    output_model: ClassVar[type[BaseModel]] = TreePlan

    def answer_model(self) -> type[BaseModel]:
        return stated(TreePlan, nodes=says(maxItems=REFINED_TREE_NODES_MAX))


class SummaryInputs(PlanInputs):
    """The last plan and the retrieved facts in time order, to be summarised for the answer."""

    template_id: ClassVar[str] = "pgr_summary"
    temperature: ClassVar[float] = 0.3
    output_model: ClassVar[type[BaseModel]] = ProspectionSummary

    steps: list[ChainStepView] | list[TreeStepView]
    facts: list[FactView]


class AnswerInputs(QueryInputs):
    """The retrieved facts and, for PGR, the summary: prospection-augmented generation."""

    template_id: ClassVar[str] = "pgr_answer"
    temperature: ClassVar[float] = 0.3
    output_model: ClassVar[type[BaseModel]] = GeneratedAnswer

    facts: list[FactView]
    summary: str
