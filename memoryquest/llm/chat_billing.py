"""What one chat answer cost, billed to its stage: tokens (the server's, or counted) and USD.

Online answers are billed in full, Batch API answers at the batch price;
the simulator's answers cost nothing. When the server reports no usage, the
prompt's tokens are the ones the client counted and the answer's are
counted here (marked approximate when the counter is).
"""

from __future__ import annotations

from typing import Any

from memoryquest.contracts import Stage
from memoryquest.llm.accounting import UsageLedger
from memoryquest.llm.backends import ChatResult
from memoryquest.llm.prices import PriceTable
from memoryquest.llm.tokens import TokenCounter


def account_chat(
    ledger: UsageLedger,
    stage: Stage,
    result: ChatResult,
    prompt_tokens: int,
    counter: TokenCounter,
    *,
    prices: PriceTable,
    default_model: str,
    simulated: bool,
    batch: bool = False,
) -> dict[str, Any]:
    """Bill ``result`` to ``stage`` in ``ledger``; what it cost. ``batch``: priced as a Batch API
    answer; ``default_model``: the price's model when the answer names none the table knows."""
    if result.usage_reported or simulated:
        input_tokens, output_tokens, approximate = (
            result.input_tokens,
            result.output_tokens,
            False,
        )
    else:
        input_tokens = prompt_tokens
        output_tokens = counter.count(result.text or result.refusal or "")
        approximate = counter.approximate
    if simulated:
        cost = 0.0
    else:
        model = result.model if result.model and prices.price(result.model) else default_model
        cost = prices.cost(model, input_tokens, output_tokens, result.cached_tokens, batch=batch)
    ledger.chat(
        stage,
        input_tokens=input_tokens,
        output_tokens=output_tokens,
        cached_tokens=result.cached_tokens,
        cost_usd=cost,
        approximate=approximate,
    )
    return {
        "calls": 1,
        "input_tokens": input_tokens,
        "output_tokens": output_tokens,
        "cached_tokens": result.cached_tokens,
        "cost_usd": cost,
    }


def used_chat_tokens(result: ChatResult, prompt_tokens: int, counter: TokenCounter) -> int:
    """The tokens an answer used, for the limiter: as reported, else counted."""
    if result.usage_reported:
        return result.input_tokens + result.output_tokens
    return prompt_tokens + counter.count(result.text or "")
