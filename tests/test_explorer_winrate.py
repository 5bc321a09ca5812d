"""The explorer shows the answer-level Win Rate of `pgr run --win-rate` when it is given, and only then."""

from __future__ import annotations

from pathlib import Path

import pytest
from playwright.sync_api import sync_playwright

from memoryquest.cli.main import main
from memoryquest.contracts import RetrievalMethod
from memoryquest.dataset import GeneratedDataset
from memoryquest.pgr.winrate_contracts import WinRateReport
from memoryquest.publish import WIN_RATE_FILE, publish_dataset
from memoryquest.publish.explorer import write_explorer
from memoryquest.settings import Settings

try:
    from tests.test_explorer_browser import VIEWPORT, chromium_path
    from tests.test_explorer_data import explorer_dataset, read_index
    from tests.test_publish_card import judged_report, with_baselines
except ModuleNotFoundError:  # tests/ is not a package: pytest puts it on sys.path
    from test_explorer_browser import VIEWPORT, chromium_path
    from test_explorer_data import explorer_dataset, read_index
    from test_publish_card import judged_report, with_baselines

TOT, BM25 = RetrievalMethod.PGR_TOT, RetrievalMethod.BM25


@pytest.fixture(scope="module")
def dataset() -> GeneratedDataset:
    return with_baselines(explorer_dataset(users=2, queries_per_user=2))


@pytest.fixture(scope="module")
def report(dataset: GeneratedDataset) -> WinRateReport:
    """PGR-ToT's answers against BM25's at its budget: won, won, split, lost."""
    return judged_report(dataset, [1.0, 1.0, 0.5, 0.0], samples=500)


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


# --------------------------------------------------------------------------- memoryquest explore


def explore(capsys: pytest.CaptureFixture[str], *args: str | Path) -> tuple[int, str, str]:
    code = main(["explore", *map(str, args)])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def labels(explorer: Path) -> list[str]:
    return [row["label"] for row in read_index(explorer)["win_rates"]["rows"]]


def test_explore_shows_the_report_beside_a_generated_dataset_or_named_by_the_flag(
    dataset: GeneratedDataset,
    report: WinRateReport,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    directory = dataset.save(tmp_path / "dataset")
    assert explore(capsys, directory)[0] == 0  # no report, no table
    assert "win_rates" not in read_index(directory / "explorer")
    # where `pgr run DIR --win-rate` writes it without --output
    (directory / WIN_RATE_FILE).write_text(report.model_dump_json(), encoding="utf-8")
    code, _, err = explore(capsys, directory)
    assert (code, err) == (0, "")
    assert labels(directory / "explorer") == ["PGR-ToT vs BM25"]
    # where `pgr run DIR --win-rate --output elsewhere/run.jsonl` wrote it
    (directory / WIN_RATE_FILE).unlink()
    elsewhere = tmp_path / "run.winrate.json"
    elsewhere.write_text(report.model_dump_json(), encoding="utf-8")
    code, _, err = explore(
        capsys, directory, "--output", tmp_path / "x", "--win-rate-report", elsewhere
    )
    assert (code, err) == (0, "")
    assert labels(tmp_path / "x") == ["PGR-ToT vs BM25"]


def test_explore_finds_the_report_publish_kept(
    dataset: GeneratedDataset,
    report: WinRateReport,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    published = tmp_path / "hub"
    publish_dataset(dataset, published, Settings(), allow_failed_audit=True, win_rates=report)
    assert labels(published / "explorer") == ["PGR-ToT vs BM25"]
    code, _, err = explore(capsys, published, "--output", tmp_path / "rebuilt")
    assert (code, err) == (0, "")
    assert (
        read_index(tmp_path / "rebuilt")["win_rates"]
        == read_index(published / "explorer")["win_rates"]
    )
    # its explorer is not rebuilt in place: a report given for it needs --output
    code, out, err = explore(capsys, published, "--win-rate-report", published / WIN_RATE_FILE)
    assert (code, out) == (2, "")
    assert err.count("\n") == 1 and "give --output DIR to build one with --win-rate-report" in err


def test_explore_refuses_a_malformed_report_in_one_line_and_writes_nothing(
    dataset: GeneratedDataset, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    directory = dataset.save(tmp_path / "dataset")
    bad = directory / WIN_RATE_FILE
    bad.write_text('{"interval": "95%", "rows": "none"}', encoding="utf-8")
    code, out, err = explore(capsys, directory)
    assert (code, out) == (2, "")
    assert err == (
        f"memoryquest: error: {bad} is not a Win Rate report of `memoryquest pgr run --win-rate`: "
        "bootstrap_samples: Field required (and 2 more)\n"
    )
    assert not (directory / "explorer").exists()
    missing = tmp_path / "nowhere.winrate.json"
    code, out, err = explore(capsys, directory, "--win-rate-report", missing)
    assert (code, out, err) == (
        2,
        "",
        f"memoryquest: error: --win-rate-report {missing} does not exist\n",
    )
    assert not (directory / "explorer").exists()


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
