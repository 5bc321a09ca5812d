"""One settings object for the whole tool.

Precedence, highest first: CLI flags (``--set section.key=value`` and the
named flags), environment variables (``MEMORYQUEST_SECTION__KEY``, plus the
usual ``OPENAI_*`` / ``AZURE_OPENAI_*`` names), a TOML config file
(``--config`` or ``MEMORYQUEST_CONFIG``), then the defaults below, which are
the constants of the MemoryQuest paper.
"""

from __future__ import annotations

import datetime as dt
import os
import stat
import tomllib
from enum import StrEnum
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, SecretStr, field_validator, model_validator
from pydantic_settings import BaseSettings, PydanticBaseSettingsSource, SettingsConfigDict

from memoryquest.contracts import JudgeKind, RetrievalMethod, Stage

CONFIG_FILE_MAX_BYTES = 1_000_000
"""A config file is a small TOML file; anything larger (or not a regular file) is refused unread."""

KNOWN_METHODS = tuple(m.value for m in RetrievalMethod)
KNOWN_JUDGES = tuple(j.value for j in JudgeKind)
KNOWN_STAGES = tuple(s.value for s in Stage)
# memoryquest.pgr.baselines.BASELINE_METHODS (a test keeps the two equal; importing it here would be circular)
KNOWN_BASELINES = (
    RetrievalMethod.QUERY_ONLY.value,
    RetrievalMethod.BM25.value,
    RetrievalMethod.RANDOM.value,
    RetrievalMethod.RECENCY.value,
    RetrievalMethod.MULTI_QUERY.value,
    RetrievalMethod.HYPOTHETICAL_FACTS.value,
)


def _refuse_unknown(values: list[str], known: tuple[str, ...], what: str) -> None:
    unknown = [v for v in values if v not in known]
    if unknown:
        raise ValueError(
            f"unknown {what} {', '.join(map(repr, unknown))}; choose from {', '.join(known)}"
        )


def _known_names(values: list[str], known: tuple[str, ...], what: str) -> list[str]:
    _refuse_unknown(values, known, what)
    if len(set(values)) != len(values):
        raise ValueError(f"a {what} is listed twice: {values}")
    return values


def Cosine(default: float, description: str = "") -> Any:  # noqa: N802 - reads like a type
    """A cosine threshold: a finite number in [-1, 1]."""
    return Field(default, ge=-1.0, le=1.0, description=description or None)


def Share(default: float, description: str = "") -> Any:  # noqa: N802 - reads like a type
    """A share or rate: a finite number in [0, 1]."""
    return Field(default, ge=0, le=1, description=description or None)


def Count(default: int, description: str = "") -> Any:  # noqa: N802 - reads like a type
    """A count, size or limit of which none makes no sense: a whole number of at least one."""
    return Field(default, ge=1, description=description or None)


def Positive(default: float | None, description: str = "") -> Any:  # noqa: N802 - reads like a type
    """A duration, rate or budget that must be above zero when set (None: no such limit)."""
    return Field(default, gt=0, description=description or None)


class Section(BaseModel):
    # allow_inf_nan=False: NaN compares false with everything, so a NaN threshold silently disables its check.
    model_config = ConfigDict(extra="forbid", validate_assignment=True, allow_inf_nan=False)


