"""Data contracts: every record the pipeline reads or publishes.

These pydantic models *are* the public API of a generated dataset. The JSON
Schemas under ``schemas/`` are generated from them (``memoryquest schemas
write``) and a test fails when the two drift apart.

Conventions shared by every table:

* ids are opaque strings with a short type prefix (``p_`` persona, ``q_`` query,
  ``r_`` reference, ``e_`` event, ``s_`` session, ``f_`` fact, ``x_`` rejected
  candidate) derived from content and position, so re-running the same inputs
  yields the same ids;
* dates are ISO-8601 calendar dates;
* collections are lists, never dicts keyed by position;
* every table row carries ``schema_version``.

Ground truth is an explicit chain so recall can be scored at several levels::

    reference_id -> event_id -> session_id -> turn indices -> fact ids

What a memory system under test reads (:data:`READABLE_TABLES`: the history, the
queries' text, the facts) carries none of it: :class:`Session`, :class:`Query` and
:class:`Fact` are the joined view the pipeline works on, and every file written holds
them split into a readable row and a labels row (:data:`TABLES`).
"""

from __future__ import annotations

import datetime as dt
import re
from enum import StrEnum
from typing import Annotated, Final, Literal

from pydantic import BaseModel, ConfigDict, Field, StringConstraints

SCHEMA_VERSION: Final = "1.0"

Id = Annotated[str, StringConstraints(pattern=r"^[a-z]_[0-9a-f]{16}$")]


class Domain(StrEnum):
    """The 20 PersonaLens task domains."""

    ALARM = "Alarm"
    BOOKS = "Books"
    BUSES = "Buses"
    CALENDAR = "Calendar"
    EVENTS = "Events"
    FINANCE = "Finance"
    FLIGHTS = "Flights"
    GAMES = "Games"
    HOTELS = "Hotels"
    MEDIA = "Media"
    MESSAGING = "Messaging"
    MOVIES = "Movies"
    MUSIC = "Music"
    RENTAL_CARS = "Rental Cars"
    RESTAURANTS = "Restaurants"
    SERVICES = "Services"
    SHOPPING = "Shopping"
    SPORTS = "Sports"
    TRAIN = "Train"
    TRAVEL = "Travel"


class FactType(StrEnum):
    """Kinds of memory fact (the paper's six)."""

    IDENTITY = "Identity"  # demographics, profession, education, relationships
    PREFERENCE = "Preference"  # likes, dislikes, habits
    GOAL = "Goal"  # plans, intentions, upcoming events
    INTEREST = "Interest"  # hobbies and topics the user cares about
    ACTIVITY = "Activity"  # things the user does or did
    EVENT = "Event"  # situations and life changes that shape decisions


class FactState(StrEnum):
    """How the latest extraction touched a fact."""

    ADD = "add"  # created by this extraction
    UPDATE = "update"  # an existing fact changed or was seen again


class FactStatus(StrEnum):
    """Whether a fact is still in the store or was folded into another."""

    ACTIVE = "active"
    MERGED = "merged"  # retired by consolidation; see ``merged_into``


class Role(StrEnum):
    USER = "user"
    ASSISTANT = "assistant"


class EventKind(StrEnum):
    REFERENCE = "reference"  # carries exactly one required reference
    FILLER = "filler"  # persona-grounded context, no reference


class PersonaSource(StrEnum):
    PERSONALENS = "personalens"
    CUSTOM = "custom"


class TaskKind(StrEnum):
    SINGLE_DOMAIN = "single_domain"
    MULTI_DOMAIN = "multi_domain"


