"""Interchangeable judges: was each required reference found in what a method retrieved?

* provenance — exact and free: found when a retrieved fact's visible revision
  lists the reference in ``source_reference_ids``;
* embedding — found when some retrieved fact's text has cosine ≥ the
  configured threshold with the reference text;
* llm — the paper's judge: a model reads the retrieved memories and says, for
  each reference, which of them state it, with a one-line reason.

Every judge scores all the sets retrieved for one query at once (each method's
and each budget-matched baseline's). The deterministic judges score each set on
its own; the model judge reads the union of the sets in one call and each set
is credited with the memories it holds. One call per query instead of one per
set costs about a fifth of the tokens, and a memory is judged the same way
whichever method retrieved it, so judge noise cannot favour one method.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

import numpy as np

from memoryquest.contracts import JudgeKind, Query, ReferenceJudgement
from memoryquest.llm.client import LLMContextLengthError, LLMOutputError, ModelClient
from memoryquest.llm.request import LLMRequest
from memoryquest.memory.snapshot import MemoryItem
from memoryquest.pgr.judges_contracts import (
    JudgeReferencesInputs,
    ReferenceVerdict,
    ReferenceVerdicts,
)
from memoryquest.pgr.retrieval import EMBED_STAGE, MemoryIndex
from memoryquest.settings import PGRSettings


class Judge:
    """Base of the judges: by default each retrieved set is judged on its own (``judge``)."""

    kind: JudgeKind

    async def judge_sets(
        self,
        query: Query,
        retrieved_sets: Sequence[Sequence[MemoryItem]],
        index: MemoryIndex,
        client: ModelClient,
    ) -> list[list[ReferenceJudgement]]:
        """One list of judgements (in reference order) per retrieved set, in the sets' order."""
        return [await self.judge(query, retrieved, index, client) for retrieved in retrieved_sets]

    async def judge(
        self, query: Query, retrieved: Sequence[MemoryItem], index: MemoryIndex, client: ModelClient
    ) -> list[ReferenceJudgement]:
        (judgements,) = await self.judge_sets(query, [retrieved], index, client)
        return judgements


def nothing_retrieved(query: Query) -> list[ReferenceJudgement]:
    return [
        ReferenceJudgement(reference_id=r.reference_id, found=False, reason="nothing was retrieved")
        for r in query.references
    ]


class ProvenanceJudge(Judge):
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


class EmbeddingJudge(Judge):
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
            return nothing_retrieved(query)
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


class LLMJudge(Judge):
    kind = JudgeKind.LLM

    def __init__(self) -> None:
        self.llm_calls = 0

    async def judge_sets(
        self,
        query: Query,
        retrieved_sets: Sequence[Sequence[MemoryItem]],
        index: MemoryIndex,
        client: ModelClient,
    ) -> list[list[ReferenceJudgement]]:
        union = list({item.fid: item for items in retrieved_sets for item in items}.values())
        if not union:
            return [nothing_retrieved(query) for _ in retrieved_sets]
        union.sort(key=lambda item: (item.date, item.fid))
        verdicts = await self._verdicts(query, union, client)
        held = [{item.fid for item in items} for items in retrieved_sets]
        return [
            [
                _credited(reference.reference_id, verdicts[n], union, fids)
                for n, reference in enumerate(query.references, start=1)
            ]
            for fids in held
        ]

    async def _verdicts(
        self, query: Query, union: list[MemoryItem], client: ModelClient
    ) -> dict[int, ReferenceVerdict]:
        """One verdict per reference over the whole union; where the model's window is too small
        for the union, over parts of it, a reference found in any part being found."""

        def fullest_first() -> Iterator[tuple[LLMRequest[ReferenceVerdicts], int]]:
            size = len(union)
            while True:
                yield judge_request(query, union[:size]), size
                if size == 1:
                    break
                size = -(-size // 2)

        _, size = await client.first_fitting(fullest_first())
        parts = [union[start : start + size] for start in range(0, len(union), size)]
        self.llm_calls += len(parts)
        try:
            answers = await client.complete_all([judge_request(query, part) for part in parts])
        except LLMContextLengthError as exc:
            if exc.learned_window is None:
                raise
            return await self._verdicts(query, union, client)  # split under the window it named
        merged: dict[int, ReferenceVerdict] = {}
        for offset, (part, answer) in enumerate(zip(parts, answers, strict=True)):
            verdicts = verdicts_by_number(answer, len(query.references), len(part), query.query_id)
            for number, verdict in verdicts.items():
                memories = [m + offset * size for m in verdict.memories]
                earlier = merged.get(number)
                if earlier is None or (memories and not earlier.memories):
                    # the first part's verdict, until a part finds the reference
                    merged[number] = verdict.model_copy(update={"memories": memories})
                elif memories:
                    merged[number] = earlier.model_copy(
                        update={"memories": [*earlier.memories, *memories]}
                    )
        return merged


def judge_request(query: Query, memories: Sequence[MemoryItem]) -> LLMRequest[ReferenceVerdicts]:
    """The model judge's request: the query's references and the memories, both numbered from 1."""
    return JudgeReferencesInputs(
        query=query.text,
        query_date=query.query_date.isoformat(),
        references=[
            {"number": n, "date": r.date.isoformat(), "text": r.text}
            for n, r in enumerate(query.references, start=1)
        ],
        retrieved=[
            {"number": n, "date": item.date.isoformat(), "info": item.info}
            for n, item in enumerate(memories, start=1)
        ],
    ).request()


def verdicts_by_number(
    answer: ReferenceVerdicts, references: int, memories: int, query_id: str
) -> dict[int, ReferenceVerdict]:
    """The answer's verdict for each reference number, or why it cannot be used."""
    by_number: dict[int, ReferenceVerdict] = {}
    for verdict in answer.verdicts:
        by_number.setdefault(verdict.number, verdict)
    missing = [n for n in range(1, references + 1) if n not in by_number]
    if missing:
        raise JudgeOutputError(
            f"{JudgeReferencesInputs.template_id} for query {query_id}: no verdict for reference number(s) {missing}"
        )
    unknown = sorted({m for v in by_number.values() for m in v.memories if not 1 <= m <= memories})
    if unknown:
        raise JudgeOutputError(
            f"{JudgeReferencesInputs.template_id} for query {query_id}: memory number(s) {unknown} outside 1..{memories}"
        )
    return by_number


def _credited(
    reference_id: str, verdict: ReferenceVerdict, union: list[MemoryItem], held: set[str]
) -> ReferenceJudgement:
    """The verdict on the union, as it applies to one set: found when the set holds a memory that states it."""
    support = [
        union[m - 1].fid for m in dict.fromkeys(verdict.memories) if union[m - 1].fid in held
    ]
    reason = verdict.reason.strip().splitlines()[0] if verdict.reason.strip() else ""
    if verdict.memories and not support:
        reason = f"stated only by memories this method did not retrieve ({reason})"
    return ReferenceJudgement(
        reference_id=reference_id, found=bool(support), reason=reason, supporting_fids=support
    )


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
