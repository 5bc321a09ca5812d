"""The Files and Batches endpoints of the fake server (``/v1/files``, ``/v1/batches``).

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
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from memoryquest.llm.batch_openai import HINTS_FIELD
from memoryquest.testing.fake_openai.chat import billed_prompt_tokens
from memoryquest.testing.fake_openai.exchange import (
    Disconnect,
    ErrorAnswer,
    LoggedRequest,
    RateLimited,
    Reply,
    Stall,
    error_body,
    found,
)
from memoryquest.testing.fake_openai.faults import Fault


@dataclass
class StoredFile:
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
class BatchState:
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


class FilesAndBatches:
    """The Files and Batches API of :class:`FakeOpenAIServer` (a mixin of the server)."""

    # Set by the server's constructor (``server``).
    files: dict[str, StoredFile]
    batches: dict[str, dict[str, Any]]
    batch_lines: list[LoggedRequest]
    batch_polls: int
    batch_delay: float
    batch_expire_after: int | None
    batch_finalizing_polls: int
    batch_enqueued_tokens_max: int | None
    _batch_lock: threading.RLock
    _batch_state: dict[str, BatchState]
    _lock: threading.Lock
    _counter: int
    _admit: Callable[..., Fault | None]
    _chat: Callable[..., Reply]

    def _new_id(self, prefix: str) -> str:
        with self._lock:
            self._counter += 1
            return f"{prefix}-fake{self._counter}"

    def _store_file(self, filename: str, content: bytes, purpose: str) -> StoredFile:
        stored = StoredFile(self._new_id("file"), filename, content, purpose, int(time.time()))
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
            raise ErrorAnswer(400, f"invalid purpose {purpose!r}", param="purpose")
        if entry.upload is None:
            raise ErrorAnswer(400, "a multipart 'file' part is required", param="file")
        filename, content = entry.upload
        if purpose == "batch" and not filename.endswith(".jsonl"):
            raise ErrorAnswer(400, "batch input files must be .jsonl", param="file")
        return 200, self._store_file(filename, content, purpose).describe(), {}

    def _stored(self, file_id: str) -> StoredFile:
        with self._batch_lock:
            return found(self.files, file_id, f"No such File object: {file_id}", "id")

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
            raise ErrorAnswer(400, f"invalid endpoint {endpoint!r}", param="endpoint")
        if body.get("completion_window") != "24h":
            raise ErrorAnswer(400, "completion_window must be '24h'", param="completion_window")
        stored = self._stored(str(body.get("input_file_id")))
        if stored.purpose != "batch":
            raise ErrorAnswer(
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
            self._batch_state[batch["id"]] = BatchState(
                lines, time.monotonic(), dict(headers), model, tokens, problems
            )
            return 200, dict(batch), {}

    def _list_batches(self, entry: LoggedRequest, headers: dict[str, str]) -> Reply:
        self._admit(entry, headers, "batches")
        query = entry.query
        try:
            limit = int(query.get("limit", "20"))
        except ValueError:
            raise ErrorAnswer(400, "limit must be an integer", param="limit") from None
        if not 1 <= limit <= 100:
            raise ErrorAnswer(400, "limit must be between 1 and 100", param="limit")
        with self._batch_lock:
            newest_first = [dict(batch) for batch in reversed(self.batches.values())]
        after = query.get("after")
        if after is not None:
            ids = [batch["id"] for batch in newest_first]
            if after not in ids:
                raise ErrorAnswer(404, f"No batch found with id '{after}'.", param="after")
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
        return found(self.batches, batch_id, f"No batch found with id '{batch_id}'.", "batch_id")

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
                raise ErrorAnswer(400, f"Cannot cancel a batch with status '{batch['status']}'.")
            batch.update(status="cancelling", cancelling_at=int(time.time()))
            return 200, dict(batch), {}

    def _run_batch(self, batch: dict[str, Any], state: BatchState) -> None:
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
            except ErrorAnswer as exc:
                status, payload = exc.status, exc.body
            except RateLimited:
                status, payload = (
                    429,
                    error_body(
                        "Rate limit reached for requests (fake server).", "rate_limit_exceeded"
                    ),
                )
            except (Stall, Disconnect):
                status, payload = (
                    500,
                    error_body("The server had an error processing your request.", "server_error"),
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
    def _finish_batch(batch: dict[str, Any], state: BatchState) -> None:
        now = int(time.time())
        if state.expired:
            batch.update(status="expired", expired_at=now)
        else:
            batch.update(status="completed", completed_at=now)