class GenerationSettings(Section):
    gamma_max: float = Field(
        0.3,
        gt=0.0,
        le=1.0,
        description="Keep queries whose mean query-reference cosine is at most this "
        "(above 0: at or below it no real embedder leaves a query).",
    )
    queries_per_user: int = Count(15, "n_q: at most this many kept queries per user.")
    candidates_per_user: int = Count(24, "Candidate queries asked for per user before filtering.")
    references_min: int = Count(3)
    references_max: int = Count(5)
    events_min: int = Count(5)
    events_max: int = Count(10)
    news_per_event_min: int = Count(
        2,
        "Each timeline event carries at least this many news items (a reference "
        "event's reference among them; every event is planned alike). With 2-6 most user turns "
        "carry news, so the one that carries a reference is not the odd one out.",
    )
    news_per_event_max: int = Count(6, "Each timeline event carries at most this many news items.")
    news_words_min: int = Count(
        4,
        "A news item, reference or filler, has at least this many words (one form "
        "for all, so length does not tell a reference).",
    )
    news_words_max: int = Count(
        45,
        "A news item, reference or filler, has at most this many words (the offline "
        "simulator's references, with their bridge clauses, reach 45).",
    )
    turns_min: int = Field(5, ge=2)
    turns_max: int = Field(30, ge=2)
    memory_every_sessions: int = Count(3, "Extract facts after every N sessions.")
    memory_facts_shown: int = Count(
        24,
        "An extraction call sees at most this many existing facts: those nearest to "
        "the new sessions' user turns (all of them while there are fewer). Of 286 updates in "
        "9 simulated personas, 97% were of one of the nearest 10 and none ranked past 17.",
    )
    consolidation_new_facts: int = Count(50, "Consolidate after this many new facts.")
    consolidation_window_days: int = Field(
        7, ge=0, description="Merge only facts dated within this window."
    )
    consolidation_similarity: float = Cosine(0.75, "Cosine at which facts cluster together.")
    max_regenerations: int = Field(
        2, ge=0, description="Bounded retries when a stage output breaks an invariant."
    )
    lead_days_max: int = Count(
        14, "Timelines start at most this many days before the earliest reference."
    )
    query_date_start: dt.date = Field(
        dt.date(2024, 3, 1), description="Earliest query date asked for."
    )
    query_date_end: dt.date = Field(
        dt.date(2025, 2, 28), description="Latest query date asked for."
    )
    reference_window_days: int = Count(
        90, "References are dated at most this many days before their query."
    )
    filler_similarity_max: float = Cosine(
        0.6,
        "A filler event with a sentence whose cosine to a reference exceeds this counts as carrying it.",
    )
    reference_turn_similarity_min: float = Cosine(
        0.45, "The turn said to convey a reference must reach this cosine to it."
    )
    fact_quote_similarity_min: float = Cosine(
        0.35,
        "An extracted fact must reach this cosine to the sentence it quotes (the quote supports it).",
    )
    fact_added_words_max: int = Field(
        2,
        ge=0,
        description="An extracted fact may use at most this many content words (stemmed) that its "
        "cited turns do not (a paraphrase's own words); more adds what the user did not say.",
    )
    cosine_tolerance: float = Field(
        0.002, ge=0, le=1, description="Slack when validation recomputes stored cosines."
    )
    reference_cosine_max: float = Cosine(
        0.5, "Reject a candidate when any single reference is closer than this to its query."
    )
    shared_words_max: int = Field(
        2,
        ge=0,
        description="Reject a candidate when a reference shares more content words (stemmed) with its query.",
    )
    duplicate_cosine: float = Cosine(
        0.9, "Two references of one user at or above this cosine are near-duplicates."
    )
    judge_relevance: bool = Field(
        True,
        description="Ask the relevance judge whether each reference would change the answer; drop it if not.",
    )
    review: bool = Field(
        False,
        description="Have the judge model (endpoint.judge_model, else the chat model) read each "
        "conversation that passed the dialogue gates, without its references or any label, and "
        "list sentences that point ahead, announce themselves or retell an earlier conversation; "
        "a flagged conversation is regenerated, and rejected as 'flagged' once max_regenerations "
        "is spent. One more request per conversation and attempt, billed to the stage 'review'.",
    )
    ledger_waves: int = Count(
        4,
        "A user's conversations are written in this many bands of dates, each once the "
        "earlier bands are settled, so a conversation's ledger shows what the user actually said "
        "before its band (1: all at once, no sentence said in any ledger). Each band adds a round of dialogue calls to a user's wall time.",
    )
    restated_cosine: float = Cosine(
        0.75,
        "A sentence of another session at or above this cosine to the sentence a reference is said "
        "with restates it (so does one that says most of its content words): the session is asked "
        "again, then the query rejected as restated.",
    )
    announcing_probability_max: float = Field(
        0.6,
        ge=0,
        le=1,
        description="A frame of a sentence that tells news (a short piece between commas, dashes "
        "or brackets, or a short statement beside it) that the announcing model scores above this speaks about "
        "the telling ('a bit of news', 'so it's on record'): the conversation is asked again, "
        "then rejected as 'marked'. 0.6 is about the 98th-99th percentile of the plain "
        "frames' cross-validated scores; 1 turns the check off.",
    )
    pointing_probability_max: float = Field(
        0.55,
        ge=0,
        le=1,
        description="The clauses of a sentence that tells news (and of the statements beside "
        "it) that look past the moment of speaking, scored by the pointing model: one above "
        "this says what is told will count at a later occasion ('which will factor into my "
        "plans', 'for when we book'): the conversation is asked again, then rejected as "
        "'foreshadow'. "
        "0.55 is just above the 99th percentile of the plain stretches' cross-validated scores; "
        "1 turns the check off.",
    )

    @model_validator(mode="after")
    def _ranges(self) -> GenerationSettings:
        for low, high in (
            ("references_min", "references_max"),
            ("events_min", "events_max"),
            ("news_per_event_min", "news_per_event_max"),
            ("news_words_min", "news_words_max"),
            ("turns_min", "turns_max"),
        ):
            if getattr(self, low) > getattr(self, high):
                raise ValueError(
                    f"{low} ({getattr(self, low)}) is above {high} ({getattr(self, high)})"
                )
        if self.query_date_start > self.query_date_end:
            raise ValueError(
                f"query_date_start ({self.query_date_start}) is after query_date_end ({self.query_date_end})"
            )
        return self


