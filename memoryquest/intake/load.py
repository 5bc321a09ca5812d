"""The one entry point: load personas from whatever ``source`` names."""

from __future__ import annotations

from pathlib import Path

from memoryquest.intake.custom import load_custom_personas
from memoryquest.intake.errors import IntakeResult
from memoryquest.intake.personalens import load_personalens
from memoryquest.intake.selection import PersonaSelection


def is_http_source(source: str | Path) -> bool:
    return str(source).startswith(("http://", "https://"))


def load_personas(
    source: str | Path,
    selection: PersonaSelection | None = None,
    *,
    max_file_bytes: int = 5_000_000,
    timeout_seconds: float = 30.0,
) -> IntakeResult:
    """Personas from a PersonaLens directory, a PersonaLens http(s) base URL, or a custom ``.json`` file.

    Bad users or files become ``IntakeResult.errors`` (each naming file and field) and
    the rest still load; a source that cannot be used at all raises ``IntakeSourceError``.
    Reads only; never writes.
    """
    selection = selection or PersonaSelection()
    if not is_http_source(source) and str(source).lower().endswith(".json"):
        return load_custom_personas(source, selection, max_file_bytes=max_file_bytes)
    return load_personalens(
        source, selection, max_file_bytes=max_file_bytes, timeout_seconds=timeout_seconds
    )
