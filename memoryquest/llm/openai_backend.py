"""OpenAI, Azure OpenAI and any OpenAI-compatible server, through the official async SDK.

What a request says (its body, shaped to the server's profile) and how an
answer is read are here; how the SDK reaches the server is in
:mod:`memoryquest.llm.openai_sdk` (one attempt per call, one client per
event loop) and how its exceptions become the client's backend errors in
:mod:`memoryquest.llm.openai_errors`.
"""

from __future__ import annotations

import asyncio
import binascii
import json
from dataclasses import replace
from typing import TYPE_CHECKING, Any

import httpx
import numpy as np

from memoryquest.llm.backends import ChatCall, ChatResult, EmbeddingResult, OutputMode
from memoryquest.llm.errors import TransientBackendError
from memoryquest.llm.hints import encode_hints
from memoryquest.llm.openai_errors import translate_error
from memoryquest.llm.openai_sdk import SdkClients, SdkConnection, make_sdk_factory
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
from memoryquest.redaction import redact_text
from memoryquest.settings import ServerKind

if TYPE_CHECKING:
    from openai import AsyncOpenAI, RequestOptions

OPENAI_DEFAULT_URL = "https://api.openai.com/v1"
DEFAULT_CONNECTION = SdkConnection()  # OpenAI itself, the key from OPENAI_API_KEY

# Models that reject temperature other than the default (reasoning models).
_FIXED_TEMPERATURE_PREFIXES = ("o1", "o3", "o4", "gpt-5")
# Chat-template tokens around a prompt (role markers, the reply's opening) when a server counts the contents alone.
CHAT_TEMPLATE_TOKENS = 16
MESSAGE_TEMPLATE_TOKENS = 8
COUNTED_TEXTS_MAX = 4096  # message texts whose server token count is remembered
EMBEDDING_DIMENSIONS = {
    "text-embedding-3-small": 1536,
    "text-embedding-3-large": 3072,
    "text-embedding-ada-002": 1536,
}


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
        connection: SdkConnection = DEFAULT_CONNECTION,
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
        self._http: SdkClients[httpx.AsyncClient] = SdkClients(
            lambda: httpx.AsyncClient(timeout=30.0)
        )
        self._clients: SdkClients[AsyncOpenAI] = SdkClients(make_sdk_factory(connection))

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

    def sdk_client(self) -> AsyncOpenAI:
        """The SDK client of the running event loop (the Batch API adapter's Files and Batches calls)."""
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
        options: RequestOptions = {"headers": headers}
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
        client = self._clients.pop()
        if client is not None:
            await client.close()
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
        connection: SdkConnection = DEFAULT_CONNECTION,
        max_batch_texts: int = 256,
    ) -> None:
        self.kind = connection.kind
        self.name = model
        self.model = model
        self.base_url = connection.address
        self.max_batch_texts = max_batch_texts
        self.dimension = EMBEDDING_DIMENSIONS.get(model)
        self._clients: SdkClients[AsyncOpenAI] = SdkClients(make_sdk_factory(connection))

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
        client = self._clients.pop()
        if client is not None:
            await client.close()
