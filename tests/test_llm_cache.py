"""The response cache: keys, atomic files, corrupt entries, concurrent writers."""

from __future__ import annotations

import json
import multiprocessing
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from memoryquest.llm.cache import ResponseCache, chat_key, embedding_key

BASE: dict[str, Any] = {
    "backend": "openai",
    "base_url": None,
    "model": "gpt-4o",
    "template_id": "query_generation",
    "template_version": 1,
    "messages": [{"role": "user", "content": "hello"}],
    "parameters": {"temperature": 0.7, "max_output_tokens": 100, "seed": 0},
    "schema": {"type": "object"},
}


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("backend", "azure"),
        ("base_url", "http://127.0.0.1:8000/v1"),
        ("model", "gpt-4o-mini"),
        ("template_id", "timeline"),
        ("template_version", 2),
        ("messages", [{"role": "user", "content": "hello!"}]),
        ("parameters", {"temperature": 0.2, "max_output_tokens": 100, "seed": 0}),
        ("schema", {"type": "object", "properties": {}}),
    ],
)
def test_every_part_of_the_request_is_in_the_key(field: str, value: Any) -> None:
    assert chat_key(**{**BASE, field: value}) != chat_key(**BASE)


def test_keys_are_stable_and_embedding_keys_depend_on_model_and_text() -> None:
    assert chat_key(**BASE) == chat_key(**json.loads(json.dumps(BASE)))
    key = embedding_key(backend="openai", base_url=None, model="text-embedding-3-small", text="a")
    assert key != embedding_key(
        backend="openai", base_url=None, model="text-embedding-3-large", text="a"
    )
    assert key != embedding_key(
        backend="openai", base_url=None, model="text-embedding-3-small", text="b"
    )
    assert key != chat_key(**BASE)


def test_entries_round_trip_and_stats_count(tmp_path: Path) -> None:
    cache = ResponseCache(tmp_path)
    key = chat_key(**BASE)
    assert cache.get_chat(key) is None
    cache.put_chat(key, '{"a": 1}', {"input_tokens": 3})
    assert cache.get_chat(key) == {"text": '{"a": 1}', "input_tokens": 3}
    vector = np.arange(4, dtype=np.float32)
    cache.put_vector("ab" * 32, vector)
    found = cache.get_vector("ab" * 32)
    assert found is not None and np.array_equal(found, vector)
    stats = cache.stats
    assert (stats.hits, stats.misses, stats.writes) == (2, 1, 2)
    assert stats.bytes_written > 0 and stats.bytes_read == stats.bytes_written
    assert not list(tmp_path.rglob(".tmp-*"))  # nothing half-written is left behind


def test_a_corrupt_entry_is_a_miss_and_is_rewritten(tmp_path: Path) -> None:
    cache = ResponseCache(tmp_path)
    key = chat_key(**BASE)
    cache.put_chat(key, "{}", {})
    (path,) = (tmp_path / "chat").rglob("*.json")
    path.write_text('{"text": ', encoding="utf-8")
    assert cache.get_chat(key) is None and cache.stats.corrupt == 1
    cache.put_chat(key, "{}", {})
    assert cache.get_chat(key) == {"text": "{}"}
    (vector_path := tmp_path / "embeddings" / "cd" / ("cd" * 32 + ".f32")).parent.mkdir(
        parents=True
    )
    vector_path.write_bytes(b"\x00\x01\x02")
    assert cache.get_vector("cd" * 32) is None


def test_a_disabled_cache_neither_reads_nor_writes(tmp_path: Path) -> None:
    cache = ResponseCache(tmp_path, enabled=False)
    cache.put_chat("k" * 64, "{}", {})
    assert cache.get_chat("k" * 64) is None
    assert not any(tmp_path.iterdir())


def _hammer(directory: str, worker: int) -> None:
    cache = ResponseCache(Path(directory))
    for i in range(200):
        cache.put_chat(f"{i % 5:064d}", json.dumps({"worker": worker, "i": i % 5}), {})
        entry = cache.get_chat(f"{i % 5:064d}")
        assert entry is not None and json.loads(entry["text"])["i"] == i % 5


def test_concurrent_processes_never_see_a_torn_entry(tmp_path: Path) -> None:
    context = multiprocessing.get_context("fork")
    workers = [context.Process(target=_hammer, args=(str(tmp_path), w)) for w in range(3)]
    for process in workers:
        process.start()
    for process in workers:
        process.join(timeout=60)
    assert [p.exitcode for p in workers] == [0, 0, 0]
    assert len(list((tmp_path / "chat").rglob("*.json"))) == 5
    assert not list(tmp_path.rglob(".tmp-*"))
