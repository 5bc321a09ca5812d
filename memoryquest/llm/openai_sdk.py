"""How the OpenAI SDK reaches a server: the connection settings and one SDK client per event loop.

The SDK runs with ``max_retries=0``: one HTTP attempt per call, so the
client's own limiter, backoff and circuit breaker are the only policy. The
SDK's HTTP connection pool belongs to the event loop that created it, so one
SDK client is kept per running loop.
"""

from __future__ import annotations

import asyncio
import weakref
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Generic, TypeVar

from memoryquest.llm.errors import LLMConfigurationError
from memoryquest.redaction import register_secret

if TYPE_CHECKING:
    from openai import AsyncOpenAI

C = TypeVar("C")


class SdkClients(Generic[C]):
    """One client (``AsyncOpenAI``, Azure's, or an HTTP client) per event loop."""

    def __init__(self, factory: Callable[[], C]) -> None:
        self._factory = factory
        self._clients: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, C] = (
            weakref.WeakKeyDictionary()
        )

    def get(self) -> C:
        loop = asyncio.get_running_loop()
        client = self._clients.get(loop)
        if client is None:
            client = self._clients[loop] = self._factory()
        return client

    def pop(self) -> C | None:
        """This loop's client, forgotten (the caller closes it), or None."""
        return self._clients.pop(asyncio.get_running_loop(), None)


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


def make_sdk_factory(connection: SdkConnection) -> Callable[[], AsyncOpenAI]:
    """A zero-argument callable building the SDK client.

    ``openai`` takes seconds to import, so it is imported here, when the
    backend is built, rather than inside the first request on the event loop.
    The key is registered with the redactor, so no message can carry it.
    """
    import openai

    register_secret(connection.api_key)

    def build() -> AsyncOpenAI:
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
