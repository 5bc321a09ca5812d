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
import binascii
import email.utils
import json
import re
import time
import weakref
from dataclasses import dataclass, field, replace
from typing import Any

import httpx
import numpy as np

from memoryquest.llm.backends import ChatCall, ChatResult, EmbeddingResult, OutputMode
from memoryquest.llm.errors import (
    AuthenticationBackendError,
    ContextLengthBackendError,
    FieldRejectedError,
    LLMConfigurationError,
    PermanentBackendError,
    ResponseFormatRejectedError,
    TransientBackendError,
)
from memoryquest.llm.hints import encode_hints
from memoryquest.llm.schema import grammar_schema
from memoryquest.llm.servers import (
    PROFILES,
    ServerFacts,
    ServerProfile,
    Tokenizer,
    discover,
    guess_kind,
    known_window,
    server_root,
)
from memoryquest.redaction import redact, redact_text, register_secret
from memoryquest.settings import ServerKind

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
# Chat-template tokens around a prompt (role markers, the reply's opening) when a server counts the contents alone.
CHAT_TEMPLATE_TOKENS = 16
MESSAGE_TEMPLATE_TOKENS = 8
COUNTED_TEXTS_MAX = 4096  # message texts whose server token count is remembered
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

    def pop(self) -> Any:
        """This loop's client, forgotten (the caller closes it), or None."""
        return self._clients.pop(asyncio.get_running_loop(), None)

    async def aclose(self) -> None:
        client = self.pop()
        if client is not None:
            await client.close()


@dataclass(frozen=True)
class SdkConnection:
    """How the SDK reaches one server: its kind, address, key and timeout (chat and embeddings alike)."""

    kind: str = "openai"
    api_key: str | None = field(default=None, repr=False)
    base_url: str | None = None
    organization: str | None = None
    azure_endpoint: str | None = None
    azure_api_version: str = "2024-10-21"
    timeout: float = 60.0

    @property
    def address(self) -> str | None:
        """The server's URL: the Azure endpoint for Azure, else the base URL (None: OpenAI's own)."""
        return self.azure_endpoint if self.kind == "azure" else self.base_url


def make_sdk_factory(connection: SdkConnection) -> Any:
    """A zero-argument callable building the SDK client.

    ``openai`` takes seconds to import, so it is imported here, when the
    backend is built, rather than inside the first request on the event loop.
    The key is registered with the redactor, so no message can carry it.
    """
    import openai

    register_secret(connection.api_key)

    def build() -> Any:
        try:
            if connection.kind == "azure":
                return openai.AsyncAzureOpenAI(
                    azure_endpoint=connection.azure_endpoint or "",
                    api_version=connection.azure_api_version,
                    api_key=connection.api_key,
                    timeout=connection.timeout,
                    max_retries=0,
                )
            return openai.AsyncOpenAI(
                api_key=connection.api_key or ("EMPTY" if connection.base_url else None),
                base_url=connection.base_url,
                organization=connection.organization,
                timeout=connection.timeout,
                max_retries=0,
            )
        except openai.OpenAIError as exc:
            raise LLMConfigurationError(
                f"cannot build the {connection.kind} client: {exc}"
            ) from None

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


# Phrases servers use when a prompt does not fit (OpenAI, vLLM, llama-cpp-python, llama.cpp, Ollama).
_OVERFLOW = (
    re.compile(r"maximum context length is (\d+)"),
    re.compile(r"context window of (\d+)"),
    re.compile(r"context (?:size|length) (?:of |is )?\(?(\d+)"),
    re.compile(r"exceeds? (?:the )?(?:available )?context (?:size|length|window)"),
    re.compile(r"context_length_exceeded"),
)
# Optional fields a server may refuse; the next attempt leaves the field out.
DROPPABLE_FIELDS = ("prompt_cache_key", "seed", "max_completion_tokens")
_STRUCTURED = (OutputMode.JSON_SCHEMA, OutputMode.JSON_OBJECT_SCHEMA, OutputMode.JSON_OBJECT)


def context_overflow(text: str) -> int | None:
    """The window named in a server's context-length refusal; 0 when it names none, None when ``text`` is no such refusal."""
    for pattern in _OVERFLOW:
        found = pattern.search(text)
        if found:
            return int(found.group(1)) if found.groups() else 0
    return None


