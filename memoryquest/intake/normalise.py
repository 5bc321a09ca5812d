"""Spelling rules shared by every persona source.

Upstream PersonaLens is not uniform: some domains say "Favourite Authors",
others "Favorite Artists"; task files are hand-edited JSON where a key may
gain a stray space or change case. Everything downstream matches on names, so
intake settles each spelling once, here.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from memoryquest.contracts import Affinity, Domain

_FAVOURITE = re.compile(r"\bfavourite", re.IGNORECASE)
_SPACES = re.compile(r"\s+")
_DIGITS = re.compile(r"(\d+)")
# fullmatch, never match + "$": "$" also matches before a trailing newline ("user0\n").
_USER_ID = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}")
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f]")
_SURROGATE = re.compile(r"[\ud800-\udfff]")
MAX_ID_CHARS = 200


def collapse_spaces(text: str) -> str:
    return _SPACES.sub(" ", text).strip()


def canonical_affinity_name(name: str) -> str:
    """'Favourite  Authors ' -> 'Favorite Authors': one spelling for every attribute name."""
    return _FAVOURITE.sub(
        lambda match: match.group(0)[:4] + match.group(0)[5:], collapse_spaces(name)
    )


def merged_affinities(
    domain: Domain, named_values: Iterable[tuple[str, Iterable[str]]]
) -> list[Affinity]:
    """One affinity per attribute name as :func:`canonical_affinity_name` spells it (names spelt
    alike merge), in order of first appearance, each with its values once, in order."""
    by_name: dict[str, dict[str, None]] = {}
    for name, values in named_values:
        # An insertion-ordered set: de-duplication stays linear.
        by_name.setdefault(canonical_affinity_name(name), {}).update(dict.fromkeys(values))
    return [
        Affinity(domain=domain, name=name, values=list(values)) for name, values in by_name.items()
    ]


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
    return tuple(
        (1, int(part)) if index % 2 else (0, part.casefold()) for index, part in enumerate(parts)
    )


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
    if _CONTROL.search(user_id):
        return f"user id {user_id!r} contains a control character"
    if not user_id.isascii():
        return f"user id {user_id!r} is not plain ASCII"
    if user_id.startswith(("/", "\\")) or re.match(r"^[A-Za-z]:", user_id):
        return f"user id {user_id!r} is an absolute path"
    if "/" in user_id or "\\" in user_id:
        return f"user id {user_id!r} contains a path separator"
    if ".." in user_id:
        return f"user id {user_id!r} contains '..'"
    if not _USER_ID.fullmatch(user_id):
        return (
            f"user id {user_id!r} may only contain letters, digits, '_', '-' and '.', "
            "must not start with '.' or '-', and is at most 128 characters"
        )
    return None


def unsafe_id(value: str, what: str = "id") -> str | None:
    """Why a task id (or another id that ends up in output rows) is unusable, or None.

    Ids are plain printable ASCII: no control character (a newline in an id
    breaks every line-oriented tool downstream), nothing outside ASCII.
    """
    if not value.strip():
        return f"{what} is empty"
    if _CONTROL.search(value):
        return f"{what} {value[:60]!r} contains a control character"
    if not value.isascii():
        return f"{what} {value[:60]!r} is not plain ASCII"
    if len(value) > MAX_ID_CHARS:
        return f"{what} is {len(value)} characters, above the {MAX_ID_CHARS}-character limit"
    return None


# --------------------------------------------------------------------------- JSON with limits


@dataclass(frozen=True)
class JsonLimits:
    """Bounds every decoded file must respect; each is checked in time linear in the file's size.

    ``max_int_digits`` stops a long integer before Python's own 4300-digit
    conversion error (which names no file); depth, list lengths and string
    lengths keep every later step linear and small.
    """

    max_depth: int = 32
    max_items: int = 10_000  # per array and per object
    max_string_chars: int = 100_000
    max_int_digits: int = 300


DEFAULT_LIMITS = JsonLimits()


class JsonProblem(ValueError):
    """A decoded file breaks a rule: ``field`` is a dotted path inside it (None: the file as a whole)."""

    def __init__(self, field: str | None, message: str) -> None:
        super().__init__(message)
        self.field = field
        self.message = message

    def __str__(self) -> str:
        return self.message if self.field is None else f"{self.field}: {self.message}"


class _TooManyDigits(ValueError):
    def __init__(self, digits: str) -> None:
        super().__init__(digits)
        self.digits = digits


class _NotJson(ValueError):
    pass


class _Members(dict[str, Any]):
    """An object whose JSON text repeated a key (the hook keeps the first value and lists the repeats)."""

    duplicates: list[str]


def _pairs_hook(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    members = dict(pairs)
    if len(members) == len(pairs):
        return members
    repeated: dict[str, None] = {}
    seen: set[str] = set()
    for key, _ in pairs:
        if key in seen:
            repeated[key] = None
        seen.add(key)
    checked = _Members(members)
    checked.duplicates = list(repeated)
    return checked


def _position(text: str, fragment: str) -> str:
    at = text.find(fragment)
    if at < 0:
        return ""
    line = text.count("\n", 0, at) + 1
    column = at - (text.rfind("\n", 0, at) + 1) + 1
    return f" (line {line}, column {column})"


def _child(path: str, key: str | int) -> str:
    if isinstance(key, int):
        return f"{path}[{key}]"
    return f"{path}.{key}" if path else key


def _string_problem(value: str, limits: JsonLimits) -> str | None:
    if len(value) > limits.max_string_chars:
        return f"string is {len(value)} characters, above the {limits.max_string_chars}-character limit"
    if "\x00" in value:
        return "string contains a NUL character (\\u0000)"
    if _SURROGATE.search(value):
        return "string contains a lone surrogate (an escaped \\ud800-\\udfff without its pair): not valid Unicode"
    return None


def check_json(
    value: object, limits: JsonLimits = DEFAULT_LIMITS, *, path: str = "", depth: int = 0
) -> None:
    """Raise :class:`JsonProblem` at the first value that breaks ``limits`` (iterative: no recursion).

    ``path`` and ``depth`` say where ``value`` sits when it is part of a larger document.
    """
    stack: list[tuple[object, str, int]] = [(value, path, depth)]
    while stack:
        item, path, depth = stack.pop()
        where = path or None
        if isinstance(item, str):
            problem = _string_problem(item, limits)
            if problem:
                raise JsonProblem(where, problem)
        elif isinstance(item, float):
            if not math.isfinite(item):
                raise JsonProblem(where, f"number {item!r} is out of range")
        elif isinstance(item, dict | list):
            if depth >= limits.max_depth:
                raise JsonProblem(where, f"nested more than {limits.max_depth} levels deep")
            if len(item) > limits.max_items:
                kind = "object has" if isinstance(item, dict) else "array has"
                noun = "members" if isinstance(item, dict) else "items"
                raise JsonProblem(
                    where, f"{kind} {len(item)} {noun}, above the {limits.max_items} limit"
                )
            if isinstance(item, dict):
                if isinstance(item, _Members):
                    names = ", ".join(repr(k) for k in item.duplicates[:5])
                    raise JsonProblem(
                        where, f"duplicate key {names}: each key may appear once per object"
                    )
                for key, member in item.items():
                    problem = _string_problem(key, limits)
                    if problem:
                        raise JsonProblem(_child(path, key[:80]), f"key: {problem}")
                    stack.append((member, _child(path, key), depth + 1))
            else:
                stack.extend(
                    (member, _child(path, index), depth + 1) for index, member in enumerate(item)
                )


def parse_json(
    raw: bytes, limits: JsonLimits = DEFAULT_LIMITS, *, check: bool = True
) -> tuple[object, JsonProblem | None]:
    """Parse UTF-8 JSON bytes within ``limits``; on failure return (None, the problem and where it is).

    Strict JSON: duplicate keys, ``NaN``/``Infinity``, lone surrogates and NUL
    characters are errors, as are integers longer than ``limits.max_int_digits``.
    With ``check=False`` only the syntax (and the digit limit) is checked: the
    caller runs :func:`check_json` on each part, so one bad part spares the rest.
    """
    if raw.startswith(b"\xef\xbb\xbf"):
        raw = raw[3:]
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        bad = raw[exc.start : exc.start + 1].hex()
        return None, JsonProblem(None, f"not valid UTF-8 (byte 0x{bad} at offset {exc.start})")

    def parse_int(digits: str) -> int:
        if len(digits) - digits.startswith("-") > limits.max_int_digits:
            raise _TooManyDigits(digits)
        return int(digits)

    def parse_constant(name: str) -> float:
        raise _NotJson(name)

    try:
        value = json.loads(
            text, object_pairs_hook=_pairs_hook, parse_int=parse_int, parse_constant=parse_constant
        )
    except json.JSONDecodeError as exc:
        return None, JsonProblem(
            None, f"invalid JSON: {exc.msg} (line {exc.lineno}, column {exc.colno})"
        )
    except RecursionError:
        return None, JsonProblem(None, "invalid JSON: nested too deeply")
    except _TooManyDigits as exc:
        count = len(exc.digits) - exc.digits.startswith("-")
        return None, JsonProblem(
            None,
            f"a number has {count} digits, above the {limits.max_int_digits}-digit limit"
            f"{_position(text, exc.digits[:40])}",
        )
    except _NotJson as exc:
        return None, JsonProblem(
            None, f"invalid JSON: {exc.args[0]} is not a JSON value{_position(text, exc.args[0])}"
        )
    if check:
        try:
            check_json(value, limits)
        except JsonProblem as problem:
            return None, problem
    return value, None


def decode_json(raw: bytes, limits: JsonLimits = DEFAULT_LIMITS) -> tuple[object, str | None]:
    """:func:`parse_json` with the problem as one message ("field: message")."""
    value, problem = parse_json(raw, limits)
    return value, None if problem is None else str(problem)
