"""`memoryquest pgr run` (and its --win-rate) on a small dataset built from user0's real PersonaLens profile."""

from __future__ import annotations

import asyncio
import json
import re
import shutil
from pathlib import Path

import pytest

from memoryquest.cli.main import main
from memoryquest.cli.pgr_inputs import load_for_pgr
from memoryquest.dataset import GeneratedDataset
from memoryquest.ids import make_id
from memoryquest.llm.client import ModelClient
from memoryquest.llm.factory import shared_local_embedder
from memoryquest.llm.simulated import SimulatedChatBackend
from memoryquest.pgr.baselines import BASELINE_METHODS
from memoryquest.pgr.run_record import EvaluationRecord, dataset_digest
from memoryquest.pgr.sample import sample_dataset
from memoryquest.pgr.winrate_contracts import WinRateReport
from memoryquest.publish import WIN_RATE_FILE

try:
    from tests.test_explorer_data import read_index
except ModuleNotFoundError:  # tests/ is not a package: pytest puts it on sys.path
    from test_explorer_data import read_index


ALL_BASELINES = [m.value for m in BASELINE_METHODS]


@pytest.fixture(scope="module")
def dataset_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    client = ModelClient(SimulatedChatBackend(), shared_local_embedder())
    dataset = asyncio.run(sample_dataset(client, background=40))
    return dataset.save(tmp_path_factory.mktemp("pgr-cli") / "dataset")


def run(dataset_dir: Path, tmp_path: Path, *extra: str) -> int:
    return main(
        [
            "pgr",
            "run",
            str(dataset_dir),
            "--set",
            f"cache.directory={tmp_path / 'cache'}",
            "--set",
            "pgr.max_iterations=2",
            *extra,
        ]
    )


def test_run_prints_the_table_and_writes_joined_results(
    dataset_dir: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    clean_settings_env: pytest.MonkeyPatch,
) -> None:
    out = tmp_path / "results" / "pgr.jsonl"
    code = run(
        dataset_dir,
        tmp_path,
        "--method", "query_only", "--method", "pgr_tot",
        "--judge", "provenance", "--judge", "llm",
        "--users", "user0",
        "--output", str(out),
    )  # fmt: skip
    assert code == 0
    printed = capsys.readouterr().out
    assert "PGR over 2 queries of 1 user(s)" in printed
    header = next(line for line in printed.splitlines() if line.startswith("method"))
    for column in ("Recall", "RecallExact", "LLM calls/q", "embed req/q", "facts/q"):
        assert column in header
    rows = [
        line.split() for line in printed.splitlines() if line.startswith(("query_only", "pgr_tot"))
    ]
    assert [(r[0], r[1]) for r in rows] == [
        ("query_only", "provenance"), ("query_only", "llm"), ("pgr_tot", "provenance"), ("pgr_tot", "llm")
    ]  # fmt: skip
    assert rows[0][5] == "0.00" and rows[0][7] == "20.00"  # query-only: no LLM call, K = 20

    every = [json.loads(line) for line in out.read_text(encoding="utf-8").splitlines()]
    # 2 queries × 2 methods × 2 judges, plus pgr_tot's 6 budget-matched baselines (tests/test_pgr_baselines.py).
    assert len(every) == 2 * 2 * 2 + 2 * 6 * 2
    lines = [line for line in every if line["baseline_for"] is None]
    assert len(lines) == 2 * 2 * 2
    dataset = GeneratedDataset.load(dataset_dir)
    texts = {q.query_id: q for q in dataset.queries}
    for line in lines:
        query = texts[line["query_id"]]
        assert line["query_text"] == query.text and line["gamma"] == pytest.approx(query.gamma)
        assert line["user"] == "user0"
        assert line["result_id"] == make_id(
            "result", line["query_id"], line["method"], line["judge"]
        )
    tot = [line for line in lines if line["method"] == "pgr_tot"]
    assert all(line["iterations"][0]["iteration"] == 0 and line["summary"] for line in tot)
    # Without --win-rate: no answers, no Win Rate table, no report.
    assert all(line["answer"] is None for line in every)
    assert "Win Rate" not in printed and not (out.parent / "pgr.winrate.json").exists()


