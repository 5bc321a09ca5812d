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

Here the dry run and the whole estimate; what the dry run counts is in ``dry_run``, the pricing
of its usage (per stage, online and batch) in ``pricing``, the printed table in ``table``.
"""

from __future__ import annotations

import tempfile
import time
from pathlib import Path

from pydantic import BaseModel, Field

from memoryquest.contracts import Persona, Stage
from memoryquest.estimate.dry_run import TemplateEstimate, TemplateTally
from memoryquest.estimate.pricing import (
    ModeEstimate,
    StageEstimate,
    online_and_batch,
    review_priced,
    scale_stage,
    without_repeats,
)
from memoryquest.llm.factory import build_client
from memoryquest.llm.prices import PriceTable
from memoryquest.llm.tokens import token_counter
from memoryquest.memory.extraction_contracts import ExtractionInputs
from memoryquest.pipeline import PipelineObserver, generate_dataset
from memoryquest.settings import Backend, Settings

EXTRACTION = ExtractionInputs.template_id


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
    rounds: dict[Stage, int] = Field(
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
        tally = TemplateTally(
            client.chat_backend,
            # The Batch API collector sends a repeat once even without the cache.
            lambda stage: settings.cache.enabled or stage in batched,
        )
        client.chat_backend = tally
        counted: list[tuple[dict[Stage, int], list[set[Stage]]]] = []
        for persona in sample:  # one at a time: each persona's rounds are counted alone
            await generate_dataset([persona], client, dry, observer)
            counted.append(tally.rounds.start_persona())
        usage = [without_repeats(row, tally.repeats.get(row.stage)) for row in client.usage()]

    prices = PriceTable.load(settings.prices_file)
    chat_model = settings.endpoint.chat_model
    remote_embeddings = settings.endpoint.resolved_backend() is not Backend.SIMULATED
    embedding_model = (
        settings.endpoint.embedding_model if remote_embeddings else client.embedder_name
    )
    scale = planned_personas / len(sample)
    # Both ways of sending the run, from the one dry run; the estimate's own is the settings' way.
    batch_stages = set(settings.endpoint.batch_stages)
    sent_in_batches = {"online": set[Stage](), "batch": batch_stages}
    priced = {
        mode: [
            scale_stage(
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
            priced[mode], reviewed_as = review_priced(
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
    if Stage.MEMORY in batched:
        steps = sum(t.calls_per_persona for t in templates if t.template_id == EXTRACTION)
        approximations.append(
            f"memory in Batch API rounds: a persona's {steps:,.0f} extraction requests are "
            "sequential (each sees the facts so far), so each waits a batch round of its own; the "
            "personas run in lockstep, so a round carries the same step of every persona"
        )
    total_cost = sum(s.cost_usd for s in stages)
    rounds = {row.stage: max(c[0].get(row.stage, 0) for c in counted) for row in usage}
    batch_rounds = max(sum(1 for r in c[1] if r & batch_stages) for c in counted)
    modes, memory_note = online_and_batch(priced, rounds, batch_rounds, usage, settings)
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


def default_sample_dir() -> Path:
    from memoryquest.resources import data_dir

    return data_dir("personas") / "personalens"
