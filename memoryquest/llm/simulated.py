"""The offline chat backend: answers from the simulator, never touches the network."""

from __future__ import annotations

from typing import Any

from memoryquest.llm.backends import ChatResult
from memoryquest.llm.request import LLMRequest
from memoryquest.simulator import simulate

SIMULATED_MODEL = "memoryquest-simulator-1"


class SimulatedChatBackend:
    name = "simulated"
    model = SIMULATED_MODEL
    base_url: str | None = None
    simulated = True

    def __init__(self, seed: int = 0) -> None:
        self.seed = seed

    async def chat(
        self, messages: list[dict[str, str]], request: LLMRequest[Any], schema: dict[str, Any]
    ) -> ChatResult:
        text = simulate(request.template_id, request.variables, seed=self.seed + request.seed)
        prompt_chars = sum(len(m["content"]) for m in messages)
        return ChatResult(text=text, input_tokens=prompt_chars // 4, output_tokens=len(text) // 4)
