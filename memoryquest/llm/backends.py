"""The two seams behind the client: something that chats, something that embeds."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np

from memoryquest.llm.request import LLMRequest


@dataclass(frozen=True)
class ChatResult:
    text: str
    finish_reason: str = "stop"
    input_tokens: int = 0
    output_tokens: int = 0
    cached_tokens: int = 0
    refusal: str | None = None


class ChatBackend(Protocol):
    name: str  # "simulated", "openai", "azure"
    model: str
    base_url: str | None
    simulated: bool

    async def chat(
        self, messages: list[dict[str, str]], request: LLMRequest[Any], schema: dict[str, Any]
    ) -> ChatResult: ...


class EmbeddingBackend(Protocol):
    name: str  # travels with every similarity computed from these vectors
    base_url: str | None

    async def embed(self, texts: list[str]) -> np.ndarray:
        """Rows L2-normalised, one per text, in input order."""
        ...
