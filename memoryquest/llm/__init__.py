"""One client layer for every LLM and embedding call.

Names are imported on first use, so that a light module of the layer
(``memoryquest.llm.request``, ``memoryquest.llm.prompts``) can be imported
by a contracts module without loading the client, the SDK or the limiter.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
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

_HOMES = {
    "ModelClient": "memoryquest.llm.client",
    "LLMRequest": "memoryquest.llm.request",
    **{
        name: "memoryquest.llm.errors"
        for name in (
            "CircuitOpenError",
            "LLMConfigurationError",
            "LLMContentFilterError",
            "LLMError",
            "LLMOutputError",
            "LLMRefusalError",
            "LLMTransportError",
            "LLMTruncatedError",
        )
    },
}

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


def __getattr__(name: str) -> Any:
    if name in _HOMES:
        return getattr(importlib.import_module(_HOMES[name]), name)
    raise AttributeError(f"module 'memoryquest.llm' has no attribute {name!r}")


def build_client(settings: object) -> ModelClient:
    from memoryquest.llm.factory import build_client as _build

    return _build(settings)  # type: ignore[arg-type]