class Stage(StrEnum):
    """The pipeline's stages, by the names rejected rows, usage rows and logs give them.

    A stage group (one Prefect task per persona, :class:`StageGroupName`) runs one or more of
    them: the conversations group runs timelines, dialogues and their review. The last two are
    billed outside the pipeline: the embeddings of the PGR sample scenario and of the invariant
    checks.
    """

    QUERIES = "queries"  # candidates with dated references, the γ filter and per-reference gates
    TIMELINES = "timelines"  # a dated timeline of events leading up to each query
    DIALOGUES = "dialogues"  # one conversation per event
    REVIEW = "review"  # the blind review of each conversation (generation.review)
    MEMORY = "memory"  # facts extracted and consolidated
    PGR = "pgr"  # every query checked by retrieval
    PGR_JUDGE = "pgr_judge"  # the judges of PGR's references and answers (endpoint.judge_model)
    PGR_SAMPLE = "sample"  # the embeddings of the PGR sample scenario (memoryquest.pgr.sample)
    INVARIANTS = "validate"  # the embeddings the invariant checks compute on a finished dataset


RejectingStage = Literal[Stage.QUERIES, Stage.TIMELINES, Stage.DIALOGUES, Stage.MEMORY, Stage.PGR]
"""The stages that refuse candidates, as a rejected row names them: the review's refusals are
dialogue candidates', and the judges, the sample and the invariants refuse nothing."""


class StageGroupName(StrEnum):
    """The stage groups of :mod:`memoryquest.pipeline`, by the names their Prefect tasks,
    ``run_report.json``, ``progress.json`` and the progress bars give them."""

    QUERIES = "queries"
    CONVERSATIONS = "conversations"
    MEMORY = "memory"
    PGR_VALIDATION = "pgr-validation"


class RejectionReason(StrEnum):
    """Why a generated candidate did not make it into the dataset."""

    SIMILARITY = "similarity"  # gamma above the threshold
    SCHEMA = "schema"  # the model output did not fit the response model
    INVARIANT = "invariant"  # parsed, but broke a rule of SPEC section 2
    CAPACITY = "capacity"  # valid, but beyond n_q for the user
    REFERENCE_LEAK = (
        "reference_leak"  # one reference's cosine to the query is above reference_cosine_max
    )
    WORD_OVERLAP = "word_overlap"  # a reference shares too many content words with its query
    NEAR_DUPLICATE = (
        "near_duplicate"  # a reference nearly repeats another reference of the same user
    )
    CONTRADICTION = "contradiction"  # a reference contradicts another reference of the same user
    STALE = "stale"  # a time-bounded reference expired before the query date
    IRRELEVANT = "irrelevant"  # the relevance judge found the reference would not change the answer
    UNCOVERED = "uncovered"  # a reference has no credited fact in memory as of the query date
    FORESHADOW = "foreshadow"  # the sentence as said names the request's date or points ahead to it
    MARKED = "marked"  # the sentence as said announces itself ("by the way", "just so you know")
    MARKDOWN = "markdown"  # a chat turn is formatted as a document (lists, headings, bold)
    UNSUPPORTED = "unsupported"  # a fact says what its quoted sentence does not
    CONTEXT_LENGTH = (
        "context_length"  # the prompt, trimmed as far as it goes, does not fit the model's window
    )
    RESTATED = "restated"  # a reference is told again in a session other than its own
    TELL = "tell"  # an out-of-fold classifier singles the query's reference items out
    FLAGGED = "flagged"  # the blind reviewer found a sentence that points ahead, announces itself or retells


class RetrievalMethod(StrEnum):
    QUERY_ONLY = (
        "query_only"  # dense retrieval on the query text (K = query_only_k, or a matched budget)
    )
    PGR_COT = "pgr_cot"
    PGR_TOT = "pgr_tot"
    BM25 = "bm25"  # lexical retrieval on the query text, at a matched budget
    RANDOM = "random"  # seeded random facts from the snapshot, at a matched budget
    RECENCY = "recency"  # the snapshot's most recent facts, at a matched budget
    MULTI_QUERY = "multi_query"  # dense retrieval with model-written search queries, fused
    HYPOTHETICAL_FACTS = "hypothetical_facts"  # dense retrieval with model-imagined facts (HyDE)


