"""Predict calls, tokens and cost of a planned run before any money is spent.

The estimate replays the real pipeline on a small sample of personas with the
offline simulator (no network, no key): every prompt is rendered from the real
templates and counted with the target model's tokenizer, so the number of calls
per stage and the input tokens are what the real run would send. A request asked
again with the same prompt (both PGR methods augment a query the same way) is
counted once, as a real run's response cache or its sharing of identical
requests in flight answers the repeat without sending it (unless the cache is
off and the stage goes online). Output tokens
come from the simulator's answers, which is the main approximation, and is
flagged as such. Cached input tokens follow the provider's prefix-caching rule
(``memoryquest.llm.prompt_cache_model``) and are priced at the cached-input
rate, as a real run is billed. Per-persona figures are then scaled to the planned number of
personas and priced with the price table (in batch mode, the stages of
``endpoint.batch_stages`` at the Batch API discount, the others online). The
output length assumed for each template, and where it comes from, is listed
with the estimate (:class:`TemplateEstimate`).
"""

from __future__ import annotations

import asyncio
import json
import math
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field

from memoryquest.contracts import Persona, Stage, StageUsage
from memoryquest.llm.backends import ChatBackend, ChatCall, ChatResult
from memoryquest.llm.factory import build_client
from memoryquest.llm.prices import PriceTable
from memoryquest.llm.tokens import token_counter
from memoryquest.memory.extraction_contracts import ExtractionInputs
from memoryquest.pipeline import PipelineObserver, generate_dataset
from memoryquest.settings import Backend, Settings
from memoryquest.stages.review_contracts import SessionReviewInputs

EXTRACTION = ExtractionInputs.template_id


class StageEstimate(BaseModel):
    stage: str
    requests: float
    input_tokens: float
    cached_input_tokens: float  # part of input_tokens, billed at the cached-input price
    output_tokens: float
    embedding_requests: float
    embedding_tokens: float
    cost_usd: float


class TemplateEstimate(BaseModel):
    """What one prompt template costs per sample persona, and the answer length assumed for it.

    The output tokens are those of the offline simulator's answers on the sample (the
    estimate's main approximation); ``allowance`` is the output budget the requests
    reserved (the template's ``max_output_tokens``, or the stage's own).
    """

    template_id: str
    stage: str
    calls_per_persona: float
    input_tokens_per_call: float
    cached_share: float
    output_tokens_per_call: float
    output_tokens_max: int
    allowance: int


class _Rounds:
    """The batch rounds one persona's run takes, found the way the Batch API collector forms them:
    requests are held until none has been asked for a moment (``QUIET_SECONDS``), then answered
    together as one round. A request that needs an earlier answer is asked in a later round, so
    memory's sequential extractions take a round each while a stage's parallel requests share
    one. In Batch API mode the personas move in lockstep and a round carries the same step of
    every persona, so one persona's rounds are the run's, whatever its number of personas."""

    QUIET_SECONDS = 0.02

    def __init__(self) -> None:
        self.by_stage: dict[str, int] = {}
        self.rounds: list[set[str]] = []
        self._waiting: list[asyncio.Future[None]] = []
        self._stages: set[str] = set()
        self._timer: asyncio.TimerHandle | None = None

    async def wait(self, stage: str) -> None:
        """Hold a request until its round closes."""
        loop = asyncio.get_running_loop()
        future: asyncio.Future[None] = loop.create_future()
        self._waiting.append(future)
        self._stages.add(stage)
        if self._timer is not None:
            self._timer.cancel()
        self._timer = loop.call_later(self.QUIET_SECONDS, self._close)
        await future

    def _close(self) -> None:
        self._timer = None
        waiting, self._waiting = self._waiting, []
        self.rounds.append(self._stages)
        for stage in self._stages:
            self.by_stage[stage] = self.by_stage.get(stage, 0) + 1
        self._stages = set()
        for future in waiting:
            if not future.done():
                future.set_result(None)

    def start_persona(self) -> tuple[dict[str, int], list[set[str]]]:
        """The rounds counted so far (the previous persona's), and a fresh count."""
        counted = (self.by_stage, self.rounds)
        self.by_stage, self.rounds = {}, []
        return counted


