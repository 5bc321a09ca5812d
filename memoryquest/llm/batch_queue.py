"""The provider's batch queue: how many prompt tokens may wait in unfinished batches, per model.

OpenAI caps the prompt tokens a project may have enqueued in the Batch API
per model (its "batch queue limit"); a batch that would go over it fails
with ``token_limit_exceeded`` ("Enqueued token limit reached for
gpt-4o-mini ... Please try again once some in_progress batches have been
completed"). A lockstep round of many personas can be far above it, so
:class:`memoryquest.llm.batch_rounds.BatchRounds` cuts a round into batch files
of at most ``endpoint.batch_enqueued_tokens_max`` prompt tokens
(:func:`split_parts`) and creates each only when :class:`BatchQueue` says
the tokens of its own unfinished batches leave room for it. A batch the
service still refuses for that limit waits until one of ours finishes and
goes again; refused while none of ours is in flight (the queue is held by
someone else, or the limit is set above the real one), its rows wait for the
next round, cut under the limit the refusal states (OpenAI's names it) or
else under half of what was refused.

The enqueued tokens of a line are its prompt tokens as the client counts
them (tiktoken, :mod:`memoryquest.llm.tokens`); the output is not counted,
as the provider does not count it.
"""

from __future__ import annotations

import asyncio
import logging
import re
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from memoryquest.llm.tokens import token_counter

log = logging.getLogger(__name__)

# Published "Batch queue limit" of usage tier 1 (the lowest paid tier), in prompt tokens per model:
# OpenAI's rate-limit table for tier 1 (platform.openai.com/docs/guides/rate-limits, as quoted in
# community.openai.com/t/1028595) and the limit in the refusal reported in openai/openai-python#2084
# ("Limit: 2,000,000 enqueued tokens" for gpt-4o-mini). Higher tiers allow more: set
# endpoint.batch_enqueued_tokens_max to the figure of your project's limits page.
TIER1_ENQUEUED_TOKENS: dict[str, int] = {
    "gpt-4o-mini": 2_000_000,
    "gpt-4o": 90_000,
    "o1-mini": 2_000_000,
    "o1-preview": 90_000,
    "gpt-4-turbo": 90_000,
    "gpt-4": 100_000,
    "gpt-3.5-turbo": 2_000_000,
}
# A model without a published figure: the tier-1 limit of the small models. Set too high, a refused
# batch alone in the queue halves the cut; set too low, the batches of a round would wait for one
# another for nothing, which costs far more wall time.
UNKNOWN_MODEL_ENQUEUED_TOKENS = 2_000_000

TOKEN_LIMIT_CODE = "token_limit_exceeded"
# The refusal states the limit: "... Limit: 2,000,000 enqueued tokens. Please try again ..."
STATED_LIMIT = re.compile(r"limit:\s*([\d,]+)\s*enqueued tokens", re.IGNORECASE)


def published_enqueued_tokens(model: str) -> int:
    """The tier-1 batch queue limit of ``model`` (a dated snapshot counts as its model)."""
    name = model.lower().split("/")[-1]
    matches = [key for key in TIER1_ENQUEUED_TOKENS if name == key or name.startswith(key + "-")]
    if not matches:
        return UNKNOWN_MODEL_ENQUEUED_TOKENS
    return TIER1_ENQUEUED_TOKENS[max(matches, key=len)]


def line_tokens(body: Mapping[str, Any]) -> tuple[str, int]:
    """The model of a batch line's body and the prompt tokens it enqueues."""
    model = str(body.get("model") or "")
    messages = body.get("messages") or []
    return model, token_counter(model).count_messages(
        message for message in messages if isinstance(message, dict)
    )


def is_token_limit_refusal(codes_and_messages: Sequence[tuple[str | None, str | None]]) -> bool:
    """Whether a failed batch's errors (or a refused create) name the enqueued-token limit."""
    return any(
        code == TOKEN_LIMIT_CODE or "enqueued token" in (message or "").lower()
        for code, message in codes_and_messages
    )


def stated_limit(messages: Sequence[str | None]) -> int | None:
    """The enqueued-token limit a refusal states, if it does."""
    for message in messages:
        match = STATED_LIMIT.search(message or "")
        if match:
            return int(match[1].replace(",", ""))
    return None