class JudgeKind(StrEnum):
    PROVENANCE = "provenance"  # exact: a retrieved fact descends from the reference
    LLM = "llm"  # per-reference yes/no from a language model
    EMBEDDING = "embedding"  # cosine between reference and retrieved facts


def parse_domain(text: str) -> Domain | None:
    """'rental cars', 'Rental Cars', 'RentalCars' -> Domain.RENTAL_CARS; unknown -> None."""
    key = re.sub(r"[\s_\-]+", "", text or "").casefold()
    for domain in Domain:
        if re.sub(r"[\s_\-]+", "", domain.value).casefold() == key:
            return domain
    return None


def parse_date(text: str) -> dt.date | None:
    """An ISO calendar date, or None for anything else."""
    try:
        return dt.date.fromisoformat(text.strip())
    except (ValueError, AttributeError):
        return None


class Contract(BaseModel):
    """Base for nested values: strict about unknown keys."""

    model_config = ConfigDict(extra="forbid")


class Row(Contract):
    """Base for one row of a published table."""

    schema_version: Literal["1.0"] = SCHEMA_VERSION


# --------------------------------------------------------------------------- personas


class Demographics(Contract):
    age: str | None = None
    gender: str | None = None
    employment_status: str | None = None
    education: str | None = None
    marital_status: str | None = None
    english_proficiency: str | None = None
    ethnicity: str | None = None
    religion: str | None = None
    birth_country: str | None = None
    reside_country: str | None = None


class Affinity(Contract):
    """One preference attribute in one domain, always as a list of values."""

    domain: Domain
    name: str = Field(min_length=1)
    values: list[str]


class Interaction(Contract):
    """PersonaLens' paragraph summarising past interactions in a domain."""

    domain: Domain
    summary: str = Field(min_length=1)


class Situation(Contract):
    name: str
    value: str


class TaskBrief(Contract):
    """A task as generation prompts show it: the goal and affinity types restate the
    description and cost tokens in every timeline and query prompt."""

    task_id: str
    kind: TaskKind
    description: str
    user_intent: str
    domains: list[Domain]
    situations: list[Situation] = Field(default_factory=list)


class PersonaTask(TaskBrief):
    goal: str
    affinity_types: list[str]


class Persona(Row):
    persona_id: Id
    source: PersonaSource
    source_user_id: str = Field(description="The user id in the source, e.g. 'user0'.")
    demographics: Demographics
    interests: list[Domain] = Field(description="Domains the user is interested in.")
    affinities: list[Affinity]
    interactions: list[Interaction]
    tasks: list[PersonaTask]


# --------------------------------------------------------------------------- queries


class Reference(Contract):
    """A short, dated, atomic statement the answer to a query depends on."""

    reference_id: Id
    date: dt.date
    text: str = Field(min_length=1)
    domain: Domain
    cosine: float = Field(description="Cosine similarity to the query text under `embedder`.")
    valid_until: dt.date | None = Field(
        default=None,
        description="Last day a time-bounded reference holds; null when it does not expire.",
    )
    rationale: str = Field(
        default="", description="Why the reference matters to the request (from the generator)."
    )
    relevance: str = Field(
        default="",
        description="The relevance judge's one-sentence reason for keeping the reference.",
    )


class QueryRequest(Row):
    """What a system under test is asked: who asks, on which date, in which words.

    Published as the ``queries`` config; the answer key lives in :class:`QueryLabels`.
    """

    query_id: Id
    persona_id: Id
    query_date: dt.date
    text: str = Field(min_length=1)


