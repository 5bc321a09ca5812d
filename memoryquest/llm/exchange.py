"""The chat policy every way of sending shares: one request's tries, the cache, limits and accounting.

``ChatExchange`` turns an :class:`LLMRequest` into tries (:class:`Attempt`),
looks them up in the response cache (:meth:`ChatExchange.lookup`, the one
lookup of both processors), fits them to the model's window, sends one
through the limiter with retries and the circuit breaker
(:meth:`ChatExchange.call_endpoint`, :mod:`memoryquest.llm.endpoint_policy`),
judges each answer (refusal, truncation, content filter, schema; a repair
turn when it does not fit: :func:`memoryquest.llm.attempt.judge_answer`) and
bills it to its stage. The two request processors, online
(:mod:`memoryquest.llm.processors`) and Batch API (:mod:`memoryquest.llm.batch`,
through the part of the exchange named :class:`memoryquest.llm.batch_api.BatchExchange`),
both send through it and neither knows the other. Backends make single attempts.
"""

from __future__ import annotations

import datetime as dt
import json
import random
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import replace
from pathlib import Path
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError

from memoryquest.contracts import Stage
from memoryquest.llm.accounting import UsageLedger
from memoryquest.llm.attempt import Attempt, Lookup, judge_answer
from memoryquest.llm.backends import ChatBackend, ChatCall, ChatResult, OutputMode
from memoryquest.llm.budget import Fit, PromptMeter, Throughput
from memoryquest.llm.cache import ResponseCache, chat_key
from memoryquest.llm.chat_billing import account_chat, used_chat_tokens
from memoryquest.llm.clock import SYSTEM_CLOCK, Clock
from memoryquest.llm.endpoint_policy import EndpointPolicy, check_access, endpoint_label
from memoryquest.llm.errors import (
    FieldRejectedError,
    LLMAuthenticationError,
    LLMConfigurationError,
    LLMContextLengthError,
)
from memoryquest.llm.limiter import CircuitBreaker, RateLimiter, RetryPolicy, one_line
from memoryquest.llm.prices import PriceTable
from memoryquest.llm.prompts import load_template
from memoryquest.llm.request import LLMRequest, ResponseT
from memoryquest.llm.schema import (
    response_schema,
    schema_fingerprint,
    schema_name,
    strict_json_schema,
)
from memoryquest.llm.tokens import token_counter

T = TypeVar("T")
P = TypeVar("P")


