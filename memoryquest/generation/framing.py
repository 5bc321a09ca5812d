"""Sentences whose framing marks what they tell, found by what the frame means.

A news sentence a model has been told matters tends to come framed: a lead before a
comma or dash, a tail after one, an aside in brackets, or a short statement of its own.
Two kinds of frame mark it for any reader. One speaks about the telling instead of the
world ("a bit of news", "so it's on record"): it *announces*. The other says the thing
told will count at some later occasion ("which will factor into my plans", "for when we
book"): it *points ahead*. Real models word both ever anew, so the idioms and shapes of
:func:`memoryquest.text.announcement` and :func:`memoryquest.text.forward_cue` catch only
the plainest. Here each frame is embedded with the local embedding model and scored by
one logistic regression per kind, fitted on ``data/talk_frames.json`` against stretches
that frame a sentence without marking it (interjections, hedges, feelings, times,
plans, reasons, consequences, requests). The local model is used whatever embedder the
run is configured with, so the checks mean the same on every endpoint and cost no
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
from enum import StrEnum
from pathlib import Path
from typing import TypeVar

import numpy as np

from memoryquest.llm.factory import shared_local_embedder
from memoryquest.llm.local_embedder import LocalEmbedder
from memoryquest.text import content_stems, looks_ahead, split_sentences, words

FRAMES_FILE = Path(__file__).parent / "data" / "talk_frames.json"
FRAME_WORDS_MAX = 8
"""Longer stretches say something of their own: a frame that announces is a few words."""
SHORT_SENTENCE_WORDS_MAX = 10
"""A statement this short, standing beside the news ("Big news!"), is scored whole, as a frame."""
CLAUSE_WORDS_MAX = 24
"""Pointing ahead takes a clause ("which I'm guessing will be a big deal once we choose"):
the pointing model scores each clause up to this length, of the sentence that tells the news
and of the statements beside it."""
REGULARISATION = 3.0
"""The regressions' C: by 5-fold cross-validation on the frames file, the announcing AUC is
about the same from 1 to 10 (0.958-0.965), with fewer announcing frames missed at 3 than at 1."""


class Marking(StrEnum):
    """What a frame does to the sentence it frames, besides framing it."""

    ANNOUNCING = "announcing"
    POINTING = "pointing"


# Marks that set a frame off from the rest of its sentence.
_DETACHING = re.compile(r"\s*(?:[,;:()\u2014\u2013]|\s-\s|\.\.\.)\s*")
_EDGE = " \t\"'!?.\u2026"


def frames(sentence: str, words_max: int = FRAME_WORDS_MAX) -> list[str]:
    """The stretches of ``sentence`` that could frame it: each piece between detaching marks
    of at most ``words_max`` words (a lead may come in several: "So, one more
    thing: ..."), and a bracketed aside."""
    pieces = _DETACHING.split(sentence)
    if "(" in sentence:  # a bracketed aside anywhere, whole
        pieces.extend(re.findall(r"\(([^()]+)\)", sentence))
    found: list[str] = []
    for piece in pieces:
        piece = piece.strip(_EDGE)
        # A stretch of function words alone ("one thing", "and so") means nothing to score.
        if len(words(piece)) <= words_max and content_stems(piece) and piece not in found:
            found.append(piece)
    return found


def _asks(sentence: str) -> bool:
    """A question asks: it neither announces nor points ahead."""
    return sentence.rstrip().endswith("?")


def standing_frame(sentence: str) -> str | None:
    """``sentence`` as a frame of its own beside the news ("Thought you would want to hear
    this."): a statement of at most :data:`SHORT_SENTENCE_WORDS_MAX` words."""
    text = sentence.strip(_EDGE)
    if _asks(sentence) or not content_stems(text):
        return None
    return text if len(words(text)) <= SHORT_SENTENCE_WORDS_MAX else None


@dataclass(frozen=True)
class FrameModel:
    """A logistic regression over normalised embeddings: P(the stretch marks its sentence)."""

    weights: np.ndarray
    bias: float

    @classmethod
    def fit(cls, vectors: np.ndarray, marking: np.ndarray) -> FrameModel:
        from sklearn.linear_model import LogisticRegression

        model = LogisticRegression(C=REGULARISATION, max_iter=5000).fit(vectors, marking)
        return cls(model.coef_[0].astype(np.float32), float(model.intercept_[0]))

    def probability(self, vectors: np.ndarray) -> np.ndarray:
        if len(vectors) == 0:
            return np.zeros(0)
        logits = vectors.astype(np.float64) @ self.weights + self.bias
        return 1.0 / (1.0 + np.exp(-logits))


@dataclass(frozen=True)
class Frames:
    """The frames file: the stretches of each marking, and the plain ones each model is
    fitted against (the pointing model also against plain stretches close to pointing:
    plans, consequences for now, decisions)."""

    marking: dict[Marking, list[str]]
    plain: dict[Marking, list[str]]

    def labelled(self, kind: Marking) -> tuple[list[str], np.ndarray]:
        """The stretches one model is fitted on, and their labels (1: marks, 0: plain)."""
        marking, plain = self.marking[kind], self.plain[kind]
        return [*marking, *plain], np.array([1] * len(marking) + [0] * len(plain))


def load_frames(path: Path = FRAMES_FILE) -> Frames:
    data = json.loads(path.read_text(encoding="utf-8"))
    plain = list(data["plain"])
    return Frames(
        {kind: list(data[kind.value]) for kind in Marking},
        {
            Marking.ANNOUNCING: plain,
            Marking.POINTING: [*plain, *data["plain_beside_pointing"]],
        },
    )


@dataclass(frozen=True)
class Framed:
    """A stretch of a sentence to score for one marking, and the sentence it frames."""

    marking: Marking
    frame: str
    sentence: str


@dataclass(frozen=True)
class MarkedFrame:
    """A sentence's frame that marks it, how, and with the model's probability."""

    marking: Marking
    frame: str
    sentence: str
    probability: float


K = TypeVar("K", bound=Hashable)


class FramingCheck:
    """Scores the frames of sentences, one model per marking; fitted on first use."""

    def __init__(self, embedder: LocalEmbedder) -> None:
        self.embedder = embedder
        self._models: dict[Marking, FrameModel] | None = None
        self._fitting = threading.Lock()  # one fit, whichever event loop or thread asks first

    def models(self) -> dict[Marking, FrameModel]:
        with self._fitting:
            if self._models is None:
                frames_file = load_frames()
                fitted = {}
                for kind in Marking:
                    texts, labels = frames_file.labelled(kind)
                    fitted[kind] = FrameModel.fit(
                        np.asarray(self.embedder.embed_sync(texts)), labels
                    )
                self._models = fitted
            return self._models

    async def strongest_marked(
        self,
        frames_by_key: Mapping[K, Sequence[Framed]],
        probability_max: Mapping[Marking, float],
    ) -> dict[K, MarkedFrame]:
        """For each key, of its frames that the model of their marking scores above that
        marking's ``probability_max``, the one scored highest; keys whose frames all pass
        are left out, and markings without a limit are not scored. One embedding call
        for all of them."""
        rows = [
            (key, framed)
            for key, framed_list in frames_by_key.items()
            for framed in framed_list
            if framed.marking in probability_max
        ]
        if not rows:
            return {}
        # The first fit embeds the frames file: off the event loop, which other work shares.
        models = self._models if self._models is not None else await asyncio.to_thread(self.models)
        texts = list(dict.fromkeys(framed.frame for _, framed in rows))
        vectors = await self.embedder.embed(texts)
        scores = {
            kind: dict(zip(texts, models[kind].probability(vectors), strict=True))
            for kind in probability_max
        }
        found: dict[K, MarkedFrame] = {}
        for key, framed in rows:
            score = float(scores[framed.marking][framed.frame])
            best = found.get(key)
            if score > probability_max[framed.marking] and (
                best is None or score > best.probability
            ):
                found[key] = MarkedFrame(framed.marking, framed.frame, framed.sentence, score)
        return found


def telling_frames(turn: str, item: str) -> list[Framed]:
    """The frames around ``item`` in ``turn``, each with the marking it is scored for: the
    :func:`frames` of the sentence that tells it (the one sharing most of its content words,
    the first on a tie) and the sentences right beside it that stand as frames of their own
    (:func:`standing_frame`); short ones for announcing, and for pointing ahead clauses that
    look past the moment of speaking (:func:`~memoryquest.text.looks_ahead`)."""
    sentences = split_sentences(turn)
    if not sentences:
        return []
    item_words = content_stems(item)
    shared = [len(item_words & content_stems(s)) for s in sentences]
    best = shared.index(max(shared))
    telling = sentences[best]
    beside = [sentences[i] for i in (best - 1, best + 1) if 0 <= i < len(sentences)]
    found = [Framed(Marking.ANNOUNCING, frame, telling) for frame in frames(telling)]
    found.extend(
        Framed(Marking.ANNOUNCING, frame, sentence)
        for sentence in beside
        if (frame := standing_frame(sentence)) is not None
    )
    # Pointing ahead takes a clause, of the telling sentence or of a statement beside it, and
    # needs a later occasion: a clause that does not look past the moment of speaking says how
    # things stand ("which affects my weekends") and is not scored for it.
    found.extend(
        Framed(Marking.POINTING, clause, sentence)
        for sentence in (telling, *(s for s in beside if not _asks(s)))
        for clause in frames(sentence, CLAUSE_WORDS_MAX)
        if looks_ahead(clause)
    )
    return found


@functools.cache
def shared_framing_check() -> FramingCheck:
    """One check per process, over the process's one local embedding model."""
    return FramingCheck(shared_local_embedder())