class QueryLabels(Row):
    """A query's answer key and how it was made; published as the ``query_labels`` config."""

    query_id: Id
    persona_id: Id
    reasoning: str
    domain: Domain
    references: list[Reference] = Field(min_length=1)
    gamma: float = Field(description="Mean cosine(query, reference) under `embedder`.")
    embedder: str = Field(description="Name of the embedding model behind every cosine.")
    rank: int = Field(
        ge=0, description="Position among the user's kept queries, lowest gamma first."
    )
    difficulty: float | None = Field(
        default=None,
        description="Query-only recall under the provenance judge (1 = easy, 0 = not found by the query alone).",
    )
    gamma_said: float | None = Field(
        default=None,
        description="Mean cosine(query, the sentence each reference is said with in its session) "
        "under `embedder`: gamma of the text retrieval searches, beside the drafts' `gamma`.",
    )


class Query(QueryRequest, QueryLabels):
    """A query joined with its labels: the view the pipeline works on, never written as one row."""


class RejectedCandidate(Row):
    """Anything generated that did not become part of the dataset, and why."""

    rejected_id: Id
    persona_id: Id
    stage: RejectingStage
    reason: RejectionReason
    detail: str
    payload_json: str = Field(description="The rejected candidate as generated, as JSON text.")
    gamma: float | None = None
    embedder: str | None = None


# --------------------------------------------------------------------------- timelines


class TimelineEvent(Contract):
    event_id: Id
    date: dt.date
    domain: Domain
    kind: EventKind
    description: str = Field(min_length=1)
    reference_id: Id | None = Field(
        default=None, description="The reference this event carries; null for filler."
    )
    news: list[str] = Field(
        default_factory=list,
        description="The personal updates the user mentions in this conversation; a reference "
        "event's reference is one of them, word for word, so its conversation cannot tell it apart.",
    )


class Timeline(Row):
    timeline_id: Id
    query_id: Id
    persona_id: Id
    events: list[TimelineEvent] = Field(min_length=1)


# --------------------------------------------------------------------------- sessions


class Turn(Contract):
    role: Role
    content: str = Field(min_length=1)


class ReferenceSpan(Contract):
    """The sentence of one turn that states a reference: ``turns[turn_index].content[start:end]``."""

    turn_index: int = Field(ge=0)
    start: int = Field(ge=0)
    end: int = Field(ge=1)


class HistorySession(Row):
    """One dated conversation as a memory system under test reads it: no label of any kind.

    Published as the ``history`` config, a user's rows in date order (ties by ``session_id``).
    """

    persona_id: Id
    session_id: Id = Field(description="Opaque; carries no order by query and no link to one.")
    date: dt.date
    turns: list[Turn] = Field(min_length=1)


class SessionLabels(Row):
    """Where a session comes from and which reference it carries; the ``session_labels`` config."""

    session_id: Id
    persona_id: Id
    query_id: Id
    event_id: Id
    domain: Domain
    position: int = Field(ge=0, description="Index in the user's chronological history.")
    reference_id: Id | None = None
    reference_turn_indices: list[int] = Field(
        default_factory=list, description="Turns that convey the reference."
    )
    reference_spans: list[ReferenceSpan] = Field(
        default_factory=list,
        description="The sentence(s) stating the reference; facts are credited from these.",
    )


class Session(HistorySession, SessionLabels):
    """One dated conversation, expanded from one timeline event, with its labels.

    The view the pipeline works on; written as two rows, :class:`HistorySession` and
    :class:`SessionLabels`.
    """


# --------------------------------------------------------------------------- facts


CREDITED_REFERENCES: Final = "References credited to this fact: it was extracted from a sentence stating them, or revises such a fact."


class MemoryFactRevision(Contract):
    """The state of a fact from `valid_from` until the next revision."""

    valid_from: dt.date = Field(description="Date of the latest session behind this revision.")
    info: str = Field(min_length=1)
    type: FactType
    frequency: int = Field(ge=1)
    related_entities: list[str]
    session_ids: list[Id]
    state: FactState


