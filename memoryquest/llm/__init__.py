"""One client layer for every LLM and embedding call."""

from memoryquest.llm.client import LLMOutputError, ModelClient
from memoryquest.llm.request import LLMRequest

__all__ = ["LLMOutputError", "LLMRequest", "ModelClient", "build_client"]


def build_client(settings: object) -> ModelClient:
    from memoryquest.llm.factory import build_client as _build

    return _build(settings)  # type: ignore[arg-type]