def test_win_rate_writes_the_table_with_intervals_beside_recall(
    dataset_dir: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    clean_settings_env: pytest.MonkeyPatch,
) -> None:
    out = tmp_path / "results" / "pgr.jsonl"
    code = run(
        dataset_dir, tmp_path,
        "--method", "pgr_tot", "--judge", "provenance", "--win-rate", "--output", str(out),
    )  # fmt: skip
    assert code == 0
    printed = capsys.readouterr().out
    assert "judged pairwise in both orders" in printed
    assert "interval: 95% percentile bootstrap over queries (2000 resamples)" in printed
    header = next(line for line in printed.splitlines() if "Win Rate % [95% CI]" in line)
    for column in ("Recall", "RecallExact", "baseline Recall", "baseline RecallExact"):
        assert column in header
    assert "judge: memoryquest-simulator-1, shown the user's profile, not the references" in printed
    assert "WARNING" not in printed  # this sample dataset has no manifest naming its author
    below = printed[printed.index(header) :].splitlines()
    # method baseline n 4×recall rate [CI] length-controlled [CI] flips words tally
    win_rows = [line.split() for line in below if line.startswith("  pgr_tot ")]
    assert all(len(r) == 14 for r in win_rows)
    assert [r[1] for r in win_rows] == ALL_BASELINES
    interval = r"\[[\d.]+,[\d.]+\]"
    assert all(r[2] == "2" and re.fullmatch(interval, r[8]) for r in win_rows)
    assert all(re.fullmatch(interval, r[10]) and r[11].endswith("%") for r in win_rows)
    assert (
        f"wrote the Win Rate report to {out.parent / 'pgr.winrate.json'} (give it to "
        f"`memoryquest publish` and `memoryquest explore` as --win-rate-report {out.parent / 'pgr.winrate.json'})"
    ) in printed

    report = WinRateReport.model_validate_json(
        (out.parent / "pgr.winrate.json").read_text(encoding="utf-8")
    )
    assert report.interval == "95% percentile bootstrap over queries" and not report.unjudged
    assert [(r.method.value, r.baseline.value, r.n) for r in report.rows] == [
        ("pgr_tot", "query_only", 2), ("pgr_tot", "bm25", 2), ("pgr_tot", "random", 2),
        ("pgr_tot", "recency", 2), ("pgr_tot", "multi_query", 2),
        ("pgr_tot", "hypothetical_facts", 2),
    ]  # fmt: skip
    for row, printed_row in zip(report.rows, win_rows, strict=True):
        assert row.win_rate_low <= row.win_rate <= row.win_rate_high
        assert printed_row[7] == f"{100 * row.win_rate:.1f}"
        assert printed_row[9] == f"{100 * row.length_controlled:.1f}"
        assert printed_row[12] == f"{row.pgr_words:.0f}/{row.baseline_words:.0f}"
        assert row.flip_rate == sum(
            p.flipped for p in report.pairs if p.baseline == row.baseline
        ) / len([p for p in report.pairs if p.baseline == row.baseline])
        assert row.wins + row.ties + row.losses == row.n
        scores = [p.score for p in report.pairs if p.baseline == row.baseline]
        assert row.win_rate == pytest.approx(sum(scores) / len(scores))
    # Both orders were judged for every pair: the score is their mean.
    points = {"pgr": 1.0, "tie": 0.5, "baseline": 0.0}
    assert len(report.pairs) == 2 * 6
    for pair in report.pairs:
        assert pair.score == (points[pair.pgr_first] + points[pair.baseline_first]) / 2
    # The results carry the answer each retrieval was judged by.
    every = [json.loads(line) for line in out.read_text(encoding="utf-8").splitlines()]
    assert len(every) == 2 * 7 and all(line["answer"] for line in every)


