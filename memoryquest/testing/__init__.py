"""Test helpers shipped with the package so benchmarks and downstream tests can use them."""

from memoryquest.testing.fake_openai.exchange import LoggedRequest
from memoryquest.testing.fake_openai.faults import Fault, FaultKind
from memoryquest.testing.fake_openai.replay import ReplayOpenAIServer
from memoryquest.testing.fake_openai.server import FakeOpenAIServer

__all__ = ["FakeOpenAIServer", "Fault", "FaultKind", "LoggedRequest", "ReplayOpenAIServer"]
