"""Offline token counting and the price table."""

from __future__ import annotations

import json
import socket
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from memoryquest.llm import tokens
from memoryquest.llm.prices import PriceTable
from memoryquest.llm.tokens import token_counter


@pytest.fixture
def fresh_counters(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[None]:
    """No network, an empty tiktoken cache, and no counter remembered from earlier tests."""

    def refuse(self: socket.socket, address: Any) -> None:
        raise OSError(f"network disabled in this test (tried {address})")

    monkeypatch.setattr(socket.socket, "connect", refuse)
    monkeypatch.setenv("TIKTOKEN_CACHE_DIR", str(tmp_path / "empty-tiktoken-cache"))
    tokens.token_counter.cache_clear()
    tokens._tiktoken.cache_clear()
    yield
    tokens.token_counter.cache_clear()
    tokens._tiktoken.cache_clear()


def test_cl100k_models_are_counted_exactly_offline(fresh_counters: None) -> None:
    counter = token_counter("gpt-4-turbo")
    assert (counter.encoding_name, counter.approximate) == ("cl100k_base", False)
    assert counter.count("hello world") == 2
    assert token_counter("text-embedding-3-small").approximate is False


def test_o200k_models_fall_back_to_cl100k_and_are_flagged(fresh_counters: None) -> None:
    for model in ("gpt-4o", "gpt-4o-mini-2024-07-18", "gpt-4.1-nano", "o3-mini", "gpt-5"):
        counter = token_counter(model)
        assert (counter.encoding_name, counter.approximate) == ("cl100k_base", True), model
        assert counter.count("hello world") == 2


def test_unknown_models_are_approximate(fresh_counters: None) -> None:
    assert token_counter("meta-llama/Llama-3.1-8B-Instruct").approximate is True


def test_without_any_encoding_characters_over_four_are_flagged(
    fresh_counters: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    import tiktoken

    def unavailable(name: str) -> Any:
        raise ValueError(f"no encoding {name}")

    monkeypatch.setattr(tiktoken, "get_encoding", unavailable)
    counter = token_counter("gpt-4")
    assert (counter.encoding_name, counter.approximate) == ("chars/4", True)
    assert counter.count("x" * 40) == 10


def test_chat_messages_include_the_formatting_overhead(fresh_counters: None) -> None:
    counter = token_counter("gpt-4")
    messages = [
        {"role": "system", "content": "hello world"},
        {"role": "user", "content": "hello world"},
    ]
    # 3 per message + role + content, plus 3 to prime the reply (OpenAI's recipe)
    assert counter.count_messages(messages) == 3 + (3 + 1 + 2) * 2


def test_prices_match_families_and_dated_names() -> None:
    table = PriceTable.load()
    assert table.price("gpt-4o-2024-08-06") == table.price("gpt-4o")
    assert table.price("gpt-4o-mini-2024-07-18") == table.price("gpt-4o-mini")
    assert table.price("gpt-4o-2024-05-13") != table.price("gpt-4o")
    assert table.price("o3x") is None
    one_million = table.cost("gpt-4o", 1_000_000, 1_000_000, cached_tokens=500_000)
    assert one_million == pytest.approx(0.5 * 2.5 + 0.5 * 1.25 + 10.0)
    assert table.cost("gpt-4o", 1_000_000, batch=True) == pytest.approx(1.25)
    assert table.cost("text-embedding-3-large", 1_000_000) == pytest.approx(0.13)


def test_an_unpriced_model_costs_zero_and_is_remembered() -> None:
    table = PriceTable.load()
    assert table.cost("my-local-llama", 1000, 1000) == 0.0
    assert table.unpriced == {"my-local-llama"}


def test_a_price_file_overrides_and_bad_files_are_named(tmp_path: Path) -> None:
    override = tmp_path / "prices.json"
    override.write_text(
        json.dumps({"models": {"gpt-4o": {"input": 1, "output": 2}}, "batch_multiplier": 0.4})
    )
    table = PriceTable.load(override)
    assert table.cost("gpt-4o", 1_000_000, 1_000_000) == pytest.approx(3.0)
    assert table.cost("gpt-4o", 1_000_000, batch=True) == pytest.approx(0.4)
    assert table.price("gpt-4o-mini") is not None  # the rest of the built-in table stays
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"models": {"x": {"output": 1}}}))
    with pytest.raises(ValueError, match=rf"{bad}: model 'x' needs at least an 'input' price"):
        PriceTable.load(bad)
    with pytest.raises(ValueError, match="does not exist"):
        PriceTable.load(tmp_path / "missing.json")
