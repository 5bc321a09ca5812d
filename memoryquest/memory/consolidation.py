"""Consolidation: fold near-duplicate facts learnt close together in time into one.

Grouping is deterministic so a re-run merges exactly the same facts:

1. the active facts are embedded in one batched call and visited in fid order;
   each joins the first cluster whose members are *all* at cosine >=
   ``consolidation_similarity`` to it (complete linkage, so a chain of
   pairwise-similar facts cannot drag unrelated facts together), else it
   starts a new cluster;
2. within a cluster, facts are ordered by their latest date (``updated_on``)
   and swept into windows that span at most ``consolidation_window_days``;
   only windows of two or more facts are merged, one LLM call each.
"""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Final

import numpy as np
from pydantic import TypeAdapter

from memoryquest.contracts import Fact, RejectedCandidate, RejectionReason, Stage
from memoryquest.generation.common import failure_reason
from memoryquest.generation.regeneration import Regeneration, Round, regenerate
from memoryquest.ids import make_id
from memoryquest.llm.client import LLMOutputError, ModelClient
from memoryquest.llm.request import LLMRequest
from memoryquest.memory.consolidation_contracts import (
    ConsolidationInputs,
    GroupFact,
    MergedFactAnswer,
)
from memoryquest.memory.store import FactStore
from memoryquest.settings import GenerationSettings

STAGE: Final = Stage.MEMORY


@dataclass
class ConsolidationOutcome:
    llm_calls: int = 0
    embedding_calls: int = 0
    merges: int = 0
    merged_fids: list[str] = field(default_factory=list)
    rejected: list[RejectedCandidate] = field(default_factory=list)


def cluster_by_similarity(
    facts: Sequence[Fact], vectors: np.ndarray, similarity: float
) -> list[list[Fact]]:
    """Complete-linkage greedy clusters, visiting facts in the given (fid) order."""
    if len(facts) != len(vectors):
        raise ValueError(f"{len(facts)} facts but {len(vectors)} embedding rows")
    close = (vectors @ vectors.T) >= similarity
    neighbours = [set(np.flatnonzero(row).tolist()) for row in close]
    clusters: list[list[int]] = []
    leader_of: dict[int, int] = {}  # first member -> cluster index
    for i in range(len(facts)):
        candidates = sorted(leader_of[j] for j in neighbours[i] if j in leader_of)
        for index in candidates:
            if neighbours[i].issuperset(clusters[index]):
                clusters[index].append(i)
                break
        else:
            leader_of[i] = len(clusters)
            clusters.append([i])
    return [[facts[i] for i in cluster] for cluster in clusters]


def split_by_window(cluster: Sequence[Fact], window_days: int) -> list[list[Fact]]:
    """Consecutive runs (by latest date) whose dates span at most ``window_days``."""
    ordered = sorted(cluster, key=lambda f: (f.updated_on, f.fid))
    windows: list[list[Fact]] = []
    for fact in ordered:
        if windows and (fact.updated_on - windows[-1][0].updated_on).days <= window_days:
            windows[-1].append(fact)
        else:
            windows.append([fact])
    return windows


def merge_groups(
    facts: Sequence[Fact], vectors: np.ndarray, settings: GenerationSettings
) -> list[list[Fact]]:
    """Every group of two or more facts that consolidation should fold into one."""
    groups: list[list[Fact]] = []
    for cluster in cluster_by_similarity(facts, vectors, settings.consolidation_similarity):
        for window in split_by_window(cluster, settings.consolidation_window_days):
            if len(window) >= 2:
                groups.append(sorted(window, key=lambda f: f.fid))
    return groups


_GROUP_FACT = TypeAdapter(GroupFact)


def fact_view(fact: Fact) -> GroupFact:
    """What the model sees of a fact: the fields its row type, :class:`GroupFact`, names."""
    return _GROUP_FACT.validate_python(fact.model_dump(mode="json"))


def merge_request(group: Sequence[Fact], seed: int) -> LLMRequest[MergedFactAnswer]:
    return ConsolidationInputs(facts=[fact_view(f) for f in group]).request(seed=seed)


def merge_problems(answer: MergedFactAnswer, group: Sequence[Fact]) -> list[str]:
    allowed = sorted({f.type.value for f in group})
    if answer.type.value not in allowed:
        return [f"type {answer.type.value!r} is not one of the group's types {allowed}"]
    return []


