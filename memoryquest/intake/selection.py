"""Which personas of a source to load.

Two ways to choose, at most one at a time, and a cap:

* ``user_ids`` — explicit ids, loaded in the order given;
* ``start``/``stop`` — a range of positions in natural order (user0, user1, ...,
  user9, user10), half-open like a Python slice: ``30:230`` is positions 30 to
  229, ``30:`` everything from 30 on, ``:10`` the first ten;
* ``count`` — at most N personas: alone, the first N in natural order; with ids
  or a range, the first N of them (``--range 30:230 --count 5`` is ``30:35``).

With none of them, a local source yields every user it has. An HTTP source has no
directory listing, so there ``count`` and ranges map to the upstream naming
``user<i>`` (upstream PersonaLens has user0 .. user1499) and "everything" is not
available.

The command line (``--users user0,user3``, ``--range 30:230``, ``--count N``) and
the generation flow's parameters (``users``, ``range``, ``count``) spell a
selection the same way; :meth:`PersonaSelection.parse` reads both.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from memoryquest.intake.errors import IntakeSourceError
from memoryquest.intake.normalise import natural_key

_UPSTREAM_PREFIX = "user"
RANGE_FORM = "START:STOP (positions START to STOP-1, e.g. 30:230)"


@dataclass(frozen=True)
class PersonaSelection:
    """A selection; ``count`` with ids or a range is folded into them on construction."""

    user_ids: Sequence[str] | None = None
    count: int | None = None
    start: int | None = None
    stop: int | None = None

    def __post_init__(self) -> None:
        ranged = self.is_range
        if self.user_ids is not None and ranged:
            raise ValueError(
                "choose personas by user ids (users) or by a range (range), not both; "
                "count caps either"
            )
        if self.count is not None and self.count < 1:
            raise ValueError(f"count must be at least 1, got {self.count}")
        if self.start is not None and self.start < 0:
            raise ValueError(
                f"range start must not be negative (positions count from 0), got {self.start}"
            )
        if self.stop is not None and self.stop < 0:
            raise ValueError(
                f"range stop must not be negative (positions count from 0), got {self.stop}"
            )
        if self.stop is not None and self.stop <= (self.start or 0):
            raise ValueError(
                f"range {self.start or 0}:{self.stop} is empty: its stop must be above its start"
            )
        if self.user_ids is not None:
            if isinstance(self.user_ids, str):
                raise ValueError("user_ids must be a list of ids, not one string")
            ids = tuple(self.user_ids)
            if not ids:
                raise ValueError("the selection lists no user ids")
            duplicates = sorted({u for u in ids if ids.count(u) > 1})
            if duplicates:
                raise ValueError(f"user ids given more than once: {', '.join(duplicates)}")
            if self.count is not None:
                ids = ids[: self.count]
                object.__setattr__(self, "count", None)
            object.__setattr__(self, "user_ids", ids)
        elif ranged and self.count is not None:
            start = self.start or 0
            capped = start + self.count if self.stop is None else min(self.stop, start + self.count)
            object.__setattr__(self, "start", start)
            object.__setattr__(self, "stop", capped)
            object.__setattr__(self, "count", None)

    @classmethod
    def parse(
        cls,
        users: str | Sequence[str] | None = None,
        count: int | None = None,
        range_text: str | None = None,
    ) -> PersonaSelection:
        """From command-line text or flow parameters: ``users="user0,user3"`` (or a list of ids),
        ``count=5``, ``range_text="30:230"``."""
        if isinstance(users, str):
            user_ids: list[str] | None = [u.strip() for u in users.split(",") if u.strip()]
        else:
            user_ids = [u.strip() for u in users] if users is not None else None
        start, stop = parse_range(range_text) if range_text is not None else (None, None)
        return cls(user_ids=user_ids, count=count, start=start, stop=stop)

    @property
    def is_everything(self) -> bool:
        return (
            self.user_ids is None
            and self.count is None
            and self.start is None
            and self.stop is None
        )

    @property
    def is_range(self) -> bool:
        return self.start is not None or self.stop is not None

    @property
    def range_text(self) -> str:
        """The range as ``START:STOP`` (``START:`` when open-ended)."""
        return f"{self.start or 0}:{'' if self.stop is None else self.stop}"

    def pick(self, available: Sequence[str]) -> tuple[list[str], list[str]]:
        """Apply to the ids a source has: (selected ids in order, requested ids it lacks).

        A range that starts past the source's last persona is an
        :class:`IntakeSourceError`: it selects nothing, and a run of nothing is a mistake.
        """
        if self.user_ids is not None:
            present = set(available)
            return [u for u in self.user_ids if u in present], [
                u for u in self.user_ids if u not in present
            ]
        ordered = sorted(available, key=natural_key)
        if self.count is not None:
            return ordered[: self.count], []
        picked = ordered[self.start or 0 : self.stop]
        if not picked and ordered and self.is_range:
            raise IntakeSourceError(
                f"range {self.range_text} selects no persona: the source has {len(ordered)} "
                f"(range 0:{len(ordered)})"
            )
        return picked, []

    def upstream_ids(self) -> list[str]:
        """The ids to request from a source that cannot be listed (upstream naming user<i>)."""
        if self.user_ids is not None:
            return list(self.user_ids)
        if self.count is not None:
            return [f"{_UPSTREAM_PREFIX}{i}" for i in range(self.count)]
        if self.stop is not None:
            return [f"{_UPSTREAM_PREFIX}{i}" for i in range(self.start or 0, self.stop)]
        raise IntakeSourceError(
            "an HTTP source cannot be listed: select personas by user ids, by count, "
            "or by a range with a stop (e.g. 0:10)"
        )


def parse_range(text: str) -> tuple[int | None, int | None]:
    """``"30:230"`` -> (30, 230); ``"30:"`` -> (30, None); ``":10"`` -> (0, 10)."""
    start_text, separator, stop_text = text.partition(":")
    try:
        if not separator:
            raise ValueError
        start = int(start_text) if start_text.strip() else 0
        stop = int(stop_text) if stop_text.strip() else None
    except ValueError:
        raise ValueError(f"range must look like {RANGE_FORM}, got {text!r}") from None
    return start, stop
