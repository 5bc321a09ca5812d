"""The one door to language models and embedders for every stage."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any

import numpy as np
from pydantic import ValidationError

from memoryquest.llm.backends import ChatBackend, EmbeddingBackend
from memoryquest.llm.prompts import load_template
from memoryquest.llm.request import LLMRequest, ResponseT


class LLMOutputError(RuntimeError):
    """The model's answer could not be turned into the response model."""


class ModelClient:
    def __init__(self, chat: ChatBackend, embedder: EmbeddingBackend) -> None:
        self.chat_backend = chat
        self.embedder = embedder

    @property
    def simulated(self) -> bool:
        return self.chat_backend.simulated

    @property
    def embedder_name(self) -> str:
        return self.embedder.name

    async def complete(self, request: LLMRequest[ResponseT]) -> ResponseT:
        template = load_template(request.template_id)
        messages = template.render(request.variables)
        schema = request.response_model.model_json_schema()
        result = await self.chat_backend.chat(messages, request, schema)
        try:
            return request.response_model.model_validate_json(result.text)
        except ValidationError as exc:
            raise LLMOutputError(f"{request.template_id}: answer does not fit {request.response_model.__name__}: {exc}") from exc

    async def complete_all(self, requests: Sequence[LLMRequest[Any]]) -> list[Any]:
        return list(await asyncio.gather(*(self.complete(r) for r in requests)))

    async def embed(self, texts: Sequence[str], stage: str) -> np.ndarray:
        return await self.embedder.embed(list(texts))
