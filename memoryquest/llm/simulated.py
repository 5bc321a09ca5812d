"""The offline chat backend: answers from the simulator, never touches the network.

Token counts come from the real tokenizer (cl100k), so usage reports and
cost estimates made on a simulated run have realistic magnitudes.
"""

from __future__ import annotations

from memoryquest.llm.backends import ChatCall, ChatResult
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

    async def chat(self, call: ChatCall) -> ChatResult:
        text = simulate(call.request.template_id, call.request.variables, seed=call.seed)
        return ChatResult(
            text=text,
            input_tokens=self._tokens.count_messages(call.messages),
            output_tokens=self._tokens.count(text),
        )
