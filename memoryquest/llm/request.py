"""What a stage asks of a language model: a template, its variables, the answer's shape."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

from pydantic import BaseModel

ResponseT = TypeVar("ResponseT", bound=BaseModel)


@dataclass(frozen=True)
class LLMRequest(Generic[ResponseT]):
    """One structured-output call.

    ``variables`` must be JSON-serialisable: they are rendered into the prompt
    for a real model and handed as-is to the offline simulator, which answers
    from them (the persona's real content) instead of from the prompt text.
    ``max_output_tokens`` is reserved against tokens/min before sending, so
    keep it near the answer's real size. ``extra`` holds further API
    parameters (e.g. ``{"top_p": 0.9}``), sent as-is and part of the cache key.
    """

    template_id: str
    variables: dict[str, Any]
    response_model: type[ResponseT]
    stage: str
    temperature: float = 0.7
    max_output_tokens: int = 4096
    seed: int = 0
    extra: dict[str, Any] = field(default_factory=dict)
