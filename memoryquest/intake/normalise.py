"""Spelling rules shared by every persona source.

Upstream PersonaLens is not uniform: some domains say "Favourite Authors",
others "Favorite Artists"; task files are hand-edited JSON where a key may
gain a stray space or change case. Everything downstream matches on names, so
intake settles each spelling once, here.
"""

from __future__ import annotations

import json
import re

from memoryquest.contracts import Domain

_FAVOURITE = re.compile(r"\bfavourite", re.IGNORECASE)
_SPACES = re.compile(r"\s+")
_DIGITS = re.compile(r"(\d+)")
_USER_ID = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}$")


def collapse_spaces(text: str) -> str:
    return _SPACES.sub(" ", text).strip()


def canonical_affinity_name(name: str) -> str:
    """'Favourite  Authors ' -> 'Favorite Authors': one spelling for every attribute name."""
    return _FAVOURITE.sub(lambda match: match.group(0)[:4] + match.group(0)[5:], collapse_spaces(name))


def field_key(key: str) -> str:
    """'Relevant_Domains ', 'relevant domains' -> 'relevant domains' (for matching keys only)."""
    return collapse_spaces(key.replace("_", " ")).casefold()


def _domain_key(text: str) -> str:
    return re.sub(r"[\s_\-]+", "", text).casefold()


_DOMAINS = {_domain_key(domain.value): domain for domain in Domain}
DOMAIN_ORDER = {domain: position for position, domain in enumerate(Domain)}


def parse_domain(text: str) -> Domain | None:
    """The Domain a name means, tolerating case and spacing ('rental cars', 'RentalCars')."""
    return _DOMAINS.get(_domain_key(text))


def unknown_domain_message(text: str) -> str:
    return f"unknown domain {text!r}; expected one of: {', '.join(d.value for d in Domain)}"


def natural_key(text: str) -> tuple[tuple[int, int | str], ...]:
    """Sort key putting 'user2' before 'user10' (and 'Task 2' before 'Task 10')."""
    parts = _DIGITS.split(text)
    return tuple((1, int(part)) if index % 2 else (0, part.casefold()) for index, part in enumerate(parts))


def unsafe_user_id(user_id: object) -> str | None:
    """Why ``user_id`` must not become part of a path or URL, or None when it is safe.

    Checked before any file or network access, so a selection such as
    ``../../etc`` never touches the file system.
    """
    if not isinstance(user_id, str):
        return f"user id must be a string, got {type(user_id).__name__}"
    if user_id == "" or user_id.strip() == "":
        return "user id is empty"
    if "\x00" in user_id:
        return f"user id {user_id!r} contains a NUL byte"
    if user_id.startswith(("/", "\\")) or re.match(r"^[A-Za-z]:", user_id):
        return f"user id {user_id!r} is an absolute path"
    if "/" in user_id or "\\" in user_id:
        return f"user id {user_id!r} contains a path separator"
    if ".." in user_id:
        return f"user id {user_id!r} contains '..'"
    if not _USER_ID.match(user_id):
        return (
            f"user id {user_id!r} may only contain letters, digits, '_', '-' and '.', "
            "must not start with '.' or '-', and is at most 128 characters"
        )
    return None


def decode_json(raw: bytes) -> tuple[object, str | None]:
    """Parse UTF-8 JSON bytes; on failure return (None, a message saying where it broke)."""
    if raw.startswith(b"\xef\xbb\xbf"):
        raw = raw[3:]
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        bad = raw[exc.start : exc.start + 1].hex()
        return None, f"not valid UTF-8 (byte 0x{bad} at offset {exc.start})"
    try:
        return json.loads(text), None
    except json.JSONDecodeError as exc:
        return None, f"invalid JSON: {exc.msg} (line {exc.lineno}, column {exc.colno})"
    except RecursionError:
        return None, "invalid JSON: nested too deeply"
