"""Which personas of a source to load.

Three ways to choose, at most one at a time:

* ``user_ids`` — explicit ids, loaded in the order given;
* ``count`` — the first N users in natural order (user0, user1, ..., user9, user10);
* ``start``/``stop`` — positions ``start .. stop-1`` in that natural order.

With none of them, a local source yields every user it has. An HTTP source has no
directory listing, so there ``count`` and ranges map to the upstream naming
``user<i>`` (upstream PersonaLens has user0 .. user1499) and "everything" is not
available.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from memoryquest.intake.errors import IntakeSourceError
from memoryquest.intake.normalise import natural_key

_UPSTREAM_PREFIX = "user"


@dataclass(frozen=True)
class PersonaSelection:
    user_ids: Sequence[str] | None = None
    count: int | None = None
    start: int | None = None
    stop: int | None = None

    def __post_init__(self) -> None:
        if self.user_ids is not None:
            if isinstance(self.user_ids, str):
                raise ValueError("user_ids must be a list of ids, not one string")
            ids = tuple(self.user_ids)
            if not ids:
                raise ValueError("the selection lists no user ids")
            duplicates = sorted({u for u in ids if ids.count(u) > 1})
            if duplicates:
                raise ValueError(f"user ids given more than once: {', '.join(duplicates)}")
            object.__setattr__(self, "user_ids", ids)
        ranged = self.start is not None or self.stop is not None
        chosen = [self.user_ids is not None, self.count is not None, ranged]
        if sum(chosen) > 1:
            raise ValueError(
                "choose personas by user ids, by count or by range, not several at once"
            )
        if self.count is not None and self.count < 1:
            raise ValueError(f"count must be at least 1, got {self.count}")
        if self.start is not None and self.start < 0:
            raise ValueError(f"range start must not be negative, got {self.start}")
        if self.stop is not None and self.stop <= (self.start or 0):
            raise ValueError(
                f"range stop ({self.stop}) must be above its start ({self.start or 0})"
            )

    @classmethod
    def parse(
        cls, users: str | None = None, count: int | None = None, range_text: str | None = None
    ) -> PersonaSelection:
        """From command-line text: ``users="user0,user3"``, ``count=5`` or ``range_text="0:10"``."""
        user_ids = [u.strip() for u in users.split(",") if u.strip()] if users is not None else None
        start = stop = None
        if range_text is not None:
            start_text, separator, stop_text = range_text.partition(":")
            if not separator:
                raise ValueError(f"range must look like START:STOP (e.g. 0:10), got {range_text!r}")
            try:
                start = int(start_text) if start_text.strip() else 0
                stop = int(stop_text) if stop_text.strip() else None
            except ValueError as exc:
                raise ValueError(
                    f"range must look like START:STOP (e.g. 0:10), got {range_text!r}"
                ) from exc
        return cls(user_ids=user_ids, count=count, start=start, stop=stop)

    @property
    def is_everything(self) -> bool:
        return (
            self.user_ids is None
            and self.count is None
            and self.start is None
            and self.stop is None
        )

    def pick(self, available: Sequence[str]) -> tuple[list[str], list[str]]:
        """Apply to the ids a source has: (selected ids in order, requested ids it lacks)."""
        if self.user_ids is not None:
            present = set(available)
            return [u for u in self.user_ids if u in present], [
                u for u in self.user_ids if u not in present
            ]
        ordered = sorted(available, key=natural_key)
        if self.count is not None:
            return ordered[: self.count], []
        return ordered[self.start or 0 : self.stop], []

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
