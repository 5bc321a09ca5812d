"""The fake OpenAI server: its settings, its routes, the test controls over the whole of it,
and the HTTP handler that reads, logs, routes and answers each request.

Each endpoint's answers live in a module of their own (``chat``, ``embeddings``, ``batches``),
as a mixin of :class:`FakeOpenAIServer`, and so do the checks before any answer
(``admission``).
"""

from __future__ import annotations

import email.parser
import email.policy
import json
import random
import re
import threading
import urllib.parse
from collections import deque
from http.server import BaseHTTPRequestHandler
from typing import Any

from memoryquest.llm.prompt_cache_model import PromptPrefixCache
from memoryquest.testing.fake_openai.admission import RateLimit, RequestAdmission
from memoryquest.testing.fake_openai.batches import BatchState, FilesAndBatches, StoredFile
from memoryquest.testing.fake_openai.chat import ChatCompletions, TemplateAnswer
from memoryquest.testing.fake_openai.embeddings import EMBEDDING_DIMENSION, Embeddings
from memoryquest.testing.fake_openai.exchange import (
    Disconnect,
    ErrorAnswer,
    LoggedRequest,
    RateLimited,
    Reply,
    Route,
    Stall,
)
from memoryquest.testing.fake_openai.faults import Fault, FaultKind
from memoryquest.testing.fake_openai.loopback import LoopbackServer, write_response
from memoryquest.testing.fake_openai.replay import request_key


