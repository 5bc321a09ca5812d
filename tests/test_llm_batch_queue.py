"""The provider's batch queue: published limits, the cut of a round, and waiting for room."""

from __future__ import annotations

import asyncio

from memoryquest.llm.batch_queue import (
    UNKNOWN_MODEL_ENQUEUED_TOKENS,
    BatchQueue,
    Line,
    is_token_limit_refusal,
    line_tokens,
    published_enqueued_tokens,
    split_parts,
    stated_limit,
)
from memoryquest.llm.tokens import token_counter


def test_published_limits_follow_the_model_and_its_dated_snapshots() -> None:
    assert published_enqueued_tokens("gpt-4o-mini") == 2_000_000
    assert published_enqueued_tokens("gpt-4o-mini-2024-07-18") == 2_000_000
    assert published_enqueued_tokens("gpt-4o-2024-08-06") == 90_000
    assert published_enqueued_tokens("gpt-4-turbo-2024-04-09") == 90_000
    assert published_enqueued_tokens("gpt-4-0613") == 100_000
    # gpt-4.1 is not gpt-4, and a model without a published figure gets the default
    assert published_enqueued_tokens("gpt-4.1") == UNKNOWN_MODEL_ENQUEUED_TOKENS
    assert published_enqueued_tokens("my-local-model") == UNKNOWN_MODEL_ENQUEUED_TOKENS


def test_a_line_enqueues_its_prompt_tokens() -> None:
    messages = [
        {"role": "system", "content": "You describe words."},
        {"role": "user", "content": "Describe the word lantern."},
    ]
    model, tokens = line_tokens({"model": "gpt-4o-mini", "messages": messages, "max_tokens": 900})
    assert model == "gpt-4o-mini"
    assert tokens == token_counter("gpt-4o-mini").count_messages(messages)


def test_the_cut_keeps_each_file_under_the_tokens_of_its_model() -> None:
    lines = [Line(10, "m", 30)] * 5 + [Line(10, "m", 100)] + [Line(10, "m", 30)]
    parts = split_parts(lines, max_lines=100, max_bytes=10_000, max_tokens=lambda _: 70)
    # two lines of 30 fit under 70, three do not; a line above the limit goes alone
    assert parts == [[0, 1], [2, 3], [4], [5], [6]]
    assert split_parts(lines[:3], max_lines=2, max_bytes=10_000, max_tokens=lambda _: 10**9) == [
        [0, 1],
        [2],
    ]
    assert split_parts(lines[:3], max_lines=9, max_bytes=25, max_tokens=lambda _: 10**9) == [
        [0, 1],
        [2],
    ]


def test_token_limit_refusals_are_told_from_other_failures() -> None:
    assert is_token_limit_refusal([("token_limit_exceeded", None)])
    assert is_token_limit_refusal(
        [(None, "Enqueued token limit reached for gpt-4o-mini in organization org-x.")]
    )
    assert not is_token_limit_refusal([("invalid_json_line", "This line is not valid JSON.")])


def test_the_limit_a_refusal_states_is_read() -> None:
    message = (
        "Enqueued token limit reached for gpt-4o-mini in organization org-x. "
        "Limit: 2,000,000 enqueued tokens. Please try again once some in_progress batches "
        "have been completed."
    )
    assert stated_limit([None, message]) == 2_000_000
    assert stated_limit(["The number of enqueued tokens has surpassed the limit."]) is None


async def test_a_stated_limit_becomes_the_cut() -> None:
    queue = BatchQueue(lambda _: 2_000_000)
    assert await queue.refused({"m": 500_000}, "file-a", 9, stated=90_000) is False
    assert queue.max_tokens("m") == 90_000  # not half of 500,000: the service said what fits
    assert await queue.refused({"m": 60_000}, "file-b", 3, stated=90_000) is False
    assert queue.max_tokens("m") == 30_000  # it fitted the limit: someone else holds the queue


async def test_a_batch_waits_until_ours_in_flight_leave_room() -> None:
    queue = BatchQueue(lambda _: 100)
    await queue.acquire({"m": 80})
    waiting = asyncio.ensure_future(queue.acquire({"m": 50}))
    await asyncio.sleep(0)
    assert not waiting.done()
    await queue.acquire({"other": 90})  # another model's queue is its own
    queue.release({"m": 80})
    await waiting
    assert queue.held["m"] == 50 and queue.in_flight == 2


async def test_alone_in_the_queue_a_batch_always_goes_and_a_refusal_halves_the_cut() -> None:
    queue = BatchQueue(lambda _: 100)
    await queue.acquire({"m": 500})  # nothing of ours in flight: it goes (the service decides)
    queue.release({"m": 500})
    assert await queue.refused({"m": 500}, "file-a", 5) is False
    assert queue.max_tokens("m") == 100  # already below half of 500
    await queue.acquire({"m": 80})
    queue.release({"m": 80})
    assert await queue.refused({"m": 80}, "file-b", 2) is False
    assert queue.max_tokens("m") == 40


async def test_a_refusal_while_ours_are_in_flight_waits_for_one_to_finish() -> None:
    queue = BatchQueue(lambda _: 100)
    await queue.acquire({"m": 60})
    again = asyncio.ensure_future(queue.refused({"m": 30}, "file-c", 1))
    await asyncio.sleep(0)
    assert not again.done()
    queue.release({"m": 60})
    assert await again is True
    assert queue.max_tokens("m") == 100
