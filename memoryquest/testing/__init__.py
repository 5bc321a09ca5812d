"""Test helpers shipped with the package so benchmarks and downstream tests can use them."""

from memoryquest.testing.fake_openai import (
    FakeOpenAIServer,
    Fault,
    FaultKind,
    LoggedRequest,
    ReplayOpenAIServer,
)

__all__ = ["FakeOpenAIServer", "Fault", "FaultKind", "LoggedRequest", "ReplayOpenAIServer"]
