"""How requests reach the model: one interface, with online and Batch API processors as siblings.

Both send through a :class:`~memoryquest.llm.exchange.ChatExchange`, which
owns the policy they share (tries, the one cache lookup
:meth:`~memoryquest.llm.exchange.ChatExchange.lookup`, cache entries,
retries, judging, billing). Neither holds the other: the Batch API processor
(:class:`memoryquest.llm.batch.BatchProcessor`) finishes a row that its
rounds could not answer with :meth:`ChatExchange.ask_from`, exactly as the
online processor asks. ``ModelClient`` picks one per request.
"""

from __future__ import annotations

import asyncio
import weakref
from collections.abc import Sequence
from typing import Any, Protocol

from memoryquest.llm.errors import LLMError
from memoryquest.llm.exchange import ChatExchange
from memoryquest.llm.request import LLMRequest, ResponseT


class RequestProcessor(Protocol):
    """Answers structured chat requests, one at a time or many together."""

    def takes(self, request: LLMRequest[Any]) -> bool:
        """Whether this processor sends ``request`` (the client sends the others online)."""
        ...

    async def complete(self, request: LLMRequest[ResponseT]) -> ResponseT: ...

    async def complete_all(
        self, requests: Sequence[LLMRequest[Any]], *, return_exceptions: bool = False
    ) -> list[Any]: ...

    async def aclose(self) -> None:
        """Stop what runs on the current event loop."""
        ...


class OnlineProcessor:
    """One HTTP request per try: the cache first, and identical concurrent requests share one answer."""

    def __init__(self, exchange: ChatExchange) -> None:
        self.exchange = exchange
        self._inflight: weakref.WeakKeyDictionary[
            asyncio.AbstractEventLoop, dict[str, asyncio.Future[str]]
        ] = weakref.WeakKeyDictionary()

    def takes(self, request: LLMRequest[Any]) -> bool:
        return True

    async def complete(self, request: LLMRequest[ResponseT]) -> ResponseT:
        exchange = self.exchange
        if not exchange.caching or exchange.simulated:  # the simulator's answers cost nothing
            value, _, _ = await exchange.ask_from(exchange.attempt(request))
            return value
        while True:
            found = exchange.lookup(request)
            if found.answer is not None:
                return found.answer  # type: ignore[return-value]
            inflight = self._inflight.setdefault(asyncio.get_running_loop(), {})
            leader = inflight.get(found.key)
            if leader is None:
                break
            try:  # the same request is already on its way: share its answer
                text = await asyncio.shield(leader)
            except asyncio.CancelledError:
                if leader.cancelled():
                    continue  # the other caller was cancelled, not us: ask ourselves
                raise
            exchange.ledger.cache_hits(request.stage)
            return request.response_model.model_validate_json(text)
        attempt, key = found.attempt, found.key
        future: asyncio.Future[str] = asyncio.get_running_loop().create_future()
        inflight[key] = future
        try:
            value, result, _ = await exchange.ask_from(attempt)
            text = value.model_dump_json()
            exchange.remember(key, attempt, text, result.model)
            future.set_result(text)
            return value
        except BaseException as exc:
            if isinstance(exc, asyncio.CancelledError):
                future.cancel()
            else:
                future.set_exception(exc)
                future.exception()  # retrieved: waiters re-raise it, nobody else must
            raise
        finally:
            inflight.pop(key, None)

    async def complete_all(
        self, requests: Sequence[LLMRequest[Any]], *, return_exceptions: bool = False
    ) -> list[Any]:
        return await gather_answers([self.complete(r) for r in requests], return_exceptions)

    async def aclose(self) -> None:
        self._inflight.pop(asyncio.get_running_loop(), None)


async def gather_answers(calls: Sequence[Any], return_exceptions: bool) -> list[Any]:
    """Run ``calls`` concurrently; the first error cancels the rest, or each ``LLMError`` takes its place."""
    tasks = [asyncio.ensure_future(call) for call in calls]
    if return_exceptions:
        results = await asyncio.gather(*tasks, return_exceptions=True)
        for result in results:
            if isinstance(result, BaseException) and not isinstance(result, LLMError):
                raise result
        return list(results)
    try:
        return list(await asyncio.gather(*tasks))
    except BaseException:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        raise
