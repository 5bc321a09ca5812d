"""The end-of-run summary, and a run that keeps nothing failing loudly instead of exiting 0."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from memoryquest.progress import ProgressSnapshot, RunSummary, StageProgress
from tests.progress_fixture import generate

NO_QUERY = "memoryquest: error: no query was kept (rejections above); nothing was published"


def test_a_run_that_keeps_no_query_prints_the_summary_and_exits_1(
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    """γ_max so low that every candidate is rejected as too similar to its references; publishing
    is asked for, and skipped (an empty dataset has nothing to audit) rather than crashing."""
    output = tmp_path_factory.mktemp("nothing") / "run"
    home = tmp_path_factory.mktemp("prefect-home")
    run = generate(
        home, output, "--count", "2", "--set", "generation.gamma_max=0.0001", publish=True
    )
    assert run.returncode == 1, run.stderr[-3000:]
    assert run.stderr.splitlines()[-1] == NO_QUERY
    assert "Traceback" not in run.stderr
    out = run.stdout
    assert "run summary" in out
    assert "personas   2 done, 0 skipped" in out
    assert "queries    0 kept" in out and "(similarity " in out
    for line in ("history", "requests", "tokens", "cost", "wall time"):
        assert f"  {line}" in out, out
    summary = json.loads((output / "run_report.json").read_text())["summary"]
    assert summary["queries_kept"] == 0 and summary["rejected"]["similarity"] > 0
    assert (output / "dataset").is_dir()  # what was generated is kept
    assert not (output / "published").exists()


def test_summary_lines_from_a_snapshot() -> None:
    snapshot = ProgressSnapshot(
        personas_total=3,
        personas_done=2,
        stages=[StageProgress(stage="queries", done=3, total=3, cached=1)],
        queries_kept=5,
        rejected={"similarity": 4, "capacity": 2},
        sessions=12,
        facts=40,
        requests=100,
        embedding_requests=7,
        input_tokens=123_456,
        output_tokens=7_890,
        cost_usd=1.5,
        rate_limited=3,
        retries=4,
    )
    summary = RunSummary.from_snapshot(snapshot, ["user9: no profile"], wall_seconds=125.0)
    text = summary.text()
    assert "2 done, 1 skipped" in text and "skipped: user9: no profile" in text
    assert "5 kept, 6 rejected (similarity 4, capacity 2)" in text
    assert "2 computed, 1 from Prefect's cache" in text
    assert "100 chat, 7 embedding; 3 × 429, 4 retries" in text
    assert "123,456 in, 7,890 out" in text
    assert "$1.50" in text and "2m05s" in text
    assert RunSummary.model_validate_json(summary.model_dump_json()) == summary
    assert summary.markdown().startswith("## Run summary")


def test_summary_is_what_the_report_holds(tmp_path: Path) -> None:
    """The command line reads the flow's summary from run_report.json: it must round-trip."""
    summary = RunSummary(personas_done=1, personas_skipped=0, queries_kept=0)
    path = tmp_path / "run_report.json"
    path.write_text(json.dumps({"summary": summary.model_dump(mode="json")}))
    assert RunSummary.model_validate(json.loads(path.read_text())["summary"]) == summary
