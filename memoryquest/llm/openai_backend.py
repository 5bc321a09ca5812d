"""OpenAI, Azure OpenAI and any OpenAI-compatible server, through the official async SDK.

The SDK runs with ``max_retries=0``: one HTTP attempt per call, so the
client's own limiter, backoff and circuit breaker are the only policy.
SDK exceptions become ``memoryquest.llm.errors`` backend errors here and
nowhere else; stages never import ``openai``. On the way, the SDK exception
itself is scrubbed (:func:`scrub_sdk_error`): an endpoint that echoes the key
in its error body must not get it into a traceback.

The SDK's HTTP connection pool belongs to the event loop that created it,
so one SDK client is kept per running loop.
"""

from __future__ import annotations

import asyncio
import base64
import email.utils
import time
import weakref
from typing import Any

import numpy as np

from memoryquest.llm.backends import ChatCall, ChatResult, EmbeddingResult, OutputMode
from memoryquest.llm.errors import (
    AuthenticationBackendError,
    LLMConfigurationError,
    PermanentBackendError,
    ResponseFormatRejectedError,
    TransientBackendError,
)
from memoryquest.llm.hints import encode_hints
from memoryquest.llm.schema import schema_instruction
from memoryquest.redaction import redact, redact_text, register_secret

OPENAI_DEFAULT_URL = "https://api.openai.com/v1"

# Models that reject temperature other than the default (reasoning models).
_FIXED_TEMPERATURE_PREFIXES = ("o1", "o3", "o4", "gpt-5")
# Words in an HTTP 400 that mean the server refuses the requested output format (online or in a batch line).
RESPONSE_FORMAT_WORDS = (
    "response_format",
    "json_schema",
    "json_object",
    "structured output",
    "strict",
)
EMBEDDING_DIMENSIONS = {
    "text-embedding-3-small": 1536,
    "text-embedding-3-large": 3072,
    "text-embedding-ada-002": 1536,
}


class _SdkClients:
    """One ``AsyncOpenAI`` (or Azure) client per event loop."""

    def __init__(self, factory: Any) -> None:
        self._factory = factory
        self._clients: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, Any] = (
            weakref.WeakKeyDictionary()
        )

    def get(self) -> Any:
        loop = asyncio.get_running_loop()
        client = self._clients.get(loop)
        if client is None:
            client = self._clients[loop] = self._factory()
        return client

    async def aclose(self) -> None:
        client = self._clients.pop(asyncio.get_running_loop(), None)
        if client is not None:
            await client.close()


def make_sdk_factory(
    *,
    kind: str,
    api_key: str | None,
    base_url: str | None,
    organization: str | None,
    azure_endpoint: str | None,
    azure_api_version: str,
    timeout: float,
) -> Any:
    """A zero-argument callable building the SDK client.

    ``openai`` takes seconds to import, so it is imported here, when the
    backend is built, rather than inside the first request on the event loop.
    The key is registered with the redactor, so no message can carry it.
    """
    import openai

    register_secret(api_key)

    def build() -> Any:
        try:
            if kind == "azure":
                return openai.AsyncAzureOpenAI(
                    azure_endpoint=azure_endpoint or "",
                    api_version=azure_api_version,
                    api_key=api_key,
                    timeout=timeout,
                    max_retries=0,
                )
            return openai.AsyncOpenAI(
                api_key=api_key or ("EMPTY" if base_url else None),
                base_url=base_url,
                organization=organization,
                timeout=timeout,
                max_retries=0,
            )
        except openai.OpenAIError as exc:
            raise LLMConfigurationError(f"cannot build the {kind} client: {exc}") from None

    return build


def scrub_sdk_error(exc: BaseException) -> None:
    """Redact an SDK exception in place: its args, ``message`` and ``body`` (the server's error text)."""
    exc.args = tuple(redact_text(a) if isinstance(a, str) else a for a in exc.args)
    message = getattr(exc, "message", None)
    if isinstance(message, str):
        exc.message = redact_text(message)  # type: ignore[attr-defined]
    body = getattr(exc, "body", None)
    if body is not None:
        exc.body = redact(body)  # type: ignore[attr-defined]


def parse_retry_after(headers: Any) -> float | None:
    """Seconds from ``retry-after-ms`` or ``retry-after`` (seconds or an HTTP date)."""
    if headers is None:
        return None
    for name, divisor in (("retry-after-ms", 1000.0), ("retry-after", 1.0)):
        raw = headers.get(name)
        if raw is None:
            continue
        try:
            return max(0.0, float(raw) / divisor)
        except ValueError:
            pass
    raw = headers.get("retry-after")
    if raw:
        try:
            parsed = email.utils.parsedate_to_datetime(raw)
            return max(0.0, parsed.timestamp() - time.time())
        except (TypeError, ValueError):
            return None
    return None


def _header_number(headers: Any, name: str) -> float | None:
    raw = headers.get(name) if headers is not None else None
    try:
        return float(raw) if raw is not None else None
    except ValueError:
        return None


