"""A loopback OpenAI-compatible server for tests and benchmarks.

It speaks enough of the OpenAI HTTP API for the official SDK
(``POST /v1/chat/completions``, ``POST /v1/embeddings``, ``GET /v1/models``,
and the Batch API: ``POST /v1/files``, ``GET /v1/files/{id}[/content]``,
``POST /v1/batches``, ``GET /v1/batches/{id}``, ``POST /v1/batches/{id}/cancel``)
and answers valid chat requests from the offline simulator: a client with
``endpoint.simulator_hints`` on sends the template id, version, seed and
variables in ``X-MemoryQuest-*`` headers (see ``memoryquest.llm.hints``;
nothing sends the variables by default), and the server replies with
``simulate(template_id, variables, seed)``. ``response_format`` is honoured:
``json_schema`` / ``json_object`` get the bare JSON, a request without one
gets the JSON wrapped in prose and a code fence, as an unconstrained model
would write it.

Embeddings are a cheap, deterministic bag-of-words hash (each word adds ±1
to a hashed dimension, then L2 normalisation): texts sharing words come out
similar, but it is not a semantic model — use the local embedder for that.

Faults are injected per test, either scripted (``server.script(...)``: the
next N matching requests fail in order) or drawn with a seeded RNG
(``server.set_fault_rates({...}, seed=...)``). An enforced requests/min
limit answers 429 with ``retry-after-ms``, ``retry-after`` and the quota
headers (``x-ratelimit-remaining-requests: 0``, ``x-ratelimit-limit-requests``)
like the real service, which enforces per-minute limits over one-second
windows; ``Fault.quota()`` sends the same headers at random, while
``Fault.rate_limit()`` is a 429 without them (a busy server). A request sent
again before the Retry-After it was given has elapsed is counted in
``server.early_retries``. Every request is logged (``server.requests``).

With ``prompt_caching=True`` (off by default, so existing cost checks stay
exact) prompt caching works as the real API's does:
``prompt_tokens_details.cached_tokens`` is the longest prefix shared with an
earlier prompt of the same model and ``prompt_cache_key``, when it is at
least 1,024 tokens, in steps of 128.

Batches: an uploaded JSONL file (purpose ``batch``) is checked while the
batch is ``validating`` (its state when created; the first retrieve ends it):
a bad line fails the batch with ``errors``, as the real service does, and so
does the enqueued-token limit (``batch_enqueued_tokens_max``: the prompt
tokens, counted as the server bills them, of a model's batches still
validating, in progress or finalizing may not exceed it; a batch that would
go over fails with ``token_limit_exceeded``). The batch then reports
``in_progress`` for ``batch_polls``
retrieves and at least ``batch_delay`` seconds, after which every line runs
through the same chat handler as an online request (scripted and random
faults included, one draw per line; the requests/min limit does not apply)
and the batch is ``completed`` (after ``batch_finalizing_polls`` retrieves
that see it ``finalizing``) with an output file (status 200 lines) and an
error file (everything else), in the service's JSONL format. A cancelled
batch is ``cancelling`` until the next retrieve, then ``cancelled``.
``GET /v1/batches`` pages like the real list: newest first, ``limit``
(default 20, at most 100), ``after`` (a batch id), ``has_more``. The lines run
are logged in ``server.batch_lines``, not in ``server.requests``. Since a
batch line has no HTTP headers, the hints travel in the line's
``x_memoryquest_headers`` field (``memoryquest.llm.batch``).
``batch_expire_after = n`` lets only the first n lines run and expires the
rest (``batch_expired`` in the error file).

A test can answer one template as another model would
(``server.answer_with(template_id, answer)``: ``answer(variables, model)``
returns the reply, or None to leave it to the simulator), for example a
reviewer that flags one conversation (``tests/test_stages_review.py``).

Record and replay: ``FakeOpenAIServer(record=True)`` keeps every 200
answer to a POST in ``server.recording``, keyed by the request's path and
body bytes (:func:`request_key`); :class:`ReplayOpenAIServer` answers the
same requests, sent again without simulator hints, from that recording, so
an answer costs a dictionary look-up instead of a simulator run
(``benchmarks/bench_pipeline_cpu.py`` measures the pipeline against it).

The server is the stdlib ``ThreadingHTTPServer`` (one thread per connection,
HTTP/1.1 keep-alive) on 127.0.0.1, port 0, run in a background thread::

    with FakeOpenAIServer(latency=0.01) as server:
        settings = Settings(endpoint={"base_url": server.url, "simulator_hints": True, ...})
"""

from __future__ import annotations

import base64
import email.parser
import email.policy
import hashlib
import json
import math
import random
import re
import threading
import time
import urllib.parse
from collections import deque
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from enum import StrEnum
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Self, TypeVar

import numpy as np

from memoryquest.llm.batch import HINTS_FIELD
from memoryquest.llm.hints import decode_hints
from memoryquest.llm.prompt_cache_model import PromptPrefixCache
from memoryquest.llm.tokens import token_counter
from memoryquest.simulator import simulate

TemplateAnswer = Callable[[dict[str, Any], str], Any]
"""A test's answer to one template: (the request's variables, its model) -> JSON-ready reply or None."""


EMBEDDING_DIMENSION = 256
"""The fake servers' vector length when a request names none."""