class PGRSettings(Section):
    query_only_k: int = Count(20, "K of the query-only baseline.")
    query_only_tau: float = Cosine(0.0, "Similarity floor of the query-only baseline.")
    step_k: int = Count(5, "K per prospection sub-query.")
    step_tau: float = Cosine(0.3, "tau per prospection sub-query.")
    augment_k: int = Count(5, "K_o: context facts for query augmentation.")
    augment_tau: float = Cosine(0.6, "tau_o: similarity floor for augmentation context.")
    delta: int = Field(5, ge=0, description="Stop refining when fewer than delta new facts arrive.")
    max_iterations: int = Field(
        10, ge=0, description="I_max: at most this many Phase 2 refinements."
    )
    methods: list[str] = Field(default_factory=lambda: ["query_only", "pgr_cot", "pgr_tot"])
    judges: list[str] = Field(default_factory=lambda: ["provenance", "embedding", "llm"])
    embedding_judge_threshold: float = Cosine(
        0.6, "Cosine at which the embedding judge counts a reference as found."
    )
    generate_answers: bool = Field(
        False, description="Also run prospection-augmented answer generation."
    )
    budget_baselines: list[str] = Field(
        default_factory=lambda: [
            "query_only",
            "bm25",
            "random",
            "recency",
            "multi_query",
            "hypothetical_facts",
        ],
        description="Baselines run at each PGR method's own budget (facts it retrieved).",
    )
    baseline_seed: int = Field(0, description="Seed of the random baseline.")
    bootstrap_samples: int = Field(
        2000, ge=100, le=1_000_000, description="Resamples for the 95% confidence intervals."
    )
    expansion_texts: int = Field(
        4,
        ge=1,
        le=20,
        description="Texts the multi-query and hypothetical-fact baselines ask the model for.",
    )
    calibration_facts: int = Field(
        2,
        ge=0,
        le=20,
        description="Facts per reference and kind (right, other query, near miss) each model or "
        "embedding judge is tested on, against the exact provenance judge; 0 skips it.",
    )

    @field_validator("methods")
    @classmethod
    def _known_methods(cls, value: list[str]) -> list[str]:
        return _known_names(value, KNOWN_METHODS, "retrieval method")

    @field_validator("judges")
    @classmethod
    def _known_judges(cls, value: list[str]) -> list[str]:
        return _known_names(value, KNOWN_JUDGES, "judge")

    @field_validator("budget_baselines")
    @classmethod
    def _known_baselines(cls, value: list[str]) -> list[str]:
        return _known_names(value, KNOWN_BASELINES, "budget baseline")

    @model_validator(mode="after")
    def _judged(self) -> PGRSettings:
        if self.methods and not self.judges:
            raise ValueError(
                "judges is empty, but methods are to be scored: name at least one judge"
            )
        return self


