"""What the estimate's dry run counts: the calls and tokens of each prompt template, and the batch
rounds one persona's requests fall into."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from typing import Any

from pydantic import BaseModel

from memoryquest.contracts import Stage, StageUsage
from memoryquest.llm.backends import ChatBackend, ChatCall, ChatResult


class TemplateEstimate(BaseModel):
    """What one prompt template costs per sample persona, and the answer length assumed for it.

    The output tokens are those of the offline simulator's answers on the sample (the
    estimate's main approximation); ``allowance`` is the output budget the requests
    reserved (the template's ``max_output_tokens``, or the stage's own).
    """

    template_id: str
    stage: Stage
    calls_per_persona: float
    input_tokens_per_call: float
    cached_share: float
    output_tokens_per_call: float
    output_tokens_max: int
    allowance: int


class BatchRounds:
    """The batch rounds one persona's run takes, found the way the Batch API collector forms them:
    requests are held until none has been asked for a moment (``QUIET_SECONDS``), then answered
    together as one round. A request that needs an earlier answer is asked in a later round, so
    memory's sequential extractions take a round each while a stage's parallel requests share
    one. In Batch API mode the personas move in lockstep and a round carries the same step of
    every persona, so one persona's rounds are the run's, whatever its number of personas."""

    QUIET_SECONDS = 0.02

    def __init__(self) -> None:
        self.by_stage: dict[Stage, int] = {}
        self.rounds: list[set[Stage]] = []
        self._waiting: list[asyncio.Future[None]] = []
        self._stages: set[Stage] = set()
        self._timer: asyncio.TimerHandle | None = None

    async def wait(self, stage: Stage) -> None:
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

    def start_persona(self) -> tuple[dict[Stage, int], list[set[Stage]]]:
        """The rounds counted so far (the previous persona's), and a fresh count."""
        counted = (self.by_stage, self.rounds)
        self.by_stage, self.rounds = {}, []
        return counted


class TemplateTally:
    """The dry run's chat backend, counting calls and tokens per template on the way.

    The simulator answers every call, a repeated one too; ``repeats`` keeps, per
    stage, what the repeats a real run does not send added to the dry run's usage.
    """

    def __init__(self, inner: ChatBackend, repeats_answered: Callable[[Stage], bool]) -> None:
        self.inner = inner
        self.repeats_answered = repeats_answered  # by stage: is a repeat answered without sending?
        self.rows: dict[str, dict[str, Any]] = {}
        self.repeats: dict[Stage, StageUsage] = {}
        self._seen: set[tuple[Any, ...]] = set()
        self.rounds = BatchRounds()

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
