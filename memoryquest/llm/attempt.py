"""One request's tries, and how each answer is judged.

An :class:`Attempt` is where one request stands between tries; the online
loop and the Batch API lifecycle keep one per request and judge every answer
with :func:`judge_answer`, so a bad answer costs the same retries whichever
way it travelled.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

from pydantic import BaseModel, ValidationError

from memoryquest.llm.backends import ChatResult
from memoryquest.llm.errors import (
    LLMContentFilterError,
    LLMOutputError,
    LLMRefusalError,
    LLMTruncatedError,
)
from memoryquest.llm.prompts import PromptTemplate
from memoryquest.llm.request import LLMRequest
from memoryquest.llm.schema import repair_instruction, validate_answer

# A truncated answer is retried with twice the output budget, up to this many tokens.
TRUNCATION_BUDGET_CAP = 16_384


Withheld = Literal["refusal", "content_filter", "length"]
"""Why a result carries no answer to judge: the model refused, the provider's filter withheld it,
or it was cut off at the output limit."""


def _nothing_spent() -> dict[str, Any]:
    return {"calls": 0, "input_tokens": 0, "output_tokens": 0, "cached_tokens": 0, "cost_usd": 0.0}


@dataclass
class Attempt:
    """Where one request stands between tries: what to send next and what went wrong so far.

    The online loop and the Batch API runner both keep one per request, so a
    bad answer costs the same retries whichever way it travelled.
    """

    request: LLMRequest[Any]
    template: PromptTemplate
    messages: list[dict[str, str]]  # the rendered prompt
    seed: int
    where: str  # names the request in error messages
    conversation: list[dict[str, str]]  # what the next try sends (a repair adds two turns)
    max_tokens: int
    repairs: int = 0
    # The window the request was last sized against; None when the model's window was unknown.
    sized_for: int | None = None
    # A server refused it as too long and named the window it had been sized without.
    window_learned: bool = False
    withheld: dict[Withheld, int] = field(default_factory=dict)  # answers withheld, by reason
    spent: dict[str, Any] = field(default_factory=_nothing_spent)

    def add(self, cost: dict[str, Any]) -> None:
        for name, value in cost.items():
            self.spent[name] += value


def withheld_reason(result: ChatResult) -> Withheld | None:
    """Why ``result`` has no answer to judge, or None when it has one."""
    if result.refusal:
        return "refusal"
    if result.finish_reason == "content_filter":
        return "content_filter"
    if result.finish_reason == "length":
        return "length"
    return None


def withheld_error(
    attempt: Attempt, result: ChatResult, reason: Withheld, times: int
) -> LLMOutputError:
    """The error of a request whose answer was withheld ``times`` times for ``reason``, once
    that has used up its retries."""
    where = attempt.where
    if reason == "refusal":
        refusal = result.refusal or ""
        return LLMRefusalError(
            f"{where}: the model refused {times} times; reason: {refusal}", refusal
        )
    if reason == "content_filter":
        return LLMContentFilterError(
            f"{where}: the provider's content filter withheld the answer {times} times "
            "(finish_reason content_filter)"
        )
    return LLMTruncatedError(
        f"{where}: the answer was cut off at the output limit ({attempt.max_tokens} tokens) "
        f"{times} times (finish_reason length); raise max_output_tokens "
        f"(the {attempt.request.template_id} template's header, or the request's)"
    )


@dataclass(frozen=True)
class Lookup:
    """A request's first try, its key in the response cache and the answer cached under it (if any)."""

    attempt: Attempt
    key: str
    answer: BaseModel | None


def judge_answer(
    attempt: Attempt,
    result: ChatResult,
    *,
    output_retries: int,
    repair_attempts: int,
    simulated: bool,
) -> Any | None:
    """The validated answer, or None after preparing ``attempt`` for another try.

    Raises the matching ``LLMOutputError`` once a kind of bad answer has
    used up its retries (``output_retries`` withheld answers of one kind,
    ``repair_attempts`` answers that do not fit; the simulator gets no repair).
    """
    request = attempt.request
    where = attempt.where
    reason = withheld_reason(result)
    if reason is not None:
        times = attempt.withheld[reason] = attempt.withheld.get(reason, 0) + 1
        if times > output_retries:
            raise withheld_error(attempt, result, reason, times)
        if reason == "length":
            attempt.max_tokens = min(
                attempt.max_tokens * 2, max(attempt.max_tokens, TRUNCATION_BUDGET_CAP)
            )
        return None
    text = result.text or ""
    model = request.response_model
    try:
        return validate_answer(model, text)
    except ValidationError as exc:
        problem = _summarise(exc) if text.strip() else "the answer was empty"
        attempt.repairs += 1
        if simulated or attempt.repairs > repair_attempts:
            tries = "" if simulated else f" after {repair_attempts} repair attempts"
            raise LLMOutputError(
                f"{where}: answer does not fit {model.__name__}{tries}: {problem}"
            ) from exc
        attempt.conversation = [
            *attempt.messages,
            {"role": "assistant", "content": text},
            {"role": "user", "content": repair_instruction(problem)},
        ]
        return None


def _summarise(exc: ValidationError, limit: int = 8) -> str:
    """The validation problems in a few lines the model (and a person) can act on."""
    lines = []
    for error in exc.errors()[:limit]:
        where = ".".join(str(part) for part in error.get("loc", ())) or "(root)"
        lines.append(f"- {where}: {error.get('msg', 'invalid')}")
    more = len(exc.errors()) - limit
    if more > 0:
        lines.append(f"- ... and {more} more")
    return "\n".join(lines)
