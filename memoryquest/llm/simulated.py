"""The offline chat backend: answers from the simulator, never touches the network.

Token counts come from the real tokenizer (cl100k), so usage reports and
cost estimates made on a simulated run have realistic magnitudes. Cached
input tokens follow the provider's prefix-caching rule per prompt cache
scope (``memoryquest.llm.prompt_cache_model``), so an estimate prices the
repeated persona blocks at the cached-input rate as a real run is billed.
"""

from __future__ import annotations

from memoryquest.llm.backends import ChatCall, ChatResult
from memoryquest.llm.prompt_cache_model import PromptPrefixCache
from memoryquest.llm.tokens import token_counter
from memoryquest.simulator import simulate

SIMULATED_MODEL = "memoryquest-simulator-1"


class SimulatedChatBackend:
    name = "simulated"
    model = SIMULATED_MODEL
    base_url: str | None = None
    simulated = True

    def __init__(self, seed: int = 0) -> None:
        self.seed = seed
        self._tokens = token_counter(SIMULATED_MODEL)
        self._prompt_cache = PromptPrefixCache()

    async def chat(self, call: ChatCall) -> ChatResult:
        text = simulate(call.request.template_id, call.request.variables, seed=call.seed)
        scope = call.request.prompt_cache_scope() or ""
        return ChatResult(
            text=text,
            input_tokens=self._tokens.count_messages(call.messages),
            output_tokens=self._tokens.count(text),
            cached_tokens=self._prompt_cache.cached_tokens(scope, call.messages, self._tokens),
        )
