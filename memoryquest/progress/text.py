"""Short renderings of figures shared by the terminal, the plain lines and the artifacts."""

from __future__ import annotations

from collections.abc import Mapping


def duration(seconds: float) -> str:
    """``1h02m05s``, ``3m07s`` or ``12.3s``."""
    if seconds < 60:
        return f"{seconds:.1f}s"
    whole = round(seconds)
    hours, rest = divmod(whole, 3600)
    minutes, secs = divmod(rest, 60)
    return f"{hours}h{minutes:02d}m{secs:02d}s" if hours else f"{minutes}m{secs:02d}s"


def count(value: float) -> str:
    """``950``, ``12.3k``, ``4.56M``: token counts that fit a status line."""
    if value < 1_000:
        return f"{value:,.0f}"
    if value < 1_000_000:
        return f"{value / 1_000:.1f}k"
    return f"{value / 1_000_000:.2f}M"


def reasons(rejected: Mapping[str, int], limit: int = 0) -> str:
    """``similarity 10, capacity 3``, most frequent first (``limit`` > 0 keeps that many and says how many more)."""
    items = sorted(rejected.items(), key=lambda item: (-item[1], item[0]))
    shown = items[:limit] if limit > 0 else items
    text = ", ".join(f"{reason} {n:,}" for reason, n in shown)
    if len(shown) < len(items):
        text += f", {len(items) - len(shown)} more"
    return text
