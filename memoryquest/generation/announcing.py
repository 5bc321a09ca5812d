"""Sentences that announce what they tell, found by what their framing means.

A news sentence a model has been told matters tends to come framed: a lead before a
comma or dash, a tail after one, an aside in brackets, or a short statement of its own,
that speaks about the telling instead of the world ("a bit of news", "so it's on
record"). Such a frame marks the sentence for any reader, and real models word it
ever anew, so :func:`memoryquest.text.announcement`'s idioms and shapes catch only the
plainest. Here each frame is embedded with the local embedding model and scored by a
logistic regression fitted on ``data/talk_frames.json``: stretches that announce and
stretches that frame a sentence without announcing it (interjections, hedges,
feelings, times, reasons, consequences, requests). The local model is used whatever embedder the run
is configured with, so the check means the same on every endpoint and costs no
request.
"""

from __future__ import annotations

import asyncio
import functools
import json
import re
import threading
from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

import numpy as np

from memoryquest.llm.factory import shared_local_embedder
from memoryquest.llm.local_embedder import LocalEmbedder
from memoryquest.text import content_stems, split_sentences, words

FRAMES_FILE = Path(__file__).parent / "data" / "talk_frames.json"
FRAME_WORDS_MAX = 8
"""Longer stretches say something of their own: a frame is a few words."""
SHORT_SENTENCE_WORDS_MAX = 10
"""A statement this short, standing beside the news ("Big news!"), is scored whole, as a frame."""
REGULARISATION = 3.0
"""The regression's C: by 5-fold cross-validation on the frames file, the AUC is about the
same from 1 to 10 (0.958-0.965), with fewer announcing frames missed at 3 than at 1."""

# Marks that set a frame off from the rest of its sentence.
_DETACHING = re.compile(r"\s*(?:[,;:()\u2014\u2013]|\s-\s|\.\.\.)\s*")
_EDGE = " \t\"'!?.\u2026"


def frames(sentence: str) -> list[str]:
    """The stretches of ``sentence`` that could frame it: each piece between detaching marks
    of at most :data:`FRAME_WORDS_MAX` words (a lead may come in several: "So, one more
    thing: ..."), and a bracketed aside."""
    pieces = _DETACHING.split(sentence)
    if "(" in sentence:  # a bracketed aside anywhere, whole
        pieces.extend(re.findall(r"\(([^()]+)\)", sentence))
    found: list[str] = []
    for piece in pieces:
        piece = piece.strip(_EDGE)
        # A stretch of function words alone ("one thing", "and so") means nothing to score.
        if len(words(piece)) <= FRAME_WORDS_MAX and content_stems(piece) and piece not in found:
            found.append(piece)
    return found


def standing_frame(sentence: str) -> str | None:
    """``sentence`` as a frame of its own beside the news ("Thought you would want to hear
    this."): a statement of at most :data:`SHORT_SENTENCE_WORDS_MAX` words. A question asks,
    it does not announce."""
    text = sentence.strip(_EDGE)
    if sentence.rstrip().endswith("?") or not content_stems(text):
        return None
    return text if len(words(text)) <= SHORT_SENTENCE_WORDS_MAX else None


@dataclass(frozen=True)
class FrameModel:
    """A logistic regression over normalised embeddings: P(the stretch announces)."""

    weights: np.ndarray
    bias: float

    @classmethod
    def fit(cls, vectors: np.ndarray, announcing: np.ndarray) -> FrameModel:
        from sklearn.linear_model import LogisticRegression

        model = LogisticRegression(C=REGULARISATION, max_iter=5000).fit(vectors, announcing)
        return cls(model.coef_[0].astype(np.float32), float(model.intercept_[0]))

    def probability(self, vectors: np.ndarray) -> np.ndarray:
        if len(vectors) == 0:
            return np.zeros(0)
        logits = vectors.astype(np.float64) @ self.weights + self.bias
        return 1.0 / (1.0 + np.exp(-logits))


def load_frames(path: Path = FRAMES_FILE) -> tuple[list[str], list[str]]:
    """(announcing, plain) stretches of the frames file."""
    data = json.loads(path.read_text(encoding="utf-8"))
    return list(data["announcing"]), list(data["plain"])


@dataclass(frozen=True)
class Announcing:
    """A sentence's frame that announces it, with the model's probability."""

    frame: str
    sentence: str
    probability: float


K = TypeVar("K", bound=Hashable)


class AnnouncingCheck:
    """Scores the frames of sentences; fitted on first use."""

    def __init__(self, embedder: LocalEmbedder) -> None:
        self.embedder = embedder
        self._model: FrameModel | None = None
        self._fitting = threading.Lock()  # one fit, whichever event loop or thread asks first

    def model(self) -> FrameModel:
        with self._fitting:
            if self._model is None:
                announcing, plain = load_frames()
                vectors = self.embedder.embed_sync([*announcing, *plain])
                labels = np.array([1] * len(announcing) + [0] * len(plain))
                self._model = FrameModel.fit(np.asarray(vectors), labels)
            return self._model

    async def first_announcing(
        self, frames_by_key: Mapping[K, Sequence[tuple[str, str]]], probability_max: float
    ) -> dict[K, Announcing]:
        """For each key, the first of its (frame, sentence) pairs whose frame scores above
        ``probability_max``; keys whose frames all pass are left out. One embedding call for
        all of them."""
        rows = [
            (key, frame, sentence)
            for key, pairs in frames_by_key.items()
            for frame, sentence in pairs
        ]
        if not rows:
            return {}
        # The first fit embeds the frames file: off the event loop, which other work shares.
        model = self._model if self._model is not None else await asyncio.to_thread(self.model)
        texts = list(dict.fromkeys(frame for _, frame, _ in rows))
        scores = dict(zip(texts, model.probability(await self.embedder.embed(texts)), strict=True))
        found: dict[K, Announcing] = {}
        for key, frame, sentence in rows:
            score = float(scores[frame])
            if key not in found and score > probability_max:
                found[key] = Announcing(frame, sentence, score)
        return found


def telling_frames(turn: str, item: str) -> list[tuple[str, str]]:
    """(frame, sentence) pairs around ``item`` in ``turn``: the :func:`frames` of the sentence
    that tells it (the one sharing most of its content words, the first on a tie) and the
    sentences right beside it that stand as frames of their own (:func:`standing_frame`)."""
    sentences = split_sentences(turn)
    if not sentences:
        return []
    item_words = content_stems(item)
    shared = [len(item_words & content_stems(s)) for s in sentences]
    best = shared.index(max(shared))
    pairs = [(frame, sentences[best]) for frame in frames(sentences[best])]
    for i in (best - 1, best + 1):
        if 0 <= i < len(sentences) and (frame := standing_frame(sentences[i])) is not None:
            pairs.append((frame, sentences[i]))
    return pairs


@functools.cache
def shared_announcing_check() -> AnnouncingCheck:
    """One check per process, over the process's one local embedding model."""
    return AnnouncingCheck(shared_local_embedder())