def refused_field(
    text: str, status: int, mode: OutputMode | None, sent: frozenset[str] = frozenset()
) -> str | None:
    """The optional field an error refuses, whatever its status: llama.cpp says so with a 500.

    A structured-output word counts for ``response_format`` only when one was
    sent; on a 5xx only the field's own name counts, never the looser words.
    """
    if mode in _STRUCTURED:
        words = RESPONSE_FORMAT_WORDS if status in (400, 422) else RESPONSE_FORMAT_WORDS[:3]
        if any(word in text for word in words):
            return "response_format"
    for name in DROPPABLE_FIELDS:
        if name in sent and name in text:
            return name
    return None


def translate_error(
    exc: Exception, mode: OutputMode | None = None, sent: frozenset[str] = frozenset()
) -> Exception:
    """An SDK exception as a backend error the client knows how to handle (both redacted).

    ``mode`` and ``sent`` (the optional fields in the request) let a refusal
    of one of them be told from any other error.
    """
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
        text = f"{exc.message} {body.get('param') or ''} {code}".lower()
        if status < 500 or status == 501:
            window = context_overflow(text)
            if window is not None:
                return ContextLengthBackendError(detail, window=window or None, status=status)
        refused = refused_field(text, status, mode, sent)
        if refused == "response_format":
            return ResponseFormatRejectedError(detail, status=status)
        if refused is not None:
            return FieldRejectedError(detail, field=refused, status=status)
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
        return PermanentBackendError(detail, status=status)
    return exc