class FaultKind(StrEnum):
    RATE_LIMIT = "rate_limit"  # 429 with Retry-After, no quota headers (a busy server: noise)
    QUOTA = "quota"  # 429 with x-ratelimit-remaining-requests: 0 and Retry-After (a spent quota)
    SERVER_ERROR = "server_error"  # 5xx
    SLOW = "slow"  # answers correctly after an extra delay
    TIMEOUT = "timeout"  # answers only after the client has given up
    DISCONNECT = "disconnect"  # closes the connection without an answer
    MALFORMED_JSON = "malformed_json"  # content is not JSON
    SCHEMA_INVALID = "schema_invalid"  # JSON, but not the asked shape
    TRUNCATED = "truncated"  # finish_reason length, content cut in half
    REFUSAL = "refusal"  # message.refusal set, no content
    CONTENT_FILTER = "content_filter"  # finish_reason content_filter, no content
    UNAUTHORIZED = "unauthorized"  # 401 (or ``status`` 403) whose body echoes the presented key


# Faults that only make sense for a chat answer.
CONTENT_FAULTS = {
    FaultKind.MALFORMED_JSON,
    FaultKind.SCHEMA_INVALID,
    FaultKind.TRUNCATED,
    FaultKind.REFUSAL,
    FaultKind.CONTENT_FILTER,
}


@dataclass(frozen=True)
class Fault:
    kind: FaultKind
    retry_after: float | None = None  # RATE_LIMIT / SERVER_ERROR: seconds to announce
    retry_after_ms: bool = False  # announce with retry-after-ms instead of retry-after
    delay: float = 0.0  # SLOW: extra seconds; TIMEOUT: seconds before a (too late) answer
    status: int = 500  # SERVER_ERROR status
    endpoint: str = "chat"  # "chat", "embeddings" or "any"
    message: str = ""  # REFUSAL text
    match: str = ""  # scripted faults: only for requests whose JSON body contains this text

    @classmethod
    def rate_limit(
        cls, retry_after: float | None = 0.05, *, ms: bool = False, endpoint: str = "chat"
    ) -> Fault:
        return cls(
            FaultKind.RATE_LIMIT, retry_after=retry_after, retry_after_ms=ms, endpoint=endpoint
        )

    @classmethod
    def quota(cls, retry_after: float | None = 1.0, *, endpoint: str = "chat") -> Fault:
        """A 429 that says the quota is spent: ``x-ratelimit-remaining-requests: 0``."""
        return cls(FaultKind.QUOTA, retry_after=retry_after, endpoint=endpoint)

    @classmethod
    def server_error(cls, status: int = 500, *, endpoint: str = "chat") -> Fault:
        return cls(FaultKind.SERVER_ERROR, status=status, endpoint=endpoint)

    @classmethod
    def slow(cls, delay: float, *, endpoint: str = "chat") -> Fault:
        return cls(FaultKind.SLOW, delay=delay, endpoint=endpoint)

    @classmethod
    def timeout(cls, delay: float = 30.0, *, endpoint: str = "chat") -> Fault:
        return cls(FaultKind.TIMEOUT, delay=delay, endpoint=endpoint)

    @classmethod
    def disconnect(cls, *, endpoint: str = "chat") -> Fault:
        return cls(FaultKind.DISCONNECT, endpoint=endpoint)

    @classmethod
    def malformed_json(cls) -> Fault:
        return cls(FaultKind.MALFORMED_JSON)

    @classmethod
    def schema_invalid(cls) -> Fault:
        return cls(FaultKind.SCHEMA_INVALID)

    @classmethod
    def truncated(cls) -> Fault:
        return cls(FaultKind.TRUNCATED)

    @classmethod
    def refusal(cls, message: str = "I'm sorry, but I can't help with that request.") -> Fault:
        return cls(FaultKind.REFUSAL, message=message)

    @classmethod
    def content_filter(cls) -> Fault:
        return cls(FaultKind.CONTENT_FILTER)

    @classmethod
    def unauthorized(cls, status: int = 401, *, endpoint: str = "chat") -> Fault:
        """The key is refused (revoked mid-run); the error body repeats it, as careless servers do."""
        return cls(FaultKind.UNAUTHORIZED, status=status, endpoint=endpoint)

    @classmethod
    def of(cls, kind: FaultKind) -> Fault:
        """The default fault of a kind (used for probabilistic injection)."""
        return {
            FaultKind.RATE_LIMIT: cls.rate_limit(),
            FaultKind.QUOTA: cls.quota(),
            FaultKind.SERVER_ERROR: cls.server_error(),
            FaultKind.SLOW: cls.slow(0.05),
            FaultKind.TIMEOUT: cls.timeout(),
            FaultKind.DISCONNECT: cls.disconnect(),
        }.get(kind, cls(kind))

    def matching(self, text: str) -> Fault:
        """This fault, for the next request whose body contains ``text`` (e.g. one batch line)."""
        return replace(self, match=text)

    def applies_to(self, endpoint: str, body: Any = None) -> bool:
        if self.endpoint not in ("any", endpoint):
            return False
        return not self.match or self.match in json.dumps(body, ensure_ascii=False)


@dataclass
class LoggedRequest:
    method: str
    path: str
    headers: dict[str, str]
    body: Any
    status: int = 0
    fault: FaultKind | None = None
    at: float = field(default_factory=time.monotonic)
    params: dict[str, str] = field(
        default_factory=dict
    )  # path parameters (``/v1/batches/{batch_id}``)
    upload: tuple[str, bytes] | None = None  # multipart file: (filename, content)
    query: dict[str, str] = field(default_factory=dict)  # the URL's query parameters (last value)
    early: bool = False  # a retry sent before the Retry-After it was given had elapsed

    @property
    def template_id(self) -> str | None:
        return self.headers.get("x-memoryquest-template")


