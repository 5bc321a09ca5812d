"""How every section of the card writes a figure, an interval, a method's name and a
Markdown table, so the same number reads the same everywhere."""

from __future__ import annotations

from collections.abc import Sequence

from memoryquest.contracts import RetrievalMethod


def decimals(value: float, digits: int = 3) -> str:
    return f"{value:.{digits}f}"


METHOD_NAMES: dict[str, str] = {
    RetrievalMethod.QUERY_ONLY.value: "dense query-only",
    RetrievalMethod.PGR_COT.value: "PGR-CoT",
    RetrievalMethod.PGR_TOT.value: "PGR-ToT",
    RetrievalMethod.BM25.value: "BM25",
    RetrievalMethod.RANDOM.value: "random",
    RetrievalMethod.RECENCY.value: "recency",
    RetrievalMethod.MULTI_QUERY.value: "multi-query expansion",
    RetrievalMethod.HYPOTHETICAL_FACTS.value: "hypothetical-fact expansion (HyDE)",
}
PGR_METHODS = (RetrievalMethod.PGR_COT.value, RetrievalMethod.PGR_TOT.value)


def method_name(method: str) -> str:
    return METHOD_NAMES.get(method, method)


def interval_text(low: float, high: float, signed: bool = False) -> str:
    return f"{low:+.3f}..{high:+.3f}" if signed else f"{low:.3f}..{high:.3f}"


def with_interval(value: float, low: float, high: float, signed: bool = False) -> str:
    """A figure and its interval, as every table shows them: ``0.512 (0.401..0.620)``."""
    return f"{value:{'+' if signed else ''}.3f} ({interval_text(low, high, signed)})"


def percent(value: float) -> str:
    return f"{100 * value:.1f}%"


def percent_interval(low: float, high: float) -> str:
    return f"{100 * low:.1f}..{100 * high:.1f}%"


def markdown_table(header: Sequence[str], rows: Sequence[Sequence[object]]) -> list[str]:
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    lines += [
        "| " + " | ".join(str(cell).replace("|", "\\|").replace("\n", " ") for cell in row) + " |"
        for row in rows
    ]
    return lines