class _TemplateTally:
    """The dry run's chat backend, counting calls and tokens per template on the way.

    The simulator answers every call, a repeated one too; ``repeats`` keeps, per
    stage, what the repeats a real run does not send added to the dry run's usage.
    """

    def __init__(self, inner: ChatBackend, repeats_answered: Callable[[str], bool]) -> None:
        self.inner = inner
        self.repeats_answered = repeats_answered  # by stage: is a repeat answered without sending?
        self.rows: dict[str, dict[str, Any]] = {}
        self.repeats: dict[str, StageUsage] = {}
        self._seen: set[tuple[Any, ...]] = set()
        self.rounds = _Rounds()

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    async def chat(self, call: ChatCall) -> ChatResult:
        await self.rounds.wait(call.request.stage)
        result = await self.inner.chat(call)
        request = call.request
        # What the response cache keys an answer by, as far as the simulator's answer depends on it.
        sent = (
            request.template_id,
            call.template_version,
            json.dumps(call.messages, sort_keys=True),
            call.seed,
            call.max_output_tokens,
        )
        if sent in self._seen and self.repeats_answered(request.stage):
            repeat = self.repeats.setdefault(request.stage, StageUsage(stage=request.stage))
            repeat.requests += 1
            repeat.input_tokens += result.input_tokens
            repeat.output_tokens += result.output_tokens
            repeat.cached_tokens += result.cached_tokens
            return result
        self._seen.add(sent)
        row = self.rows.setdefault(
            request.template_id,
            {"stage": request.stage, "calls": 0, "input": 0, "cached": 0, "output": 0},
        )
        row["calls"] += 1
        row["input"] += result.input_tokens
        row["cached"] += result.cached_tokens
        row["output"] += result.output_tokens
        row["max"] = max(row.get("max", 0), result.output_tokens)
        row["allowance"] = max(row.get("allowance", 0), call.max_output_tokens)
        return result

    def estimates(self, personas: int) -> list[TemplateEstimate]:
        return [
            TemplateEstimate(
                template_id=template,
                stage=row["stage"],
                calls_per_persona=row["calls"] / personas,
                input_tokens_per_call=row["input"] / row["calls"],
                cached_share=row["cached"] / row["input"] if row["input"] else 0.0,
                output_tokens_per_call=row["output"] / row["calls"],
                output_tokens_max=row["max"],
                allowance=row["allowance"],
            )
            for template, row in self.rows.items()
        ]


class ModeEstimate(BaseModel):
    """The whole run sent one way: online, or through the Batch API (``endpoint.batch_stages``)."""

    mode: str  # "online" or "batch"
    requests: float
    input_tokens: float
    output_tokens: float
    cost_usd: float
    wall_hours: float
    wall_basis: str = Field(description="What the wall time follows, in words.")


class RunEstimate(BaseModel):
    planned_personas: int
    sample_personas: list[str]
    chat_model: str
    embedding_model: str
    batch: bool
    stages: list[StageEstimate]
    total_requests: float
    total_input_tokens: float
    total_cached_input_tokens: float
    total_output_tokens: float
    total_cost_usd: float
    per_persona_cost_usd: float
    approximations: list[str] = Field(default_factory=list)
    sample_seconds: float
    templates: list[TemplateEstimate] = Field(default_factory=list)
    rounds: dict[str, int] = Field(
        default_factory=dict,
        description="Per stage, the batch rounds holding its requests in one persona's run (the "
        "most of any sample persona): in Batch API mode, the whole run's.",
    )
    modes: list[ModeEstimate] = Field(
        default_factory=list, description="Online and Batch API side by side, with wall time."
    )
    memory_online_note: str = ""