class _RateLimit:
    """Token bucket holding one second's worth of requests, refilled continuously."""

    def __init__(self, per_minute: float) -> None:
        self.per_minute = per_minute
        self.rate = per_minute / 60.0
        self.capacity = max(1.0, self.rate)
        self.level = self.capacity
        self.updated = time.monotonic()
        self.lock = threading.Lock()

    def take(self) -> float | None:
        """None when allowed, else the seconds until the next request would be (the quota is spent)."""
        with self.lock:
            now = time.monotonic()
            self.level = min(self.capacity, self.level + (now - self.updated) * self.rate)
            self.updated = now
            if self.level >= 1.0:
                self.level -= 1.0
                return None
            return (1.0 - self.level) / self.rate


@dataclass
class _StoredFile:
    id: str
    filename: str
    content: bytes
    purpose: str
    created_at: int

    def describe(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "object": "file",
            "bytes": len(self.content),
            "created_at": self.created_at,
            "filename": self.filename,
            "purpose": self.purpose,
            "status": "processed",
        }


@dataclass
class _BatchState:
    lines: list[dict[str, Any]]
    created: float  # monotonic
    headers: dict[str, str]  # of the create request (authorization travels to every line)
    model: str  # of its first line: the queue limit is per model
    tokens: int  # prompt tokens enqueued, as the server bills them
    problems: list[dict[str, Any]]  # reported when validation ends: the batch fails
    polls: int = 0
    finalizing_polls: int = 0
    expired: bool = False  # its lines ran out of time: it ends expired, not completed


ENQUEUED_STATUSES = ("validating", "in_progress", "finalizing")


def _jsonl(records: list[dict[str, Any]]) -> bytes:
    return "".join(json.dumps(record) + "\n" for record in records).encode("utf-8")


def _error_body(message: str, code: str) -> dict[str, Any]:
    return {"error": {"message": message, "type": "server_error", "param": None, "code": code}}


def billed_prompt_tokens(body: dict[str, Any]) -> int:
    """The prompt tokens of a chat body, as the server bills them (and counts them enqueued)."""
    messages = [m for m in body.get("messages") or [] if isinstance(m, dict)]
    return token_counter(str(body.get("model") or "")).count_messages(messages)