def quota_headers(headers: Any) -> dict[str, Any]:
    """What a 429's ``x-ratelimit-*`` headers say: a quota is spent (remaining at 0), and its limits."""
    remaining = [
        _header_number(headers, f"x-ratelimit-remaining-{kind}") for kind in ("requests", "tokens")
    ]
    return {
        "quota": any(value is not None and value <= 0 for value in remaining),
        "limit_requests": _header_number(headers, "x-ratelimit-limit-requests"),
        "limit_tokens": _header_number(headers, "x-ratelimit-limit-tokens"),
    }


def translate_error(exc: Exception, mode: OutputMode | None = None) -> Exception:
    """An SDK exception as a backend error the client knows how to handle (both redacted)."""
    import openai

    scrub_sdk_error(exc)

    if isinstance(exc, openai.APITimeoutError):
        return TransientBackendError(f"request timed out: {exc}", kind="timeout")
    if isinstance(exc, openai.APIConnectionError):
        return TransientBackendError(f"connection failed: {exc}", kind="connection")
    if isinstance(exc, openai.APIResponseValidationError):
        return TransientBackendError(
            f"malformed response body: {exc}", kind="server", status=exc.response.status_code
        )
    if isinstance(exc, openai.APIStatusError):
        status = exc.status_code
        retry_after = parse_retry_after(exc.response.headers)
        body = exc.body if isinstance(exc.body, dict) else {}
        code = str(body.get("code") or "")
        detail = f"HTTP {status}: {exc.message}"
        if status in (401, 403):
            return AuthenticationBackendError(detail, status=status)
        if status == 429:
            if code == "insufficient_quota" or "insufficient_quota" in exc.message:
                return PermanentBackendError(
                    f"{detail} (the account has no quota left)", status=status
                )
            return TransientBackendError(
                detail,
                kind="rate_limit",
                status=status,
                retry_after=retry_after,
                **quota_headers(exc.response.headers),
            )
        if status >= 500 or status in (408, 409):
            return TransientBackendError(
                detail, kind="server", status=status, retry_after=retry_after
            )
        if status == 400 and mode in (OutputMode.JSON_SCHEMA, OutputMode.JSON_OBJECT):
            text = f"{exc.message} {body.get('param') or ''}".lower()
            if any(word in text for word in RESPONSE_FORMAT_WORDS):
                return ResponseFormatRejectedError(detail, status=status)
        return PermanentBackendError(detail, status=status)
    return exc


class OpenAIChatBackend:
    """Chat completions with structured output; one HTTP attempt per ``chat`` call."""

    simulated = False

    def __init__(
        self,
        *,
        kind: str = "openai",
        model: str,
        base_url: str | None = None,
        api_key: str | None = None,
        organization: str | None = None,
        azure_endpoint: str | None = None,
        azure_api_version: str = "2024-10-21",
        timeout: float = 60.0,
        seed: int = 0,
        send_variables: bool = False,
        prompt_cache_key: bool | None = None,
    ) -> None:
        self.name = kind
        self.model = model
        self.base_url = azure_endpoint if kind == "azure" else base_url
        self.seed = seed
        # The prompt's variables go along only when asked (endpoint.simulator_hints: the fake server).
        self.send_variables = send_variables
        # Official endpoints want max_completion_tokens; compatible servers mostly know max_tokens.
        self._official = kind == "azure" or base_url is None or "api.openai.com" in (base_url or "")
        # prompt_cache_key: by default only where it is known to be accepted (OpenAI itself).
        openai_itself = kind == "openai" and (base_url is None or "api.openai.com" in base_url)
        self.send_cache_key = openai_itself if prompt_cache_key is None else prompt_cache_key
        self._clients = _SdkClients(
            make_sdk_factory(
                kind=kind,
                api_key=api_key,
                base_url=base_url,
                organization=organization,
                azure_endpoint=azure_endpoint,
                azure_api_version=azure_api_version,
                timeout=timeout,
            )
        )

    def request_body(self, call: ChatCall) -> dict[str, Any]:
        """The keyword arguments of ``chat.completions.create`` for this call."""
        messages = [dict(m) for m in call.messages]
        if call.mode is not OutputMode.JSON_SCHEMA:
            note = schema_instruction(call.schema)
            if messages and messages[0]["role"] == "system":
                messages[0]["content"] = f"{messages[0]['content']}\n\n{note}"
            else:
                messages.insert(0, {"role": "system", "content": note})
        body: dict[str, Any] = {"model": self.model, "messages": messages, "seed": call.seed}
        if not self.model.lower().startswith(_FIXED_TEMPERATURE_PREFIXES):
            body["temperature"] = call.request.temperature
        body["max_completion_tokens" if self._official else "max_tokens"] = call.max_output_tokens
        if call.mode is OutputMode.JSON_SCHEMA and call.strict_schema is not None:
            body["response_format"] = {
                "type": "json_schema",
                "json_schema": {
                    "name": call.schema_name,
                    "schema": call.strict_schema,
                    "strict": True,
                },
            }
        elif call.mode is OutputMode.JSON_OBJECT:
            body["response_format"] = {"type": "json_object"}
        scope = call.request.prompt_cache_scope() if self.send_cache_key else None
        if scope:
            body["prompt_cache_key"] = scope
        extra = dict(call.request.extra)
        if extra:
            body["extra_body"] = extra
        body["extra_headers"] = encode_hints(
            call.request.template_id,
            call.template_version,
            call.seed,
            call.request.variables if self.send_variables else None,
        )
        return body

    def sdk_client(self) -> Any:
        """The SDK client of the running event loop (the Batch API runner's Files and Batches calls)."""
        return self._clients.get()

    @property
    def endpoint_url(self) -> str:
        """Where requests go, for messages (the SDK's default for the official endpoint)."""
        return self.base_url or OPENAI_DEFAULT_URL

    async def check_access(self) -> None:
        """One free request (``GET /models``); raises the translated error when it fails."""
        import openai

        client = self._clients.get()
        try:
            await client.models.list()
        except openai.OpenAIError as exc:
            raise translate_error(exc) from None

    async def chat(self, call: ChatCall) -> ChatResult:
        import openai

        client = self._clients.get()
        try:
            completion = await client.chat.completions.create(**self.request_body(call))
        except openai.OpenAIError as exc:
            raise translate_error(exc, call.mode) from exc
        if not completion.choices:
            raise TransientBackendError("the server answered without choices", kind="server")
        choice = completion.choices[0]
        message = choice.message
        usage = completion.usage
        cached = 0
        if usage is not None and usage.prompt_tokens_details is not None:
            cached = usage.prompt_tokens_details.cached_tokens or 0
        return ChatResult(
            text=message.content,
            finish_reason=choice.finish_reason or "stop",
            input_tokens=usage.prompt_tokens if usage else 0,
            output_tokens=usage.completion_tokens if usage else 0,
            cached_tokens=cached,
            refusal=getattr(message, "refusal", None),
            usage_reported=usage is not None,
            model=completion.model,
        )

    async def aclose(self) -> None:
        await self._clients.aclose()