async def estimate_run(
    settings: Settings,
    sample: list[Persona],
    planned_personas: int,
    observer: PipelineObserver | None = None,
) -> RunEstimate:
    """Dry-run ``sample`` offline, then scale to ``planned_personas`` (``observer`` watches the dry run)."""
    if not sample:
        raise ValueError("the estimate needs at least one sample persona")
    if planned_personas < 1:
        raise ValueError("planned personas must be at least 1")
    batch = settings.endpoint.batch
    # In Batch API mode only the stages of endpoint.batch_stages travel in batches; the
    # others go online at the full price.
    batched = set(settings.endpoint.batch_stages) if batch else set()
    dry = settings.model_copy(deep=True)
    dry.endpoint.backend = Backend.SIMULATED
    dry.endpoint.api_key = None
    started = time.perf_counter()
    # A cold cache of its own: a warm one would hide the embedding requests a real run sends.
    with tempfile.TemporaryDirectory(prefix="memoryquest-estimate-") as cold:
        dry.cache.directory = Path(cold)
        client = build_client(dry)
        tally = _TemplateTally(
            client.chat_backend,
            # The Batch API collector sends a repeat once even without the cache.
            lambda stage: settings.cache.enabled or stage in batched,
        )
        client.chat_backend = tally
        counted: list[tuple[dict[str, int], list[set[str]]]] = []
        for persona in sample:  # one at a time: each persona's rounds are counted alone
            await generate_dataset([persona], client, dry, observer)
            counted.append(tally.rounds.start_persona())
        usage = [_less(row, tally.repeats.get(row.stage)) for row in client.usage()]

    prices = PriceTable.load(settings.prices_file)
    chat_model = settings.endpoint.chat_model
    remote_embeddings = settings.endpoint.resolved_backend() is not Backend.SIMULATED
    embedding_model = (
        settings.endpoint.embedding_model if remote_embeddings else client.embedder_name
    )
    scale = planned_personas / len(sample)
    # Both ways of sending the run, from the one dry run; the estimate's own is the settings' way.
    batch_stages = set(settings.endpoint.batch_stages)
    sent_in_batches = {"online": set[str](), "batch": batch_stages}
    priced = {
        mode: [
            _scale_stage(
                row,
                scale,
                prices,
                chat_model,
                embedding_model,
                remote_embeddings,
                row.stage in in_batches,
            )
            for row in usage
        ]
        for mode, in_batches in sent_in_batches.items()
    }
    if settings.generation.review:
        for mode, in_batches in sent_in_batches.items():
            priced[mode], reviewed_as = _review_priced(
                priced[mode],
                usage,
                settings,
                scale,
                prices,
                embedding_model,
                remote_embeddings,
                in_batches,
            )
    stages = priced["batch" if batch else "online"]
    approximations = [
        "output tokens are the offline simulator's answer lengths; a real model's answers differ in length",
        f"scaled linearly from {len(sample)} sample persona(s) to {planned_personas}",
        "cached input tokens follow the provider's prefix caching (a shared prompt prefix of "
        "at least 1,024 tokens under the persona's prompt_cache_key) and depend on the order "
        "of prompt parts",
    ]
    if token_counter(chat_model).approximate or any(row.approximate_tokens for row in usage):
        approximations.append(f"token counts for {chat_model} use an approximate tokenizer offline")
    if prices.price(chat_model) is None:
        approximations.append(f"no price known for {chat_model}: its cost is counted as 0")
    if not remote_embeddings:
        approximations.append("embeddings run locally and cost nothing")
    online = [row.stage for row in usage if batch and row.stage not in batched]
    if online:
        approximations.append(
            f"Batch API prices for {', '.join(sorted(batched & {r.stage for r in usage}))}; "
            f"{', '.join(online)} online at the full price (endpoint.batch_stages)"
        )
    if settings.generation.review:
        approximations.append(reviewed_as)
    templates = tally.estimates(len(sample))
    if Stage.MEMORY.value in batched:
        steps = sum(t.calls_per_persona for t in templates if t.template_id == EXTRACTION)
        approximations.append(
            f"memory in Batch API rounds: a persona's {steps:,.0f} extraction requests are "
            "sequential (each sees the facts so far), so each waits a batch round of its own; the "
            "personas run in lockstep, so a round carries the same step of every persona"
        )
    total_cost = sum(s.cost_usd for s in stages)
    rounds = {row.stage: max(c[0].get(row.stage, 0) for c in counted) for row in usage}
    batch_rounds = max(sum(1 for r in c[1] if r & batch_stages) for c in counted)
    modes, memory_note = _modes(priced, rounds, batch_rounds, usage, settings)
    return RunEstimate(
        planned_personas=planned_personas,
        sample_personas=[p.source_user_id for p in sample],
        chat_model=chat_model,
        embedding_model=embedding_model,
        batch=batch,
        stages=stages,
        total_requests=sum(s.requests for s in stages),
        total_input_tokens=sum(s.input_tokens for s in stages),
        total_cached_input_tokens=sum(s.cached_input_tokens for s in stages),
        total_output_tokens=sum(s.output_tokens for s in stages),
        total_cost_usd=total_cost,
        per_persona_cost_usd=total_cost / planned_personas,
        approximations=approximations,
        sample_seconds=round(time.perf_counter() - started, 2),
        templates=templates,
        rounds=rounds,
        modes=modes,
        memory_online_note=memory_note,
    )


def _quota_hours(stages: list[StageEstimate], settings: Settings) -> tuple[float, str]:
    """Hours the requests and tokens take at the configured quota, and which limit binds."""
    requests = sum(s.requests for s in stages)
    tokens = sum(s.input_tokens + s.output_tokens for s in stages)
    by_requests = requests / settings.limits.requests_per_minute / 60
    by_tokens = tokens / settings.limits.tokens_per_minute / 60
    if by_requests >= by_tokens:
        return by_requests, f"{settings.limits.requests_per_minute:,} requests/min"
    return by_tokens, f"{settings.limits.tokens_per_minute:,} tokens/min"