FilterClassifier = Literal[
    "user_turns", "news_wording", "facts", "structure_turns", "structure_sessions"
]


def _every_filter_classifier() -> list[FilterClassifier]:
    return ["user_turns", "news_wording", "facts", "structure_turns", "structure_sessions"]


class AuditSettings(Section):
    """Thresholds of ``memoryquest audit``; crossing one fails ``validate`` and ``publish``.

    The ``*_min`` / ``*_max`` targets below the thresholds only report: a missed
    target is named by the audit and on the card, and fails nothing.
    """

    ngram_min: int = Count(2, "Shortest word n-gram checked for exclusivity.")
    ngram_max: int = Count(5, "Longest word n-gram checked for exclusivity.")
    exclusive_ngram_share_max: float = Share(
        0.10,
        "Fail when an n-gram found only around reference turns covers at least this share of them.",
    )
    classifier_auc_max: float = Field(
        0.65,
        ge=0.5,
        le=1,
        description="Fail when the cross-user classifier separates reference material above this AUC.",
    )
    structure_auc_max: float = Field(
        0.60,
        ge=0.5,
        le=1,
        description="Fail when a classifier on structural features (the reference turn's index, the "
        "session's length and news items, the event's place in its timeline, the domain relative to "
        "the query's) separates references above this AUC.",
    )
    filter_tells: bool = Field(
        True,
        description="Before a run publishes, withdraw (reason `tell`) the queries whose reference "
        "items stand out to the audit's out-of-fold classifiers (`memoryquest audit --filter` does "
        "the same to a dataset made elsewhere).",
    )
    filter_fdr: float = Field(
        0.05,
        gt=0,
        lt=1,
        description="A query stands out when the p-value of its reference items (each: how many "
        "of its fold's other items score at least as high; combined with their mean rank's) "
        "passes the Benjamini-Hochberg procedure at this false discovery rate, over every query "
        "of the classifier.",
    )
    filter_classifiers: list[FilterClassifier] = Field(
        default_factory=_every_filter_classifier,
        min_length=1,
        description="The audit's classifiers whose out-of-fold scores the filter reads.",
    )
    filter_rounds_max: int = Count(5, "At most this many rounds of scoring and withdrawing.")
    uncovered_max: int = Field(
        0, ge=0, description="Fail when more references than this have no credited fact."
    )
    stale_max: int = Field(
        0, ge=0, description="Fail when more references than this expired before their query."
    )
    repeated_sentence_min: int = Field(
        5, ge=2, description="A sentence counts as repeated at this many occurrences."
    )
    # Targets: what a usable benchmark shows. Missing one is reported (audit, card), not a failure.
    query_only_recall_min: float = Share(
        0.3,
        "Target: dense query-only recall at least this; below it the query finds its references hardly better than chance, and the set measures noise.",
    )
    query_only_recall_max: float = Share(
        0.7,
        "Target: dense query-only recall at most this; above it the query alone finds the references, and the set is trivial.",
    )
    distinct_2_min: float = Share(
        0.25,
        "Target: distinct-2 of user turns, on the audit's fixed-size word sample, at least this (natural chat is about 0.3).",
    )
    repeated_sentence_share_max: float = Share(
        0.25,
        "Target: at most this share of user-turn sentences are repeated ones.",
    )

    @model_validator(mode="after")
    def _ngram_range(self) -> AuditSettings:
        if self.ngram_min > self.ngram_max:
            raise ValueError(f"ngram_min ({self.ngram_min}) is above ngram_max ({self.ngram_max})")
        if self.query_only_recall_min > self.query_only_recall_max:
            raise ValueError(
                f"query_only_recall_min ({self.query_only_recall_min}) is above "
                f"query_only_recall_max ({self.query_only_recall_max})"
            )
        return self


