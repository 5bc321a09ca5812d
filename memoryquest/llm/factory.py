"""Build the client the settings ask for."""

from __future__ import annotations

import threading
from pathlib import Path

from memoryquest.llm.backends import ChatBackend, EmbeddingBackend
from memoryquest.llm.batch_sets import BatchOptions
from memoryquest.llm.budget import Throughput
from memoryquest.llm.cache import ResponseCache
from memoryquest.llm.client import ModelClient
from memoryquest.llm.errors import LLMConfigurationError
from memoryquest.llm.exchange import ChatExchange
from memoryquest.llm.limiter import RateLimiter, RetryPolicy
from memoryquest.llm.local_embedder import MODEL_NAME as LOCAL_MODEL_NAME
from memoryquest.llm.local_embedder import LocalEmbedder
from memoryquest.llm.openai_backend import (
    OpenAIChatBackend,
    OpenAIEmbeddingBackend,
    SdkConnection,
)
from memoryquest.llm.prices import PriceTable
from memoryquest.llm.servers import PROFILES, guess_kind
from memoryquest.llm.shared_limit import SharedRequestLimit
from memoryquest.llm.simulated import SimulatedChatBackend
from memoryquest.settings import Backend, EmbedderKind, Settings

_shared_local: LocalEmbedder | None = None
_shared_lock = threading.Lock()


def shared_local_embedder() -> LocalEmbedder:
    """One local embedding model per process: loading it takes about half a second."""
    global _shared_local
    with _shared_lock:
        if _shared_local is None:
            _shared_local = LocalEmbedder()
        return _shared_local


def build_chat_backend(settings: Settings) -> ChatBackend:
    endpoint = settings.endpoint
    backend = endpoint.resolved_backend()
    if backend is Backend.SIMULATED:
        return SimulatedChatBackend(seed=settings.seed)
    if backend is Backend.AZURE and not (endpoint.azure_endpoint and endpoint.api_key):
        raise LLMConfigurationError(
            "backend 'azure' needs endpoint.azure_endpoint and endpoint.api_key "
            "(or AZURE_OPENAI_ENDPOINT and AZURE_OPENAI_API_KEY)"
        )
    if endpoint.api_key is None and not endpoint.base_url and backend is Backend.OPENAI:
        raise LLMConfigurationError(
            "backend 'openai' needs endpoint.api_key (or OPENAI_API_KEY), or endpoint.base_url for a server without keys"
        )
    return OpenAIChatBackend(
        model=endpoint.chat_model,
        connection=_connection(settings, backend.value, endpoint.base_url),
        seed=settings.seed,
        send_variables=endpoint.simulator_hints,
        prompt_cache_key=endpoint.prompt_cache_key,
        server=endpoint.server,
        context_window=endpoint.context_window,
    )


def embeddings_from_endpoint(settings: Settings) -> bool:
    """Whether embeddings come from an embeddings endpoint rather than the bundled local model.

    ``auto``: the endpoint's own for OpenAI and Azure; for any other chat server
    only when an embeddings server or model is named (a chat server seldom
    serves ``text-embedding-3-small``, and γ is calibrated per embedder).
    """
    endpoint = settings.endpoint
    if endpoint.embedder != EmbedderKind.AUTO:
        return endpoint.embedder == EmbedderKind.OPENAI
    backend = endpoint.resolved_backend()
    if backend is Backend.SIMULATED:
        return False
    named = (
        endpoint.embedding_base_url is not None or "embedding_model" in endpoint.model_fields_set
    )
    kind = guess_kind(endpoint.server, endpoint.base_url, endpoint.azure_endpoint)
    return named or PROFILES[kind].openai_embeddings


def build_embedding_backend(settings: Settings) -> EmbeddingBackend:
    endpoint = settings.endpoint
    backend = endpoint.resolved_backend()
    if not embeddings_from_endpoint(settings):
        if endpoint.local_embedding_model != LOCAL_MODEL_NAME:
            raise LLMConfigurationError(
                f"endpoint.local_embedding_model {endpoint.local_embedding_model!r} is not available; "
                f"the bundled local model is {LOCAL_MODEL_NAME!r}"
            )
        return shared_local_embedder()
    if backend is Backend.SIMULATED and endpoint.api_key is None and not endpoint.base_url:
        raise LLMConfigurationError("embedder 'openai' needs endpoint.api_key or endpoint.base_url")
    return OpenAIEmbeddingBackend(
        model=endpoint.embedding_model,
        connection=_connection(
            settings,
            Backend.AZURE.value if backend is Backend.AZURE else Backend.OPENAI.value,
            endpoint.embedding_base_url or endpoint.base_url,
        ),
    )


def _connection(settings: Settings, kind: str, base_url: str | None) -> SdkConnection:
    """The endpoint's key, organization, Azure address and timeout, for a server of ``kind``."""
    endpoint = settings.endpoint
    return SdkConnection(
        kind=kind,
        api_key=endpoint.api_key.get_secret_value() if endpoint.api_key else None,
        base_url=base_url,
        organization=endpoint.organization,
        azure_endpoint=endpoint.azure_endpoint,
        azure_api_version=endpoint.azure_api_version,
        timeout=endpoint.timeout_seconds,
    )