class FakeOpenAIServer(
    RequestAdmission, ChatCompletions, Embeddings, FilesAndBatches, LoopbackServer
):
    """Start with ``with FakeOpenAIServer(...) as server:``; ``server.url`` is the SDK base URL."""

    thread_name = "fake-openai"

    def handler(self) -> type[BaseHTTPRequestHandler]:
        return _Handler

    def __init__(
        self,
        *,
        latency: float = 0.0,
        requests_per_minute: float | None = None,
        seed: int = 0,
        embedding_dimension: int = EMBEDDING_DIMENSION,
        supports_json_schema: bool = True,
        supports_json_object: bool = True,
        api_key: str | None = None,
        cached_tokens: int = 0,
        prompt_caching: bool = False,
        shuffle_embeddings: bool = False,
        report_usage: bool = True,
        batch_polls: int = 1,
        batch_delay: float = 0.0,
        batch_expire_after: int | None = None,
        batch_finalizing_polls: int = 0,
        batch_enqueued_tokens_max: int | None = None,
        echo_key: bool = False,
        record: bool = False,
    ) -> None:
        self._default_rpm = requests_per_minute
        self._defaults: dict[str, Any] = {
            "latency": latency,
            "supports_json_schema": supports_json_schema,
            "supports_json_object": supports_json_object,
            "api_key": api_key,
            "cached_tokens": cached_tokens,
            "prompt_caching": prompt_caching,
            "shuffle_embeddings": shuffle_embeddings,
            "report_usage": report_usage,
            "batch_polls": batch_polls,
            "batch_delay": batch_delay,
            "batch_expire_after": batch_expire_after,
            "batch_finalizing_polls": batch_finalizing_polls,
            "batch_enqueued_tokens_max": batch_enqueued_tokens_max,
            "echo_key": echo_key,
        }
        self.latency = latency
        self.rate_limit = RateLimit(requests_per_minute) if requests_per_minute else None
        self.embedding_dimension = embedding_dimension
        self.supports_json_schema = supports_json_schema
        self.supports_json_object = supports_json_object
        self.api_key = api_key
        self.cached_tokens = (
            cached_tokens  # a fixed count for every answer (0: prompt caching decides)
        )
        self.prompt_caching = prompt_caching
        self.shuffle_embeddings = shuffle_embeddings
        self.report_usage = report_usage
        self.batch_polls = batch_polls  # retrieves that see a batch in progress before it completes
        self.batch_delay = batch_delay  # and the seconds it stays in progress at least
        self.batch_expire_after = batch_expire_after  # lines run before a batch expires (None: all)
        self.batch_finalizing_polls = batch_finalizing_polls  # retrieves that see it finalizing
        # Prompt tokens a model's unfinished batches may hold together (None: no limit).
        self.batch_enqueued_tokens_max = batch_enqueued_tokens_max
        self.echo_key = echo_key  # a refused key is repeated in the 401 body (a careless server)
        # record=True: every 200 answer to a POST, by request_key(path, body bytes), for ReplayOpenAIServer.
        self.recording: dict[str, bytes] | None = {} if record else None
        self.files: dict[str, StoredFile] = {}
        self.batches: dict[str, dict[str, Any]] = {}
        self.batch_lines: list[LoggedRequest] = []
        self._batch_lock = threading.RLock()  # held while a batch runs, which stores files
        self._batch_state: dict[str, BatchState] = {}
        self.in_flight = 0
        self.max_in_flight = 0
        self.requests: list[LoggedRequest] = []
        self._scripted: deque[Fault] = deque()
        self._rates: dict[FaultKind, float] = {}
        self._drawn: dict[FaultKind, Fault] = {}
        self._rng = random.Random(seed)
        # Retry-After bookkeeping: body hash -> when its retry may come; retries that came sooner.
        self._not_before: dict[str, float] = {}
        self.early_retries = 0
        # Prompt caching: earlier prompts per (model, prompt_cache_key).
        self._prompt_cache = PromptPrefixCache()
        self._answers: dict[str, TemplateAnswer] = {}  # answer_with: a test's answer per template
        self._lock = threading.Lock()
        self._simulator_lock = threading.Lock()
        super().__init__()
        self._counter = 0
        # One handler per path; paths with an id match a pattern and put it in ``entry.params``.
        self.routes: dict[tuple[str, str], Route] = {
            ("POST", "/v1/chat/completions"): self._chat,
            ("POST", "/v1/embeddings"): self._embeddings,
            ("GET", "/v1/models"): self._models,
            ("POST", "/v1/files"): self._upload_file,
            ("POST", "/v1/batches"): self._create_batch,
            ("GET", "/v1/batches"): self._list_batches,
        }
        self.pattern_routes: list[tuple[str, re.Pattern[str], Route]] = [
            ("GET", re.compile(r"/v1/files/(?P<file_id>[^/]+)"), self._file_info),
            ("GET", re.compile(r"/v1/files/(?P<file_id>[^/]+)/content"), self._file_content),
            ("GET", re.compile(r"/v1/batches/(?P<batch_id>[^/]+)"), self._retrieve_batch),
            ("POST", re.compile(r"/v1/batches/(?P<batch_id>[^/]+)/cancel"), self._cancel_batch),
        ]

    def route(self, method: str, path: str) -> tuple[Route | None, dict[str, str]]:
        """The handler for a request and the path parameters it needs."""
        handler = self.routes.get((method, path))
        if handler is not None:
            return handler, {}
        for verb, pattern, candidate in self.pattern_routes:
            match = pattern.fullmatch(path)
            if verb == method and match:
                return candidate, match.groupdict()
        return None, {}

    # --- test controls --------------------------------------------------------------------

    def clear_log(self) -> None:
        with self._lock:
            self.requests.clear()
            self.max_in_flight = self.in_flight

    def reset(self) -> None:
        """Back to the constructor's configuration: no faults, empty log (for module-scoped servers)."""
        with self._lock:
            self._scripted.clear()
            self._rates = {}
            self._drawn = {}
            self._not_before.clear()
            self._prompt_cache.clear()
            self._answers.clear()
            self.early_retries = 0
        self.set_rate_limit(self._default_rpm)
        for name, value in self._defaults.items():
            setattr(self, name, value)
        with self._batch_lock:
            self.files.clear()
            self.batches.clear()
            self._batch_state.clear()
            self.batch_lines.clear()
        self.clear_log()

    def _enter(self) -> None:
        with self._lock:
            self.in_flight += 1
            self.max_in_flight = max(self.max_in_flight, self.in_flight)

    def _leave(self) -> None:
        with self._lock:
            self.in_flight -= 1

    def count(self, path: str | None = None, status: int | None = None) -> int:
        """Logged requests, optionally only to ``path`` (suffix match) or with ``status``.

        Without ``path``, the client's one look at ``/models`` (what the server
        is, before its first request) is not counted: it is no model work.
        """
        with self._lock:
            return sum(
                1
                for r in self.requests
                if (r.path.endswith(path) if path is not None else not r.path.endswith("/models"))
                and (status is None or r.status == status)
            )

    # --- request handling -----------------------------------------------------------------

    def _log(self, entry: LoggedRequest) -> None:
        with self._lock:
            self.requests.append(entry)

    def _sleep(self, seconds: float) -> None:
        if seconds > 0:
            self._stopping.wait(seconds)

    def _models(self, entry: LoggedRequest, headers: dict[str, str]) -> Reply:
        if self.api_key is not None and headers.get("authorization") != f"Bearer {self.api_key}":
            raise self._refused(headers)
        return (
            200,
            {
                "object": "list",
                "data": [{"id": "fake-model", "object": "model", "owned_by": "memoryquest"}],
            },
            {},
        )