class MemoryFact(Row):
    """A memory fact with its full history, so the store can be replayed to any date.

    Published as the ``facts`` config: the memory a retrieval method under test reads,
    without the references it is credited with (those are in :class:`FactLabels`).
    """

    fid: Id
    persona_id: Id
    info: str = Field(min_length=1, description="Latest text.")
    type: FactType
    frequency: int = Field(ge=1)
    related_entities: list[str]
    session_ids: list[Id] = Field(description="Provenance: every session behind the fact.")
    merged_fids: list[Id] = Field(
        default_factory=list, description="Facts folded into this one by consolidation."
    )
    state: FactState
    status: FactStatus = FactStatus.ACTIVE
    merged_into: Id | None = None
    created_on: dt.date
    updated_on: dt.date
    retired_on: dt.date | None = Field(
        default=None, description="Consolidation date for merged facts."
    )
    revisions: list[MemoryFactRevision] = Field(min_length=1)


class RevisionCredit(Contract):
    """The references credited to one revision of a fact (same order as the fact's revisions)."""

    valid_from: dt.date
    source_reference_ids: list[Id] = Field(default_factory=list)


class FactLabels(Row):
    """The references each fact is credited with, as a whole and per revision; the ``fact_labels`` config."""

    fid: Id
    persona_id: Id
    source_reference_ids: list[Id] = Field(
        default_factory=list,
        description=CREDITED_REFERENCES,
    )
    revisions: list[RevisionCredit] = Field(
        min_length=1, description="One entry per revision of the fact, in the same order."
    )


class FactRevision(MemoryFactRevision):
    """A revision with the references credited to it (the pipeline's view)."""

    source_reference_ids: list[Id] = Field(default_factory=list)


class Fact(MemoryFact):
    """A memory fact with the references credited to it: the view the pipeline works on.

    Written as two rows, :class:`MemoryFact` and :class:`FactLabels`.
    """

    source_reference_ids: list[Id] = Field(
        default_factory=list,
        description=CREDITED_REFERENCES,
    )
    revisions: list[FactRevision] = Field(min_length=1)  # type: ignore[assignment]


# --------------------------------------------------------------------------- validation


class ProspectionStep(Contract):
    """One node of a chain (parent = previous step) or a tree."""

    step_id: str
    action: str
    constraints: str
    parent: str | None = None
    children: list[str] = Field(default_factory=list)
    retrieved_fids: list[Id] = Field(default_factory=list)


class ProspectionIteration(Contract):
    iteration: int = Field(ge=0, description="0 = Phase 1; 1.. = Phase 2 refinements.")
    steps: list[ProspectionStep]
    new_fids: list[Id]


class ReferenceJudgement(Contract):
    reference_id: Id
    found: bool
    reason: str = ""
    supporting_fids: list[Id] = Field(default_factory=list)


class ValidationResult(Row):
    """One query, one retrieval method, one judge."""

    result_id: Id
    query_id: Id
    persona_id: Id
    method: RetrievalMethod
    judge: JudgeKind
    memory_as_of: dt.date
    memory_size: int = Field(ge=0, description="Facts visible on the query date.")
    baseline_for: RetrievalMethod | None = Field(
        default=None,
        description="For a budget-matched baseline: the method whose retrieval budget it uses; null otherwise.",
    )
    budget: int = Field(
        default=0, ge=0, description="Number of facts the method was allowed to return."
    )
    retrieved_fids: list[Id]
    judgements: list[ReferenceJudgement]
    recall: float = Field(ge=0.0, le=1.0)
    recall_exact: bool
    ndcg: float = Field(ge=0.0, le=1.0)
    llm_calls: int = Field(ge=0)
    embedding_calls: int = Field(ge=0)
    iterations: list[ProspectionIteration] = Field(default_factory=list)
    augmented_query: str | None = None
    summary: str | None = None
    answer: str | None = None


# --------------------------------------------------------------------------- manifest


class PromptVersion(Contract):
    template_id: str
    version: int
    sha256: str


