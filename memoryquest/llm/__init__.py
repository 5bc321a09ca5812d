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

_HOMES = {
    "memoryquest.llm.client": ("ModelClient",),
    "memoryquest.llm.request": ("LLMRequest",),
    "memoryquest.llm.errors": (
        "CircuitOpenError",
        "LLMConfigurationError",
        "LLMContentFilterError",
        "LLMError",
        "LLMOutputError",
        "LLMRefusalError",
        "LLMTransportError",
        "LLMTruncatedError",
    ),
}
_HOME_OF = {name: module for module, names in _HOMES.items() for name in names}

__all__ = sorted([*_HOME_OF, "build_client"])


def __getattr__(name: str) -> Any:
    if name in _HOME_OF:
        return getattr(importlib.import_module(_HOME_OF[name]), name)
    raise AttributeError(f"module 'memoryquest.llm' has no attribute {name!r}")


def build_client(settings: object) -> ModelClient:
    from memoryquest.llm.factory import build_client as _build

    return _build(settings)  # type: ignore[arg-type]