@dataclass(frozen=True)
class Line:
    """One line of a round, as the split sees it."""

    size: int  # bytes
    model: str
    tokens: int


def split_parts(
    lines: Sequence[Line], *, max_lines: int, max_bytes: int, max_tokens: Callable[[str], int]
) -> list[list[int]]:
    """The lines' indices cut into batch files, in order, each within the per-batch limits and,
    per model, at most ``max_tokens(model)`` prompt tokens (a single larger line goes alone)."""
    parts: list[list[int]] = [[]]
    size = 0
    tokens: Counter[str] = Counter()
    for index, line in enumerate(lines):
        part = parts[-1]
        if part and (
            len(part) >= max_lines
            or size + line.size > max_bytes
            or tokens[line.model] + line.tokens > max_tokens(line.model)
        ):
            parts.append([])
            part = parts[-1]
            size = 0
            tokens = Counter()
        part.append(index)
        size += line.size
        tokens[line.model] += line.tokens
    return [part for part in parts if part]


@dataclass(eq=False)
class BatchQueue:
    """Prompt tokens of our unfinished batches per model, against the limit; a new batch waits for room.

    One per event loop (the batch collector's): the batches of every set sent from it share it.
    """

    limit: Callable[[str], int]
    held: Counter[str] = field(default_factory=Counter)
    in_flight: int = 0  # our batches created and not yet finished
    lowered: dict[str, int] = field(
        default_factory=dict
    )  # after a refusal with none of ours in flight
    _released: asyncio.Event = field(default_factory=asyncio.Event)

    def max_tokens(self, model: str) -> int:
        return min(self.limit(model), self.lowered.get(model, self.limit(model)))

    def fits(self, tokens: Mapping[str, int]) -> bool:
        """Room for a batch of ``tokens``; with none of ours in flight, always (it may be refused)."""
        return self.in_flight == 0 or all(
            self.held[model] + count <= self.max_tokens(model) for model, count in tokens.items()
        )

    async def acquire(self, tokens: Mapping[str, int]) -> None:
        """Until a batch of ``tokens`` fits next to ours in flight; then it counts as in flight."""
        while not self.fits(tokens):
            await self._released.wait()
        self.hold(tokens)

    def hold(self, tokens: Mapping[str, int]) -> None:
        """A batch of ``tokens`` is in the provider's queue (created, or found running on resume)."""
        self.held.update(tokens)
        self.in_flight += 1

    def release(self, tokens: Mapping[str, int]) -> None:
        """A batch has finished (or was refused): its tokens leave the queue; waiters look again."""
        self.held.subtract(tokens)
        self.in_flight -= 1
        released, self._released = self._released, asyncio.Event()
        released.set()

    async def refused(
        self,
        tokens: Mapping[str, int],
        input_file_id: str,
        requests: int,
        stated: int | None = None,
    ) -> bool:
        """After the provider refused a batch of ``tokens`` for its queue limit (already released).

        A limit the refusal states (``stated``) becomes the cut for these models. True once one
        of our batches has finished since: send it again. False when none of ours is in flight,
        so waiting for ours frees nothing: the cut is lowered to the stated limit when the batch
        was above it, else to half of the batch (someone else holds the queue), and its rows
        wait for the next round.
        """
        if stated is not None:
            for model in tokens:
                self.lowered[model] = min(self.max_tokens(model), stated)
        if self.in_flight == 0:
            for model, count in tokens.items():
                cut = stated if stated is not None and count > stated else count // 2
                self.lowered[model] = min(self.max_tokens(model), max(1, cut))
            log.warning(
                "batch of %s refused for the enqueued-token limit with none of ours in flight: its "
                "%d requests go in the next round, cut under %s prompt tokens (lower "
                "endpoint.batch_enqueued_tokens_max if this repeats)",
                input_file_id,
                requests,
                ", ".join(f"{self.max_tokens(model):,} of {model}" for model in tokens) or "?",
            )
            return False
        await self._released.wait()
        log.info(
            "batch of %s refused for the enqueued-token limit: sending it again now that an "
            "earlier batch has finished",
            input_file_id,
        )
        return True