def _as_vector(raw: Any) -> np.ndarray:
    if isinstance(raw, str):  # encoding_format=base64
        return np.frombuffer(base64.b64decode(raw), dtype="<f4").astype(np.float32)
    return np.asarray(raw, dtype=np.float32)


def normalise_rows(vectors: np.ndarray) -> np.ndarray:
    vectors = np.asarray(vectors, dtype=np.float32)
    if vectors.size == 0:
        return vectors
    norms = np.linalg.norm(vectors, axis=1, keepdims=True)
    return vectors / np.clip(norms, 1e-12, None)


class OpenAIEmbeddingBackend:
    """``/embeddings``: batched, answers put back in input order by their ``index``."""

    remote = True

    def __init__(
        self,
        *,
        kind: str = "openai",
        model: str = "text-embedding-3-small",
        base_url: str | None = None,
        api_key: str | None = None,
        organization: str | None = None,
        azure_endpoint: str | None = None,
        azure_api_version: str = "2024-10-21",
        timeout: float = 60.0,
        max_batch_texts: int = 256,
    ) -> None:
        self.kind = kind
        self.name = model
        self.model = model
        self.base_url = azure_endpoint if kind == "azure" else base_url
        self.max_batch_texts = max_batch_texts
        self.dimension = EMBEDDING_DIMENSIONS.get(model)
        self._clients = _SdkClients(
            make_sdk_factory(
                kind=kind,
                api_key=api_key,
                base_url=base_url,
                organization=organization,
                azure_endpoint=azure_endpoint,
                azure_api_version=azure_api_version,
                timeout=timeout,
            )
        )

    async def embed_with_usage(self, texts: list[str]) -> EmbeddingResult:
        import openai

        client = self._clients.get()
        try:
            response = await client.embeddings.create(model=self.model, input=texts)
        except openai.OpenAIError as exc:
            raise translate_error(exc) from exc
        rows = sorted(response.data, key=lambda item: item.index)
        if len(rows) != len(texts) or [r.index for r in rows] != list(range(len(texts))):
            raise TransientBackendError(
                f"the server returned {len(rows)} embeddings for {len(texts)} texts", kind="server"
            )
        vectors = np.stack([_as_vector(r.embedding) for r in rows])
        if self.dimension is None:
            self.dimension = int(vectors.shape[1])
        usage = response.usage
        return EmbeddingResult(
            vectors=normalise_rows(vectors),
            tokens=usage.prompt_tokens if usage else 0,
            usage_reported=usage is not None,
        )

    async def embed(self, texts: list[str]) -> np.ndarray:
        """One attempt, no cache or limiter: use ``ModelClient.embed`` for those."""
        if not texts:
            return np.zeros((0, self.dimension or 0), dtype=np.float32)
        return (await self.embed_with_usage(texts)).vectors

    async def aclose(self) -> None:
        await self._clients.aclose()
