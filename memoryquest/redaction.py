"""One redactor for every secret: the configured API key, and anything shaped like a key.

Used wherever text can leave the process: messages the client layer raises or
logs (``memoryquest.llm``), the command line's error line, and the published
manifest (``memoryquest.publish``). Three rules, applied in order:

1. every *known* secret is cut out wherever it appears: the keys registered
   with :func:`register_secret` (the client registers its API key when it is
   built) and any passed explicitly;
2. text *shaped* like a key is masked even when nobody registered it: OpenAI
   style ``sk-...`` tokens, the credential after ``Bearer`` / ``Basic``, and a
   long token right after a word such as "key", "token" or "secret"
   ("Incorrect API key provided: abc123...");
3. URLs lose their user info and secret-looking query parameters.

JSON-like values (:func:`redact`) additionally mask the value of every
secret-looking key (``api_key``, ``token``, ``authorization``, ...).
"""

from __future__ import annotations

import logging
import re
import threading
from collections.abc import Iterable
from typing import Any
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

MASK = "****"
# Shorter values are not treated as secrets: masking "EMPTY" or "none" everywhere would mangle text.
MIN_SECRET_LENGTH = 8

_SECRET_KEY = re.compile(
    r"(^|[_\-.])(api[_\-]?key|secret|client[_\-]?secret|password|passwd|token|access[_\-]?token|"
    r"refresh[_\-]?token|authorization|auth|sig|signature|credentials?)$",
    re.IGNORECASE,
)
_OPENAI_KEY = re.compile(r"(?<![A-Za-z0-9])sk-[A-Za-z0-9_\-]{8,}")
_AUTH_SCHEME = re.compile(r"\b(Bearer|Basic)(\s+)([A-Za-z0-9._~+/\-]+=*)", re.IGNORECASE)
# "api key provided: XYZ", "token=XYZ", "x-api-key: XYZ", "secret 'XYZ'"
_AFTER_WORD = re.compile(
    r"\b((?:api[ _\-]?key|key|token|secret|password|passwd|credentials?)\b"
    r"(?:\s+(?:provided|is|was|given))?[\"']?\s*[:=]?\s*[\"']?)"
    r"([A-Za-z0-9._~+/\-]{16,}=*)",
    re.IGNORECASE,
)
_URL = re.compile(r"\b[a-z][a-z0-9+.\-]*://[^\s\"'<>]+", re.IGNORECASE)

_registered: set[str] = set()
_registered_lock = threading.Lock()


def register_secret(value: str | None) -> None:
    """Remember ``value`` as a secret for every later redaction in this process."""
    if value and len(value) >= MIN_SECRET_LENGTH:
        with _registered_lock:
            _registered.add(value)


def known_secrets(extra: Iterable[str | None] = ()) -> list[str]:
    """Registered secrets plus ``extra``, longest first (so a key containing another is cut whole)."""
    with _registered_lock:
        values = set(_registered)
    values.update(s for s in extra if s and len(s) >= MIN_SECRET_LENGTH)
    return sorted(values, key=len, reverse=True)


def is_secret_key(key: str) -> bool:
    """``api_key``, ``openai_api_key``, ``token`` ... but not ``input_tokens`` or ``tokens_per_minute``."""
    return bool(_SECRET_KEY.search(key))


def _looks_like_secret(token: str) -> bool:
    """A long run of key characters mixing letters and digits (not a word, a path or a URL)."""
    if token.startswith(("/", ".", "http")):
        return False
    return any(c.isdigit() for c in token) and any(c.isalpha() for c in token)


def redact_url(url: str) -> str:
    try:
        parts = urlsplit(url)
    except ValueError:
        return url
    if not parts.scheme or not parts.netloc:
        return url
    netloc = parts.netloc.rsplit("@", 1)[-1]
    query = urlencode(
        [
            (k, MASK if is_secret_key(k) else v)
            for k, v in parse_qsl(parts.query, keep_blank_values=True)
        ],
        safe="*",
    )
    return urlunsplit((parts.scheme, netloc, parts.path, query, parts.fragment))


def redact_text(text: str, secrets: Iterable[str | None] = ()) -> str:
    """``text`` with known secrets, key-shaped tokens and URL credentials masked."""
    if not text:
        return text
    for secret in known_secrets(secrets):
        if secret in text:
            text = text.replace(secret, MASK)
    text = _OPENAI_KEY.sub(MASK, text)
    text = _AUTH_SCHEME.sub(
        lambda m: f"{m.group(1)}{m.group(2)}{MASK}" if m.group(3) != MASK else m.group(0), text
    )
    text = _AFTER_WORD.sub(
        lambda m: m.group(1) + MASK if _looks_like_secret(m.group(2)) else m.group(0),
        text,
    )
    if "://" in text:
        text = _URL.sub(lambda m: redact_url(m.group(0)), text)
    return text


def redact(value: Any, secrets: Iterable[str | None] = ()) -> Any:
    """A copy of a JSON-like value with secrets masked (see the module docstring)."""
    known = list(secrets)

    def walk(item: Any) -> Any:
        if isinstance(item, dict):
            return {
                key: (
                    MASK if is_secret_key(str(key)) and item[key] is not None else walk(item[key])
                )
                for key in item
            }
        if isinstance(item, list | tuple):
            return [walk(element) for element in item]
        if isinstance(item, str):
            return redact_text(item, known)
        return item

    return walk(value)


class RedactingFilter(logging.Filter):
    """A logging filter that redacts each record's message (and drops its now-rendered arguments)."""

    def filter(self, record: logging.LogRecord) -> bool:
        try:
            message = record.getMessage()
        except (
            Exception
        ):  # a broken format string: leave the record to the handler's own error path
            return True
        clean = redact_text(message)
        if clean != message:
            record.msg = clean
            record.args = None
        return True


def redact_loggers(*names: str) -> None:
    """Attach one :class:`RedactingFilter` to each named logger (records logged directly on it)."""
    for name in names:
        logger = logging.getLogger(name)
        if not any(isinstance(f, RedactingFilter) for f in logger.filters):
            logger.addFilter(RedactingFilter())