def _read_batch_input(
    content: bytes, endpoint: str
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """The lines of a batch input file, and what is wrong with it (the batch fails if anything is)."""
    lines: list[dict[str, Any]] = []
    problems: list[dict[str, Any]] = []
    seen: set[str] = set()
    for number, raw in enumerate(content.decode("utf-8", "replace").splitlines(), start=1):
        if not raw.strip():
            continue
        try:
            line = json.loads(raw)
        except ValueError:
            problems.append(
                {
                    "code": "invalid_json_line",
                    "line": number,
                    "message": "This line is not valid JSON.",
                }
            )
            continue
        if not isinstance(line, dict) or not isinstance(line.get("custom_id"), str):
            problems.append(
                {
                    "code": "missing_required_parameter",
                    "line": number,
                    "message": "custom_id is required.",
                }
            )
            continue
        if line["custom_id"] in seen:
            problems.append(
                {
                    "code": "duplicate_custom_id",
                    "line": number,
                    "message": f"custom_id {line['custom_id']!r} repeats.",
                }
            )
            continue
        if (
            line.get("method") != "POST"
            or line.get("url") != endpoint
            or not isinstance(line.get("body"), dict)
        ):
            problems.append(
                {
                    "code": "invalid_request",
                    "line": number,
                    "message": f"each line needs method POST, url {endpoint} and a JSON body.",
                }
            )
            continue
        seen.add(line["custom_id"])
        lines.append(line)
    if not lines and not problems:
        problems.append(
            {"code": "empty_file", "line": None, "message": "The input file has no requests."}
        )
    return lines, problems


Reply = tuple[int, Any, dict[str, str]]
"""What a route replies: the HTTP status, the JSON body and extra response headers."""

Route = Callable[[LoggedRequest, dict[str, str]], Reply]


class _ErrorAnswer(Exception):
    def __init__(
        self, status: int, message: str, *, code: str | None = None, param: str | None = None
    ) -> None:
        super().__init__(message)
        self.status = status
        self.body = {
            "error": {
                "message": message,
                "type": "invalid_request_error",
                "param": param,
                "code": code,
            }
        }


_RowT = TypeVar("_RowT")


def _found(rows: Mapping[str, _RowT], key: str, message: str, param: str) -> _RowT:
    """``rows[key]``, or the API's 404 with ``message``, naming the parameter ``param``."""
    row = rows.get(key)
    if row is None:
        raise _ErrorAnswer(404, message, param=param)
    return row


def hashed_embedding(text: str, dimension: int) -> list[float]:
    """Deterministic bag-of-words hashing; see the module docstring."""
    vector = np.zeros(dimension, dtype=np.float64)
    words = re.findall(r"\w+", text.lower()) or [text]
    for word in words:
        digest = hashlib.blake2b(word.encode("utf-8"), digest_size=8).digest()
        value = int.from_bytes(digest, "little")
        vector[value % dimension] += 1.0 if (value >> 63) & 1 else -1.0
    norm = float(np.linalg.norm(vector)) or 1.0
    return [float(x) for x in vector / norm]


class LoopbackServer:
    """A threaded HTTP server on 127.0.0.1 for one test or benchmark: ``with Server(...) as s``.

    Subclasses name their request handler (whose ``owner`` is set to the server) and backlog.
    """

    backlog = 128  # ~30 concurrent connects must not overflow the backlog
    thread_name = "loopback-openai"

    def handler(self) -> type[BaseHTTPRequestHandler]:
        """The request handler class; each request's handler reads the server as ``owner``."""
        raise NotImplementedError

    def __init__(self) -> None:
        self._stopping = threading.Event()
        self._httpd: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    def start(self) -> Self:
        handler = type("Handler", (self.handler(),), {"owner": self})
        httpd = ThreadingHTTPServer(("127.0.0.1", 0), handler, bind_and_activate=False)
        httpd.daemon_threads = True
        httpd.request_queue_size = self.backlog
        httpd.allow_reuse_address = True
        httpd.server_bind()
        httpd.server_activate()
        self._httpd = httpd
        self._stopping.clear()
        self._thread = threading.Thread(
            target=httpd.serve_forever,
            kwargs={"poll_interval": 0.05},
            name=self.thread_name,
            daemon=True,
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stopping.set()  # wakes handlers sleeping on latency or timeout faults
        if self._httpd is not None:
            self._httpd.shutdown()
            self._httpd.server_close()
            self._httpd = None
        if self._thread is not None:
            self._thread.join(timeout=5)
            self._thread = None

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def port(self) -> int:
        if self._httpd is None:
            raise RuntimeError(f"the {type(self).__name__} is not running")
        return int(self._httpd.server_address[1])

    @property
    def url(self) -> str:
        """The base URL for the SDK (``.../v1``)."""
        return f"http://127.0.0.1:{self.port}/v1"


class FakeOpenAIServer(LoopbackServer):
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
        self.rate_limit = _RateLimit(requests_per_minute) if requests_per_minute else None
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
        self.files: dict[str, _StoredFile] = {}
        self.batches: dict[str, dict[str, Any]] = {}
        self.batch_lines: list[LoggedRequest] = []
        self._batch_lock = threading.RLock()  # held while a batch runs, which stores files
        self._batch_state: dict[str, _BatchState] = {}
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

    # --- lifecycle ------------------------------------------------------------------------

    # --- test controls --------------------------------------------------------------------

    def script(self, *faults: Fault) -> None:
        """The next matching requests fail with these faults, in order."""
        with self._lock:
            self._scripted.extend(faults)

    def set_fault_rates(
        self,
        rates: dict[FaultKind, float],
        seed: int = 0,
        faults: dict[FaultKind, Fault] | None = None,
    ) -> None:
        """Each request draws at most one fault: ``kind`` with probability ``rates[kind]``.

        ``faults`` gives the fault drawn for a kind (e.g. ``Fault.rate_limit(1.0)``
        for a one-second Retry-After); by default ``Fault.of(kind)``.
        """
        if sum(rates.values()) > 1.0:
            raise ValueError("fault rates must sum to at most 1")
        with self._lock:
            self._rates = dict(rates)
            self._drawn = dict(faults or {})
            self._rng = random.Random(seed)

    def clear_log(self) -> None:
        with self._lock:
            self.requests.clear()
            self.max_in_flight = self.in_flight

    def answer_with(self, template_id: str, answer: TemplateAnswer | None) -> None:
        """Answer ``template_id``'s requests with ``answer(variables, model)`` (its JSON-ready reply,
        or None to let the simulator answer), as another model would; None: the simulator again.

        The model is the request's ``model`` field, so a test can tell the chat model's answers
        from the judge model's.
        """
        with self._lock:
            if answer is None:
                self._answers.pop(template_id, None)
            else:
                self._answers[template_id] = answer

    def set_rate_limit(self, requests_per_minute: float | None) -> None:
        """Enforce (or, with None, stop enforcing) a requests/min limit."""
        self.rate_limit = _RateLimit(requests_per_minute) if requests_per_minute else None

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

    @property
    def pending_faults(self) -> int:
        with self._lock:
            return len(self._scripted)

    # --- request handling -----------------------------------------------------------------

    def _log(self, entry: LoggedRequest) -> None:
        with self._lock:
            self.requests.append(entry)

    def _next_fault(self, endpoint: str, body: Any = None) -> Fault | None:
        with self._lock:
            for index, fault in enumerate(self._scripted):
                if fault.applies_to(endpoint, body):
                    del self._scripted[index]
                    return fault
            if self._rates:
                draw = self._rng.random()
                for kind, rate in self._rates.items():
                    if draw < rate and (endpoint == "chat" or kind not in CONTENT_FAULTS):
                        return self._drawn.get(kind) or Fault.of(kind)
                    draw -= rate
        return None

    def _sleep(self, seconds: float) -> None:
        if seconds > 0:
            self._stopping.wait(seconds)

    def _admit(
        self, entry: LoggedRequest, headers: dict[str, str], endpoint: str, *, limited: bool = True
    ) -> Fault | None:
        """Auth, rate limit and transport faults; returns the content fault, if any."""
        if self.api_key is not None and headers.get("authorization") != f"Bearer {self.api_key}":
            raise self._refused(headers)
        identity = self._check_retry(entry) if limited else None
        try:
            return self._admit_or_fault(entry, headers, endpoint, limited)
        except _RateLimited as exc:
            if identity is not None and exc.retry_after is not None:
                with self._lock:
                    self._not_before[identity] = time.monotonic() + exc.retry_after
            raise

    def _check_retry(self, entry: LoggedRequest) -> str:
        """Count a request sent again before the Retry-After it was given had elapsed."""
        identity = hashlib.blake2b(
            json.dumps(entry.body, sort_keys=True, default=str).encode("utf-8"), digest_size=16
        ).hexdigest()
        with self._lock:
            not_before = self._not_before.pop(identity, None)
            if not_before is not None and entry.at < not_before - 0.001:
                self.early_retries += 1
                entry.early = True
        return identity

    def _admit_or_fault(
        self, entry: LoggedRequest, headers: dict[str, str], endpoint: str, limited: bool
    ) -> Fault | None:
        if limited and self.rate_limit is not None:
            wait = self.rate_limit.take()
            if wait is not None:
                entry.fault = FaultKind.QUOTA
                raise _RateLimited(wait, ms=True, quota=self.rate_limit.per_minute)
        fault = self._next_fault(endpoint, entry.body)
        if fault is None:
            return None
        entry.fault = fault.kind
        if fault.kind is FaultKind.RATE_LIMIT:
            raise _RateLimited(fault.retry_after, ms=fault.retry_after_ms)
        if fault.kind is FaultKind.QUOTA:
            limit = self.rate_limit.per_minute if self.rate_limit is not None else None
            raise _RateLimited(fault.retry_after, ms=fault.retry_after_ms, quota=limit or 0.0)
        if fault.kind is FaultKind.SERVER_ERROR:
            raise _ErrorAnswer(
                fault.status,
                "The server had an error while processing your request.",
                code="server_error",
            )
        if fault.kind is FaultKind.UNAUTHORIZED:
            raise self._refused(headers, status=fault.status, echo=True)
        if fault.kind is FaultKind.TIMEOUT:
            raise _Stall(fault.delay)
        if fault.kind is FaultKind.DISCONNECT:
            raise _Disconnect()
        if fault.kind is FaultKind.SLOW:
            self._sleep(fault.delay)
            return None
        return fault

    def _chat(
        self, entry: LoggedRequest, headers: dict[str, str], *, in_batch: bool = False
    ) -> Reply:
        body = entry.body
        if not isinstance(body, dict) or not isinstance(body.get("model"), str):
            raise _ErrorAnswer(400, "you must provide a model parameter", param="model")
        messages = body.get("messages")
        if not isinstance(messages, list) or not messages:
            raise _ErrorAnswer(400, "messages must be a non-empty array", param="messages")
        fault = self._admit(entry, headers, "chat", limited=not in_batch)
        self._sleep(self.latency)
        response_format = body.get("response_format") or {}
        kind = response_format.get("type") if isinstance(response_format, dict) else None
        if kind == "json_schema" and not self.supports_json_schema:
            raise _ErrorAnswer(
                400,
                "response_format 'json_schema' is not supported by this server",
                param="response_format",
            )
        if kind == "json_object" and not self.supports_json_object:
            raise _ErrorAnswer(
                400,
                "response_format 'json_object' is not supported by this server",
                param="response_format",
            )
        hints = decode_hints(headers)
        if hints is None or hints.variables is None:
            raise _ErrorAnswer(
                400,
                "this test server answers from the simulator: send the X-MemoryQuest-Template and "
                "X-MemoryQuest-Variables headers (set endpoint.simulator_hints = true; memoryquest.llm.hints)",
            )
        try:
            with (
                self._simulator_lock
            ):  # one answer at a time: its memos and stemmer are not thread-safe
                chosen = self._answers.get(hints.template_id)
                given = chosen(hints.variables, body["model"]) if chosen is not None else None
                answer = (
                    json.dumps(given, ensure_ascii=False)
                    if given is not None
                    else simulate(hints.template_id, hints.variables, seed=hints.seed)
                )
        except KeyError as exc:
            raise _ErrorAnswer(400, str(exc.args[0]) if exc.args else str(exc)) from exc
        content: str | None = (
            answer
            if kind in ("json_schema", "json_object")
            else (f"Here is the answer you asked for.\n\n```json\n{answer}\n```\n")
        )
        refusal = None
        finish = "stop"
        if fault is not None:
            if fault.kind is FaultKind.MALFORMED_JSON:
                content = '{"this is": not json'
            elif fault.kind is FaultKind.SCHEMA_INVALID:
                content = json.dumps({"unexpected": True})
            elif fault.kind is FaultKind.TRUNCATED:
                content = (content or "")[: max(1, len(content or "") // 2)]
                finish = "length"
            elif fault.kind is FaultKind.REFUSAL:
                content, refusal = None, fault.message
            elif fault.kind is FaultKind.CONTENT_FILTER:
                content, finish = None, "content_filter"
        counter = token_counter(body["model"])
        prompt_tokens = billed_prompt_tokens(body)
        cached_tokens = (
            min(self.cached_tokens, prompt_tokens)
            if self.cached_tokens
            else self._cached_prefix(body, messages)
        )
        completion_tokens = counter.count(content or refusal or "")
        if finish == "length":
            limit = body.get("max_completion_tokens") or body.get("max_tokens")
            completion_tokens = int(limit) if limit else completion_tokens
        with self._lock:
            self._counter += 1
            number = self._counter
        return (
            200,
            {
                "id": f"chatcmpl-fake{number}",
                "object": "chat.completion",
                "created": int(time.time()),
                "model": body["model"],
                "system_fingerprint": "fp_fake",
                "choices": [
                    {
                        "index": 0,
                        "message": {"role": "assistant", "content": content, "refusal": refusal},
                        "finish_reason": finish,
                        "logprobs": None,
                    }
                ],
                "usage": {
                    "prompt_tokens": prompt_tokens,
                    "completion_tokens": completion_tokens,
                    "total_tokens": prompt_tokens + completion_tokens,
                    "prompt_tokens_details": {"cached_tokens": cached_tokens},
                }
                if self.report_usage
                else None,
            },
            {},
        )

    def _cached_prefix(self, body: dict[str, Any], messages: list[Any]) -> int:
        """Prompt caching as the real API does it (``memoryquest.llm.prompt_cache_model``)."""
        if not self.prompt_caching:
            return 0
        model = str(body.get("model"))
        return self._prompt_cache.cached_tokens(
            (model, str(body.get("prompt_cache_key") or "")),
            [m for m in messages if isinstance(m, dict)],
            token_counter(model),
        )

    def _embeddings(self, entry: LoggedRequest, headers: dict[str, str]) -> Reply:
        body = entry.body
        if not isinstance(body, dict) or not isinstance(body.get("model"), str):
            raise _ErrorAnswer(400, "you must provide a model parameter", param="model")
        texts = body.get("input")
        if isinstance(texts, str):
            texts = [texts]
        if (
            not isinstance(texts, list)
            or not texts
            or not all(isinstance(t, str) and t for t in texts)
        ):
            raise _ErrorAnswer(
                400, "input must be a non-empty string or array of non-empty strings", param="input"
            )
        self._admit(entry, headers, "embeddings")
        self._sleep(self.latency)
        answer = embeddings_answer(body, texts, self.embedding_dimension)
        if self.shuffle_embeddings:
            answer["data"].reverse()
        return 200, answer, {}

    def _refused(
        self, headers: dict[str, str], *, status: int = 401, echo: bool | None = None
    ) -> _ErrorAnswer:
        """The answer to a refused key; with ``echo`` (default ``self.echo_key``) it repeats the key."""
        presented = headers.get("authorization", "").removeprefix("Bearer ").strip()
        if echo if echo is not None else self.echo_key:
            message = f"Incorrect API key provided: {presented}. Authorization: Bearer {presented}"
        else:
            message = "Incorrect API key provided."
        return _ErrorAnswer(status, message, code="invalid_api_key")

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

    # --- Batch API ------------------------------------------------------------------------

    def _new_id(self, prefix: str) -> str:
        with self._lock:
            self._counter += 1
            return f"{prefix}-fake{self._counter}"

    def _store_file(self, filename: str, content: bytes, purpose: str) -> _StoredFile:
        stored = _StoredFile(self._new_id("file"), filename, content, purpose, int(time.time()))
        with self._batch_lock:
            self.files[stored.id] = stored
        return stored

    def file_lines(self, file_id: str) -> list[dict[str, Any]]:
        """The JSON lines of a stored file (for assertions on what was uploaded or answered)."""
        with self._batch_lock:
            stored = self.files[file_id]
        return [
            json.loads(line) for line in stored.content.decode("utf-8").splitlines() if line.strip()
        ]

    def _upload_file(self, entry: LoggedRequest, headers: dict[str, str]) -> Reply:
        self._admit(entry, headers, "files")
        body = entry.body if isinstance(entry.body, dict) else {}
        purpose = body.get("purpose")
        if purpose not in ("batch", "fine-tune", "assistants", "user_data", "vision", "evals"):
            raise _ErrorAnswer(400, f"invalid purpose {purpose!r}", param="purpose")
        if entry.upload is None:
            raise _ErrorAnswer(400, "a multipart 'file' part is required", param="file")
        filename, content = entry.upload
        if purpose == "batch" and not filename.endswith(".jsonl"):
            raise _ErrorAnswer(400, "batch input files must be .jsonl", param="file")
        return 200, self._store_file(filename, content, purpose).describe(), {}

    def _stored(self, file_id: str) -> _StoredFile:
        with self._batch_lock:
            return _found(self.files, file_id, f"No such File object: {file_id}", "id")

    def _file_info(self, entry: LoggedRequest, headers: dict[str, str]) -> Reply:
        self._admit(entry, headers, "files")
        return 200, self._stored(entry.params["file_id"]).describe(), {}

    def _file_content(self, entry: LoggedRequest, headers: dict[str, str]) -> Reply:
        self._admit(entry, headers, "files")
        return 200, self._stored(entry.params["file_id"]).content, {}

    def _create_batch(self, entry: LoggedRequest, headers: dict[str, str]) -> Reply:
        self._admit(entry, headers, "batches")
        body = entry.body
        endpoint = body.get("endpoint")
        if endpoint not in (
            "/v1/chat/completions",
            "/v1/embeddings",
            "/v1/responses",
            "/v1/completions",
        ):
            raise _ErrorAnswer(400, f"invalid endpoint {endpoint!r}", param="endpoint")
        if body.get("completion_window") != "24h":
            raise _ErrorAnswer(400, "completion_window must be '24h'", param="completion_window")
        stored = self._stored(str(body.get("input_file_id")))
        if stored.purpose != "batch":
            raise _ErrorAnswer(
                400,
                f"file {stored.id} has purpose {stored.purpose!r}, not 'batch'",
                param="input_file_id",
            )
        lines, problems = _read_batch_input(stored.content, endpoint)
        now = int(time.time())
        batch: dict[str, Any] = {
            "id": self._new_id("batch"),
            "object": "batch",
            "endpoint": endpoint,
            "errors": None,
            "input_file_id": stored.id,
            "completion_window": "24h",
            "status": "validating",
            "output_file_id": None,
            "error_file_id": None,
            "created_at": now,
            "in_progress_at": None,
            "expires_at": now + 24 * 3600,
            "finalizing_at": None,
            "completed_at": None,
            "failed_at": None,
            "expired_at": None,
            "cancelling_at": None,
            "cancelled_at": None,
            "request_counts": {"total": len(lines), "completed": 0, "failed": 0},
            "metadata": body.get("metadata"),
        }
        model = str(lines[0]["body"].get("model") or "") if lines and not problems else ""
        tokens = sum(billed_prompt_tokens(line["body"]) for line in lines) if not problems else 0
        with self._batch_lock:
            limit = self.batch_enqueued_tokens_max
            if not problems and limit is not None:
                enqueued = sum(
                    state.tokens
                    for batch_id, state in self._batch_state.items()
                    if state.model == model
                    and not state.problems
                    and self.batches[batch_id]["status"] in ENQUEUED_STATUSES
                )
                if enqueued + tokens > limit:
                    problems = [
                        {
                            "code": "token_limit_exceeded",
                            "line": None,
                            "param": None,
                            "message": f"Enqueued token limit reached for {model} in organization "
                            f"org-fake. Limit: {limit:,} enqueued tokens. Please try again once "
                            "some in_progress batches have been completed.",
                        }
                    ]
            self.batches[batch["id"]] = batch
            self._batch_state[batch["id"]] = _BatchState(
                lines, time.monotonic(), dict(headers), model, tokens, problems
            )
            return 200, dict(batch), {}

    def _list_batches(self, entry: LoggedRequest, headers: dict[str, str]) -> Reply:
        self._admit(entry, headers, "batches")
        query = entry.query
        try:
            limit = int(query.get("limit", "20"))
        except ValueError:
            raise _ErrorAnswer(400, "limit must be an integer", param="limit") from None
        if not 1 <= limit <= 100:
            raise _ErrorAnswer(400, "limit must be between 1 and 100", param="limit")
        with self._batch_lock:
            newest_first = [dict(batch) for batch in reversed(self.batches.values())]
        after = query.get("after")
        if after is not None:
            ids = [batch["id"] for batch in newest_first]
            if after not in ids:
                raise _ErrorAnswer(404, f"No batch found with id '{after}'.", param="after")
            newest_first = newest_first[ids.index(after) + 1 :]
        data = newest_first[:limit]
        return (
            200,
            {
                "object": "list",
                "data": data,
                "first_id": data[0]["id"] if data else None,
                "last_id": data[-1]["id"] if data else None,
                "has_more": len(newest_first) > limit,
            },
            {},
        )

    def _batch(self, batch_id: str) -> dict[str, Any]:
        return _found(self.batches, batch_id, f"No batch found with id '{batch_id}'.", "batch_id")

    def _retrieve_batch(self, entry: LoggedRequest, headers: dict[str, str]) -> Reply:
        self._admit(entry, headers, "batches")
        with (
            self._batch_lock
        ):  # held while the lines run: a concurrent poll must not run them twice
            batch = self._batch(entry.params["batch_id"])
            state = self._batch_state[batch["id"]]
            state.polls += 1
            now = int(time.time())
            status = batch["status"]
            if status == "cancelling":
                batch.update(status="cancelled", cancelled_at=now)
            elif status == "finalizing":
                state.finalizing_polls -= 1
                if state.finalizing_polls <= 0:
                    self._finish_batch(batch, state)
            elif status == "validating":
                if state.problems:
                    batch.update(
                        status="failed",
                        failed_at=now,
                        errors={"object": "list", "data": state.problems},
                    )
                else:
                    batch.update(status="in_progress", in_progress_at=now)
            due = (
                state.polls > self.batch_polls
                and time.monotonic() - state.created >= self.batch_delay
            )
            if batch["status"] == "in_progress" and due:
                self._run_batch(batch, state)
            return 200, dict(batch), {}

    def _cancel_batch(self, entry: LoggedRequest, headers: dict[str, str]) -> Reply:
        self._admit(entry, headers, "batches")
        with self._batch_lock:
            batch = self._batch(entry.params["batch_id"])
            if batch["status"] not in ("validating", "in_progress"):
                raise _ErrorAnswer(400, f"Cannot cancel a batch with status '{batch['status']}'.")
            batch.update(status="cancelling", cancelling_at=int(time.time()))
            return 200, dict(batch), {}

    def _run_batch(self, batch: dict[str, Any], state: _BatchState) -> None:
        """Every line through the chat handler; results into an output and an error file."""
        outputs: list[dict[str, Any]] = []
        errors: list[dict[str, Any]] = []
        limit = self.batch_expire_after
        for index, line in enumerate(state.lines):
            number = self._new_id("batch_req")
            custom_id = line["custom_id"]
            if limit is not None and index >= limit:
                errors.append(
                    {
                        "id": number,
                        "custom_id": custom_id,
                        "response": None,
                        "error": {
                            "code": "batch_expired",
                            "message": "This request could not be executed before the completion window expired.",
                        },
                    }
                )
                continue
            hints = line.get(HINTS_FIELD) or {}
            headers = {**state.headers, **{str(k).lower(): str(v) for k, v in hints.items()}}
            entry = LoggedRequest(
                method="POST", path=line["url"], headers=headers, body=line["body"]
            )
            try:
                status, payload, _ = self._chat(entry, headers, in_batch=True)
            except _ErrorAnswer as exc:
                status, payload = exc.status, exc.body
            except _RateLimited:
                status, payload = (
                    429,
                    _error_body(
                        "Rate limit reached for requests (fake server).", "rate_limit_exceeded"
                    ),
                )
            except (_Stall, _Disconnect):
                status, payload = (
                    500,
                    _error_body("The server had an error processing your request.", "server_error"),
                )
            entry.status = status
            with self._lock:
                self.batch_lines.append(entry)
            record = {
                "id": number,
                "custom_id": custom_id,
                "response": {"status_code": status, "request_id": f"req_{number}", "body": payload},
                "error": None,
            }
            (outputs if status == 200 else errors).append(record)
        now = int(time.time())
        expired = limit is not None and limit < len(state.lines)
        batch["request_counts"] = {
            "total": len(state.lines),
            "completed": len(outputs),
            "failed": len(errors),
        }
        if outputs:
            batch["output_file_id"] = self._store_file(
                f"{batch['id']}_output.jsonl", _jsonl(outputs), "batch_output"
            ).id
        if errors:
            batch["error_file_id"] = self._store_file(
                f"{batch['id']}_error.jsonl", _jsonl(errors), "batch_output"
            ).id
        batch["finalizing_at"] = now
        state.expired = expired
        state.finalizing_polls = self.batch_finalizing_polls
        batch["status"] = "finalizing"
        if state.finalizing_polls <= 0:
            self._finish_batch(batch, state)

    @staticmethod
    def _finish_batch(batch: dict[str, Any], state: _BatchState) -> None:
        now = int(time.time())
        if state.expired:
            batch.update(status="expired", expired_at=now)
        else:
            batch.update(status="completed", completed_at=now)


class _RateLimited(Exception):
    """A 429; with ``quota`` (the per-minute limit, 0 when unknown) it carries the quota headers."""

    def __init__(self, retry_after: float | None, *, ms: bool, quota: float | None = None) -> None:
        super().__init__("rate limited")
        self.retry_after = retry_after
        self.headers: dict[str, str] = {}
        if quota is not None:
            self.headers["x-ratelimit-remaining-requests"] = "0"
            if quota:
                self.headers["x-ratelimit-limit-requests"] = f"{quota:g}"
        if retry_after is not None:
            if ms:
                self.headers["retry-after-ms"] = str(max(1, math.ceil(retry_after * 1000)))
            self.headers["retry-after"] = (
                str(max(1, math.ceil(retry_after))) if ms else f"{retry_after:g}"
            )


class _Disconnect(Exception):
    pass


class _Stall(Exception):
    """Reply nothing for ``delay`` seconds, then hang up (the client has timed out by then)."""

    def __init__(self, delay: float) -> None:
        super().__init__("stall")
        self.delay = delay


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
                raise _ErrorAnswer(404, f"no route {method} {path} on the fake server")
            if (
                method == "POST"
                and not isinstance(body, dict)
                and (body is not None or not entry.params)
            ):
                raise _ErrorAnswer(400, "the request body must be a JSON object")
            status, payload, extra = route(entry, headers)
        except _ErrorAnswer as exc:
            status, payload = exc.status, exc.body
        except _RateLimited as exc:
            status, extra = 429, exc.headers
            payload = {
                "error": {
                    "message": "Rate limit reached for requests (fake server).",
                    "type": "requests",
                    "param": None,
                    "code": "rate_limit_exceeded",
                }
            }
        except _Stall as exc:
            entry.status = -1
            owner._leave()  # abandoned by the client: not counted as being answered
            self._left = True
            owner._sleep(exc.delay)
            self.close_connection = True
            return
        except _Disconnect:
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


def write_response(
    handler: BaseHTTPRequestHandler,
    status: int,
    data: bytes,
    content_type: str,
    headers: dict[str, str],
) -> None:
    """Send one answer; a client that hung up meanwhile only closes the connection."""
    try:
        handler.send_response(status)
        handler.send_header("Content-Type", content_type)
        handler.send_header("Content-Length", str(len(data)))
        for name, value in headers.items():
            handler.send_header(name, value)
        handler.end_headers()
        handler.wfile.write(data)
    except (BrokenPipeError, ConnectionResetError):
        handler.close_connection = True


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


def embeddings_answer(body: dict[str, Any], texts: list[str], dimension: int) -> dict[str, Any]:
    """The answer to an embeddings request for ``texts``: each text's hashed vector (the same
    for a text whatever batch it comes in), as floats or base64 as the request asks."""
    as_base64 = body.get("encoding_format") == "base64"
    dimension = int(body.get("dimensions") or dimension)
    data = []
    for index, text in enumerate(texts):
        vector = hashed_embedding(text, dimension)
        encoded: Any = (
            base64.b64encode(np.asarray(vector, dtype="<f4").tobytes()).decode("ascii")
            if as_base64
            else vector
        )
        data.append({"object": "embedding", "index": index, "embedding": encoded})
    tokens = token_counter(body["model"]).count_many(texts)
    return {
        "object": "list",
        "data": data,
        "model": body["model"],
        "usage": {"prompt_tokens": tokens, "total_tokens": tokens},
    }


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
        self.rate_limit = _RateLimit(requests_per_minute) if requests_per_minute else None
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
                limited = _RateLimited(wait, ms=True, quota=self.rate_limit.per_minute)
                error = _error_body(
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
            error = _error_body(f"no recorded answer for this {path} request", "not_recorded")
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
