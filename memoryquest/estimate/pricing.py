"""The dry run's usage scaled to the planned personas and priced: per stage, and per way of sending
the run (online, or through the Batch API), with its wall time."""

from __future__ import annotations

from pydantic import BaseModel, Field

from memoryquest.contracts import Stage, StageUsage
from memoryquest.llm.prices import PriceTable
from memoryquest.settings import Settings
from memoryquest.stages.review_contracts import SessionReviewInputs


class StageEstimate(BaseModel):
    stage: Stage
    requests: float
    input_tokens: float
    cached_input_tokens: float  # part of input_tokens, billed at the cached-input price
    output_tokens: float
    embedding_requests: float
    embedding_tokens: float
    cost_usd: float


class ModeEstimate(BaseModel):
    """The whole run sent one way: online, or through the Batch API (``endpoint.batch_stages``)."""

    mode: str  # "online" or "batch"
    requests: float
    input_tokens: float
    output_tokens: float
    cost_usd: float
    wall_hours: float
    wall_basis: str = Field(description="What the wall time follows, in words.")


def quota_hours(stages: list[StageEstimate], settings: Settings) -> tuple[float, str]:
    """Hours the requests and tokens take at the configured quota, and which limit binds."""
    requests = sum(s.requests for s in stages)
    tokens = sum(s.input_tokens + s.output_tokens for s in stages)
    by_requests = requests / settings.limits.requests_per_minute / 60
    by_tokens = tokens / settings.limits.tokens_per_minute / 60
    if by_requests >= by_tokens:
        return by_requests, f"{settings.limits.requests_per_minute:,} requests/min"
    return by_tokens, f"{settings.limits.tokens_per_minute:,} tokens/min"


def online_and_batch(
    priced: dict[str, list[StageEstimate]],
    rounds: dict[Stage, int],
    batch_rounds: int,
    usage: list[StageUsage],
    settings: Settings,
) -> tuple[list[ModeEstimate], str]:
    """Online and batch side by side, and what sending memory online instead would change."""
    online = priced["online"]
    online_hours, binds = quota_hours(online, settings)
    batched = set(settings.endpoint.batch_stages)
    turnaround = settings.endpoint.batch_turnaround_minutes
    left_online = [s for s in priced["batch"] if s.stage not in batched]
    left_hours, _ = quota_hours(left_online, settings) if left_online else (0.0, "")
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
    memory = Stage.MEMORY
    if memory not in batched or memory not in rounds:
        return modes, ""
    memory_rounds = rounds[memory]
    full = next(s for s in online if s.stage == memory)
    discounted = next(s for s in priced["batch"] if s.stage == memory)
    calls = next((row for row in usage if row.stage == memory), None)
    per_call = calls.output_tokens / calls.requests if calls and calls.requests else 0.0
    chain_hours = memory_rounds * per_call / settings.endpoint.tokens_per_second / 3600
    memory_quota_hours, _ = quota_hours([full], settings)
    online_memory_hours = max(chain_hours, memory_quota_hours)
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


def review_priced(
    stages: list[StageEstimate],
    usage: list[StageUsage],
    settings: Settings,
    scale: float,
    prices: PriceTable,
    embedding_model: str,
    remote_embeddings: bool,
    batched: set[Stage],
) -> tuple[list[StageEstimate], str]:
    """The stages with the blind review (generation.review) priced as the model that answers it,
    the judge model when one is set, and a note on how many reviews the dry run asked for."""
    reviewer = settings.endpoint.judge_model or settings.endpoint.chat_model
    stage = SessionReviewInputs.stage
    priced = [
        scale_stage(
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


def without_repeats(row: StageUsage, repeats: StageUsage | None) -> StageUsage:
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


def scale_stage(
    row: StageUsage,
    scale: float,
    prices: PriceTable,
    chat_model: str,
    embedding_model: str,
    remote_embeddings: bool,
    batch: bool,
) -> StageEstimate:
    # Simulator answers are never cached, so the dry run's requests, less the repeats (see
    # TemplateTally), are every chat request a real run sends; the ledger's cache hits are
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
