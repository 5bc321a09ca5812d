"""The one generate-check-reject loop: ask a model, check what it wrote, ask again what failed.

Every stage that asks a model for text and holds it to rules (queries,
timelines, dialogues, memory extraction, consolidation) runs its items
through :func:`regenerate`. The policy lives here once:

- an item is asked at most ``attempts`` times, each attempt with its own
  number (stages derive the request's seed from it);
- an answer the client could not turn into the response model
  (``LLMOutputError``) is recorded as a rejected candidate, and the item is
  asked again; one whose prompt cannot fit the model's window
  (``LLMContextLengthError``) is not, since asking again cannot help;
- unless the window was unknown when the item was planned and the refusal
  named it: the item is planned again under it (split or trimmed by the
  stage's ``ask``, as when the window is known) in the same round, once;
- any other error (the endpoint failed, not the item) ends the stage;
- what a stage's check refuses is recorded, never dropped silently.

A stage says how to ask, how to check and how to record a failed call;
nothing else.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Generic, TypeVar

from memoryquest.contracts import RejectedCandidate
from memoryquest.llm.errors import LLMContextLengthError, LLMOutputError

ItemT = TypeVar("ItemT")
AnswerT = TypeVar("AnswerT")
KeptT = TypeVar("KeptT")


@dataclass(frozen=True)
class Round:
    """Where the loop stands: the attempt's number, and whether it is the item's last."""

    attempt: int
    last: bool


class GiveUp:
    """A check's verdict that asking again for this item cannot help (its rejections are recorded)."""


GIVE_UP = GiveUp()


class Regeneration(ABC, Generic[ItemT, AnswerT, KeptT]):
    """What a stage tells the loop: how to ask, how to check, how to record a failed call."""

    @abstractmethod
    async def ask(self, items: Sequence[ItemT], round: Round) -> Sequence[AnswerT | BaseException]:
        """One answer (or the call's error in its place) per item, in order."""

    @abstractmethod
    async def check(
        self, answers: Sequence[tuple[int, ItemT, AnswerT]], round: Round
    ) -> Iterable[tuple[int, KeptT | RejectedCandidate | GiveUp]]:
        """Verdicts by item position, in the order they are recorded: what is kept, what is
        refused (both for one item: kept anyway, after the retries), or that it is given up."""

    @abstractmethod
    def failed(self, item: ItemT, error: LLMOutputError, round: Round) -> RejectedCandidate:
        """The record of a call that gave no usable answer."""

    def planned_without_the_window(self, answer: AnswerT | BaseException) -> bool:
        """Whether ``answer`` is a refusal that taught the model's window (a stage whose answer
        holds several calls' results looks into them)."""
        return window_learned(answer)


def window_learned(answer: object) -> bool:
    """A call refused as too long for a window it was planned without, which the refusal named."""
    return isinstance(answer, LLMContextLengthError) and answer.learned_window is not None


@dataclass
class Regenerated(Generic[KeptT]):
    """What the loop ends with: kept values by item position, every rejection, and the calls made."""

    kept: dict[int, KeptT] = field(default_factory=dict)
    rejected: list[RejectedCandidate] = field(default_factory=list)
    unresolved: list[int] = field(default_factory=list)  # items with nothing kept
    calls: int = 0


async def regenerate(
    stage: Regeneration[ItemT, AnswerT, KeptT],
    items: Sequence[ItemT],
    attempts: int,
) -> Regenerated[KeptT]:
    """Ask for every item until its answer passes the stage's check or its attempts are used up."""
    outcome: Regenerated[KeptT] = Regenerated()
    pending = list(range(len(items)))
    for attempt in range(attempts):
        if not pending:
            break
        round = Round(attempt, last=attempt == attempts - 1)
        answers = list(await stage.ask([items[i] for i in pending], round))
        outcome.calls += len(pending)
        replan = [k for k, answer in enumerate(answers) if stage.planned_without_the_window(answer)]
        if replan:
            again = await stage.ask([items[pending[k]] for k in replan], round)
            outcome.calls += len(replan)
            for k, answer in zip(replan, again, strict=True):
                answers[k] = answer
        given_up: set[int] = set()
        usable: list[tuple[int, ItemT, AnswerT]] = []
        for position, answer in zip(pending, answers, strict=True):
            if isinstance(answer, LLMOutputError):
                outcome.rejected.append(stage.failed(items[position], answer, round))
                if isinstance(answer, LLMContextLengthError):
                    given_up.add(position)  # the smallest prompt does not fit
            elif isinstance(answer, BaseException):
                raise answer  # the endpoint failed, not this item
            else:
                usable.append((position, items[position], answer))
        for position, verdict in await stage.check(usable, round):
            if isinstance(verdict, RejectedCandidate):
                outcome.rejected.append(verdict)
            elif isinstance(verdict, GiveUp):
                given_up.add(position)
            else:
                outcome.kept[position] = verdict
        pending = [i for i in pending if i not in outcome.kept and i not in given_up]
        if given_up:
            outcome.unresolved.extend(i for i in given_up if i not in outcome.kept)
    outcome.unresolved = sorted({*outcome.unresolved, *pending})
    return outcome


__all__ = ["GIVE_UP", "Regenerated", "Regeneration", "Round", "regenerate", "window_learned"]