def build_limiter(settings: Settings) -> RateLimiter:
    """The process's limiter; with ``limits.shared_limit_name``, also bound by the run-wide limits."""
    limits = settings.limits
    gate = (
        SharedRequestLimit(
            limits.shared_limit_name, limits.requests_per_minute, limits.tokens_per_minute
        )
        if limits.shared_limit_name
        else None
    )
    return RateLimiter(
        limits.requests_per_minute,
        limits.tokens_per_minute,
        limits.max_concurrency,
        quota_retry_after=limits.quota_retry_after_seconds,
        gate=gate,
    )


def build_client(
    settings: Settings,
    *,
    embedder: EmbeddingBackend | None = None,
    retry: RetryPolicy | None = None,
    prompts_dir: Path | None = None,
) -> ModelClient:
    """Backend from ``endpoint.resolved_backend()``, embedder from ``endpoint.embedder``.

    ``embedder`` replaces the configured one (tests share one local model);
    ``retry`` overrides the backoff timing (tests use tiny delays).
    """
    limits = settings.limits
    endpoint = settings.endpoint
    chat = build_chat_backend(settings)
    batch = None
    if endpoint.batch and not chat.simulated:  # the simulator has nothing to batch
        batch = BatchOptions(
            poll_seconds=endpoint.batch_poll_seconds,
            max_poll_seconds=max(endpoint.batch_max_poll_seconds, endpoint.batch_poll_seconds),
            rounds=endpoint.batch_rounds,
            collect_seconds=endpoint.batch_collect_seconds,
            enqueued_tokens_max=endpoint.batch_enqueued_tokens_max,
            stages=frozenset(endpoint.batch_stages),
        )
    exchange = ChatExchange(
        chat,
        cache=ResponseCache(settings.cache_dir, enabled=settings.cache.enabled),
        limiter=build_limiter(settings),
        retry=retry
        or RetryPolicy(
            max_retries=settings.endpoint.max_retries,
            base_delay=limits.retry_base_seconds,
            max_delay=limits.retry_max_seconds,
        ),
        prices=PriceTable.load(settings.prices_file),
        breaker_failures=limits.circuit_breaker_failures,
        strict_schema=settings.endpoint.strict_schema,
        prompts_dir=prompts_dir,
        throughput=Throughput(endpoint.tokens_per_second),
        base_timeout=endpoint.timeout_seconds,
        concurrency_from_server="max_concurrency" not in limits.model_fields_set,
    )
    client = ModelClient(exchange, embedder or build_embedding_backend(settings), batch=batch)
    if endpoint.judge_model and not chat.simulated:
        client.judge_client = _judge_client(settings, client, retry, prompts_dir)
    return client


def _judge_client(
    settings: Settings, author: ModelClient, retry: RetryPolicy | None, prompts_dir: Path | None
) -> ModelClient:
    """The judge model's client: its own backend, the author's cache, ledger and embedder, and
    the author's limiter when both models share a server."""
    endpoint = settings.endpoint
    elsewhere = endpoint.judge_base_url is not None
    judged = settings.model_copy(
        update={
            "endpoint": endpoint.model_copy(
                update={
                    "chat_model": endpoint.judge_model,
                    "judge_model": None,
                    "base_url": endpoint.judge_base_url or endpoint.base_url,
                    "context_window": None if elsewhere else endpoint.context_window,
                }
            )
        }
    )
    judge = build_client(judged, embedder=author.embedder, retry=retry, prompts_dir=prompts_dir)
    judge.share(author, limiter=not elsewhere)
    return judge


def describe_endpoint(settings: Settings) -> str | None:
    """The run's first words on where requests go: the server kind, and where embeddings come from.

    None for the simulator. Said once at the start of a run, since a changed
    embedder changes every γ (the similarity gates are calibrated per embedder).
    """
    endpoint = settings.endpoint
    backend = endpoint.resolved_backend()
    if backend is Backend.SIMULATED:
        return None
    kind = guess_kind(endpoint.server, endpoint.base_url, endpoint.azure_endpoint)
    where = endpoint.base_url or endpoint.azure_endpoint or "OpenAI"
    if embeddings_from_endpoint(settings):
        embeddings = (
            f"embeddings: {endpoint.embedding_model} at {endpoint.embedding_base_url or where}"
        )
    else:
        embeddings = (
            f"embeddings: the local {LOCAL_MODEL_NAME} model (set endpoint.embedding_base_url or "
            "endpoint.embedding_model for an embeddings server; γ is per embedder)"
        )
    label = "server kind from /models at the first request" if kind == "compatible" else kind
    return f"endpoint {where} ({label}), chat model {endpoint.chat_model}; {embeddings}"
