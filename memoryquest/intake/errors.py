"""What intake reports when input is bad.

Intake never stops at the first bad persona: every problem becomes an
:class:`IntakeError` naming the file (path or URL) and the field inside it, and
the personas that are fine still load. Only a source that cannot be read at all
(a missing directory, a malformed URL, a selection HTTP cannot serve) raises
:class:`IntakeSourceError`.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from memoryquest.contracts import Persona


class IntakeSourceError(ValueError):
    """The persona source as a whole is unusable; nothing can be loaded from it."""


@dataclass(frozen=True)
class IntakeError:
    """One problem with one file: ``file`` is a path or URL, ``field`` a dotted path inside it."""

    file: str
    field: str | None
    message: str

    def __str__(self) -> str:
        if self.field is None:
            return f"{self.file}: {self.message}"
        return f"{self.file}: {self.field}: {self.message}"


@dataclass
class IntakeResult:
    """The personas that loaded, in selection order, and every problem found on the way."""

    personas: list[Persona] = field(default_factory=list)
    errors: list[IntakeError] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.errors


class ErrorCollector:
    """Gathers the errors of one file so a mapper can report all of them, not just the first."""

    def __init__(self, file: str) -> None:
        self.file = file
        self.errors: list[IntakeError] = []

    def add(self, field_path: str | None, message: str) -> None:
        self.errors.append(IntakeError(self.file, field_path, message))


def type_name(value: object) -> str:
    """JSON's name for a decoded value's type, for error messages."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int | float):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "array"
    if isinstance(value, dict):
        return "object"
    return type(value).__name__
