"""The provider's automatic prompt cache, as one rule for the loopback server and the simulator.

OpenAI caches prompt prefixes by itself: the part of a new prompt that repeats
an earlier prompt of the same model and ``prompt_cache_key`` is billed at the
cached-input price once that shared prefix reaches 1,024 tokens, counted in
128-token steps. The fake server reports it in ``usage`` and the offline
simulator in its results, so tests, benchmarks and ``memoryquest estimate``
see the same cached-token figures a real run would.
"""

from __future__ import annotations

import threading
from collections import OrderedDict, deque
from collections.abc import Hashable, Iterable, Mapping
from typing import Any

from memoryquest.llm.tokens import TokenCounter

# Prefixes from this many tokens on are cached, counted in steps of this many.
CACHE_MIN_TOKENS = 1024
CACHE_STEP_TOKENS = 128
# Earlier prompts compared per scope, and scopes kept (least recently used forgotten first):
# the provider evicts an idle prefix within minutes, and a persona's requests come together.
HISTORY_PER_SCOPE = 32
MAX_SCOPES = 256


def common_prefix(a: str, b: str) -> int:
    """Length of the longest common prefix (binary search over C-speed slice comparisons)."""
    low, high = 0, min(len(a), len(b))
    while low < high:
        middle = (low + high + 1) // 2
        if a[:middle] == b[:middle]:
            low = middle
        else:
            high = middle - 1
    return low


class PromptPrefixCache:
    """Remembers recent prompts per scope and says how much of a new one the provider would cache.

    A scope is whatever the provider keys its cache by: the model and the
    ``prompt_cache_key`` for the fake server, the persona for the simulator.
    Thread-safe: the fake server answers from several threads.
    """

    def __init__(self, history: int = HISTORY_PER_SCOPE, max_scopes: int = MAX_SCOPES) -> None:
        self.history = history
        self.max_scopes = max_scopes
        self._prompts: OrderedDict[Hashable, deque[str]] = OrderedDict()
        self._lock = threading.Lock()

    def cached_tokens(
        self, scope: Hashable, messages: Iterable[Mapping[str, Any]], counter: TokenCounter
    ) -> int:
        """Cached tokens of this prompt: its longest prefix shared with one of the scope's last
        prompts, counted by ``counter``; the prompt is then remembered for the next ones."""
        text = "".join(f"{m.get('role')}\n{m.get('content')}\n" for m in messages)
        with self._lock:
            earlier = self._prompts.get(scope)
            if earlier is None:
                earlier = self._prompts[scope] = deque(maxlen=self.history)
                if len(self._prompts) > self.max_scopes:
                    self._prompts.popitem(last=False)
            else:
                self._prompts.move_to_end(scope)
            previous = list(earlier)
            earlier.append(text)
        shared = text[: max((common_prefix(text, other) for other in previous), default=0)]
        if len(shared.encode("utf-8")) < CACHE_MIN_TOKENS:  # a token is at least one byte
            return 0
        tokens = counter.count(shared)
        return 0 if tokens < CACHE_MIN_TOKENS else tokens // CACHE_STEP_TOKENS * CACHE_STEP_TOKENS

    def clear(self) -> None:
        with self._lock:
            self._prompts.clear()
