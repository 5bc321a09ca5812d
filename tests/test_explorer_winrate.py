"""The explorer shows the answer-level Win Rate of `pgr run --win-rate` when it is given, and only then."""

from __future__ import annotations

from pathlib import Path

import pytest
from playwright.sync_api import sync_playwright

from memoryquest.contracts import RetrievalMethod
from memoryquest.dataset import GeneratedDataset
from memoryquest.pgr.winrate import win_rate_report
from memoryquest.pgr.winrate_contracts import ScoredPair, WinRateReport
from memoryquest.publish.explorer import write_explorer

try:
    from tests.test_explorer_browser import VIEWPORT, chromium_path
    from tests.test_explorer_data import explorer_dataset, read_index
    from tests.test_publish_card import with_baselines
except ModuleNotFoundError:  # tests/ is not a package: pytest puts it on sys.path
    from test_explorer_browser import VIEWPORT, chromium_path
    from test_explorer_data import explorer_dataset, read_index
    from test_publish_card import with_baselines

TOT, BM25 = RetrievalMethod.PGR_TOT, RetrievalMethod.BM25


@pytest.fixture(scope="module")
def dataset() -> GeneratedDataset:
    return with_baselines(explorer_dataset(users=2, queries_per_user=2))


@pytest.fixture(scope="module")
def report(dataset: GeneratedDataset) -> WinRateReport:
    """PGR-ToT's answers against BM25's at its budget: won, won, split, lost."""
    queries = sorted({r.query_id for r in dataset.validation if r.method is TOT})
    pairs = [
        ScoredPair(
            query_id=q,
            method=TOT,
            baseline=BM25,
            pgr_first="pgr" if score > 0 else "baseline",
            baseline_first="pgr" if score == 1.0 else "baseline",
            score=score,
        )
        for q, score in zip(queries, [1.0, 1.0, 0.5, 0.0], strict=True)
    ]
    return win_rate_report(pairs, dataset.validation, samples=500)


def test_the_index_carries_the_win_rate_only_when_given(
    dataset: GeneratedDataset, report: WinRateReport, tmp_path: Path
) -> None:
    write_explorer(dataset, tmp_path / "with", win_rates=report)
    write_explorer(dataset, tmp_path / "without")
    (row,) = read_index(tmp_path / "with")["win_rates"]["rows"]
    assert (row["label"], row["n"], row["win_rate"], row["won_tied_lost"]) == (
        "PGR-ToT vs BM25",
        4,
        0.625,
        [2, 1, 1],
    )
    assert row["low"] <= 0.625 <= row["high"] and row["judge"] == "provenance"
    assert "win_rates" not in read_index(tmp_path / "without")


@pytest.mark.browser
def test_the_overview_shows_the_win_rate_table(
    dataset: GeneratedDataset, report: WinRateReport, tmp_path: Path
) -> None:
    write_explorer(dataset, tmp_path / "explorer", win_rates=report)
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(
            executable_path=chromium_path(playwright.chromium.executable_path),
            args=["--no-sandbox"],
        )
        try:
            page = browser.new_context(viewport=VIEWPORT).new_page()
            errors: list[str] = []
            page.on("pageerror", lambda error: errors.append(str(error)))
            page.goto((tmp_path / "explorer" / "index.html").as_uri())
            table = page.wait_for_selector(".win-rates table")
            assert table is not None
            text = table.inner_text()
        finally:
            browser.close()
    assert errors == []
    assert "Win Rate of PGR's answers over each baseline's at the same budget" in text
    low, high = report.rows[0].win_rate_low, report.rows[0].win_rate_high
    assert "PGR-ToT vs BM25" in text and "62.5%" in text and "2 / 1 / 1" in text
    assert f"{100 * low:.1f}% – {100 * high:.1f}%" in text
