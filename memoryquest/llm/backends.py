"""The two seams behind the client: something that chats, something that embeds.

A backend makes exactly one attempt per call and reports failures as
``memoryquest.llm.errors.BackendError``; retries, rate limits, caching and
accounting belong to ``ModelClient`` so every backend gets the same policy.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import Any, Protocol

import numpy as np

from memoryquest.llm.request import LLMRequest
from memoryquest.llm.schema import schema_instruction


class OutputMode(StrEnum):
    """How the answer's shape is asked for, strongest first."""

    JSON_SCHEMA = "json_schema"  # response_format json_schema, strict
    # JSON mode with the schema beside it, which llama.cpp turns into a grammar; also in the prompt
    JSON_OBJECT_SCHEMA = "json_object_schema"
    JSON_OBJECT = "json_object"  # JSON mode; the schema travels in the prompt
    TEXT = "text"  # no response_format; the schema travels in the prompt

    def weaker(self) -> OutputMode | None:
        order = list(OutputMode)
        index = order.index(self)
        return order[index + 1] if index + 1 < len(order) else None


@dataclass(frozen=True)
class ChatCall:
    """Everything one chat attempt needs; built by the client."""

    messages: list[dict[str, str]]
    request: LLMRequest[Any]
    schema: dict[str, Any]  # the response model's JSON schema
    schema_name: str
    strict_schema: dict[str, Any] | None  # strict-compatible variant, None when impossible
    mode: OutputMode
    seed: int  # effective seed (backend seed + request seed)
    max_output_tokens: int
    template_version: int = 0
    timeout: float | None = None  # seconds for this attempt (None: the backend's default)

    def sent_messages(self) -> list[dict[str, str]]:
        """The messages as sent: unless the server enforces the schema itself, it travels in the prompt."""
        messages = [dict(m) for m in self.messages]
        if self.mode is not OutputMode.JSON_SCHEMA:
            note = schema_instruction(self.schema)
            if messages and messages[0]["role"] == "system":
                messages[0]["content"] = f"{messages[0]['content']}\n\n{note}"
            else:
                messages.insert(0, {"role": "system", "content": note})
        return messages


@dataclass(frozen=True)
class ChatResult:
    text: str | None
    finish_reason: str = "stop"
    input_tokens: int = 0
    output_tokens: int = 0
    cached_tokens: int = 0
    refusal: str | None = None
    usage_reported: bool = False  # False: the token numbers are the client's own count
    model: str | None = None  # the model that actually answered, when the server says


@dataclass(frozen=True)
class EmbeddingResult:
    vectors: np.ndarray  # one row per input text, input order, not necessarily normalised
    tokens: int = 0
    usage_reported: bool = False


class ChatBackend(Protocol):
    name: str  # "simulated", "openai", "azure"
    model: str
    base_url: str | None
    simulated: bool
    seed: int

    async def chat(self, call: ChatCall) -> ChatResult: ...


class EmbeddingBackend(Protocol):
    """The minimum an embedder offers.

    Optional extras the client uses when present: ``model`` (cache key; else
    ``name``), ``remote`` (True: goes through the limiter and retries),
    ``max_batch_texts`` (texts per call), ``dimension``, and
    ``async embed_with_usage(texts) -> EmbeddingResult`` (token usage as the
    server reports it) and ``count_tokens(texts) -> int``.
    """

    name: str  # travels with every similarity computed from these vectors
    base_url: str | None

    async def embed(self, texts: list[str]) -> np.ndarray:
        """Rows L2-normalised, one per text, in input order."""
        ...