class OpenAIChatBackend:
    """Chat completions with structured output; one HTTP attempt per ``chat`` call.

    What is sent follows the server's profile (``memoryquest.llm.servers``):
    settled from the settings, or from what the server says of itself the
    first time :meth:`prepare` runs. A field the server refuses is left out
    of every later request (:meth:`drop_field`).
    """

    simulated = False

    def __init__(
        self,
        *,
        model: str,
        connection: SdkConnection = SdkConnection(),
        seed: int = 0,
        send_variables: bool = False,
        prompt_cache_key: bool | None = None,
        server: ServerKind = ServerKind.AUTO,
        context_window: int | None = None,
    ) -> None:
        self.name = connection.kind
        self.model = model
        self.base_url = connection.address
        self.seed = seed
        # The prompt's variables go along only when asked (endpoint.simulator_hints: the fake server).
        self.send_variables = send_variables
        self.facts = ServerFacts(
            PROFILES[
                guess_kind(
                    server,
                    connection.base_url,
                    connection.azure_endpoint if connection.kind == "azure" else None,
                )
            ]
        )
        # Settled when the settings name the server, or when there is nothing to ask (OpenAI, Azure).
        self._settled = server is not ServerKind.AUTO or self.facts.profile.kind in (
            ServerKind.OPENAI,
            ServerKind.AZURE,
        )
        self._cache_key_setting = prompt_cache_key
        self._window_setting = context_window
        self._api_key = connection.api_key
        self.dropped: set[str] = set()  # optional fields the server refused
        # Tokens per message text: a stage's fit check and the send-time check count the same
        # prompt, and system prompts repeat across requests; each is asked of the server once.
        self._counted: dict[str, int] = {}
        self._prepare_lock: asyncio.Lock | None = None
        self._http = _SdkClients(lambda: httpx.AsyncClient(timeout=30.0))
        self._clients = _SdkClients(make_sdk_factory(connection))

    # --- what the server is ----------------------------------------------------------------

    @property
    def profile(self) -> ServerProfile:
        return self.facts.profile

    @property
    def strongest_mode(self) -> OutputMode:
        """The strongest structured-output mode this server takes."""
        return self.profile.structured_output

    @property
    def context_window(self) -> int | None:
        """The model's window: the setting, else what the server said, else a hosted model's known one."""
        return self._window_setting or self.facts.context_window or known_window(self.model)

    @property
    def slots(self) -> int | None:
        return self.facts.slots

    def learn_window(self, window: int) -> None:
        """A context-length refusal named the window: later requests are sized to it."""
        if self._window_setting is None:
            self.facts = replace(self.facts, context_window=window)

    async def prepare(self) -> ServerFacts:
        """Ask the server, once, what it is and what it offers (a no-op for OpenAI and Azure)."""
        if self._settled:
            return self.facts
        if self._prepare_lock is None:
            self._prepare_lock = asyncio.Lock()
        async with self._prepare_lock:
            if not self._settled and self.base_url:
                self.facts = await discover(
                    self.base_url, self.model, kind=self.profile.kind, api_key=self._api_key
                )
                self._settled = True
        return self.facts

    async def count_prompt(self, messages: list[dict[str, str]]) -> int | None:
        """The prompt's tokens by the server's own tokenizer; None when it offers none.

        Each message's content is counted as the server tokenizes it, plus a
        few tokens a message for the chat template's role markers.
        """
        tokenizer = self.facts.tokenizer
        if tokenizer is None or not self.base_url:
            return None
        http = self._http.get()
        headers = {"Authorization": f"Bearer {self._api_key}"} if self._api_key else {}
        total = CHAT_TEMPLATE_TOKENS
        url = f"{server_root(self.base_url)}{tokenizer.path}"
        for message in messages:
            text = message["content"]
            if text not in self._counted:
                try:
                    response = await http.post(
                        url, json=tokenizer.body(text, self.model), headers=headers
                    )
                    response.raise_for_status()
                    counted = Tokenizer.count(response.json())
                except (httpx.HTTPError, ValueError):
                    return None
                if len(self._counted) >= COUNTED_TEXTS_MAX:
                    self._counted.clear()
                self._counted[text] = counted
            total += self._counted[text] + MESSAGE_TEMPLATE_TOKENS
        return total

    def drop_field(self, field: str) -> bool:
        """Leave ``field`` out from now on; False when it was already left out (nothing to change)."""
        if field in self.dropped:
            return False
        self.dropped.add(field)
        return True

    # --- requests ----------------------------------------------------------------------------

    @property
    def send_cache_key(self) -> bool:
        """prompt_cache_key: by default only where it is known to be accepted (OpenAI itself)."""
        wanted = (
            self.profile.prompt_cache_key
            if self._cache_key_setting is None
            else self._cache_key_setting
        )
        return wanted and "prompt_cache_key" not in self.dropped

    def request_body(self, call: ChatCall) -> dict[str, Any]:
        """The keyword arguments of ``chat.completions.create`` for this call."""
        profile = self.profile
        body: dict[str, Any] = {"model": self.model, "messages": call.sent_messages()}
        if profile.seed and "seed" not in self.dropped:
            body["seed"] = call.seed
        if not self.model.lower().startswith(_FIXED_TEMPERATURE_PREFIXES):
            body["temperature"] = call.request.temperature
        tokens_field = profile.max_tokens_field
        if tokens_field in self.dropped:
            tokens_field = "max_tokens"
        body[tokens_field] = call.max_output_tokens
        if call.mode is OutputMode.JSON_SCHEMA and call.strict_schema is not None:
            body["response_format"] = {
                "type": "json_schema",
                "json_schema": {
                    "name": call.schema_name,
                    "schema": call.strict_schema,
                    "strict": True,
                },
            }
        elif call.mode is OutputMode.JSON_OBJECT_SCHEMA:
            body["response_format"] = {
                "type": "json_object",
                "schema": grammar_schema(call.schema) or call.strict_schema or call.schema,
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
        if call.timeout is not None:
            body["timeout"] = call.timeout
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
        body = self.request_body(call)
        sent = frozenset(body)
        headers = body.pop("extra_headers", None) or {}
        timeout = body.pop("timeout", None)
        body.update(body.pop("extra_body", None) or {})
        options: dict[str, Any] = {"headers": headers}
        if timeout is not None:
            options["timeout"] = timeout
        try:
            # The body goes as built: the SDK's ``create`` would walk every message and schema
            # to transform it, then build its response models; the answer is parsed once, here.
            text = await client.post("/chat/completions", cast_to=str, body=body, options=options)
        except openai.OpenAIError as exc:
            raise translate_error(exc, call.mode, sent) from exc
        return chat_result(_parse_answer(text))

    async def aclose(self) -> None:
        await self._clients.aclose()
        http = self._http.pop()
        if http is not None:
            await http.aclose()


def _as_vector(raw: Any) -> np.ndarray:
    if isinstance(raw, str):  # encoding_format=base64
        return np.frombuffer(binascii.a2b_base64(raw), dtype="<f4")
    return np.asarray(raw, dtype=np.float32)


def _index(row: Any) -> int:
    return row.get("index", -1) if isinstance(row, dict) else -1


def _parse_answer(text: str) -> dict[str, Any]:
    """A 200 answer's JSON object; a body that is not one is the server's fault (retried)."""
    try:
        answer = json.loads(text)
    except ValueError:
        answer = None
    if not isinstance(answer, dict):
        raise TransientBackendError(
            f"malformed response body: {redact_text(str(text)[:200])!r}", kind="server"
        )
    return answer


def _count(usage: Any, name: str) -> int:
    value = usage.get(name) if isinstance(usage, dict) else None
    return value if isinstance(value, int) else 0


def chat_result(answer: dict[str, Any]) -> ChatResult:
    """A chat completion (the JSON object the server answered) as the client's result."""
    choices = answer.get("choices")
    choice = choices[0] if isinstance(choices, list) and choices else None
    if not isinstance(choice, dict):
        raise TransientBackendError("the server answered without choices", kind="server")
    message = choice.get("message")
    message = message if isinstance(message, dict) else {}
    usage = answer.get("usage")
    details = usage.get("prompt_tokens_details") if isinstance(usage, dict) else None
    content = message.get("content")
    refusal = message.get("refusal")
    model = answer.get("model")
    return ChatResult(
        text=content if isinstance(content, str) else None,
        finish_reason=choice.get("finish_reason") or "stop",
        input_tokens=_count(usage, "prompt_tokens"),
        output_tokens=_count(usage, "completion_tokens"),
        cached_tokens=_count(details, "cached_tokens"),
        refusal=refusal if isinstance(refusal, str) else None,
        usage_reported=isinstance(usage, dict),
        model=model if isinstance(model, str) else None,
    )


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
        model: str = "text-embedding-3-small",
        connection: SdkConnection = SdkConnection(),
        max_batch_texts: int = 256,
    ) -> None:
        self.kind = connection.kind
        self.name = model
        self.model = model
        self.base_url = connection.address
        self.max_batch_texts = max_batch_texts
        self.dimension = EMBEDDING_DIMENSIONS.get(model)
        self._clients = _SdkClients(make_sdk_factory(connection))

    async def embed_with_usage(self, texts: list[str]) -> EmbeddingResult:
        import openai

        client = self._clients.get()
        try:
            text = await client.post(
                "/embeddings",
                cast_to=str,
                body={"model": self.model, "input": texts, "encoding_format": "base64"},
            )
        except openai.OpenAIError as exc:
            raise translate_error(exc) from exc
        answer = _parse_answer(text)
        data = answer.get("data")
        rows = sorted(data, key=_index) if isinstance(data, list) else []
        if len(rows) != len(texts) or [_index(r) for r in rows] != list(range(len(texts))):
            raise TransientBackendError(
                f"the server returned {len(rows)} embeddings for {len(texts)} texts", kind="server"
            )
        try:
            vectors = np.stack([_as_vector(r.get("embedding")) for r in rows])
        except (TypeError, ValueError, binascii.Error) as exc:
            raise TransientBackendError(f"malformed embeddings: {exc}", kind="server") from None
        if vectors.ndim != 2:
            raise TransientBackendError(
                "malformed embeddings: not one vector a text", kind="server"
            )
        if self.dimension is None:
            self.dimension = int(vectors.shape[1])
        usage = answer.get("usage")
        return EmbeddingResult(
            vectors=normalise_rows(vectors),
            tokens=_count(usage, "prompt_tokens"),
            usage_reported=isinstance(usage, dict),
        )

    async def embed(self, texts: list[str]) -> np.ndarray:
        """One attempt, no cache or limiter: use ``ModelClient.embed`` for those."""
        if not texts:
            return np.zeros((0, self.dimension or 0), dtype=np.float32)
        return (await self.embed_with_usage(texts)).vectors

    async def aclose(self) -> None:
        await self._clients.aclose()
