"""PNG figures for the dataset card.

Figures are drawn with the Agg canvas directly (no pyplot, so no global
backend switch and no interference with the caller's matplotlib state) under
matplotlib's default style, and saved without the ``Software`` text chunk, so
the same statistics give byte-identical files.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

import matplotlib
import numpy as np
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from matplotlib.ticker import MaxNLocator

from memoryquest.publish.stats import MethodScore

GAMMA_HISTOGRAM = "gamma_histogram.png"
RECALL_BY_METHOD = "recall_by_method.png"
_DPI = 100
_PNG_METADATA: dict[str, str | None] = {"Software": None}
_MARGINS = {"left": 0.1, "right": 0.97, "bottom": 0.14, "top": 0.91}


@contextmanager
def _default_style() -> Iterator[None]:
    """Matplotlib's defaults, whatever the caller's rcParams say."""
    with matplotlib.rc_context():
        matplotlib.rcdefaults()
        matplotlib.rcParams["svg.hashsalt"] = "memoryquest"
        yield


def _save(figure: Figure, path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    FigureCanvasAgg(figure)
    figure.savefig(path, format="png", dpi=_DPI, metadata=_PNG_METADATA)
    return path


def gamma_histogram(gammas: Sequence[float], threshold: float, path: Path) -> Path:
    """Distribution of γ over kept queries, with the filter threshold marked."""
    with _default_style():
        figure = Figure(figsize=(6.4, 3.6))
        axes = figure.subplots()
        low = min(0.0, *gammas) if gammas else 0.0
        high = max(threshold, *gammas) if gammas else threshold
        bins = [float(edge) for edge in np.linspace(low, high + 0.01, 21)]
        axes.hist(list(gammas), bins=bins, color="#4c72b0", edgecolor="white")
        axes.axvline(
            threshold,
            color="#c44e52",
            linestyle="--",
            linewidth=1.5,
            label=f"threshold γ ≤ {threshold:g}",
        )
        axes.set_xlabel("γ = mean cosine(query, reference)")
        axes.set_ylabel("queries")
        axes.yaxis.set_major_locator(MaxNLocator(integer=True))
        axes.set_title(f"Query–reference similarity γ ({len(gammas)} queries)")
        axes.legend(loc="upper left")
        figure.subplots_adjust(
            **_MARGINS
        )  # fixed margins: tight_layout costs more than the drawing
        return _save(figure, path)


def recall_by_method(scores: Sequence[MethodScore], path: Path) -> Path:
    """Mean Recall (light) and RecallExact (dark) per method, one bar group per judge."""
    with _default_style():
        figure = Figure(figsize=(6.4, 3.6))
        axes = figure.subplots()
        methods = list(dict.fromkeys(score.method for score in scores))
        judges = list(dict.fromkeys(score.judge for score in scores))
        by_key = {(score.method, score.judge): score for score in scores}
        width = 0.8 / max(len(judges), 1)
        palette = ["#4c72b0", "#55a868", "#c44e52", "#8172b2", "#ccb974", "#64b5cd"]
        for j, judge in enumerate(judges):
            xs, recall, exact = [], [], []
            for m, method in enumerate(methods):
                score = by_key.get((method, judge))
                if score is None:
                    continue
                xs.append(m - 0.4 + width * (j + 0.5))
                recall.append(score.mean_recall)
                exact.append(score.recall_exact)
            color = palette[j % len(palette)]
            axes.bar(
                xs, recall, width=width * 0.95, color=color, alpha=0.45, label=f"{judge}: Recall"
            )
            axes.bar(
                xs, exact, width=width * 0.95, color=color, alpha=1.0, label=f"{judge}: RecallExact"
            )
        axes.set_xticks(range(len(methods)), methods)
        axes.set_ylim(0.0, 1.3)  # headroom for the legend
        axes.set_yticks([0.0, 0.2, 0.4, 0.6, 0.8, 1.0])
        axes.set_ylabel("score")
        axes.set_title("Validation recall by retrieval method and judge")
        axes.legend(fontsize="small", ncols=max(len(judges), 1), loc="upper left")
        figure.subplots_adjust(
            **_MARGINS
        )  # fixed margins: tight_layout costs more than the drawing
        return _save(figure, path)
