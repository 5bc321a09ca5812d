"""PersonaLens users -> :class:`~memoryquest.contracts.Persona`, from a directory or over HTTP.

The files are read by :mod:`~memoryquest.intake.personalens_readers` (the source's
layout, size caps, symlinks, HTTP) and mapped by :mod:`~memoryquest.intake.personalens_mapping`
(the mapping rules); this module loads the selected users, one at a time or concurrently.

A user with any error is not loaded; all of its errors are reported. Whatever
goes wrong with one user — a limit (see :class:`~memoryquest.intake.normalise.JsonLimits`),
a duplicate key, a symlink leaving the source, or an exception nobody
foresaw — becomes an error naming that user's file, and the other users load.
"""

from __future__ import annotations

from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from memoryquest.contracts import Persona
from memoryquest.intake.errors import IntakeError, IntakeResult
from memoryquest.intake.normalise import parse_json, unsafe_user_id
from memoryquest.intake.personalens_mapping import map_personalens_user
from memoryquest.intake.personalens_readers import (
    PROFILE_FILE,
    TASK_FILES,
    Fetcher,
    HttpReader,
    LocalReader,
)
from memoryquest.intake.selection import PersonaSelection


def load_user(user_id: str, fetch: Fetcher) -> tuple[Persona | None, list[IntakeError]]:
    """Read and map one user.

    The profile comes first: when the user does not exist or the server cannot be
    reached, that one error is reported and the other files are not requested.
    """
    label = user_id
    try:
        profile = fetch(user_id, PROFILE_FILE)
        label = profile.label
        if profile.unknown_user or profile.unreachable:
            return None, [IntakeError(profile.label, None, profile.error or "unknown user id")]
        fetched = [profile, *(fetch(user_id, name) for name in TASK_FILES)]
        errors: list[IntakeError] = []
        decoded: list[tuple[str, object]] = []
        for item in fetched:
            label = item.label
            if item.error is not None or item.raw is None:
                errors.append(IntakeError(item.label, None, item.error or "no content"))
                decoded.append((item.label, None))
                continue
            value, problem = parse_json(item.raw)
            if problem is not None:
                errors.append(IntakeError(item.label, problem.field, problem.message))
            decoded.append((item.label, value))
        if errors:
            return None, errors
        label = profile.label
        task_files = [
            (file, kind, value)
            for (file, value), kind in zip(decoded[1:], TASK_FILES.values(), strict=True)
        ]
        return map_personalens_user(user_id, decoded[0], task_files)
    except Exception as exc:  # one user's bad input must never stop the others
        return None, [IntakeError(label, None, f"could not be loaded: {type(exc).__name__}: {exc}")]


def _checked_ids(requested: list[str], source: str) -> tuple[list[str], list[IntakeError]]:
    safe: list[str] = []
    errors: list[IntakeError] = []
    for user_id in requested:
        problem = unsafe_user_id(user_id)
        if problem:
            errors.append(IntakeError(source, "user_ids", f"rejected: {problem}"))
        else:
            safe.append(user_id)
    return safe, errors


def _gather(
    users: list[str], fetch: Fetcher, workers: int
) -> Iterator[tuple[Persona | None, list[IntakeError]]]:
    if workers <= 1 or len(users) <= 1:
        yield from (load_user(user, fetch) for user in users)
        return
    with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="persona-intake") as pool:
        yield from pool.map(lambda user: load_user(user, fetch), users)


def load_personalens(
    source: str | Path,
    selection: PersonaSelection,
    *,
    max_file_bytes: int,
    timeout_seconds: float,
    http_workers: int = 8,
) -> IntakeResult:
    """Every selected user of a PersonaLens directory or base URL (see module docstring)."""
    result = IntakeResult()
    text = str(source)
    if text.startswith(("http://", "https://")):
        reader = HttpReader(text, max_file_bytes, timeout_seconds)
        try:
            users, result.errors = _checked_ids(selection.upstream_ids(), text)
            outcomes = list(_gather(users, reader.fetch, http_workers))
        finally:
            reader.close()
    else:
        local = LocalReader(Path(source), max_file_bytes)
        if selection.user_ids is not None:
            users, result.errors = _checked_ids(list(selection.user_ids), text)
        else:
            available, result.errors = local.list_users()
            users, _ = selection.pick(available)
        outcomes = list(_gather(users, local.fetch, 1))
    for persona, errors in outcomes:
        if persona is not None:
            result.personas.append(persona)
        result.errors.extend(errors)
    return result
