"""The one generate-check-reject loop: its policy, held by every stage that uses it."""

from __future__ import annotations

from collections.abc import Sequence

import pytest

from memoryquest.contracts import RejectedCandidate, RejectionReason
from memoryquest.generation.common import failure_reason, rejected
from memoryquest.generation.regeneration import GIVE_UP, GiveUp, Regeneration, Round, regenerate
from memoryquest.ids import make_id
from memoryquest.llm.errors import LLMContextLengthError, LLMOutputError, LLMTransportError

PERSONA = make_id("persona", "user0")


class Scripted(Regeneration[str, str, str]):
    """Answers each item from its script, one entry per attempt; an answer passes when it is upper case."""

    def __init__(self, scripts: dict[str, list[str | BaseException]], salvage: bool = False):
        self.scripts = scripts
        self.salvage = salvage
        self.asked: list[tuple[int, str]] = []

    async def ask(self, items: Sequence[str], round: Round) -> Sequence[str | BaseException]:
        self.asked.extend((round.attempt, item) for item in items)
        return [self.scripts[item][round.attempt] for item in items]

    async def check(
        self, answers: Sequence[tuple[int, str, str]], round: Round
    ) -> list[tuple[int, str | RejectedCandidate | GiveUp]]:
        verdicts: list[tuple[int, str | RejectedCandidate | GiveUp]] = []
        for position, item, answer in answers:
            if answer == "hopeless":
                verdicts.append((position, GIVE_UP))
            elif answer.isupper():
                verdicts.append((position, answer))
            else:
                problem = rejected(
                    PERSONA,
                    "timelines",
                    RejectionReason.INVARIANT,
                    answer,
                    answer,
                    item,
                    round.attempt,
                )
                verdicts.append((position, problem))
                if self.salvage and round.last:
                    verdicts.append((position, answer))
        return verdicts

    def failed(self, item: str, error: LLMOutputError, round: Round) -> RejectedCandidate:
        return rejected(
            PERSONA, "timelines", failure_reason(error), str(error), {}, item, round.attempt
        )


async def test_only_what_failed_is_asked_again_and_every_failure_is_recorded() -> None:
    job = Scripted(
        {"a": ["ok", "OK"], "b": ["FINE"], "c": ["no", LLMOutputError("bad json"), "no"]}
    )
    outcome = await regenerate(job, ["a", "b", "c"], attempts=3)
    assert outcome.kept == {0: "OK", 1: "FINE"}
    assert outcome.unresolved == [2]
    assert job.asked == [(0, "a"), (0, "b"), (0, "c"), (1, "a"), (1, "c"), (2, "c")]
    assert outcome.calls == 6
    assert [r.detail for r in outcome.rejected] == ["ok", "no", "bad json", "no"]
    assert outcome.rejected[2].reason is RejectionReason.SCHEMA


async def test_a_prompt_that_cannot_fit_or_a_check_that_gives_up_is_not_asked_again() -> None:
    too_long = LLMContextLengthError("does not fit")
    job = Scripted({"a": [too_long, "A"], "b": ["hopeless", "B"], "c": ["c", "C"]})
    outcome = await regenerate(job, ["a", "b", "c"], attempts=2)
    assert outcome.kept == {2: "C"} and outcome.unresolved == [0, 1]
    assert job.asked == [(0, "a"), (0, "b"), (0, "c"), (1, "c")]
    assert outcome.rejected[0].reason is RejectionReason.CONTEXT_LENGTH


async def test_the_last_attempt_may_keep_what_it_also_refuses() -> None:
    outcome = await regenerate(Scripted({"a": ["x", "y"]}, salvage=True), ["a"], attempts=2)
    assert outcome.kept == {0: "y"} and [r.detail for r in outcome.rejected] == ["x", "y"]


async def test_an_endpoint_failure_ends_the_stage() -> None:
    job = Scripted({"a": ["A"], "b": [LLMTransportError("503 after 8 attempts", 8, None)]})
    with pytest.raises(LLMTransportError):
        await regenerate(job, ["a", "b"], attempts=3)
