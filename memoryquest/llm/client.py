"""The one door to language models and embedders for every stage.

``ModelClient`` answers a stage's structured chat requests through a request
processor, online (:mod:`memoryquest.llm.processors`) or, for the stages of
``endpoint.batch_stages``, the Batch API (:mod:`memoryquest.llm.batch`). The
policy both share, rendering, the cache, the limiter, retries honouring
Retry-After, the circuit breaker, turning answers into response models
(repairing or retrying refusals, truncations and filtered answers a bounded
number of times, never accepting them silently) and accounting per stage,
lives in one :class:`~memoryquest.llm.exchange.ChatExchange`. Embeddings go
through the same limiter, retries and ledger. Backends make single attempts.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable, Sequence
from typing import Any, TypeVar

import numpy as np

from memoryquest.contracts import Stage, StageUsage, Usage
from memoryquest.llm.accounting import UsageLedger
from memoryquest.llm.attempt import TRUNCATION_BUDGET_CAP
from memoryquest.llm.backends import ChatBackend, ChatCall, EmbeddingBackend, EmbeddingResult
from memoryquest.llm.batch import BatchProcessor
from memoryquest.llm.batch_openai import openai_batch_api
from memoryquest.llm.batch_sets import BatchOptions
from memoryquest.llm.budget import Fit
from memoryquest.llm.cache import CacheStats, embedding_key
from memoryquest.llm.endpoint_policy import check_access
from memoryquest.llm.errors import (
    CircuitOpenError,
    LLMAuthenticationError,
    LLMConfigurationError,
    LLMContentFilterError,
    LLMContextLengthError,
    LLMError,
    LLMOutputError,
    LLMRefusalError,
    LLMTransportError,
    LLMTruncatedError,
)
from memoryquest.llm.exchange import ChatExchange
from memoryquest.llm.limiter import RateLimiter
from memoryquest.llm.openai_backend import normalise_rows
from memoryquest.llm.processors import OnlineProcessor, RequestProcessor, gather_answers
from memoryquest.llm.request import LLMRequest, ResponseT
from memoryquest.llm.tokens import token_counter
from memoryquest.redaction import redact_loggers

__all__ = [
    "TRUNCATION_BUDGET_CAP",
    "CircuitOpenError",
    "LLMAuthenticationError",
    "LLMConfigurationError",
    "LLMContentFilterError",
    "LLMContextLengthError",
    "LLMError",
    "LLMOutputError",
    "LLMRefusalError",
    "LLMTransportError",
    "LLMTruncatedError",
    "ModelClient",
    "check_access",
]

P = TypeVar("P")

# Whatever the client layer logs is redacted too (its errors redact themselves: memoryquest.llm.errors).
redact_loggers(
    "memoryquest.llm.client",
    "memoryquest.llm.exchange",
    "memoryquest.llm.batch",
    "memoryquest.llm.batch_queue",
    "memoryquest.llm.batch_rounds",
    "memoryquest.llm.batch_state",
    "memoryquest.llm.openai_backend",
    "memoryquest.llm.prices",
    "memoryquest.llm.tokens",
    "openai",
    "httpx",
)

# Remote embedding requests stay well under the provider's 300k-token per-request limit.
EMBEDDING_BATCH_TOKENS = 200_000


class ModelClient:
    """Structured chat completions and embeddings with caching, limits, retries and accounting.

    Build it with ``memoryquest.llm.factory.build_client(settings)``. Built
    from a bare backend (tests, benchmarks), it neither caches nor (for the
    simulator) rate-limits.
    """

    def __init__(
        self,
        chat: ChatBackend | ChatExchange,
        embedder: EmbeddingBackend,
        *,
        batch: BatchOptions | None = None,
    ) -> None:
        """``chat``: a backend, sent to with the default policy, or an exchange built with its own."""
        self.exchange = chat if isinstance(chat, ChatExchange) else ChatExchange(chat)
        self.online = OnlineProcessor(self.exchange)
        # Batch API mode for the stages it takes (None: every request online); see memoryquest.llm.batch.
        self.batch = (
            BatchProcessor(self.exchange, batch, openai_batch_api(self.exchange.chat_backend))
            if batch is not None
            else None
        )
        self.embedder = embedder
        self._embedding_tokens = token_counter(self._embedding_model)
        # Another model's client for judges' requests (endpoint.judge_model); None: this one judges.
        self.judge_client: ModelClient | None = None

    # --- what the rest of the code reads ---------------------------------------------------

    @property
    def chat_backend(self) -> ChatBackend:
        return self.exchange.chat_backend

    @chat_backend.setter
    def chat_backend(self, backend: ChatBackend) -> None:
        self.exchange.chat_backend = backend

    @property
    def ledger(self) -> UsageLedger:
        return self.exchange.ledger

    @property
    def limiter(self) -> RateLimiter | None:
        return self.exchange.limiter

    @property
    def simulated(self) -> bool:
        return self.exchange.simulated

    @property
    def embedder_name(self) -> str:
        return self.embedder.name

    @property
    def judge_model_name(self) -> str:
        """The model that answers judges' requests: the judge's client's when set, else this one's."""
        return (self.judge_client or self).chat_backend.model

    @property
    def cache_stats(self) -> CacheStats:
        return self.exchange.cache.stats if self.exchange.cache is not None else CacheStats()

    def usage(self) -> list[StageUsage]:
        """Tokens, cost, cache hits and time per stage, in first-use order."""
        return self.ledger.rows()

    def total_usage(self) -> Usage:
        """The whole run's usage as one row (stage ``total``)."""
        return self.ledger.total()

    @property
    def _embedding_model(self) -> str:
        return str(getattr(self.embedder, "model", self.embedder.name))

    @property
    def caching(self) -> bool:
        """Whether answers are read from and written to the response cache."""
        return self.exchange.caching

    @property
    def endpoint_url(self) -> str:
        """The chat endpoint, for messages: its base URL (or the SDK's default), else the backend name."""
        return self.exchange.endpoint_url

    async def check_access(self) -> None:
        """Fail fast, before any work, when the endpoint refuses the key."""
        await self.exchange.check_access()

    def share(self, other: ModelClient, *, limiter: bool) -> None:
        """Cache in and bill to ``other``'s cache and ledger, and with ``limiter`` take its place
        in ``other``'s limiter: a judge model's client beside the author's."""
        self.exchange.ledger = other.ledger
        self.exchange.cache = other.exchange.cache
        if limiter:
            self.exchange.limiter = other.limiter

    # --- chat ------------------------------------------------------------------------------

    def processor(self, request: LLMRequest[Any]) -> RequestProcessor:
        """The way ``request`` travels: in a batch when its stage is batched, else online."""
        if self.batch is not None and self.batch.takes(request):
            return self.batch
        return self.online

    async def complete(self, request: LLMRequest[ResponseT]) -> ResponseT:
        """The answer to one request as an instance of ``request.response_model``.

        In Batch API mode (``endpoint.batch``) an uncached request waits in
        the collector and travels in the next batch with every other request
        made meanwhile (see ``memoryquest.llm.batch``). A judge's request goes
        to the judge's client when one is set (``endpoint.judge_model``): the
        author does not grade itself.
        """
        if request.judge and self.judge_client is not None:
            return await self.judge_client.complete(request)
        with self.ledger.timing(request.stage):
            return await self.processor(request).complete(request)

    async def complete_all(
        self, requests: Sequence[LLMRequest[Any]], *, return_exceptions: bool = False
    ) -> list[Any]:
        """All answers, in request order, computed concurrently (the limiter paces them).

        By default the first error cancels the remaining requests and is
        raised; with ``return_exceptions=True`` each failed request's
        ``LLMError`` takes its place in the list instead.

        When every request is batched (``endpoint.batch``), they join the
        collector together (see ``memoryquest.llm.batch``); an error is then
        raised only once every other answer has been cached.
        """
        routed = self.judge_client is not None and any(r.judge for r in requests)
        batch = self.batch
        if not routed and batch is not None and requests and all(batch.takes(r) for r in requests):
            return await batch.complete_all(requests, return_exceptions=return_exceptions)
        return await gather_answers([self.complete(r) for r in requests], return_exceptions)

    # --- fitting the model's context window ------------------------------------------------

    async def prepare(self) -> None:
        """Learn, once, what the server is (profile, window, slots) before the first request."""
        await self.exchange.prepare()

    @property
    def context_window(self) -> int | None:
        return self.exchange.context_window

    async def measure(self, call: ChatCall) -> Fit:
        """``call``'s prompt in the server's tokens against the model's window."""
        return await self.exchange.measure(call)

    async def fits(self, request: LLMRequest[Any]) -> bool:
        """Whether ``request``'s prompt and output allowance fit the model's window (stages trim until it does)."""
        return await self.exchange.fits(request)

    async def first_fitting(
        self, options: Iterable[tuple[LLMRequest[ResponseT], P]]
    ) -> tuple[LLMRequest[ResponseT], P]:
        """The first of ``options`` that fits the model's window (see :meth:`ChatExchange.first_fitting`)."""
        return await self.exchange.first_fitting(options)

    # --- embeddings ------------------------------------------------------------------------

    async def embed(self, texts: Sequence[str], stage: Stage) -> np.ndarray:
        """One L2-normalised row per text, in input order (cosine = dot product)."""
        texts = list(texts)
        with self.ledger.timing(stage):
            return await self._embed(texts, stage)

    def _dimension(self) -> int:
        return int(getattr(self.embedder, "dimension", None) or 0)

    async def _embed(self, texts: list[str], stage: Stage) -> np.ndarray:
        if not texts:
            return np.zeros((0, self._dimension()), dtype=np.float32)
        unique = list(dict.fromkeys(texts))
        vectors: dict[str, np.ndarray] = {}
        keys: dict[str, str] = {}
        if self.caching:
            assert self.exchange.cache is not None
            for text in unique:
                keys[text] = embedding_key(
                    backend=_embedder_kind(self.embedder),
                    base_url=self.embedder.base_url,
                    model=self._embedding_model,
                    text=text,
                )
                found = self.exchange.cache.get_vector(keys[text])
                if found is not None:
                    vectors[text] = found
            self.ledger.cache_hits(stage, len(vectors))
        missing = [text for text in unique if text not in vectors]
        if missing:
            batches = self._batches(missing)
            results = await asyncio.gather(*(self._embed_batch(batch, stage) for batch in batches))
            for batch, rows in zip(batches, results, strict=True):
                for text, row in zip(batch, rows, strict=True):
                    vectors[text] = row
                    if keys:
                        assert self.exchange.cache is not None
                        self.exchange.cache.put_vector(keys[text], row)
        return np.stack([vectors[text] for text in texts]).astype(np.float32, copy=False)

    def _batches(self, texts: list[str]) -> list[list[str]]:
        if not getattr(self.embedder, "remote", False):
            return [texts]
        limit = int(getattr(self.embedder, "max_batch_texts", 256))
        if len(texts) <= limit and sum(map(len, texts)) * 4 <= EMBEDDING_BATCH_TOKENS:
            return [texts]  # a token is at least a byte, a character at most 4: nothing to count
        batches: list[list[str]] = [[]]
        tokens = 0
        for text in texts:
            size = self._embedding_tokens.count(text)
            if batches[-1] and (
                len(batches[-1]) >= limit or tokens + size > EMBEDDING_BATCH_TOKENS
            ):
                batches.append([])
                tokens = 0
            batches[-1].append(text)
            tokens += size
        return batches

    async def _embed_batch(self, batch: list[str], stage: Stage) -> np.ndarray:
        embedder = self.embedder
        remote = bool(getattr(embedder, "remote", False))

        async def send() -> EmbeddingResult:
            with_usage = getattr(embedder, "embed_with_usage", None)
            if callable(with_usage):
                result: EmbeddingResult = await with_usage(batch)
                return result
            return EmbeddingResult(vectors=await embedder.embed(batch))

        if remote and self.limiter is not None:
            # Held against tokens/min until the answer says what it used: a ceiling from the
            # characters (about four to a token, taken generously), not a tokenizer pass over every text.
            reserve = sum(len(text) for text in batch) // 3 + len(batch)
            result = await self.exchange.call_endpoint(
                send,
                reserve=reserve,
                used=lambda r: r.tokens or reserve,
                where=f"embeddings (stage {stage})",
            )
        else:
            result = await send()
        if len(result.vectors) != len(batch):
            raise LLMOutputError(
                f"embedder {embedder.name} returned {len(result.vectors)} vectors for {len(batch)} texts"
            )
        if result.usage_reported:
            tokens, approximate = result.tokens, False
        else:
            tokens = self._embedding_tokens.count_many(batch)
            approximate = self._embedding_tokens.approximate
        cost = (
            self.exchange.prices.cost(self._embedding_model, tokens)  # embeddings always go online
            if remote
            else 0.0
        )
        self.ledger.embedding(stage, tokens=tokens, cost_usd=cost, approximate=approximate)
        return normalise_rows(result.vectors)

    async def aclose(self) -> None:
        """Close HTTP connections held for the running event loop (and stop collecting batch requests on it)."""
        if self.judge_client is not None:
            await self.judge_client.aclose()
        await self.online.aclose()
        if self.batch is not None:
            await self.batch.aclose()
        for backend in (self.chat_backend, self.embedder):
            close = getattr(backend, "aclose", None)
            if callable(close):
                await close()


def _embedder_kind(embedder: EmbeddingBackend) -> str:
    return str(
        getattr(embedder, "kind", "remote" if getattr(embedder, "remote", False) else "local")
    )
