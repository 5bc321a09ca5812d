"""What each kind of OpenAI-compatible server takes, and what it says about itself.

OpenAI, Azure, vLLM, Ollama and llama.cpp all speak ``/v1/chat/completions``,
but not the same dialect: llama.cpp constrains output with ``json_object``
plus a ``schema`` and refuses ``json_schema``; only OpenAI takes
``prompt_cache_key``; only the official endpoints want ``max_completion_tokens``.
A :class:`ServerProfile` holds those choices for one kind of server, and
:func:`discover` asks a running server what it is, how long its context window
is, how many requests it works on at once, and how it counts tokens. Everything
here is read-only: nothing is sent to the chat endpoint.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
from typing import Any
from urllib.parse import urlsplit

import httpx

from memoryquest.llm.backends import OutputMode
from memoryquest.settings import ServerKind

OPENAI_HOST = "api.openai.com"
OLLAMA_PORT = 11434


@dataclass(frozen=True)
class ServerProfile:
    """The request fields one kind of server is sent."""

    kind: str  # a ServerKind value, or "compatible" for a server auto could not name
    structured_output: OutputMode  # the strongest output mode it takes
    seed: bool
    prompt_cache_key: bool
    max_tokens_field: str  # "max_completion_tokens" (official endpoints) or "max_tokens"
    openai_embeddings: bool  # serves OpenAI's embedding models at the same base URL


PROFILES: dict[str, ServerProfile] = {
    ServerKind.OPENAI: ServerProfile(
        "openai", OutputMode.JSON_SCHEMA, True, True, "max_completion_tokens", True
    ),
    ServerKind.AZURE: ServerProfile(
        "azure", OutputMode.JSON_SCHEMA, True, False, "max_completion_tokens", True
    ),
    ServerKind.VLLM: ServerProfile(
        "vllm", OutputMode.JSON_SCHEMA, True, False, "max_tokens", False
    ),
    ServerKind.OLLAMA: ServerProfile(
        "ollama", OutputMode.JSON_SCHEMA, True, False, "max_tokens", False
    ),
    ServerKind.LLAMACPP: ServerProfile(
        "llamacpp", OutputMode.JSON_OBJECT_SCHEMA, True, False, "max_tokens", False
    ),
    # Some other OpenAI-compatible server: the common dialect; a refused field is dropped as it comes.
    "compatible": ServerProfile(
        "compatible", OutputMode.JSON_SCHEMA, True, False, "max_tokens", False
    ),
}

# Context windows of the hosted models, by name prefix (longest prefix wins).
KNOWN_WINDOWS = {
    "gpt-4o": 128_000,
    "gpt-4.1": 1_047_576,
    "gpt-4-turbo": 128_000,
    "gpt-5": 400_000,
    "o1": 200_000,
    "o3": 200_000,
    "o4": 200_000,
}


def known_window(model: str) -> int | None:
    matches = [prefix for prefix in KNOWN_WINDOWS if model.lower().startswith(prefix)]
    return KNOWN_WINDOWS[max(matches, key=len)] if matches else None


def guess_kind(server: ServerKind, base_url: str | None, azure_endpoint: str | None) -> str:
    """The server's kind from the settings alone (before anything is asked of it)."""
    if server is not ServerKind.AUTO:
        return server.value
    if azure_endpoint:
        return ServerKind.AZURE.value
    if not base_url:
        return ServerKind.OPENAI.value
    parts = urlsplit(base_url)
    if parts.hostname == OPENAI_HOST:
        return ServerKind.OPENAI.value
    if parts.port == OLLAMA_PORT:
        return ServerKind.OLLAMA.value
    return "compatible"


@dataclass(frozen=True)
class Tokenizer:
    """A server's own tokenizer endpoint: where it is and how it is asked."""

    path: str  # from the server's root
    flavour: str  # "llama-cpp-python" | "llama.cpp" | "vllm"

    def body(self, text: str, model: str) -> dict[str, Any]:
        if self.flavour == "llama-cpp-python":
            return {"input": text, "model": model}
        if self.flavour == "llama.cpp":
            return {"content": text, "add_special": False}
        return {"model": model, "prompt": text, "add_special_tokens": False}

    @staticmethod
    def count(answer: Any) -> int:
        if isinstance(answer, dict):
            if isinstance(answer.get("count"), int):
                return int(answer["count"])
            if isinstance(answer.get("tokens"), list):
                return len(answer["tokens"])
        raise ValueError(f"unexpected tokenizer answer: {str(answer)[:200]}")