class Usage(Contract):
    """Tokens, cost and time spent, as one row of a usage table: a stage's (:class:`StageUsage`),
    or the whole run's, labelled ``total``."""

    stage: str
    requests: int = 0
    cache_hits: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    cached_tokens: int = 0
    embedding_requests: int = 0
    embedding_tokens: int = 0
    cost_usd: float = 0.0
    approximate_tokens: bool = False
    seconds: float = 0.0


class StageUsage(Usage):
    """What one stage spent (the rows of ``usage.jsonl`` and the manifest's usage tables)."""

    stage: Stage


class ReviewTally(Contract):
    """What the blind reviewer read in a run (``generation.review``): every conversation it was
    given, and those in which it flagged a sentence (each then regenerated or rejected ``flagged``)."""

    reviewer_model: str | None = Field(
        None,
        description="The model that answered the review: endpoint.judge_model, else the chat model "
        "(the simulator offline); set in the run manifest.",
    )
    sessions_reviewed: int = Field(0, ge=0)
    sessions_flagged: int = Field(0, ge=0)

    def plus(self, other: ReviewTally) -> ReviewTally:
        return ReviewTally(
            reviewer_model=self.reviewer_model or other.reviewer_model,
            sessions_reviewed=self.sessions_reviewed + other.sessions_reviewed,
            sessions_flagged=self.sessions_flagged + other.sessions_flagged,
        )


class RunManifest(Row):
    run_id: str
    created_at: dt.datetime
    package_version: str
    simulated: bool = Field(description="True when the text came from the offline simulator.")
    backend: str
    base_url: str | None = None
    chat_model: str
    embedder: str
    seed: int
    settings: dict[str, object] = Field(description="Every threshold and constant in force.")
    prompts: list[PromptVersion]
    usage: list[StageUsage] = Field(
        description="Tokens and cost actually spent, per stage, summed over every attempt of the run "
        "(a killed and resumed run is several attempts; see usage_this_attempt and reused_from_cache)."
    )
    total_cost_usd: float = Field(
        description="Sum of usage: what the whole run cost, every attempt included."
    )
    persona_ids: list[Id]
    wall_seconds: float = Field(description="Wall time of the attempt that wrote this manifest.")
    usage_this_attempt: list[StageUsage] = Field(
        default_factory=list,
        description="What the attempt that wrote this manifest spent (empty when the run did not record attempts).",
    )
    cost_this_attempt_usd: float = 0.0
    reused_from_cache: list[StageUsage] = Field(
        default_factory=list,
        description="What earlier attempts into the same output directory spent; this attempt took their "
        "answers from the request cache and Prefect's stage results instead of paying again.",
    )
    reused_cost_usd: float = 0.0
    attempts: int = Field(
        1, ge=1, description="Attempts (runs into the same output directory) the usage covers."
    )
    wall_seconds_all_attempts: float | None = Field(
        default=None,
        description="Wall time of every attempt (a killed one up to its last usage record).",
    )
    audit: dict[str, object] | None = Field(
        default=None,
        description="The validity audit of the dataset (`memoryquest audit`), when it was run.",
    )
    review: ReviewTally | None = Field(
        default=None,
        description="The blind reviewer's tally (generation.review), when it ran.",
    )


TABLES: dict[str, type[Row]] = {
    "personas": Persona,
    "queries": QueryRequest,
    "query_labels": QueryLabels,
    "timelines": Timeline,
    "history": HistorySession,
    "session_labels": SessionLabels,
    "facts": MemoryFact,
    "fact_labels": FactLabels,
    "validation": ValidationResult,
    "rejected": RejectedCandidate,
}
"""Written table name -> row model: one JSONL file of the working dataset, one Parquet config published."""

READABLE_TABLES: Final = ("history", "queries", "facts")
"""The tables a memory system under test may read; every other table scores it or records how
the data was made (ground truth, source profiles, validation results, rejected candidates)."""