class ChatExchange:
    """One endpoint's chat policy: tries, cache entries, window fit, retries, judging and billing."""

    def __init__(
        self,
        chat: ChatBackend,
        *,
        ledger: UsageLedger | None = None,
        cache: ResponseCache | None = None,
        limiter: RateLimiter | None = None,
        retry: RetryPolicy | None = None,
        prices: PriceTable | None = None,
        breaker_failures: int = 20,
        strict_schema: bool = True,
        repair_attempts: int = 2,
        output_retries: int = 2,
        prompts_dir: Path | None = None,
        rng: random.Random | None = None,
        throughput: Throughput | None = None,
        base_timeout: float = 60.0,
        concurrency_from_server: bool = False,
    ) -> None:
        self.chat_backend = chat
        self.ledger = ledger or UsageLedger()
        # A paid answer's usage is on disk before the next answer arrives.
        self.ledger.write_through = not chat.simulated
        self.cache = cache
        if limiter is None and not chat.simulated:
            from memoryquest.settings import LimitSettings

            defaults = LimitSettings()
            limiter = RateLimiter(
                defaults.requests_per_minute, defaults.tokens_per_minute, defaults.max_concurrency
            )
        self.endpoint = EndpointPolicy(
            limiter,
            retry or RetryPolicy(),
            CircuitBreaker(breaker_failures, chat.base_url or chat.name),
            rng or random.Random(),
        )
        self.prices = prices or PriceTable.load()
        self.strict_schema = strict_schema
        self.repair_attempts = repair_attempts
        self.output_retries = output_retries
        self.prompts_dir = prompts_dir
        self._modes: dict[str, OutputMode] = {}
        self._schema_token_counts: dict[str, int] = {}
        self._chat_tokens = token_counter(chat.model)
        profile = getattr(chat, "profile", None)
        hosted = profile is None or profile.kind in ("openai", "azure")
        self.prompt_meter = PromptMeter(exact=hosted and not self._chat_tokens.approximate)
        self.throughput = throughput or Throughput(assumed_tokens_per_second=10.0)
        self.base_timeout = base_timeout
        # The limiter takes the server's slot count as its concurrency (unless limits.max_concurrency was set).
        self.concurrency_from_server = concurrency_from_server
        self._prepared = False

    @property
    def limiter(self) -> RateLimiter | None:
        """The endpoint policy's limiter (a client that shares another's swaps it in)."""
        return self.endpoint.limiter

    @limiter.setter
    def limiter(self, limiter: RateLimiter | None) -> None:
        self.endpoint.limiter = limiter

    @property
    def simulated(self) -> bool:
        return self.chat_backend.simulated

    @property
    def clock(self) -> Clock:
        """The limiter's clock: retries wait on it and answers are timed by it."""
        return self.limiter.clock if self.limiter is not None else SYSTEM_CLOCK

    @property
    def caching(self) -> bool:
        """Whether answers are read from and written to the response cache."""
        return self.cache is not None and self.cache.enabled

    @property
    def endpoint_url(self) -> str:
        """The chat endpoint, for messages: its base URL (or the SDK's default), else the backend name."""
        return endpoint_label(self.chat_backend)

    @property
    def cache_directory(self) -> Path | None:
        """Where the response cache lives, when answers are cached (the Batch API's state files go there)."""
        return self.cache.directory if self.cache is not None and self.caching else None

    async def check_access(self) -> None:
        """Fail fast, before any work, when the endpoint refuses the key (see :func:`check_access`)."""
        try:
            await check_access(self.chat_backend)
        except LLMAuthenticationError as exc:
            self.endpoint.auth_failure = str(exc)
            raise

    # --- one request's tries ---------------------------------------------------------------

    def attempt(self, request: LLMRequest[Any]) -> Attempt:
        """The first try of ``request``: its prompt rendered and its seed fixed."""
        template = load_template(request.template_id, self.prompts_dir)
        messages = template.render(request.variables)
        return Attempt(
            request=request,
            template=template,
            messages=messages,
            seed=int(getattr(self.chat_backend, "seed", 0)) + request.seed,
            where=f"{request.template_id} v{template.version} (stage {request.stage})",
            conversation=list(messages),
            max_tokens=request.output_budget(template.max_output_tokens),
        )

    def cache_key(self, attempt: Attempt) -> str:
        """The request's key in the response cache: endpoint, model, prompt, parameters and schema."""
        backend = self.chat_backend
        request = attempt.request
        return chat_key(
            backend=backend.name,
            base_url=backend.base_url,
            model=backend.model,
            template_id=attempt.template.template_id,
            template_version=attempt.template.version,
            messages=attempt.messages,
            parameters={
                "temperature": request.temperature,
                "max_output_tokens": request.output_budget(attempt.template.max_output_tokens),
                "seed": attempt.seed,
                "extra": request.extra,
            },
            schema=schema_fingerprint(request.response_model),
        )

    def lookup(self, request: LLMRequest[Any]) -> Lookup:
        """The one cache lookup of both processors: ``request``'s first try, its cache key and
        the answer cached under it, a hit counted to the request's stage."""
        attempt = self.attempt(request)
        key = self.cache_key(attempt)
        answer = self._cached(key, request)
        if answer is not None:
            self.ledger.cache_hits(request.stage)
        return Lookup(attempt, key, answer)

    def _cached(self, key: str, request: LLMRequest[Any]) -> BaseModel | None:
        """The cached answer under ``key``, unless caching is off or the model's validators changed since."""
        if self.cache is None or not self.caching:
            return None
        entry = self.cache.get_chat(key)
        if entry is None:
            return None
        try:
            return request.response_model.model_validate_json(entry["text"])
        except ValidationError:
            return None

    def _mode(self, name: str, strict: dict[str, Any] | None) -> OutputMode:
        if name in self._modes:
            return self._modes[name]
        strongest = getattr(self.chat_backend, "strongest_mode", OutputMode.JSON_SCHEMA)
        if strongest is OutputMode.JSON_OBJECT_SCHEMA:
            return (
                strongest  # the server's grammar: the plain schema serves when no strict one exists
            )
        if self.strict_schema and strict is not None:
            return strongest
        return OutputMode.JSON_OBJECT

    async def ask_from(self, attempt: Attempt) -> tuple[Any, ChatResult, dict[str, Any]]:
        """Send, check and validate online from wherever ``attempt`` stands, repairing or retrying
        bad answers a bounded number of times (the Batch API runner hands over here); the answer,
        the last result and what the attempt spent."""
        await self.prepare()
        while True:
            call = await self.fitted(self.next_call(attempt), attempt)
            try:
                result, cost = await self._send_chat(call, attempt.where)
            except FieldRejectedError as exc:
                self.field_rejected(call, attempt.where, exc)
                continue
            except LLMContextLengthError:
                if attempt.sized_for is None and self.context_window is not None:
                    attempt.window_learned = True
                    # Sized without a window, refused by a server that named it: fitted again
                    # under it (the output allowance cut to the room left, or it fails alone).
                    continue
                raise
            attempt.add(cost)
            value = self.judge(attempt, result)
            if value is not None:
                return value, result, attempt.spent

    def next_call(self, attempt: Attempt) -> ChatCall:
        """The next call for ``attempt``, in the strongest output mode the server has not rejected."""
        model = attempt.request.response_model
        name = schema_name(model)
        strict = strict_json_schema(model) if self.strict_schema else None
        return ChatCall(
            messages=attempt.conversation,
            request=attempt.request,
            schema=response_schema(model),
            schema_name=name,
            strict_schema=strict,
            mode=self._mode(name, strict),
            seed=attempt.seed,
            max_output_tokens=attempt.max_tokens,
            template_version=attempt.template.version,
        )

    async def prepare(self) -> None:
        """Learn, once, what the server is (profile, window, slots) before the first request."""
        if self._prepared:
            return
        prepare = getattr(self.chat_backend, "prepare", None)
        if callable(prepare):
            await prepare()
        self._prepared = True
        slots = getattr(self.chat_backend, "slots", None)
        if self.concurrency_from_server and slots and self.limiter is not None:
            self.limiter.cap_concurrency(int(slots))

    @property
    def context_window(self) -> int | None:
        return getattr(self.chat_backend, "context_window", None)

    async def measure(self, call: ChatCall) -> Fit:
        """``call``'s prompt in the server's tokens against the model's window."""
        window = self.context_window
        if window is None:
            return Fit(0, call.max_output_tokens, None)
        messages = call.sent_messages()
        # A byte-level tokenizer makes at most one token a byte: a prompt that fits by its bytes
        # fits, and needs no counting (hosted windows are ten times any prompt here).
        ceiling = sum(len(m["content"].encode()) + 8 for m in messages) + 16
        if ceiling + call.max_output_tokens <= window:
            return Fit(ceiling, call.max_output_tokens, window)
        exact = None
        count = getattr(self.chat_backend, "count_prompt", None)
        if callable(count) and not self.simulated:
            exact = await count(messages)
        if exact is None:
            exact = self.prompt_meter.estimate(self._prompt_tokens(call))
        return Fit(exact, call.max_output_tokens, window)

    async def fits(self, request: LLMRequest[Any]) -> bool:
        """Whether ``request``'s prompt and output allowance fit the model's window (stages trim until it does)."""
        if self.context_window is None:
            return True
        await self.prepare()
        attempt = self.attempt(request)
        return (await self.measure(self.next_call(attempt))).fits

    async def first_fitting(
        self, options: Iterable[tuple[LLMRequest[ResponseT], P]]
    ) -> tuple[LLMRequest[ResponseT], P]:
        """The first of ``options`` (requests, each with the plan it was built from; fullest
        first, built lazily) whose prompt and output allowance fit the model's context window;
        the last when none does, which then fails alone with ``LLMContextLengthError``.
        Without a known window the first is taken as it is."""
        last: tuple[LLMRequest[ResponseT], P] | None = None
        for option in options:
            last = option
            if await self.fits(option[0]):
                return option
        if last is None:
            raise ValueError("first_fitting needs at least one request")
        return last

    async def fitted(self, call: ChatCall, attempt: Attempt) -> ChatCall:
        """``call`` with its timeout, checked against the window: a retry's larger output
        allowance is cut to the room left, a request that cannot fit fails alone."""
        fit = await self.measure(call)
        allowance = attempt.request.output_budget(attempt.template.max_output_tokens)
        attempt.sized_for = fit.window
        if fit.window is not None and fit.room is not None:
            if fit.room < min(allowance, call.max_output_tokens):
                raise LLMContextLengthError(
                    f"{attempt.where}: a prompt of {fit.prompt_tokens} tokens and an output "
                    f"allowance of {min(allowance, call.max_output_tokens)} do not fit the "
                    f"{fit.window}-token context window of {self.chat_backend.model}",
                    learned_window=fit.window if attempt.window_learned else None,
                )
            if call.max_output_tokens > fit.room:
                attempt.max_tokens = fit.room
                call = replace(call, max_output_tokens=fit.room)
        if self.simulated:
            return call
        return replace(
            call, timeout=self.throughput.timeout(call.max_output_tokens, self.base_timeout)
        )

    def field_rejected(self, call: ChatCall, where: str, exc: FieldRejectedError) -> None:
        """The server refuses a field: a weaker output mode, or the field left out, or give up."""
        if exc.field != "response_format":
            drop = getattr(self.chat_backend, "drop_field", None)
            if callable(drop) and drop(exc.field):
                return
            raise LLMConfigurationError(
                f"{where}: {self.endpoint_url} refuses {exc.field}: {one_line(str(exc))}"
            ) from exc
        self.format_rejected(call, where, exc)

    def format_rejected(self, call: ChatCall, where: str, exc: Exception) -> None:
        """Remember that the server refuses ``call.mode`` for this schema, or give up."""
        weaker = call.mode.weaker()
        if weaker is None:
            raise LLMConfigurationError(
                f"{where}: the server rejects every output format: {exc}"
            ) from exc
        self._modes[call.schema_name] = weaker

    def judge(self, attempt: Attempt, result: ChatResult) -> Any | None:
        """The validated answer, or None after preparing ``attempt`` for another try.

        Online answers and Batch API output lines both pass through here, so
        both are held to the same rules (:func:`memoryquest.llm.attempt.judge_answer`).
        """
        return judge_answer(
            attempt,
            result,
            output_retries=self.output_retries,
            repair_attempts=self.repair_attempts,
            simulated=self.simulated,
        )

    def remember(self, key: str, attempt: Attempt, text: str, model: str | None) -> None:
        """Store an answer under its cache key with what its attempt cost (when answers are cached)."""
        if self.cache is None or not self.caching:
            return
        self.cache.put_chat(
            key,
            text,
            {
                "template": [attempt.template.template_id, attempt.template.version],
                "model": model or self.chat_backend.model,
                **attempt.spent,  # what the answer cost, repairs and retried refusals included
                "created": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
            },
        )

    async def _send_chat(self, call: ChatCall, where: str) -> tuple[ChatResult, dict[str, Any]]:
        """The answer, and what it cost (tokens and USD)."""
        counter = self._chat_tokens
        if self.simulated:  # counts its own tokens; nothing to limit or retry
            result = await self.chat_backend.chat(call)
            return result, self._bill(call.request.stage, result, result.input_tokens)
        prompt_tokens = self._prompt_tokens(call)
        started: list[float] = []

        async def send() -> ChatResult:
            started.append(self.clock.monotonic())
            return await self.chat_backend.chat(call)

        result = await self.call_endpoint(
            send,
            reserve=prompt_tokens + call.max_output_tokens,
            used=lambda r: used_chat_tokens(r, prompt_tokens, counter),
            where=where,
        )
        if result.usage_reported:
            self.throughput.observe(result.output_tokens, self.clock.monotonic() - started[-1])
            self.prompt_meter.observe(prompt_tokens, result.input_tokens)
        return result, self._bill(call.request.stage, result, prompt_tokens)

    def _prompt_tokens(self, call: ChatCall) -> int:
        """The prompt's tokens as the endpoint bills them (a strict schema counts as prompt)."""
        tokens = self._chat_tokens.count_messages(call.sent_messages())
        if call.mode is OutputMode.JSON_SCHEMA:
            if call.schema_name not in self._schema_token_counts:
                text = json.dumps(call.strict_schema or call.schema, separators=(",", ":"))
                self._schema_token_counts[call.schema_name] = self._chat_tokens.count(text)
            tokens += self._schema_token_counts[call.schema_name]
        return tokens

    def account_batch_answer(self, call: ChatCall, result: ChatResult) -> dict[str, Any]:
        """Bill one Batch API output line, at the batch price, to its request's stage; what it cost."""
        prompt_tokens = 0 if result.usage_reported else self._prompt_tokens(call)
        return self._bill(call.request.stage, result, prompt_tokens, batch=True)

    def _bill(
        self, stage: Stage, result: ChatResult, prompt_tokens: int, *, batch: bool = False
    ) -> dict[str, Any]:
        return account_chat(
            self.ledger,
            stage,
            result,
            prompt_tokens,
            self._chat_tokens,
            prices=self.prices,
            default_model=self.chat_backend.model,
            simulated=self.simulated,
            batch=batch,
        )

    async def call_endpoint(
        self,
        send: Callable[[], Awaitable[T]],
        *,
        where: str,
        reserve: int = 0,
        used: Callable[[T], int] = lambda _: 0,
    ) -> T:
        """One logical request to the endpoint, under the one retry policy (:class:`EndpointPolicy`)."""
        return await self.endpoint.call(
            self.chat_backend, send, where=where, reserve=reserve, used=used
        )
