"""The one entry point: load personas from whatever ``source`` names."""

from __future__ import annotations

from pathlib import Path

from memoryquest.intake.custom import load_custom_personas
from memoryquest.intake.errors import IntakeResult
from memoryquest.intake.personalens import load_personalens
from memoryquest.intake.personalens_readers import LocalReader
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


def check_selection(
    source: str | Path, selection: PersonaSelection, *, max_file_bytes: int = 5_000_000
) -> None:
    """What :func:`load_personas` would refuse about the source or the selection as a whole,
    found without reading a persona: a PersonaLens directory that is not one, a range past
    its last persona, a selection an HTTP source cannot serve. A custom file must be read to
    know its ids; loading checks it."""
    if is_http_source(source):
        selection.upstream_ids()
    elif not str(source).lower().endswith(".json") and selection.user_ids is None:
        available, _ = LocalReader(Path(source), max_file_bytes).list_users()
        selection.pick(available)
