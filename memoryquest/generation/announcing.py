"""Sentences that announce what they tell, found by what their framing means.

A news sentence a model has been told matters tends to come framed: a lead before a
comma or dash, a tail after one, an aside in brackets, or a short sentence of its own,
that speaks about the telling instead of the world ("a bit of news", "so it's on
record"). Such a frame marks the sentence for any reader, and real models word it
ever anew, so :func:`memoryquest.text.announcement`'s idioms and shapes catch only the
plainest. Here each frame is embedded with the local embedding model and scored by a
logistic regression fitted on ``data/talk_frames.json``: stretches that announce and
stretches that frame a sentence without announcing it (interjections, hedges,
feelings, times, reasons, answers). The local model is used whatever embedder the run
is configured with, so the check means the same on every endpoint and costs no
request.
"""

from __future__ import annotations

import functools
import json
import re
import threading
from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol, TypeVar

import numpy as np

from memoryquest.llm.factory import shared_local_embedder
from memoryquest.text import content_stems, split_sentences, words

FRAMES_FILE = Path(__file__).parent / "data" / "talk_frames.json"
FRAME_WORDS_MAX = 8
"""Longer stretches say something of their own: a frame is a few words."""
SHORT_SENTENCE_WORDS_MAX = 5
"""A statement this short, standing beside the news ("Big news!"), is scored as a frame."""
REGULARISATION = 3.0
"""The regression's C: measured by 5-fold cross-validation on the frames file (AUC 0.978
for C from 1 to 10; fewer missed announcing frames at 3 than at 1)."""

# Marks that set a frame off from the rest of its sentence.
_DETACHING = re.compile(r"\s*(?:[,;:()\u2014\u2013]|\s-\s|\.\.\.)\s*")
_EDGE = " \t\"'!?.\u2026"


class Embedder(Protocol):
    def embed_sync(self, texts: list[str]) -> np.ndarray: ...

    async def embed(self, texts: list[str]) -> np.ndarray: ...


def frames(sentence: str) -> list[str]:
    """The stretches of ``sentence`` that could frame it: each piece between detaching marks
    of at most :data:`FRAME_WORDS_MAX` words (a lead may come in several: "So, one more
    thing: ..."), and a bracketed aside; a whole short statement is one piece."""
    pieces = [p.strip(_EDGE) for p in _DETACHING.split(sentence)]
    pieces = [p for p in pieces if words(p)]
    if not pieces:
        return []
    if len(pieces) == 1:  # a short statement beside the news; a question asks, it does not announce
        whole = pieces[0]
        short = len(words(whole)) <= SHORT_SENTENCE_WORDS_MAX and bool(content_stems(whole))
        return [whole] if short and not sentence.rstrip().endswith("?") else []
    if "(" in sentence:  # a bracketed aside anywhere, whole
        pieces.extend(re.findall(r"\(([^()]+)\)", sentence))
    found: list[str] = []
    for piece in pieces:
        piece = piece.strip(_EDGE)
        # A stretch of function words alone ("one thing", "and so") means nothing to score.
        if len(words(piece)) <= FRAME_WORDS_MAX and content_stems(piece) and piece not in found:
            found.append(piece)
    return found


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
    """Scores the frames of sentences; fitted on first use, once per embedder."""

    def __init__(self, embedder: Embedder) -> None:
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
        self, sentences_by_key: Mapping[K, Sequence[str]], probability_max: float
    ) -> dict[K, Announcing]:
        """For each key, the first of its sentences with a frame scored above
        ``probability_max``; keys whose sentences all pass are left out. One embedding
        call for all of them."""
        rows: list[tuple[K, str, str]] = []
        for key, sentences in sentences_by_key.items():
            for sentence in sentences:
                rows.extend((key, frame, sentence) for frame in frames(sentence))
        if not rows:
            return {}
        model = self.model()
        texts = list(dict.fromkeys(frame for _, frame, _ in rows))
        scores = dict(zip(texts, model.probability(await self.embedder.embed(texts)), strict=True))
        found: dict[K, Announcing] = {}
        for key, frame, sentence in rows:
            score = float(scores[frame])
            if key not in found and score > probability_max:
                found[key] = Announcing(frame, sentence, score)
        return found


def telling_sentences(turn: str, item: str) -> list[str]:
    """The sentence of ``turn`` that tells ``item`` (the one sharing most of its content
    words, the first on a tie) and the short sentences right beside it, where a frame of its
    own would stand ("Big news! ...")."""
    sentences = split_sentences(turn)
    if not sentences:
        return []
    item_words = content_stems(item)
    shared = [len(item_words & content_stems(s)) for s in sentences]
    best = shared.index(max(shared))
    beside = [
        sentences[i]
        for i in (best - 1, best + 1)
        if 0 <= i < len(sentences) and len(words(sentences[i])) <= SHORT_SENTENCE_WORDS_MAX
    ]
    return [sentences[best], *beside]


@functools.cache
def shared_announcing_check() -> AnnouncingCheck:
    """One check per process, over the process's one local embedding model."""
    return AnnouncingCheck(shared_local_embedder())