class _Handler(BaseHTTPRequestHandler):
    owner: FakeOpenAIServer
    protocol_version = "HTTP/1.1"  # keep-alive, like the SDK expects
    disable_nagle_algorithm = True  # headers and body go out as separate writes

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - stdlib signature
        pass

    def do_GET(self) -> None:  # noqa: N802 - stdlib name
        self._handle("GET")

    def do_POST(self) -> None:  # noqa: N802 - stdlib name
        self._handle("POST")

    def _handle(self, method: str) -> None:
        owner = self.owner
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        headers = {k.lower(): v for k, v in self.headers.items()}
        path = self.path.split("?", 1)[0]
        self._key = (
            request_key(path, raw) if owner.recording is not None and method == "POST" else None
        )
        upload: tuple[str, bytes] | None = None
        body: Any
        if headers.get("content-type", "").startswith("multipart/form-data"):
            body, upload = _parse_multipart(headers["content-type"], raw)
        else:
            try:
                body = json.loads(raw) if raw else None
            except ValueError:
                body = raw.decode("utf-8", "replace")
        entry = LoggedRequest(method=method, path=path, headers=headers, body=body, upload=upload)
        entry.query = {
            key: values[-1]
            for key, values in urllib.parse.parse_qs(self.path.partition("?")[2]).items()
        }
        owner._log(entry)
        owner._enter()
        self._left = False
        try:
            self._answer(method, path, entry, headers, body)
        finally:
            if not self._left:
                owner._leave()

    _left = False  # set once the in-flight count has been decremented for this request
    _key: str | None = None  # the request's recording key (FakeOpenAIServer(record=True))

    def _answer(
        self, method: str, path: str, entry: LoggedRequest, headers: dict[str, str], body: Any
    ) -> None:
        owner = self.owner
        route, entry.params = owner.route(method, path)
        extra: dict[str, str] = {}
        try:
            if route is None:
                raise ErrorAnswer(404, f"no route {method} {path} on the fake server")
            if (
                method == "POST"
                and not isinstance(body, dict)
                and (body is not None or not entry.params)
            ):
                raise ErrorAnswer(400, "the request body must be a JSON object")
            status, payload, extra = route(entry, headers)
        except ErrorAnswer as exc:
            status, payload = exc.status, exc.body
        except RateLimited as exc:
            status, extra = 429, exc.headers
            payload = {
                "error": {
                    "message": "Rate limit reached for requests (fake server).",
                    "type": "requests",
                    "param": None,
                    "code": "rate_limit_exceeded",
                }
            }
        except Stall as exc:
            entry.status = -1
            owner._leave()  # abandoned by the client: not counted as being answered
            self._left = True
            owner._sleep(exc.delay)
            self.close_connection = True
            return
        except Disconnect:
            entry.status = -1
            self.close_connection = True
            return
        entry.status = status
        binary = isinstance(payload, bytes)  # file content
        data = payload if binary else json.dumps(payload).encode("utf-8")
        if self._key is not None and status == 200 and not binary and owner.recording is not None:
            owner.recording[self._key] = data
        owner._leave()  # before the answer leaves: the client may send its next request at once
        self._left = True
        content_type = "application/octet-stream" if binary else "application/json"
        write_response(self, status, data, content_type, extra)


def _parse_multipart(
    content_type: str, raw: bytes
) -> tuple[dict[str, Any], tuple[str, bytes] | None]:
    """Form fields as a dict, and the uploaded file (the SDK's ``files.create``) if any."""
    message = email.parser.BytesParser(policy=email.policy.HTTP).parsebytes(
        f"Content-Type: {content_type}\r\n\r\n".encode("latin-1") + raw
    )
    fields: dict[str, Any] = {}
    upload: tuple[str, bytes] | None = None
    for part in message.iter_parts():
        name = part.get_param("name", header="content-disposition")
        payload = part.get_payload(decode=True)
        content = payload if isinstance(payload, bytes) else b""
        filename = part.get_filename()
        if filename is not None:
            upload = (filename, content)
            fields[str(name)] = {"filename": filename, "bytes": len(content)}
        else:
            fields[str(name)] = content.decode("utf-8")
    return fields, upload