@dataclass(frozen=True)
class ServerFacts:
    """What a running server said about itself; None where it said nothing."""

    profile: ServerProfile
    context_window: int | None = None
    slots: int | None = None  # requests it works on at once
    tokenizer: Tokenizer | None = None


def server_root(base_url: str) -> str:
    """The server's root: the base URL without its trailing ``/v1``."""
    root = base_url.rstrip("/")
    return root[: -len("/v1")] if root.endswith("/v1") else root


def _model_entry(answer: Any, model: str) -> dict[str, Any]:
    rows = answer.get("data") if isinstance(answer, dict) else None
    if not isinstance(rows, list) or not rows:
        return {}
    dict_rows = [row for row in rows if isinstance(row, dict)]
    for row in dict_rows:
        if row.get("id") == model:
            return row
    return dict_rows[0] if dict_rows else {}


def _positive(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else None


def ollama_window(show: Any) -> int | None:
    """``num_ctx`` from ``/api/show``'s parameters, else the model's trained context length."""
    if not isinstance(show, dict):
        return None
    parameters = show.get("parameters")
    if isinstance(parameters, str):
        found = re.search(r"^\s*num_ctx\s+(\d+)", parameters, re.MULTILINE)
        if found:
            return int(found.group(1))
    info = show.get("model_info")
    if isinstance(info, dict):
        for key, value in info.items():
            if key.endswith(".context_length") and _positive(value):
                return int(value)
    return None


def llamacpp_props(props: Any) -> tuple[int | None, int | None]:
    """The context window and slot count from llama.cpp's ``/props``."""
    if not isinstance(props, dict):
        return None, None
    settings = props.get("default_generation_settings")
    window = _positive(settings.get("n_ctx")) if isinstance(settings, dict) else None
    return window or _positive(props.get("n_ctx")), _positive(props.get("total_slots"))


async def discover(
    base_url: str,
    model: str,
    *,
    kind: str,
    api_key: str | None = None,
    timeout: float = 10.0,
) -> ServerFacts:
    """Ask the server at ``base_url`` what it is (when ``kind`` is not settled) and what it offers.

    ``kind``: what the settings say (:func:`guess_kind`); ``compatible`` is
    narrowed from ``/models`` (vLLM reports ``max_model_len``, llama.cpp owns its
    models as ``llamacpp``, llama-cpp-python as ``me``). A server that answers
    none of these questions keeps ``kind``'s profile and no window.
    """
    headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
    root = server_root(base_url)
    async with httpx.AsyncClient(timeout=timeout, headers=headers) as http:

        async def get_json(url: str, method: str = "GET", body: Any = None) -> Any:
            try:
                response = await http.request(method, url, json=body)
                if response.status_code >= 400:
                    return None
                return response.json()
            except (httpx.HTTPError, ValueError):
                return None

        entry = _model_entry(await get_json(f"{base_url.rstrip('/')}/models"), model)
        owner = str(entry.get("owned_by") or "")
        python_flavour = owner == "me"
        if kind == "compatible":
            if _positive(entry.get("max_model_len")):
                kind = ServerKind.VLLM.value
            elif owner in ("llamacpp", "me"):
                kind = ServerKind.LLAMACPP.value
            elif owner in ("library", "ollama"):
                kind = ServerKind.OLLAMA.value
            elif owner in ("openai", "system", "openai-internal"):
                kind = ServerKind.OPENAI.value
        facts = ServerFacts(PROFILES[kind])
        if kind == ServerKind.VLLM:
            return replace(
                facts,
                context_window=_positive(entry.get("max_model_len")),
                tokenizer=Tokenizer("/tokenize", "vllm"),
            )
        if kind == ServerKind.LLAMACPP:
            props = await get_json(f"{root}/props")
            if props is not None:
                window, slots = llamacpp_props(props)
                return replace(
                    facts,
                    context_window=window,
                    slots=slots,
                    tokenizer=Tokenizer("/tokenize", "llama.cpp"),
                )
            if python_flavour or owner == "":
                probe = await get_json(
                    f"{root}/extras/tokenize/count", "POST", {"input": "ping", "model": model}
                )
                if probe is not None:
                    # llama-cpp-python works on one request at a time and does not report its window.
                    return replace(
                        facts,
                        slots=1,
                        tokenizer=Tokenizer("/extras/tokenize/count", "llama-cpp-python"),
                    )
            return facts
        if kind == ServerKind.OLLAMA:
            show = await get_json(f"{root}/api/show", "POST", {"model": model})
            return replace(facts, context_window=ollama_window(show))
        return replace(facts, context_window=known_window(model))
