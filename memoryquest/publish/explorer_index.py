"""The explorer's index: the run summary safe to publish, the totals, the methods and judges
with their labels, every persona with its query list, and the Win Rate table when given."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from memoryquest.contracts import RunManifest
from memoryquest.dataset import GeneratedDataset
from memoryquest.pgr.winrate_contracts import WinRateReport
from memoryquest.publish.explorer_personas import FORMAT_VERSION, PersonaTables, rounded

_LABELS = {
    "query_only": "query-only",
    "pgr_cot": "PGR-CoT",
    "pgr_tot": "PGR-ToT",
    "bm25": "BM25",
    "random": "random",
    "recency": "recency",
    "multi_query": "multi-query",
    "hypothetical_facts": "hypothetical facts",
}
_SHORT = {
    "query_only": "QO",
    "pgr_cot": "CoT",
    "pgr_tot": "ToT",
    "bm25": "BM25",
    "random": "Rnd",
    "recency": "Rec",
    "multi_query": "MQ",
    "hypothetical_facts": "HyDE",
}


def _method_info(key: str) -> dict[str, Any]:
    method, _, target = key.partition("@")
    if not target:
        return {
            "key": key,
            "method": method,
            "baseline_for": None,
            "label": _LABELS.get(method, method),
            "short": _SHORT.get(method, method),
        }
    return {
        "key": key,
        "method": method,
        "baseline_for": target,
        "label": f"{_LABELS.get(method, method)} at the {_LABELS.get(target, target)} budget",
        "short": f"{_SHORT.get(method, method)}@{_SHORT.get(target, target)}",
    }


def _run_summary(manifest: RunManifest | None) -> dict[str, Any] | None:
    """Provenance safe to publish: no settings, no endpoint."""
    if manifest is None:
        return None
    return {
        "run_id": manifest.run_id,
        "created_at": manifest.created_at.isoformat(),
        "package_version": manifest.package_version,
        "simulated": manifest.simulated,
        "backend": manifest.backend,
        "chat_model": manifest.chat_model,
        "embedder": manifest.embedder,
        "seed": manifest.seed,
        "total_cost_usd": manifest.total_cost_usd,
        "wall_seconds": manifest.wall_seconds,
    }


def _win_rates(report: WinRateReport) -> dict[str, Any]:
    """The Win Rate table as the overview shows it (rates 0..1, rounded like recall)."""
    return {
        "interval": report.interval,
        "bootstrap_samples": report.bootstrap_samples,
        "unjudged": len(report.unjudged),
        "judge_model": report.judge_model,
        "judge_is_generator": report.judge_is_generator,
        "judge_sees_references": report.judge_sees_references,
        "answer_context": report.answer_context,
        "rows": [
            {
                "method": row.method.value,
                "baseline": row.baseline.value,
                "label": f"{_LABELS.get(row.method.value, row.method.value)} vs "
                f"{_LABELS.get(row.baseline.value, row.baseline.value)}",
                "judge": row.judge.value,
                "n": row.n,
                "recall": rounded(row.recall),
                "recall_exact": rounded(row.recall_exact),
                "baseline_recall": rounded(row.baseline_recall),
                "baseline_recall_exact": rounded(row.baseline_recall_exact),
                "win_rate": rounded(row.win_rate),
                "low": rounded(row.win_rate_low),
                "high": rounded(row.win_rate_high),
                "won_tied_lost": [row.wins, row.ties, row.losses],
                "length_controlled": rounded(row.length_controlled),
                "lc_low": rounded(row.length_controlled_low),
                "lc_high": rounded(row.length_controlled_high),
                "flip_rate": rounded(row.flip_rate),
                "words": [round(row.pgr_words), round(row.baseline_words)],
            }
            for row in report.rows
        ],
    }


def index_payload(
    dataset: GeneratedDataset,
    tables: PersonaTables,
    personas: list[dict[str, Any]],
    manifest: RunManifest | None,
    audit: Mapping[str, object] | None,
    plots: Sequence[Mapping[str, str]],
    win_rates: WinRateReport | None = None,
) -> dict[str, Any]:
    index = {
        "format": FORMAT_VERSION,
        "run": _run_summary(manifest),
        "totals": {
            "personas": len(personas),
            "queries": len(dataset.queries),
            "sessions": len(dataset.sessions),
            "facts": len(dataset.facts),
            "validation": len(dataset.validation),
            "rejected": len(dataset.rejected),
        },
        "judges": tables.judges,
        "methods": [_method_info(key) for key in tables.method_keys],
        "audit": dict(audit) if audit is not None else None,
        "plots": [dict(p) for p in plots],
        "personas": personas,
    }
    if win_rates is not None:  # absent otherwise, so an explorer without it keeps its bytes
        index["win_rates"] = _win_rates(win_rates)
    return index
