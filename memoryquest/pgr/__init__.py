"""The bundled Prospection-Guided Retrieval (PGR) runner: retrieval, prospection, judges, metrics.

Names are imported on first use: a ``memoryquest.pgr.*_contracts`` module
(which the simulator reads) loads neither the runner nor the client behind it.
"""

from __future__ import annotations

import importlib
from typing import Any

_HOMES = {
    "memoryquest.pgr.judges": (
        "EmbeddingJudge",
        "Judge",
        "LLMJudge",
        "ProvenanceJudge",
        "build_judges",
    ),
    "memoryquest.pgr.metrics": (
        "PGRSummary",
        "PGRSummaryRow",
        "ndcg",
        "recall",
        "recall_at_k",
        "recall_exact",
        "summarise",
        "summary_markdown",
    ),
    "memoryquest.pgr.outcomes": ("PGRError", "RetrievalOutcome"),
    "memoryquest.pgr.retrieval": ("Hit", "IndexCache", "MemoryIndex", "Retriever", "build_index"),
    "memoryquest.pgr.runner": ("run_query", "validate_queries"),
    "memoryquest.pgr.winrate": ("PairwiseOutcome", "pairwise_winrate", "win_rate"),
}
_HOME_OF = {name: module for module, names in _HOMES.items() for name in names}

__all__ = sorted(_HOME_OF)


def __getattr__(name: str) -> Any:
    if name in _HOME_OF:
        return getattr(importlib.import_module(_HOME_OF[name]), name)
    raise AttributeError(f"module 'memoryquest.pgr' has no attribute {name!r}")