async def consolidate(
    store: FactStore,
    client: ModelClient,
    settings: GenerationSettings,
    on: dt.date,
    *,
    seed: int = 0,
    embeddings: dict[str, np.ndarray] | None = None,
) -> ConsolidationOutcome:
    """Merge similar, temporally close active facts; members are retired on ``on``.

    ``embeddings`` (fact text -> vector) carries vectors from one consolidation
    to the next, so each run embeds only texts it has not seen, in one call.
    """
    outcome = ConsolidationOutcome()
    facts = store.active()
    if len(facts) < 2:
        return outcome
    known = embeddings if embeddings is not None else {}
    missing = sorted({f.info for f in facts} - known.keys())
    if missing:
        fresh = np.asarray(await client.embed(missing, stage=STAGE), dtype=np.float32)
        known.update(zip(missing, fresh, strict=True))
        outcome.embedding_calls += 1
    vectors = np.stack([known[f.info] for f in facts])
    groups = merge_groups(facts, vectors, settings)
    job = _MergeJob(store.persona_id, client, seed)
    merged = await regenerate(job, groups, settings.max_regenerations + 1)
    outcome.llm_calls += merged.calls
    outcome.rejected.extend(merged.rejected)
    answers = merged.kept
    for index in sorted(answers):
        group, answer = groups[index], answers[index]
        store.merge(
            [f.fid for f in group], answer.info, answer.type, _dedupe(answer.related_entities), on
        )
        outcome.merges += 1
        outcome.merged_fids.extend(f.fid for f in group)
    return outcome


class _MergeJob(Regeneration[list[Fact], MergedFactAnswer, MergedFactAnswer]):
    """Each group's merged fact, asked again while it breaks a rule; a group that never passes
    stays unmerged."""

    def __init__(self, persona_id: str, client: ModelClient, seed: int) -> None:
        self.persona_id, self.client, self.seed = persona_id, client, seed

    async def ask(
        self, items: Sequence[list[Fact]], round: Round
    ) -> Sequence[MergedFactAnswer | BaseException]:
        requests = [merge_request(group, self.seed + round.attempt) for group in items]
        return await self.client.complete_all(requests, return_exceptions=True)

    async def check(
        self, answers: Sequence[tuple[int, list[Fact], MergedFactAnswer]], round: Round
    ) -> list[tuple[int, MergedFactAnswer | RejectedCandidate]]:
        verdicts: list[tuple[int, MergedFactAnswer | RejectedCandidate]] = []
        for position, group, answer in answers:
            problems = merge_problems(answer, group)
            if not problems:
                verdicts.append((position, answer))
                continue
            payload = answer.model_dump(mode="json")
            rejection = self._rejected(
                group, RejectionReason.INVARIANT, "; ".join(problems), payload, round
            )
            verdicts.append((position, rejection))
        return verdicts

    def failed(self, item: list[Fact], error: LLMOutputError, round: Round) -> RejectedCandidate:
        return self._rejected(item, failure_reason(error), str(error), {"error": str(error)}, round)

    def _rejected(
        self,
        group: list[Fact],
        reason: RejectionReason,
        detail: str,
        payload: dict[str, object],
        round: Round,
    ) -> RejectedCandidate:
        member_fids = [f.fid for f in group]
        return RejectedCandidate(
            rejected_id=make_id(
                "rejected",
                self.persona_id,
                ConsolidationInputs.template_id,
                *member_fids,
                round.attempt,
            ),
            persona_id=self.persona_id,
            stage=STAGE,
            reason=reason,
            detail=f"merge of {member_fids} (attempt {round.attempt + 1}): {detail}"
            + ("; retries exhausted, the facts stay unmerged" if round.last else ""),
            payload_json=json.dumps(
                {"facts": [fact_view(f) for f in group], "answer": payload},
                ensure_ascii=False,
            ),
        )


def _dedupe(values: Sequence[str]) -> list[str]:
    seen: set[str] = set()
    kept: list[str] = []
    for value in values:
        key = value.strip().lower()
        if key and key not in seen:
            seen.add(key)
            kept.append(value.strip())
    return kept
