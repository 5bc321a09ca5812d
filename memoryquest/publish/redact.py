"""Keep credentials out of everything that gets published.

The run manifest records the settings in force; a generator that stored them
unmasked, or a base URL with a key in it, must not leak a secret into a public
dataset. Values under secret-looking keys are masked, URLs lose their user
info and secret-looking query parameters, and any known secret string is cut
out wherever it appears.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

MASK = "****"

_SECRET_KEY = re.compile(
    r"(^|[_\-.])(api[_\-]?key|secret|client[_\-]?secret|password|passwd|token|access[_\-]?token|"
    r"refresh[_\-]?token|authorization|auth|sig|signature|credentials?)$",
    re.IGNORECASE,
)


def is_secret_key(key: str) -> bool:
    """``api_key``, ``openai_api_key``, ``token`` ... but not ``input_tokens`` or ``tokens_per_minute``."""
    return bool(_SECRET_KEY.search(key))


def redact_url(url: str) -> str:
    parts = urlsplit(url)
    if not parts.scheme or not parts.netloc:
        return url
    netloc = parts.netloc.rsplit("@", 1)[-1]
    query = urlencode(
        [(k, MASK if is_secret_key(k) else v) for k, v in parse_qsl(parts.query, keep_blank_values=True)],
        safe="*",
    )
    return urlunsplit((parts.scheme, netloc, parts.path, query, parts.fragment))


def redact(value: Any, secrets: Iterable[str] = ()) -> Any:
    """A copy of a JSON-like value with secrets masked (see the module docstring)."""
    known = [s for s in secrets if s]

    def walk(item: Any) -> Any:
        if isinstance(item, dict):
            return {
                key: (MASK if is_secret_key(str(key)) and item[key] is not None else walk(item[key]))
                for key in item
            }
        if isinstance(item, list | tuple):
            return [walk(element) for element in item]
        if isinstance(item, str):
            for secret in known:
                item = item.replace(secret, MASK)
            if "://" in item:
                item = redact_url(item)
            return item
        return item

    return walk(value)
