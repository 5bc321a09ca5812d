"""Interchangeable judges: was each required reference found in what a method retrieved?

* provenance — exact and free: found when a retrieved fact's visible revision
  lists the reference in ``source_reference_ids``;
* embedding — found when some retrieved fact's text has cosine ≥ the
  configured threshold with the reference text;
* llm — one model call per query and method, a yes/no and a one-line reason
  per reference (the paper's judge).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

import numpy as np

from memoryquest.contracts import JudgeKind, Query, ReferenceJudgement
from memoryquest.llm.client import LLMOutputError, ModelClient
from memoryquest.llm.request import LLMRequest
from memoryquest.memory.snapshot import MemoryItem
from memoryquest.pgr.judges_contracts import (
    JudgeReferencesInputs,
    ReferenceVerdict,
    ReferenceVerdicts,
)
from memoryquest.pgr.retrieval import EMBED_STAGE, MemoryIndex
from memoryquest.settings import PGRSettings

JUDGE_STAGE = "pgr_judge"
JUDGE_TEMPLATE = "judge_references"


class Judge(Protocol):
    kind: JudgeKind

    async def judge(
        self, query: Query, retrieved: Sequence[MemoryItem], index: MemoryIndex, client: ModelClient
    ) -> list[ReferenceJudgement]: ...


class ProvenanceJudge:
    kind = JudgeKind.PROVENANCE

    async def judge(
        self, query: Query, retrieved: Sequence[MemoryItem], index: MemoryIndex, client: ModelClient
    ) -> list[ReferenceJudgement]:
        judgements = []
        for reference in query.references:
            support = [
                item.fid
                for item in retrieved
                if reference.reference_id in item.source_reference_ids
            ]
            reason = (
                f"{len(support)} retrieved fact(s) descend from it, first {support[0]}"
                if support
                else "no retrieved fact descends from it"
            )
            judgements.append(
                ReferenceJudgement(
                    reference_id=reference.reference_id,
                    found=bool(support),
                    reason=reason,
                    supporting_fids=support,
                )
            )
        return judgements


class EmbeddingJudge:
    kind = JudgeKind.EMBEDDING

    def __init__(self, threshold: float) -> None:
        self.threshold = threshold
        self._vectors: dict[tuple[str, str], np.ndarray] = {}
        self.embedding_requests = 0

    async def _reference_vectors(self, texts: list[str], client: ModelClient) -> np.ndarray:
        name = client.embedder_name
        missing = sorted({t for t in texts if (name, t) not in self._vectors})
        if missing:
            self.embedding_requests += 1
            vectors = np.asarray(await client.embed(missing, stage=EMBED_STAGE), dtype=np.float32)
            for text, vector in zip(missing, vectors, strict=True):
                self._vectors[(name, text)] = vector
        return np.stack([self._vectors[(name, t)] for t in texts])

    async def judge(
        self, query: Query, retrieved: Sequence[MemoryItem], index: MemoryIndex, client: ModelClient
    ) -> list[ReferenceJudgement]:
        if not retrieved:
            return [
                ReferenceJudgement(
                    reference_id=r.reference_id, found=False, reason="nothing was retrieved"
                )
                for r in query.references
            ]
        refs = await self._reference_vectors([r.text for r in query.references], client)
        facts = np.stack([index.vector(item.fid) for item in retrieved])
        scores = refs @ facts.T
        judgements = []
        for reference, row in zip(query.references, scores, strict=True):
            order = np.lexsort((np.arange(len(row)), -row))
            best = int(order[0])
            support = [retrieved[i].fid for i in order if row[i] >= self.threshold]
            verdict = "at or above" if support else "below"
            judgements.append(
                ReferenceJudgement(
                    reference_id=reference.reference_id,
                    found=bool(support),
                    reason=f"best cosine {row[best]:.3f} ({retrieved[best].fid}) is {verdict} {self.threshold}",
                    supporting_fids=support,
                )
            )
        return judgements


class JudgeOutputError(LLMOutputError):
    """The judge's answer does not cover the references it was asked about."""


class LLMJudge:
    kind = JudgeKind.LLM

    def __init__(self) -> None:
        self.llm_calls = 0

    async def judge(
        self, query: Query, retrieved: Sequence[MemoryItem], index: MemoryIndex, client: ModelClient
    ) -> list[ReferenceJudgement]:
        if not retrieved:
            return [
                ReferenceJudgement(
                    reference_id=r.reference_id, found=False, reason="nothing was retrieved"
                )
                for r in query.references
            ]
        request = LLMRequest(
            template_id=JUDGE_TEMPLATE,
            variables=JudgeReferencesInputs(
                query=query.text,
                query_date=query.query_date.isoformat(),
                references=[
                    {"number": n, "date": r.date.isoformat(), "text": r.text}
                    for n, r in enumerate(query.references, start=1)
                ],
                retrieved=[
                    {"date": item.date.isoformat(), "info": item.info} for item in retrieved
                ],
            ).variables(),
            response_model=ReferenceVerdicts,
            stage=JUDGE_STAGE,
            temperature=0.0,
        )
        self.llm_calls += 1
        answer = await client.complete(request)
        by_number: dict[int, ReferenceVerdict] = {}
        for verdict in answer.verdicts:
            by_number.setdefault(verdict.number, verdict)
        missing = [n for n in range(1, len(query.references) + 1) if n not in by_number]
        if missing:
            raise JudgeOutputError(
                f"{JUDGE_TEMPLATE} for query {query.query_id}: no verdict for reference number(s) {missing}"
            )
        return [
            ReferenceJudgement(
                reference_id=reference.reference_id,
                found=by_number[n].found,
                reason=by_number[n].reason.strip().splitlines()[0]
                if by_number[n].reason.strip()
                else "",
            )
            for n, reference in enumerate(query.references, start=1)
        ]


def build_judge(kind: JudgeKind | str, settings: PGRSettings) -> Judge:
    try:
        kind = JudgeKind(kind)
    except ValueError:
        raise ValueError(
            f"unknown judge {kind!r}; choose from {', '.join(k.value for k in JudgeKind)}"
        ) from None
    if kind is JudgeKind.PROVENANCE:
        return ProvenanceJudge()
    if kind is JudgeKind.EMBEDDING:
        return EmbeddingJudge(settings.embedding_judge_threshold)
    return LLMJudge()


def build_judges(kinds: Sequence[JudgeKind | str | Judge], settings: PGRSettings) -> list[Judge]:
    """Judges by name (or ready-made judge objects), in the order given."""
    return [k if not isinstance(k, str) else build_judge(k, settings) for k in kinds]