def _modes(
    priced: dict[str, list[StageEstimate]],
    rounds: dict[str, int],
    batch_rounds: int,
    usage: list[StageUsage],
    settings: Settings,
) -> tuple[list[ModeEstimate], str]:
    """Online and batch side by side, and what sending memory online instead would change."""
    online = priced["online"]
    online_hours, binds = _quota_hours(online, settings)
    batched = set(settings.endpoint.batch_stages)
    turnaround = settings.endpoint.batch_turnaround_minutes
    left_online = [s for s in priced["batch"] if s.stage not in batched]
    left_hours, _ = _quota_hours(left_online, settings) if left_online else (0.0, "")
    batch_hours = batch_rounds * turnaround / 60 + left_hours

    def totals(stages: list[StageEstimate]) -> dict[str, float]:
        return {
            "requests": sum(s.requests for s in stages),
            "input_tokens": sum(s.input_tokens for s in stages),
            "output_tokens": sum(s.output_tokens for s in stages),
            "cost_usd": sum(s.cost_usd for s in stages),
        }

    modes = [
        ModeEstimate(
            mode="online",
            **totals(online),
            wall_hours=online_hours,
            wall_basis=f"the quota ({binds} binds; limits.*), every persona at once",
        ),
        ModeEstimate(
            mode="batch",
            **totals(priced["batch"]),
            wall_hours=batch_hours,
            wall_basis=f"{batch_rounds} batch rounds × {turnaround:g} min "
            "(endpoint.batch_turnaround_minutes)"
            + (f", plus {', '.join(s.stage for s in left_online)} online" if left_online else ""),
        ),
    ]
    memory = Stage.MEMORY.value
    if memory not in batched or memory not in rounds:
        return modes, ""
    memory_rounds = rounds[memory]
    full = next(s for s in online if s.stage == memory)
    discounted = next(s for s in priced["batch"] if s.stage == memory)
    calls = next((row for row in usage if row.stage == memory), None)
    per_call = calls.output_tokens / calls.requests if calls and calls.requests else 0.0
    chain_hours = memory_rounds * per_call / settings.endpoint.tokens_per_second / 3600
    quota_hours, _ = _quota_hours([full], settings)
    online_memory_hours = max(chain_hours, quota_hours)
    note = (
        f"memory takes {memory_rounds} of the {batch_rounds} batch rounds (a persona's "
        "extractions are sequential: each sees the facts so far); sent online instead it would "
        f"cost ${full.cost_usd - discounted.cost_usd:,.2f} more and take about "
        f"{online_memory_hours:,.1f} h instead of {memory_rounds * turnaround / 60:,.1f} h "
        f"({memory_rounds} answers in turn at endpoint.tokens_per_second = "
        f"{settings.endpoint.tokens_per_second:g}, or the quota if slower): "
        "--set endpoint.batch_stages=[...] without memory"
    )
    return modes, note


def _review_priced(
    stages: list[StageEstimate],
    usage: list[StageUsage],
    settings: Settings,
    scale: float,
    prices: PriceTable,
    embedding_model: str,
    remote_embeddings: bool,
    batched: set[str],
) -> tuple[list[StageEstimate], str]:
    """The stages with the blind review (generation.review) priced as the model that answers it,
    the judge model when one is set, and a note on how many reviews the dry run asked for."""
    reviewer = settings.endpoint.judge_model or settings.endpoint.chat_model
    stage = SessionReviewInputs.stage
    priced = [
        _scale_stage(
            row, scale, prices, reviewer, embedding_model, remote_embeddings, row.stage in batched
        )
        if row.stage == stage
        else estimate
        for row, estimate in zip(usage, stages, strict=True)
    ]
    reviews = sum(row.requests for row in usage if row.stage == stage)
    note = (
        f"the blind review (generation.review) is priced as {reviewer}'s requests: one per "
        f"conversation and attempt, {reviews} on the sample, at the simulator's flag rate (a real "
        "reviewer that flags more asks for more regenerations)"
    )
    return priced, note


def _less(row: StageUsage, repeats: StageUsage | None) -> StageUsage:
    """``row`` without the repeated requests a real run does not send."""
    if repeats is None:
        return row
    return row.model_copy(
        update={
            "requests": row.requests - repeats.requests,
            "input_tokens": row.input_tokens - repeats.input_tokens,
            "output_tokens": row.output_tokens - repeats.output_tokens,
            "cached_tokens": row.cached_tokens - repeats.cached_tokens,
        }
    )


