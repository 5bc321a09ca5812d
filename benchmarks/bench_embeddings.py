"""Local embedding throughput (all-MiniLM-L6-v2 int8 ONNX) on real persona sentences.

Sentences come from the bundled PersonaLens sample (interaction summaries
split into sentences). Prints sentences/s for the bare embedder at each
batch size, then through ``ModelClient.embed`` with a cold and a warm cache.

    .venv/bin/python benchmarks/bench_embeddings.py                # under a minute on 2 idle cores
    .venv/bin/python benchmarks/bench_embeddings.py --sentences 5000 --batch-sizes 16,32,64,128
"""

from __future__ import annotations

import argparse
import asyncio
import json
import re
import tempfile
import time
from pathlib import Path

from memoryquest.llm.factory import build_client
from memoryquest.llm.local_embedder import LocalEmbedder
from memoryquest.resources import data_dir
from memoryquest.settings import Settings


def persona_sentences(limit: int) -> list[str]:
    sentences: list[str] = []
    profiles = sorted((data_dir("personas") / "personalens" / "profile").glob("user*/profile.json"))
    for path in profiles:
        profile = json.loads(path.read_text(encoding="utf-8"))
        for summary in profile.get("interactions", {}).values():
            sentences.extend(
                s.strip() for s in re.split(r"(?<=[.!?])\s+", summary) if len(s.strip()) > 20
            )
    unique = list(dict.fromkeys(sentences))
    if not unique:
        raise SystemExit("no persona sentences found in the bundled PersonaLens sample")
    while len(unique) < limit:  # repeat with a marker so every text stays distinct
        unique.extend(f"{s} ({len(unique)})" for s in unique[: limit - len(unique)])
    return unique[:limit]


def bare(texts: list[str], batch_sizes: list[int], threads: int | None) -> None:
    for batch_size in batch_sizes:
        embedder = LocalEmbedder(batch_size=batch_size, threads=threads)
        embedder.embed_sync(texts[:32])  # warm-up
        started = time.perf_counter()
        embedder.embed_sync(texts)
        elapsed = time.perf_counter() - started
        print(
            f"  batch {batch_size:4d}             {len(texts) / elapsed:8.1f} sentences/s   ({elapsed:.1f} s)"
        )


async def through_client(texts: list[str], work: Path) -> None:
    settings = Settings(output_dir=work)
    for label in ("cold cache", "warm cache"):
        client = build_client(settings)
        started = time.perf_counter()
        vectors = await client.embed(texts, stage="memory")
        elapsed = time.perf_counter() - started
        (usage,) = client.usage()
        print(
            f"  client, {label:10s}     {len(texts) / elapsed:8.1f} sentences/s   ({elapsed:.2f} s, "
            f"{usage.cache_hits} cache hits, {usage.embedding_tokens} tokens embedded, shape {vectors.shape})"
        )


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--sentences", type=int, default=1000)
    parser.add_argument(
        "--batch-sizes", default="64", help="comma-separated batch sizes for the bare embedder"
    )
    parser.add_argument(
        "--threads",
        type=int,
        default=None,
        help="onnxruntime intra-op threads (default: one fewer than the cores)",
    )
    args = parser.parse_args()
    texts = persona_sentences(args.sentences)
    words = sum(len(t.split()) for t in texts) / len(texts)
    print(f"local embedder: {len(texts)} persona sentences, {words:.1f} words on average")
    bare(texts, [int(b) for b in args.batch_sizes.split(",")], args.threads)
    with tempfile.TemporaryDirectory(prefix="bench-embeddings-") as temp:
        asyncio.run(through_client(texts, Path(temp)))


if __name__ == "__main__":
    main()
