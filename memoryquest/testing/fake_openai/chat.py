"""Chat completions, answered from the offline simulator (the package docstring says how a
request names its template and variables), with the token usage the real API reports.

With ``prompt_caching=True`` (off by default, so existing cost checks stay
exact) prompt caching works as the real API's does:
``prompt_tokens_details.cached_tokens`` is the longest prefix shared with an
earlier prompt of the same model and ``prompt_cache_key``, when it is at
least 1,024 tokens, in steps of 128.

A test can answer one template as another model would
(``server.answer_with(template_id, answer)``: ``answer(variables, model)``
returns the reply, or None to leave it to the simulator), for example a
reviewer that flags one conversation (``tests/test_stages_review.py``).
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from typing import Any

from memoryquest.llm.hints import decode_hints
from memoryquest.llm.prompt_cache_model import PromptPrefixCache
from memoryquest.llm.tokens import token_counter
from memoryquest.simulator import simulate
from memoryquest.testing.fake_openai.exchange import ErrorAnswer, LoggedRequest, Reply
from memoryquest.testing.fake_openai.faults import Fault, FaultKind

TemplateAnswer = Callable[[dict[str, Any], str], Any]
"""A test's answer to one template: (the request's variables, its model) -> JSON-ready reply or None."""


def billed_prompt_tokens(body: dict[str, Any]) -> int:
    """The prompt tokens of a chat body, as the server bills them (and counts them enqueued)."""
    messages = [m for m in body.get("messages") or [] if isinstance(m, dict)]
    return token_counter(str(body.get("model") or "")).count_messages(messages)


class ChatCompletions:
    """``POST /v1/chat/completions`` of :class:`FakeOpenAIServer` (a mixin of the server)."""

    # Set by the server's constructor (``server``).
    latency: float
    supports_json_schema: bool
    supports_json_object: bool
    cached_tokens: int
    prompt_caching: bool
    report_usage: bool
    _answers: dict[str, TemplateAnswer]
    _prompt_cache: PromptPrefixCache
    _lock: threading.Lock
    _simulator_lock: threading.Lock
    _counter: int
    _admit: Callable[..., Fault | None]
    _sleep: Callable[[float], None]

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

    def _chat(
        self, entry: LoggedRequest, headers: dict[str, str], *, in_batch: bool = False
    ) -> Reply:
        body = entry.body
        if not isinstance(body, dict) or not isinstance(body.get("model"), str):
            raise ErrorAnswer(400, "you must provide a model parameter", param="model")
        messages = body.get("messages")
        if not isinstance(messages, list) or not messages:
            raise ErrorAnswer(400, "messages must be a non-empty array", param="messages")
        fault = self._admit(entry, headers, "chat", limited=not in_batch)
        self._sleep(self.latency)
        response_format = body.get("response_format") or {}
        kind = response_format.get("type") if isinstance(response_format, dict) else None
        if kind == "json_schema" and not self.supports_json_schema:
            raise ErrorAnswer(
                400,
                "response_format 'json_schema' is not supported by this server",
                param="response_format",
            )
        if kind == "json_object" and not self.supports_json_object:
            raise ErrorAnswer(
                400,
                "response_format 'json_object' is not supported by this server",
                param="response_format",
            )
        hints = decode_hints(headers)
        if hints is None or hints.variables is None:
            raise ErrorAnswer(
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
            raise ErrorAnswer(400, str(exc.args[0]) if exc.args else str(exc)) from exc
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