class Backend(StrEnum):
    AUTO = "auto"  # openai when an API key or base URL is configured, else simulated
    SIMULATED = "simulated"
    OPENAI = "openai"
    AZURE = "azure"


class ServerKind(StrEnum):
    """What serves the OpenAI-compatible API; decides which request fields it is sent (memoryquest.llm.servers)."""

    AUTO = "auto"  # from the base URL, then from what the server's /models answers
    OPENAI = "openai"
    AZURE = "azure"
    VLLM = "vllm"
    OLLAMA = "ollama"
    LLAMACPP = "llamacpp"  # llama.cpp's server or llama-cpp-python's


class EmbedderKind(StrEnum):
    AUTO = "auto"  # the endpoint's embeddings for openai/azure, else local
    LOCAL = "local"
    OPENAI = "openai"


class EndpointSettings(Section):
    backend: Backend = Backend.AUTO
    api_key: SecretStr | None = None
    base_url: str | None = None
    organization: str | None = None
    azure_endpoint: str | None = None
    azure_api_version: str = "2024-10-21"
    chat_model: str = "gpt-4o"
    judge_model: str | None = Field(
        None,
        description="The model that answers the judges (reference relevance, retrieval judge, "
        "pairwise judge), so that the author does not grade its own work; default: chat_model.",
    )
    judge_base_url: str | None = Field(
        None, description="The judge model's server when it is not base_url's."
    )
    server: ServerKind = Field(
        ServerKind.AUTO,
        description="The kind of server behind base_url: decides the request fields sent "
        "(structured-output style, seed, prompt_cache_key, max_tokens name), where embeddings "
        "come from and how the context window is read.",
    )
    context_window: int | None = Field(
        None,
        ge=256,
        description="The chat model's context window in tokens; default: read from the server "
        "(llama.cpp /props, vLLM /v1/models, Ollama /api/show) or known for OpenAI models. "
        "Every request's prompt plus its output allowance must fit it.",
    )
    embedder: EmbedderKind = EmbedderKind.AUTO
    embedding_model: str = "text-embedding-3-small"
    embedding_base_url: str | None = Field(
        None,
        description="An embeddings server other than base_url. A non-OpenAI chat server uses the "
        "local embedder unless this or embedding_model is set.",
    )
    local_embedding_model: str = "all-MiniLM-L6-v2-onnx-int8"
    timeout_seconds: float = Positive(
        60.0,
        "Time for the server to start answering. Each request gets this plus the time "
        "its prompt and output allowance take at the throughput measured on this server "
        "(tokens_per_second until a request has been measured).",
    )
    tokens_per_second: float = Positive(
        10.0,
        "Output tokens per second assumed before the server's own speed is measured; "
        "sizes the first requests' timeouts.",
    )
    max_retries: int = Field(6, ge=0)
    strict_schema: bool = Field(
        True, description="Ask for strict JSON-schema output where the server supports it."
    )
    batch: bool = Field(
        False, description="Send LLM stages through the OpenAI Batch API (half price)."
    )
    batch_poll_seconds: float = Positive(30.0, "First wait between two polls of a running batch.")
    batch_max_poll_seconds: float = Positive(600.0, "The poll wait grows 1.5x per poll up to this.")
    batch_rounds: int = Count(
        3, "Batches per request set (the first plus resends of failed rows); the rest goes online."
    )
    batch_turnaround_minutes: float = Positive(
        60.0,
        "Batch mode, for the estimate's wall time: minutes from submitting a batch "
        "to its results (the Batch API promises 24 h; small batches usually come back sooner).",
    )
    batch_enqueued_tokens_max: int | None = Positive(
        None,
        "Batch mode: prompt tokens per model our unfinished batches may hold at once; a "
        "round above it is cut into several batch files, each created once earlier ones leave room. "
        "OpenAI caps a project's enqueued batch tokens per model (its 'batch queue limit'; a batch "
        "over it fails with token_limit_exceeded). Default: the published usage-tier-1 figure for the "
        "model (gpt-4o-mini, gpt-3.5-turbo, o1-mini 2,000,000; gpt-4o, gpt-4-turbo, o1-preview "
        "90,000; gpt-4 100,000; from OpenAI's rate-limit table for tier 1, as quoted in "
        "community.openai.com/t/1028595, and the refusal quoted in openai/openai-python#2084), "
        "2,000,000 for other models. Higher tiers allow more: set your project's figure.",
    )
    batch_collect_seconds: float = Field(
        2.0,
        ge=0,
        description="Batch mode: requests are collected until none has arrived for this long, then sent as one batch.",
    )
    prompt_cache_key: bool | None = Field(
        None,
        description="Send prompt_cache_key (one per persona) so the provider's prompt cache groups a "
        "persona's requests; default: only to OpenAI itself, since other servers may reject it.",
    )
    batch_stages: list[Stage] = Field(
        default_factory=lambda: [
            Stage.QUERIES,
            Stage.TIMELINES,
            Stage.DIALOGUES,
            Stage.MEMORY,
            Stage.PGR,
            Stage.PGR_JUDGE,
        ],
        description="Batch mode: the stages (as the usage table names them) whose requests go through "
        "the Batch API; the others go online at the full price. Memory asks one extraction after "
        "another per persona, so batched it takes a batch round per extraction step; the personas "
        "run in lockstep, so round k carries the k-th step of every persona. Leave it out to trade "
        "its discount for those rounds' wait.",
    )
    simulator_hints: bool = Field(
        False,
        description="For the bundled fake server (memoryquest.testing.fake_openai) only: send each prompt's "
        "variables in a request header so it can answer from the offline simulator. Never for a real "
        "server: the header carries the persona data a second time.",
    )

    @field_validator("batch_stages", mode="before")
    @classmethod
    def _known_stages(cls, value: Any) -> Any:
        """Before pydantic's own enum error, which would not list the stages."""
        if isinstance(value, list):
            _refuse_unknown([v for v in value if isinstance(v, str)], KNOWN_STAGES, "stage")
        return value

    def resolved_backend(self) -> Backend:
        if self.backend is not Backend.AUTO:
            return self.backend
        if self.azure_endpoint:
            return Backend.AZURE
        if self.api_key is not None or self.base_url:
            return Backend.OPENAI
        return Backend.SIMULATED


