"""Record and replay: ``FakeOpenAIServer(record=True)`` keeps every 200
answer to a POST in ``server.recording``, keyed by the request's path and
body bytes (:func:`request_key`); :class:`ReplayOpenAIServer` answers the
same requests, sent again without simulator hints, from that recording, so
an answer costs a dictionary look-up instead of a simulator run
(``benchmarks/bench_pipeline_cpu.py`` measures the pipeline against it).
"""

from __future__ import annotations

import hashlib
import json
import threading
import time
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler
from typing import Any

from memoryquest.testing.fake_openai.admission import RateLimit
from memoryquest.testing.fake_openai.embeddings import EMBEDDING_DIMENSION, embeddings_answer
from memoryquest.testing.fake_openai.exchange import RateLimited, error_body
from memoryquest.testing.fake_openai.loopback import LoopbackServer, write_response


def request_key(path: str, body: bytes) -> str:
    """A request's key in a recording: its path and its body, byte for byte."""
    digest = hashlib.blake2b(path.encode("utf-8"), digest_size=16)
    digest.update(b"\0")
    digest.update(body)
    return digest.hexdigest()


@dataclass
class ReplayedRequest:
    path: str
    arrived: float  # time.monotonic()
    answered: float = 0.0  # when the answer started to leave (0: not answered)
    status: int = 0


class ReplayOpenAIServer(LoopbackServer):
    """Answers recorded by ``FakeOpenAIServer(record=True)``, looked up by each request's path and
    body bytes, so answering costs a dictionary look-up rather than a simulator run.

    A client that sends the recorded requests again, without simulator hints,
    gets the recorded answers; a request that was not recorded gets a 500 and
    is counted in ``misses``. ``latency`` seconds pass before each answer and
    ``requests_per_minute`` is enforced as the fake server does (429 with
    ``retry-after-ms`` and the quota headers). Each request is logged in
    ``log`` with when it arrived and when its answer left.
    """

    backlog = 256
    thread_name = "replay-openai"

    def handler(self) -> type[BaseHTTPRequestHandler]:
        return _ReplayHandler

    def __init__(
        self,
        recording: dict[str, bytes],
        *,
        latency: float = 0.0,
        requests_per_minute: float | None = None,
        embedding_dimension: int = EMBEDDING_DIMENSION,
    ) -> None:
        self.recording = recording
        self.embedding_dimension = embedding_dimension
        self.latency = latency
        self.rate_limit = RateLimit(requests_per_minute) if requests_per_minute else None
        self.log: list[ReplayedRequest] = []
        self.misses = 0
        self.recomputed = 0
        self.in_flight = 0
        self.max_in_flight = 0
        self._lock = threading.Lock()
        super().__init__()

    def answer(self, path: str, body: bytes) -> tuple[int, bytes, dict[str, str]]:
        """Status, body and extra headers for one request (after the latency)."""
        if self.rate_limit is not None:
            wait = self.rate_limit.take()
            if wait is not None:
                limited = RateLimited(wait, ms=True, quota=self.rate_limit.per_minute)
                error = error_body(
                    "Rate limit reached for requests (replay server).", "rate_limit_exceeded"
                )
                return 429, json.dumps(error).encode("utf-8"), limited.headers
        if self.latency > 0:
            self._stopping.wait(self.latency)
        found = self.recording.get(request_key(path, body))
        if found is None and path.endswith("/embeddings"):
            found = self._embeddings_again(body)
        if found is None:
            with self._lock:
                self.misses += 1
            error = error_body(f"no recorded answer for this {path} request", "not_recorded")
            return 500, json.dumps(error).encode("utf-8"), {}
        return 200, found, {}

    def _embeddings_again(self, body: bytes) -> bytes | None:
        """An embeddings request batched otherwise than when recorded (the pipeline groups texts
        as they come): answered as the recording server did, since a text's vector does not
        depend on its batch; counted in ``recomputed``."""
        try:
            request = json.loads(body)
            texts = request["input"]
            texts = [texts] if isinstance(texts, str) else list(texts)
            answer = embeddings_answer(request, texts, self.embedding_dimension)
        except (ValueError, KeyError, TypeError):
            return None
        with self._lock:
            self.recomputed += 1
        return json.dumps(answer).encode("utf-8")


_MODELS_ANSWER = json.dumps(
    {"object": "list", "data": [{"id": "fake-model", "object": "model", "owned_by": "memoryquest"}]}
).encode("utf-8")


class _ReplayHandler(BaseHTTPRequestHandler):
    owner: ReplayOpenAIServer
    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - stdlib signature
        pass

    def do_GET(self) -> None:  # noqa: N802 - stdlib name
        self._send(200, _MODELS_ANSWER, {})

    def do_POST(self) -> None:  # noqa: N802 - stdlib name
        owner = self.owner
        entry = ReplayedRequest(self.path.split("?", 1)[0], time.monotonic())
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length) if length else b""
        with owner._lock:
            owner.log.append(entry)
            owner.in_flight += 1
            owner.max_in_flight = max(owner.max_in_flight, owner.in_flight)
        try:
            entry.status, data, extra = owner.answer(entry.path, body)
        finally:
            with owner._lock:
                owner.in_flight -= 1
            entry.answered = time.monotonic()
        self._send(entry.status, data, extra)

    def _send(self, status: int, data: bytes, extra: dict[str, str]) -> None:
        write_response(self, status, data, "application/json", extra)