def _scale_stage(
    row: StageUsage,
    scale: float,
    prices: PriceTable,
    chat_model: str,
    embedding_model: str,
    remote_embeddings: bool,
    batch: bool,
) -> StageEstimate:
    # Simulator answers are never cached, so the dry run's requests, less the repeats (see
    # _TemplateTally), are every chat request a real run sends; the ledger's cache hits are
    # embedded texts served from the cache.
    requests = row.requests * scale
    input_tokens = row.input_tokens * scale
    cached_tokens = row.cached_tokens * scale
    output_tokens = row.output_tokens * scale
    embedding_tokens = row.embedding_tokens * scale
    cost = prices.cost(
        chat_model, round(input_tokens), round(output_tokens), round(cached_tokens), batch=batch
    )
    if remote_embeddings:
        cost += prices.cost(embedding_model, round(embedding_tokens), batch=False)
    return StageEstimate(
        stage=row.stage,
        requests=requests,
        input_tokens=input_tokens,
        cached_input_tokens=cached_tokens,
        output_tokens=output_tokens,
        embedding_requests=row.embedding_requests * scale,
        embedding_tokens=embedding_tokens,
        cost_usd=cost,
    )


def estimate_table(estimate: RunEstimate) -> str:
    lines = [
        f"Estimate for {estimate.planned_personas} personas with {estimate.chat_model}"
        f"{' (Batch API, discounted)' if estimate.batch else ''}; embeddings: {estimate.embedding_model}",
        f"{'stage':<14}{'requests':>12}{'input tok':>16}{'cached input':>16}{'output tok':>16}"
        f"{'embed req':>12}{'cost USD':>12}",
    ]
    for s in estimate.stages:
        lines.append(
            f"{s.stage:<14}{s.requests:>12,.0f}{s.input_tokens:>16,.0f}{s.cached_input_tokens:>16,.0f}"
            f"{s.output_tokens:>16,.0f}{s.embedding_requests:>12,.0f}{s.cost_usd:>12,.2f}"
        )
    lines.append(
        f"{'total':<14}{estimate.total_requests:>12,.0f}{estimate.total_input_tokens:>16,.0f}"
        f"{estimate.total_cached_input_tokens:>16,.0f}{estimate.total_output_tokens:>16,.0f}"
        f"{'':>12}{estimate.total_cost_usd:>12,.2f}"
    )
    lines.append(
        f"per persona: ${estimate.per_persona_cost_usd:,.4f}; sampled {', '.join(estimate.sample_personas)} "
        f"in {estimate.sample_seconds:.1f} s (offline, no request sent)"
    )
    if estimate.templates:
        lines.append(
            "output lengths assumed per template: the offline simulator's answers on the sample "
            "(per call; allowance: the output budget reserved)"
        )
        lines.append(
            f"{'template':<22}{'stage':<11}{'calls/persona':>14}{'input tok':>11}{'cached':>8}"
            f"{'output tok':>12}{'max':>7}{'allowance':>11}"
        )
        for t in estimate.templates:
            lines.append(
                f"{t.template_id:<22}{t.stage:<11}{t.calls_per_persona:>14,.1f}"
                f"{t.input_tokens_per_call:>11,.0f}{t.cached_share:>8.0%}"
                f"{t.output_tokens_per_call:>12,.0f}{t.output_tokens_max:>7,}{t.allowance:>11,}"
            )
    if estimate.modes:
        lines.append("")
        lines.append(
            f"{'':<14}{'requests':>12}{'input tok':>16}{'output tok':>16}{'cost USD':>14}{'wall time':>12}"
        )
        for mode in estimate.modes:
            lines.append(
                f"{mode.mode:<14}{mode.requests:>12,.0f}{mode.input_tokens:>16,.0f}"
                f"{mode.output_tokens:>16,.0f}{mode.cost_usd:>14,.2f}{_hours(mode.wall_hours):>12}"
                f"  ({mode.wall_basis})"
            )
        lines.append(
            "batch rounds holding each stage's requests (a round may hold two stages): "
            + ", ".join(f"{stage} {n}" for stage, n in estimate.rounds.items())
        )
        if estimate.memory_online_note:
            lines.append(estimate.memory_online_note)
    lines.extend(f"approximation: {note}" for note in estimate.approximations)
    return "\n".join(lines)


def _hours(hours: float) -> str:
    if hours < 1:
        return f"{math.ceil(hours * 60):.0f} min"
    return f"{hours:,.1f} h" if hours < 48 else f"{hours / 24:,.1f} d"


def default_sample_dir() -> Path:
    from memoryquest.resources import data_dir

    return data_dir("personas") / "personalens"