class LimitSettings(Section):
    requests_per_minute: int = Count(500)
    tokens_per_minute: int = Count(400_000)
    max_concurrency: int = Count(16)
    circuit_breaker_failures: int = Count(20, "Consecutive failed requests before the run stops.")
    retry_base_seconds: float = Positive(
        0.5, "First retry backoff; doubles per attempt, with jitter."
    )
    retry_max_seconds: float = Positive(30.0, "Longest backoff between two retries.")
    quota_retry_after_seconds: float = Positive(
        5.0,
        "A 429 whose Retry-After is at least this long means a spent quota (the rate and "
        "concurrency go down); a shorter one without quota headers only delays its own request.",
    )
    shared_limit_name: str | None = Field(
        None,
        description="Name of the Prefect global concurrency limits that hold requests_per_minute (NAME) "
        "and tokens_per_minute (NAME-tokens) for every process of a run (shards, Dask workers): set it "
        "when a run spans workers. Off by default.",
    )

    @model_validator(mode="after")
    def _backoff_range(self) -> LimitSettings:
        if self.retry_base_seconds > self.retry_max_seconds:
            raise ValueError(
                f"retry_base_seconds ({self.retry_base_seconds:g}) is above retry_max_seconds ({self.retry_max_seconds:g})"
            )
        return self


