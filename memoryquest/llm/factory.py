"""Build the client the settings ask for."""

from __future__ import annotations

from memoryquest.llm.client import ModelClient
from memoryquest.llm.local_embedder import LocalEmbedder
from memoryquest.llm.simulated import SimulatedChatBackend
from memoryquest.settings import Backend, Settings


def build_client(settings: Settings) -> ModelClient:
    backend = settings.endpoint.resolved_backend()
    if backend is not Backend.SIMULATED:
        raise NotImplementedError(f"backend {backend} is not wired yet")
    return ModelClient(SimulatedChatBackend(seed=settings.seed), LocalEmbedder())
