"""The bundled Prospection-Guided Retrieval (PGR) runner: retrieval, prospection, judges, metrics."""

from memoryquest.pgr.judges import EmbeddingJudge, Judge, LLMJudge, ProvenanceJudge, build_judges
from memoryquest.pgr.metrics import (
    PGRSummary,
    PGRSummaryRow,
    ndcg,
    recall,
    recall_at_k,
    recall_exact,
    summarise,
    summary_markdown,
)
from memoryquest.pgr.retrieval import Hit, IndexCache, MemoryIndex, Retriever, build_index
from memoryquest.pgr.runner import PGRError, RetrievalOutcome, run_query, validate_queries
from memoryquest.pgr.winrate import PairwiseOutcome, pairwise_winrate, win_rate

__all__ = [
    "EmbeddingJudge",
    "Hit",
    "IndexCache",
    "Judge",
    "LLMJudge",
    "MemoryIndex",
    "PGRError",
    "PGRSummary",
    "PGRSummaryRow",
    "PairwiseOutcome",
    "ProvenanceJudge",
    "RetrievalOutcome",
    "Retriever",
    "build_index",
    "build_judges",
    "ndcg",
    "pairwise_winrate",
    "recall",
    "recall_at_k",
    "recall_exact",
    "run_query",
    "summarise",
    "summary_markdown",
    "validate_queries",
    "win_rate",
]