class CacheSettings(Section):
    enabled: bool = True
    directory: Path | None = Field(None, description="Defaults to <output_dir>/.cache.")


class PublishSettings(Section):
    train: float = Share(0.8)
    validation: float = Share(0.1)
    test: float = Share(0.1)
    split_seed: int = 13

    @model_validator(mode="after")
    def _sums_to_one(self) -> PublishSettings:
        total = self.train + self.validation + self.test
        if abs(total - 1.0) > 1e-6:
            raise ValueError(f"split ratios must sum to 1, got {total:.3f}")
        return self


def _bundled_personas() -> Path:
    from memoryquest.resources import data_dir

    return data_dir("personas") / "personalens"


class Settings(BaseSettings):
    """Every knob of a run; printed by ``memoryquest config show``."""

    model_config = SettingsConfigDict(
        env_prefix="MEMORYQUEST_",
        env_nested_delimiter="__",
        extra="forbid",
        validate_assignment=True,
    )

    seed: int = Field(0, ge=0, le=2**63 - 1)
    output_dir: Path = Path("output")
    persona_source: str = Field(
        default_factory=lambda: str(_bundled_personas()),
        description="Directory or http(s) base URL laid out like PersonaLens data/.",
    )
    generation: GenerationSettings = Field(default_factory=GenerationSettings)
    pgr: PGRSettings = Field(default_factory=PGRSettings)
    endpoint: EndpointSettings = Field(default_factory=EndpointSettings)
    limits: LimitSettings = Field(default_factory=LimitSettings)
    cache: CacheSettings = Field(default_factory=CacheSettings)
    publish: PublishSettings = Field(default_factory=PublishSettings)
    audit: AuditSettings = Field(default_factory=AuditSettings)
    prices_file: Path | None = Field(
        None, description="JSON price table overriding the built-in one."
    )

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        return (init_settings, env_settings, _VendorEnvSource(settings_cls))

    @property
    def cache_dir(self) -> Path:
        return self.cache.directory or self.output_dir / ".cache"

    def masked(self) -> dict[str, Any]:
        """The effective configuration with secrets replaced by '****'."""
        data = self.model_dump(mode="json")
        if self.endpoint.api_key is not None:
            data["endpoint"]["api_key"] = "****"
        return data


class _VendorEnvSource(PydanticBaseSettingsSource):
    """The variable names OpenAI and Azure users already have set."""

    VARIABLES: dict[str, tuple[str, ...]] = {
        "api_key": ("OPENAI_API_KEY", "AZURE_OPENAI_API_KEY"),
        "base_url": ("OPENAI_BASE_URL",),
        "organization": ("OPENAI_ORG_ID",),
        "azure_endpoint": ("AZURE_OPENAI_ENDPOINT",),
        "azure_api_version": ("OPENAI_API_VERSION",),
    }

    def get_field_value(self, field: Any, field_name: str) -> tuple[Any, str, bool]:
        return None, field_name, False

    def __call__(self) -> dict[str, Any]:
        endpoint: dict[str, Any] = {}
        for key, names in self.VARIABLES.items():
            for name in names:
                if os.environ.get(name):
                    endpoint[key] = os.environ[name]
                    break
        return {"endpoint": endpoint} if endpoint else {}


__all__ = ["Settings", "load_settings", "parse_assignments", "read_config_file"]