def test_an_evaluation_writes_its_run_record_beside_its_results(
    dataset_dir: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    clean_settings_env: pytest.MonkeyPatch,
) -> None:
    """Enough to reproduce a figure: the dataset's hash, models, prompt versions, seeds, cost."""
    copy = tmp_path / "dataset"
    shutil.copytree(dataset_dir, copy)
    out = tmp_path / "results" / "pgr.jsonl"
    args = ("--method", "pgr_tot", "--judge", "provenance", "--output", str(out))
    assert run(copy, tmp_path, *args) == 0
    record = EvaluationRecord.model_validate_json(
        (out.parent / "pgr.run.json").read_text(encoding="utf-8")
    )
    assert "wrote the run record" in capsys.readouterr().out
    assert record.dataset == str(copy) and record.dataset_sha256 == dataset_digest(copy)
    assert record.command[:3] == ["memoryquest", "pgr", "run"] and "--output" in record.command
    assert (record.methods, record.judges) == (["pgr_tot"], ["provenance"])
    assert record.budget_baselines == ALL_BASELINES
    assert record.chat_model == record.judge_model == "memoryquest-simulator-1"
    assert record.embedder == "all-MiniLM-L6-v2-onnx-int8" and record.baseline_seed == 0
    templates = {p.template_id: p.version for p in record.prompts}
    assert "pgr_tot_initial" in templates and templates["judge_pairwise"] == 3
    assert not any(t.startswith(("query_", "timeline_", "dialogue_", "memory_")) for t in templates)
    assert sum(u.requests for u in record.usage) > 0 and record.outputs == ["pgr.jsonl"]
    # The hash is of the data: another byte in a table gives another hash.
    facts = copy / "facts.jsonl"
    facts.write_text(facts.read_text(encoding="utf-8") + "\n", encoding="utf-8")
    assert dataset_digest(copy) != record.dataset_sha256


def test_win_rate_without_output_goes_beside_the_dataset_where_explore_finds_it(
    dataset_dir: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    clean_settings_env: pytest.MonkeyPatch,
) -> None:
    copy = tmp_path / "dataset"
    shutil.copytree(dataset_dir, copy)
    code = run(copy, tmp_path, "--method", "pgr_tot", "--judge", "provenance", "--win-rate")
    assert code == 0
    report_path = copy / WIN_RATE_FILE
    assert (
        f"wrote the Win Rate report to {report_path} "
        "(`memoryquest publish` and `memoryquest explore` show it)"
    ) in capsys.readouterr().out
    report = WinRateReport.model_validate_json(report_path.read_text(encoding="utf-8"))
    assert [r.baseline.value for r in report.rows] == ALL_BASELINES
    assert main(["explore", str(copy)]) == 0
    rows = read_index(copy / "explorer")["win_rates"]["rows"]
    assert [row["n"] for row in rows] == [r.n for r in report.rows] == [2] * 6


def test_win_rate_bad_input_is_one_line_and_loses_nothing(
    dataset_dir: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    clean_settings_env: pytest.MonkeyPatch,
) -> None:
    out = tmp_path / "pgr.jsonl"
    out.write_text("earlier results\n", encoding="utf-8")
    missing = tmp_path / "no-such-dataset"
    assert run(missing, tmp_path, "--win-rate", "--output", str(out)) == 2
    error = capsys.readouterr().err.strip()
    assert error.count("\n") == 0 and f"{missing} is not a dataset directory" in error
    no_pgr = ("--win-rate", "--method", "query_only", "--output", str(out))
    assert run(dataset_dir, tmp_path, *no_pgr) == 2
    error = capsys.readouterr().err.strip()
    assert error.count("\n") == 0 and "--win-rate compares PGR's answers" in error
    assert run(dataset_dir, tmp_path, "--judge-sees-references", "--output", str(out)) == 2
    error = capsys.readouterr().err.strip()
    assert error.count("\n") == 0 and "--judge-sees-references goes with --win-rate" in error
    assert out.read_text(encoding="utf-8") == "earlier results\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["pgr.jsonl"]


def test_unknown_user_is_a_clear_error(
    dataset_dir: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    clean_settings_env: pytest.MonkeyPatch,
) -> None:
    assert run(dataset_dir, tmp_path, "--users", "user7", "--judge", "provenance") == 2
    assert "no such user(s) in the dataset: user7" in capsys.readouterr().err


def test_load_for_pgr_names_what_is_missing(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="is not a dataset directory"):
        load_for_pgr(tmp_path)
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "queries-train.parquet").write_bytes(b"")
    with pytest.raises(ValueError, match="published Parquet dataset"):
        load_for_pgr(tmp_path)


def test_pgr_appears_in_help(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["pgr", "run", "--help"])
    assert "DATASET_DIR" in capsys.readouterr().out
