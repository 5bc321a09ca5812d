"""Retrieval metrics and the per method × judge summary of a validation run.

Definitions (all per query, then averaged):

* Recall — fraction of the query's required references the judge found.
* RecallExact — 1 when every required reference was found, else 0.
* recall@K — fraction of references with a supporting fact among the first K
  facts of the ranked retrieval list. Query-only ranks by cosine; PGR ranks by
  the order facts were first retrieved (augmentation + Phase 1 first, then
  each refinement), and by best cosine within one round.
* nDCG — binary relevance: a retrieved fact is relevant when its visible
  revision descends from a required reference (provenance). The ideal list
  puts every relevant fact of the memory snapshot first, truncated to the
  length of the retrieved list.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from statistics import fmean

from pydantic import BaseModel, Field

from memoryquest.contracts import JudgeKind, ReferenceJudgement, RetrievalMethod, ValidationResult
from memoryquest.memory.snapshot import MemoryItem


def recall(judgements: Sequence[ReferenceJudgement]) -> float:
    if not judgements:
        raise ValueError("recall needs at least one reference judgement")
    return sum(j.found for j in judgements) / len(judgements)


def recall_exact(judgements: Sequence[ReferenceJudgement]) -> bool:
    if not judgements:
        raise ValueError("recall_exact needs at least one reference judgement")
    return all(j.found for j in judgements)


def provenance_support(reference_ids: Iterable[str], items: Iterable[MemoryItem]) -> dict[str, list[str]]:
    """reference id -> fids (in the given order) whose visible revision descends from it."""
    support: dict[str, list[str]] = {rid: [] for rid in reference_ids}
    for item in items:
        for rid in item.source_reference_ids:
            if rid in support:
                support[rid].append(item.fid)
    return support


def recall_at_k(ranked_fids: Sequence[str], support: Mapping[str, Iterable[str]], k: int) -> float:
    """Share of references with a supporting fact in the first ``k`` ranked facts."""
    if k < 1:
        raise ValueError(f"k must be at least 1, got {k}")
    if not support:
        raise ValueError("recall@K needs at least one reference")
    top = set(ranked_fids[:k])
    return sum(bool(top & set(fids)) for fids in support.values()) / len(support)


def ndcg(ranked_fids: Sequence[str], relevant_fids: Iterable[str]) -> float:
    """Binary-relevance nDCG of the whole ranked list (0 when nothing relevant exists or was retrieved)."""
    relevant = set(relevant_fids)
    if not ranked_fids or not relevant:
        return 0.0
    dcg = sum(1.0 / math.log2(rank + 1) for rank, fid in enumerate(ranked_fids, start=1) if fid in relevant)
    ideal_hits = min(len(relevant), len(ranked_fids))
    idcg = sum(1.0 / math.log2(rank + 1) for rank in range(1, ideal_hits + 1))
    return dcg / idcg


def relevant_fids(reference_ids: Iterable[str], items: Iterable[MemoryItem]) -> set[str]:
    """Facts of a snapshot that descend from any of the references."""
    wanted = set(reference_ids)
    return {item.fid for item in items if wanted.intersection(item.source_reference_ids)}


# --------------------------------------------------------------------------- summary


class PGRSummaryRow(BaseModel):
    method: RetrievalMethod
    judge: JudgeKind
    n: int = Field(description="Queries scored.")
    recall: float = Field(description="Mean fraction of required references found.")
    recall_exact: float = Field(description="Share of queries with every reference found.")
    ndcg: float
    llm_calls: float = Field(description="Mean retrieval/generation LLM calls per query (judge calls excluded).")
    embedding_calls: float = Field(description="Mean query-time embedding requests per query.")
    facts_retrieved: float = Field(description="Mean unique facts retrieved per query.")
    phase1_facts: float | None = Field(None, description="PGR: mean facts after Phase 1.")
    phase2_new_facts: float | None = Field(None, description="PGR: mean facts added by Phase 2 refinements.")
    refinements: float | None = Field(None, description="PGR: mean Phase 2 iterations run.")


class PGRSummary(BaseModel):
    rows: list[PGRSummaryRow]
    queries: int = Field(description="Distinct queries in the results.")

    def row(self, method: RetrievalMethod | str, judge: JudgeKind | str) -> PGRSummaryRow:
        for row in self.rows:
            if row.method == method and row.judge == judge:
                return row
        raise KeyError(f"no summary row for method {method} and judge {judge}")


def summarise(results: Sequence[ValidationResult]) -> PGRSummary:
    """Means per method × judge, in the order the pairs first appear."""
    groups: dict[tuple[RetrievalMethod, JudgeKind], list[ValidationResult]] = {}
    for result in results:
        groups.setdefault((result.method, result.judge), []).append(result)
    rows = []
    for (method, judge), group in groups.items():
        prospective = method is not RetrievalMethod.QUERY_ONLY
        rows.append(
            PGRSummaryRow(
                method=method,
                judge=judge,
                n=len(group),
                recall=fmean(r.recall for r in group),
                recall_exact=fmean(float(r.recall_exact) for r in group),
                ndcg=fmean(r.ndcg for r in group),
                llm_calls=fmean(r.llm_calls for r in group),
                embedding_calls=fmean(r.embedding_calls for r in group),
                facts_retrieved=fmean(len(r.retrieved_fids) for r in group),
                phase1_facts=fmean(_phase1(r) for r in group) if prospective else None,
                phase2_new_facts=fmean(_phase2(r) for r in group) if prospective else None,
                refinements=fmean(max(len(r.iterations) - 1, 0) for r in group) if prospective else None,
            )
        )
    return PGRSummary(rows=rows, queries=len({r.query_id for r in results}))


def _phase1(result: ValidationResult) -> int:
    return len(result.iterations[0].new_fids) if result.iterations else 0


def _phase2(result: ValidationResult) -> int:
    return sum(len(it.new_fids) for it in result.iterations[1:])


def _cell(value: float | None, digits: int = 3) -> str:
    return "–" if value is None else f"{value:.{digits}f}"


def summary_markdown(summary: PGRSummary) -> str:
    """A Markdown table shaped like the paper's Tables 1 and 7."""
    if not summary.rows:
        return "No PGR validation results.\n"
    lines = [
        f"PGR validation over {summary.queries} queries.",
        "",
        "| Method | Judge | n | Recall | RecallExact | nDCG | LLM calls/query | Embedding requests/query "
        "| Facts retrieved/query | Phase-1 facts | Phase-2 new facts | Refinements |",
        "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for row in summary.rows:
        lines.append(
            f"| {row.method.value} | {row.judge.value} | {row.n} | {_cell(row.recall)} | {_cell(row.recall_exact)} "
            f"| {_cell(row.ndcg)} | {_cell(row.llm_calls, 2)} | {_cell(row.embedding_calls, 2)} "
            f"| {_cell(row.facts_retrieved, 2)} | {_cell(row.phase1_facts, 2)} | {_cell(row.phase2_new_facts, 2)} "
            f"| {_cell(row.refinements, 2)} |"
        )
    return "\n".join(lines) + "\n"