def _set_dotted(target: dict[str, Any], dotted: str, value: Any) -> None:
    node = target
    parts = dotted.split(".")
    for part in parts[:-1]:
        node = node.setdefault(part, {})
        if not isinstance(node, dict):
            raise ValueError(f"--set {dotted}: '{part}' is not a section")
    node[parts[-1]] = value


def _deep_merge(base: dict[str, Any], extra: dict[str, Any]) -> dict[str, Any]:
    merged = dict(base)
    for key, value in extra.items():
        if isinstance(value, dict) and isinstance(merged.get(key), dict):
            merged[key] = _deep_merge(merged[key], value)
        else:
            merged[key] = value
    return merged


def parse_assignments(assignments: list[str]) -> dict[str, Any]:
    """Turn ``["generation.gamma_max=0.25", ...]`` into a nested dict."""
    overrides: dict[str, Any] = {}
    for item in assignments:
        if "=" not in item:
            raise ValueError(f"--set expects section.key=value, got {item!r}")
        key, raw = item.split("=", 1)
        value: Any = raw
        if raw.startswith("[") and raw.endswith("]"):
            # [a, b] or, as TOML and JSON write it, ["a", "b"]
            parts = (part.strip().strip("\"'") for part in raw[1:-1].split(","))
            value = [part for part in parts if part]
        _set_dotted(overrides, key.strip(), value)
    return overrides


def read_config_file(path: Path) -> dict[str, Any]:
    """The TOML values of a config file: a regular file of at most ``CONFIG_FILE_MAX_BYTES``.

    Checked before it is opened, so ``--config /dev/zero`` or a directory is one
    clear error rather than an endless read or a traceback.
    """
    try:
        info = path.stat()
    except FileNotFoundError:
        raise ValueError(f"config file {path} does not exist") from None
    except OSError as exc:
        raise ValueError(f"config file {path} cannot be read: {exc.strerror or exc}") from None
    if stat.S_ISDIR(info.st_mode):
        raise ValueError(f"config file {path} is a directory, not a TOML file")
    if not stat.S_ISREG(info.st_mode):
        raise ValueError(f"config file {path} is not a regular file")
    if info.st_size > CONFIG_FILE_MAX_BYTES:
        raise ValueError(
            f"config file {path} is {info.st_size} bytes, above the {CONFIG_FILE_MAX_BYTES}-byte limit"
        )
    try:
        with path.open("rb") as handle:
            raw = handle.read(CONFIG_FILE_MAX_BYTES + 1)
    except OSError as exc:
        raise ValueError(f"config file {path} cannot be read: {exc.strerror or exc}") from None
    if len(raw) > CONFIG_FILE_MAX_BYTES:
        raise ValueError(f"config file {path} is above the {CONFIG_FILE_MAX_BYTES}-byte limit")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ValueError(
            f"config file {path} is not UTF-8 text (byte offset {exc.start})"
        ) from None
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ValueError(f"config file {path} is not valid TOML: {exc}") from None
    except (
        ValueError,
        RecursionError,
    ) as exc:  # e.g. an integer beyond Python's digit limit, deep nesting
        reason = "nested too deeply" if isinstance(exc, RecursionError) else str(exc)
        raise ValueError(f"config file {path} is not valid TOML: {reason}") from None


def load_settings(
    config_file: Path | None = None,
    overrides: dict[str, Any] | None = None,
) -> Settings:
    """Build the settings from file < environment < explicit overrides."""
    config_file = config_file or (
        Path(os.environ["MEMORYQUEST_CONFIG"]) if os.environ.get("MEMORYQUEST_CONFIG") else None
    )
    file_values: dict[str, Any] = (
        read_config_file(Path(config_file)) if config_file is not None else {}
    )
    # Environment beats the file: read it separately, then lay it over the file values.
    env_only = Settings().model_dump(exclude_unset=True)
    values = _deep_merge(_deep_merge(file_values, env_only), overrides or {})
    return Settings(**values)
