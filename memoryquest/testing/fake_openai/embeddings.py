"""Embeddings are a cheap, deterministic bag-of-words hash (each word adds ±1
to a hashed dimension, then L2 normalisation): texts sharing words come out
similar, but it is not a semantic model — use the local embedder for that.
"""

from __future__ import annotations

import base64
import hashlib
import re
from collections.abc import Callable
from typing import Any

import numpy as np

from memoryquest.llm.tokens import token_counter
from memoryquest.testing.fake_openai.exchange import ErrorAnswer, LoggedRequest, Reply
from memoryquest.testing.fake_openai.faults import Fault

EMBEDDING_DIMENSION = 256
"""The fake servers' vector length when a request names none."""


def hashed_embedding(text: str, dimension: int) -> list[float]:
    """Deterministic bag-of-words hashing; see the module docstring."""
    vector = np.zeros(dimension, dtype=np.float64)
    words = re.findall(r"\w+", text.lower()) or [text]
    for word in words:
        digest = hashlib.blake2b(word.encode("utf-8"), digest_size=8).digest()
        value = int.from_bytes(digest, "little")
        vector[value % dimension] += 1.0 if (value >> 63) & 1 else -1.0
    norm = float(np.linalg.norm(vector)) or 1.0
    return [float(x) for x in vector / norm]


def embeddings_answer(body: dict[str, Any], texts: list[str], dimension: int) -> dict[str, Any]:
    """The answer to an embeddings request for ``texts``: each text's hashed vector (the same
    for a text whatever batch it comes in), as floats or base64 as the request asks."""
    as_base64 = body.get("encoding_format") == "base64"
    dimension = int(body.get("dimensions") or dimension)
    data = []
    for index, text in enumerate(texts):
        vector = hashed_embedding(text, dimension)
        encoded: Any = (
            base64.b64encode(np.asarray(vector, dtype="<f4").tobytes()).decode("ascii")
            if as_base64
            else vector
        )
        data.append({"object": "embedding", "index": index, "embedding": encoded})
    tokens = token_counter(body["model"]).count_many(texts)
    return {
        "object": "list",
        "data": data,
        "model": body["model"],
        "usage": {"prompt_tokens": tokens, "total_tokens": tokens},
    }


class Embeddings:
    """``POST /v1/embeddings`` of :class:`FakeOpenAIServer` (a mixin of the server)."""

    # Set by the server's constructor (``server``).
    latency: float
    embedding_dimension: int
    shuffle_embeddings: bool
    _admit: Callable[..., Fault | None]
    _sleep: Callable[[float], None]

    def _embeddings(self, entry: LoggedRequest, headers: dict[str, str]) -> Reply:
        body = entry.body
        if not isinstance(body, dict) or not isinstance(body.get("model"), str):
            raise ErrorAnswer(400, "you must provide a model parameter", param="model")
        texts = body.get("input")
        if isinstance(texts, str):
            texts = [texts]
        if (
            not isinstance(texts, list)
            or not texts
            or not all(isinstance(t, str) and t for t in texts)
        ):
            raise ErrorAnswer(
                400, "input must be a non-empty string or array of non-empty strings", param="input"
            )
        self._admit(entry, headers, "embeddings")
        self._sleep(self.latency)
        answer = embeddings_answer(body, texts, self.embedding_dimension)
        if self.shuffle_embeddings:
            answer["data"].reverse()
        return 200, answer, {}
