"""One client layer for every LLM and embedding call."""

from memoryquest.llm.client import ModelClient
from memoryquest.llm.errors import (
    CircuitOpenError,
    LLMConfigurationError,
    LLMContentFilterError,
    LLMError,
    LLMOutputError,
    LLMRefusalError,
    LLMTransportError,
    LLMTruncatedError,
)
from memoryquest.llm.request import LLMRequest

__all__ = [
    "CircuitOpenError",
    "LLMConfigurationError",
    "LLMContentFilterError",
    "LLMError",
    "LLMOutputError",
    "LLMRefusalError",
    "LLMRequest",
    "LLMTransportError",
    "LLMTruncatedError",
    "ModelClient",
    "build_client",
]


def build_client(settings: object) -> ModelClient:
    from memoryquest.llm.factory import build_client as _build

    return _build(settings)  # type: ignore[arg-type]
