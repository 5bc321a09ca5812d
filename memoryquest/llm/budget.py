"""How long a request may be, and how long it may take, on the server at hand.

Two measures the client keeps per run: the prompt's size in the server's own
tokens (:class:`PromptMeter`), so that every prompt plus its output allowance
fits the model's context window before it is sent; and the server's output
speed (:class:`Throughput`), so that a request's timeout grows with the answer
it may write instead of one fixed figure a long answer on local hardware
would overrun (and be sent a second time while the server still works on it).
"""

from __future__ import annotations

import threading
from collections import deque
from dataclasses import dataclass

# Until a server has answered, a prompt counted with a tokenizer other than the model's
# is taken to be this much longer (small open models split JSON into more tokens than o200k).
FOREIGN_TOKENIZER_RATIO = 1.35
# Kept on top of the learned ratio: one prompt's ratio varies around the mean of others.
RATIO_MARGIN = 1.1
# The timeout gives the output this many times the time it takes at the measured speed.
TIMEOUT_SLACK = 2.0


@dataclass(frozen=True)
class Fit:
    """A prompt's size against the window; ``window`` None means there is nothing to fit."""

    prompt_tokens: int
    output_tokens: int
    window: int | None

    @property
    def room(self) -> int | None:
        """Output tokens the window leaves after the prompt."""
        return None if self.window is None else self.window - self.prompt_tokens

    @property
    def fits(self) -> bool:
        return self.window is None or self.prompt_tokens + self.output_tokens <= self.window


class PromptMeter:
    """Prompt tokens as the server counts them, estimated from a local tokenizer.

    ``exact``: the local tokenizer is the model's (OpenAI models and tiktoken).
    Otherwise the estimate is scaled by the largest ratio of reported to
    estimated prompt tokens seen so far (at first ``FOREIGN_TOKENIZER_RATIO``),
    with a margin, so it errs long: a prompt trimmed too far costs a little
    context, one sent too long costs its item.
    """

    def __init__(self, *, exact: bool) -> None:
        self.exact = exact
        self._ratio: float | None = None
        self._lock = threading.Lock()

    @property
    def ratio(self) -> float:
        if self.exact:
            return 1.0
        return (self._ratio or FOREIGN_TOKENIZER_RATIO) * RATIO_MARGIN

    def estimate(self, local_count: int) -> int:
        return int(local_count * self.ratio) + 1

    def observe(self, local_count: int, reported: int) -> None:
        """An answered request's prompt: ``local_count`` by our tokenizer, ``reported`` by the server."""
        if self.exact or local_count <= 0 or reported <= 0:
            return
        with self._lock:
            seen = reported / local_count
            self._ratio = seen if self._ratio is None else max(self._ratio, seen)


class Throughput:
    """The server's output speed over its last answers, for sizing timeouts."""

    def __init__(self, assumed_tokens_per_second: float, window: int = 32) -> None:
        self.assumed = assumed_tokens_per_second
        self._samples: deque[tuple[int, float]] = deque(maxlen=window)
        self._lock = threading.Lock()

    def observe(self, output_tokens: int, seconds: float) -> None:
        if output_tokens > 0 and seconds > 0:
            with self._lock:
                self._samples.append((output_tokens, seconds))

    @property
    def measured(self) -> bool:
        return bool(self._samples)

    def tokens_per_second(self) -> float:
        """Output tokens over wall time of the recent answers (prompt time included: it errs slow)."""
        with self._lock:
            if not self._samples:
                return self.assumed
            tokens = sum(t for t, _ in self._samples)
            seconds = sum(s for _, s in self._samples)
        return tokens / seconds

    def timeout(self, output_tokens: int, base_seconds: float) -> float:
        """Time to start answering plus ``TIMEOUT_SLACK`` times the allowance at the measured speed."""
        return base_seconds + TIMEOUT_SLACK * output_tokens / self.tokens_per_second()
