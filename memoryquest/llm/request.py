"""What a stage asks of a language model: a template, its variables, the answer's shape."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

from pydantic import BaseModel

from memoryquest.contracts import Stage

ResponseT = TypeVar("ResponseT", bound=BaseModel)

# The output budget of a request whose template declares none.
DEFAULT_MAX_OUTPUT_TOKENS = 4096


@dataclass(frozen=True)
class LLMRequest(Generic[ResponseT]):
    """One structured-output call.

    ``variables`` must be JSON-serialisable: they are rendered into the prompt
    for a real model and handed as-is to the offline simulator, which answers
    from them (the persona's real content) instead of from the prompt text.
    ``max_output_tokens`` is reserved against tokens/min before sending, so
    keep it near the answer's real size: by default (None) it is the
    template's ``max_output_tokens`` header, sized from its answer schema.
    ``extra`` holds further API
    parameters (e.g. ``{"top_p": 0.9}``), sent as-is and part of the cache key.
    ``cache_scope`` groups requests that share a long stable prompt prefix
    (one persona's): it travels as ``prompt_cache_key`` where the endpoint
    takes it, so the provider's prompt cache sees them together. It does not
    change the answer and is not part of the response-cache key; without it,
    a ``persona_id`` among the variables (or in a ``persona`` variable) is used.
    """

    template_id: str
    variables: dict[str, Any]
    response_model: type[ResponseT]
    stage: Stage
    temperature: float = 0.7
    max_output_tokens: int | None = None
    seed: int = 0
    extra: dict[str, Any] = field(default_factory=dict)
    cache_scope: str | None = None
    judge: bool = False  # answered by the judge model when one is configured (endpoint.judge_model)

    def output_budget(self, template_budget: int | None) -> int:
        """The budget sent: the request's own, else the template's, else the default."""
        return self.max_output_tokens or template_budget or DEFAULT_MAX_OUTPUT_TOKENS

    def prompt_cache_scope(self) -> str | None:
        """``cache_scope``, else the persona the variables are about, else None."""
        if self.cache_scope:
            return self.cache_scope
        persona = self.variables.get("persona")
        for source in (self.variables, persona if isinstance(persona, dict) else {}):
            value = source.get("persona_id")
            if isinstance(value, str) and value:
                return f"persona:{value}"
        return None
