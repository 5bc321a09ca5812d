"""Personas in lockstep: no persona starts a stage group before every other has reached it.

Why: in Batch API mode (``endpoint.batch``) a request waits in the client's
collector and travels with every request made meanwhile
(:mod:`memoryquest.llm.batch`). Personas that run freely drift apart: one
is still in an earlier stage (memory, say) while another already asks its
validation questions, and each of those questions then makes a batch of its
own, one after the other. The number of batch rounds grows with the number
of personas, and with a real Batch API every round can take hours.

Held at each stage group's start until all personas are there, the same
step of every persona is asked at the same time. Within a group, the
collector also knows which persona each waiting call comes from (a context
variable set for the persona's walk, inherited by every task it starts), so
it can hold a batch while a persona is still working towards its next
request (:meth:`Lockstep.all_idle`), instead of guessing from a quiet
window alone. The rounds are then those of the slowest persona, whatever
the number of personas.

The order of the stage groups is still :data:`memoryquest.pipeline.STAGE_GROUPS`,
walked by each persona as before (:func:`memoryquest.pipeline.run_persona`);
a persona that fails or is cancelled leaves, so it never holds up the rest.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Iterator
from contextvars import ContextVar
from dataclasses import dataclass, field


@dataclass(eq=False)
class Member:
    """One persona's walk through the stage groups."""

    lockstep: Lockstep
    waiting: int = 0  # calls of this persona waiting for a batch answer now
    parked: bool = False  # waiting for the others at a stage group's start

    @property
    def idle(self) -> bool:
        """Nothing more will come from this persona until a batch answers or the others catch up."""
        return self.parked or self.waiting > 0


_MEMBER: ContextVar[Member | None] = ContextVar("memoryquest_lockstep_member", default=None)


def current_member() -> Member | None:
    """The persona walk the running code belongs to, if it runs in lockstep."""
    return _MEMBER.get()


@dataclass(eq=False)
class Lockstep:
    """A barrier per stage group for ``parties`` personas of one event loop."""

    parties: int
    members: set[Member] = field(default_factory=set)
    _arrived: dict[str, int] = field(default_factory=dict)
    _open: dict[str, asyncio.Event] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.parties < 1:
            raise ValueError(f"a lockstep needs at least one persona, got {self.parties}")

    def all_idle(self) -> bool:
        """Whether every persona still walking waits (for a batch answer or for the others)."""
        return all(member.idle for member in self.members)

    async def reach(self, stage: str) -> None:
        """Wait until every persona still walking has reached ``stage`` (or left)."""
        member = current_member()
        self._arrived[stage] = self._arrived.get(stage, 0) + 1
        opened = self._open.setdefault(stage, asyncio.Event())
        self._release()
        if member is not None:
            member.parked = True
        try:
            await opened.wait()
        except asyncio.CancelledError:
            if not opened.is_set():  # it no longer waits here: the others must not count it
                self._arrived[stage] -= 1
            raise
        finally:
            if member is not None:
                member.parked = False

    @contextlib.contextmanager
    def member(self) -> Iterator[Member]:
        """One persona's walk (the context of the code inside); when it ends, however, it no longer counts."""
        member = Member(self)
        self.members.add(member)
        token = _MEMBER.set(member)
        try:
            yield member
        finally:
            _MEMBER.reset(token)
            self.members.discard(member)
            self.parties -= 1
            self._release()

    def _release(self) -> None:
        for stage, opened in self._open.items():
            if not opened.is_set() and self._arrived.get(stage, 0) >= self.parties:
                opened.set()


__all__ = ["Lockstep", "Member", "current_member"]
