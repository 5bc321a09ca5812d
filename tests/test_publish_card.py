"""The card's headline claims only what budget-matched comparisons with bootstrap intervals support."""

from __future__ import annotations

import datetime as dt
import json
import re
import shutil
from pathlib import Path
from statistics import fmean

import pyarrow.parquet as pq
import pytest

from memoryquest.cli.main import main
from memoryquest.contracts import (
    JudgeKind,
    ReferenceJudgement,
    RetrievalMethod,
    ReviewTally,
    ValidationResult,
)
from memoryquest.dataset import GeneratedDataset
from memoryquest.ids import make_id
from memoryquest.pgr.calibration_contracts import wilson_interval
from memoryquest.pgr.metrics import bootstrap_ci, paired_bootstrap_ci
from memoryquest.pgr.run_record import EvaluationRun, EvaluationRunError, read_evaluation_run
from memoryquest.pgr.winrate import win_rate_report
from memoryquest.pgr.winrate_contracts import ScoredPair, WinRateReport
from memoryquest.publish import PublishError, load_published, publish_dataset
from memoryquest.publish.arrow import arrow_schema, rows_to_table, table_to_rows
from memoryquest.publish.card import render_card
from memoryquest.publish.card.inputs import CardInputs
from memoryquest.publish.card.results import headline_lines
from memoryquest.publish.stats import compute_statistics
from memoryquest.settings import Settings

try:
    from tests.publish_fixture import build_publish_fixture
except ModuleNotFoundError:  # tests/ is not a package: pytest puts it on sys.path
    from publish_fixture import build_publish_fixture

PID = make_id("persona", "card")
DAY = dt.date(2024, 6, 1)
QO, COT, TOT = RetrievalMethod.QUERY_ONLY, RetrievalMethod.PGR_COT, RetrievalMethod.PGR_TOT
BM25, RANDOM = RetrievalMethod.BM25, RetrievalMethod.RANDOM


def row(
    query: int,
    method: RetrievalMethod,
    found: int,
    *,
    budget: int = 20,
    judge: JudgeKind = JudgeKind.PROVENANCE,
    baseline_for: RetrievalMethod | None = None,
) -> ValidationResult:
    """One result: the judge found ``found`` of 4 references among ``budget`` facts."""
    judgements = [
        ReferenceJudgement(reference_id=make_id("reference", query, i), found=i < found)
        for i in range(4)
    ]
    return ValidationResult(
        result_id=make_id("result", query, method, judge, baseline_for),
        query_id=make_id("query", "card", query),
        persona_id=PID,
        method=method,
        judge=judge,
        memory_as_of=DAY,
        memory_size=80,
        baseline_for=baseline_for,
        budget=budget,
        retrieved_fids=[make_id("fact", query, i) for i in range(budget)],
        judgements=judgements,
        recall=found / 4,
        recall_exact=found == 4,
        ndcg=0.5,
        llm_calls=0 if baseline_for is not None or method is QO else 4,
        embedding_calls=1,
    )


def rows_for(pgr: list[int], baselines: dict[RetrievalMethod, list[int]]) -> list[ValidationResult]:
    """Query-only at K = 20, PGR-ToT at 40 facts, and each baseline at PGR-ToT's budget."""
    rows = []
    for q, found in enumerate(pgr):
        rows += [row(q, QO, 1), row(q, TOT, found, budget=40)]
        rows += [
            row(q, b, founds[q], budget=40, baseline_for=TOT) for b, founds in baselines.items()
        ]
    return rows


def headline(rows: list[ValidationResult], *, simulated: bool = False) -> str:
    stats = compute_statistics(GeneratedDataset(validation=rows), bootstrap_samples=500)
    return "\n".join(headline_lines(stats, simulated))


def test_headline_says_does_not_beat_when_the_interval_includes_zero() -> None:
    # PGR-ToT doubles query-only's K = 20 recall, but at its own budget dense retrieval is as good.
    pgr = [4, 3, 2, 4, 3, 2, 4, 3]
    dense = [3, 4, 2, 3, 4, 2, 4, 2]
    text = headline(rows_for(pgr, {QO: dense, BM25: [1] * 8, RANDOM: [0] * 8}))
    assert (
        "PGR-ToT does not beat the best budget-matched baseline (dense query-only, Recall 0.750)"
        in text
    )
    assert "at an equal budget" in text and "which includes 0" in text
    assert "PGR-ToT beats" not in text
    assert "with 40.0 facts retrieved per query" in text
    assert "BM25 0.250 (0.250..0.250)" in text and "random 0.000 (0.000..0.000)" in text
    assert "doubles" not in text.lower()


def test_headline_says_beats_only_when_the_whole_interval_is_above_zero() -> None:
    text = headline(rows_for([4] * 6, {QO: [2, 1, 2, 1, 2, 1], BM25: [1] * 6, RANDOM: [0] * 6}))
    match = re.search(
        r"PGR-ToT beats the best budget-matched baseline \(dense query-only\) by 0\.625 \(95% CI ([\d.]+)\.\.([\d.]+)\)\.",
        text,
    )
    assert match is not None, text
    assert 0.0 < float(match[1]) <= 0.625 <= float(match[2]) <= 0.75
    assert "does not beat" not in text


def test_headline_says_so_when_the_baseline_is_ahead() -> None:
    text = headline(rows_for([1] * 5, {BM25: [4] * 5}))
    assert "PGR-ToT does not beat the best budget-matched baseline (BM25, Recall 1.000)" in text
    assert "-0.750 (95% CI -0.750..-0.750), which lies below 0" in text


def test_headline_makes_no_claim_without_budget_matched_baselines() -> None:
    rows = [r for q in range(4) for r in (row(q, QO, 1), row(q, TOT, 4, budget=40))]
    text = headline(rows, simulated=True)
    assert "No budget-matched baselines were run" in text and "makes no claim" in text
    assert "dense query-only 20.0, PGR-ToT 40.0" in text
    assert "beats" not in text


def test_headline_prefers_the_provenance_judge_and_flags_simulated_text() -> None:
    rows = rows_for([4] * 4, {QO: [3] * 4})
    rows += [
        r.model_copy(
            update={
                "judge": JudgeKind.EMBEDDING,
                "recall": 0.0,
                "result_id": make_id("result", r.result_id),
            }
        )
        for r in rows
    ]
    text = headline(rows, simulated=True)
    assert "under the `provenance` judge" in text
    assert "simulated text" in text


def test_statistics_keep_baseline_rows_out_of_the_per_method_table() -> None:
    stats = compute_statistics(
        GeneratedDataset(validation=rows_for([4, 2], {QO: [2, 2]})), bootstrap_samples=200
    )
    assert [(s.method, s.queries, s.mean_retrieved) for s in stats.validation] == [
        ("query_only", 2, 20.0),
        ("pgr_tot", 2, 40.0),
    ]
    (comparison,) = stats.budget_matched
    assert (comparison.method, comparison.baseline, comparison.n) == (TOT, QO, 2)
    assert stats.bootstrap_samples == 200


def test_the_llm_judges_agreement_with_provenance_is_counted_reference_by_reference() -> None:
    # Query 0: both find 2 of 4. Query 1: provenance finds 3, the LLM judge 1 (two misses).
    rows = [
        row(0, TOT, 2),
        row(0, TOT, 2, judge=JudgeKind.LLM),
        row(1, TOT, 3),
        row(1, TOT, 1, judge=JudgeKind.LLM),
        row(1, QO, 4, judge=JudgeKind.EMBEDDING),  # a third judge does not count
    ]
    agreement = compute_statistics(
        GeneratedDataset(validation=rows), bootstrap_samples=100
    ).judge_agreement
    assert agreement is not None
    assert (agreement.verdicts, agreement.agree) == (8, 6)
    assert (agreement.llm_only, agreement.provenance_only) == (0, 2)
    assert agreement.share == 0.75
    alone = compute_statistics(GeneratedDataset(validation=rows[:1]), bootstrap_samples=100)
    assert alone.judge_agreement is None


def test_baseline_rows_survive_the_arrow_round_trip() -> None:
    rows = rows_for([3], {BM25: [1]})
    schema = arrow_schema(ValidationResult, "validation")
    assert schema.field("baseline_for").nullable and str(schema.field("budget").type) == "int64"
    assert table_to_rows(rows_to_table(rows, schema), ValidationResult) == rows


# --------------------------------------------------------------------------- publish end to end


def with_baselines(dataset: GeneratedDataset) -> GeneratedDataset:
    """The fixture plus a BM25 row at each PGR row's budget, finding one reference fewer."""
    extra = []
    for result in dataset.validation:
        if result.method in (COT, TOT):
            judgements = [
                j.model_copy(update={"found": j.found and i > 0})
                for i, j in enumerate(result.judgements)
            ]
            extra.append(
                result.model_copy(
                    update={
                        "result_id": make_id(
                            "result",
                            result.query_id,
                            "bm25",
                            result.judge.value,
                            "budget_of",
                            result.method.value,
                        ),
                        "method": BM25,
                        "baseline_for": result.method,
                        "budget": len(result.retrieved_fids),
                        "judgements": judgements,
                        "recall": sum(j.found for j in judgements) / len(judgements),
                        "recall_exact": all(j.found for j in judgements),
                        "llm_calls": 0,
                        "iterations": [],
                        "augmented_query": None,
                        "summary": None,
                    }
                )
            )
    copy = dataset.model_copy(deep=True)
    copy.validation.extend(extra)
    return copy


def judged_report(dataset: GeneratedDataset, scores: list[float], samples: int) -> WinRateReport:
    """PGR-ToT's answers against BM25's at its budget, query by query: 1 won, 0.5 split, 0 lost."""
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
        for q, score in zip(queries, scores, strict=True)
    ]
    return win_rate_report(pairs, dataset.validation, samples=samples)


@pytest.fixture(scope="module")
def published(tmp_path_factory: pytest.TempPathFactory) -> tuple[GeneratedDataset, Path]:
    dataset = with_baselines(build_publish_fixture(users=3, queries_per_user=2))
    destination = tmp_path_factory.mktemp("card") / "memoryquest"
    publish_dataset(dataset, destination, Settings(), allow_failed_audit=True)
    return dataset, destination


def test_published_card_states_budget_matched_results(
    published: tuple[GeneratedDataset, Path],
) -> None:
    _, root = published
    card = (root / "README.md").read_text(encoding="utf-8")
    assert "## Headline results" in card and "#### Budget-matched baselines" in card
    assert "PGR-ToT" in card and "PGR-CoT" in card
    # The shape beside the published set's, and how far the model judge can be trusted.
    assert "| sessions per user | " in card and "| 77.6 |" in card
    assert "| queries per user | 2.0 | 10.7 |" in card
    assert "agrees with the provenance judge" in card or "were not both run" in card
    assert "budget-matched baseline (BM25)" in card or "budget-matched baseline (BM25," in card
    assert "budget: facts retrieved / query" in card and "Recall 95% CI" in card
    assert card.index("## Headline results") < card.index("## Provenance")
    assert "doubles" not in card.lower()


def test_published_validation_table_holds_the_baseline_rows(
    published: tuple[GeneratedDataset, Path],
) -> None:
    dataset, root = published
    table = pq.read_table(sorted((root / "data" / "validation").glob("*.parquet")))
    matched = [r for r in table.to_pylist() if r["baseline_for"] is not None]
    assert len(matched) == sum(1 for r in dataset.validation if r.baseline_for is not None) > 0
    assert all(r["method"] == "bm25" and r["budget"] == len(r["retrieved_fids"]) for r in matched)
    reloaded = load_published(root)
    assert sorted(r.result_id for r in reloaded.validation) == sorted(
        r.result_id for r in dataset.validation
    )


# --------------------------------------------------------------------------- answer-level Win Rate


def card_for(
    dataset: GeneratedDataset,
    win_rates: WinRateReport | None = None,
    evaluation: EvaluationRun | None = None,
) -> str:
    assert dataset.manifest is not None
    inputs = CardInputs(
        manifest=dataset.manifest,
        statistics=compute_statistics(dataset, bootstrap_samples=200),
        publish=Settings().publish,
        gamma_threshold=0.3,
        row_counts={},
        users_per_split={},
        schemas={},
        plots=(),
        has_personalens=True,
        licence_file=None,
        win_rates=win_rates,
        evaluation=evaluation,
    )
    return render_card(inputs)


def test_the_card_shows_the_win_rate_with_its_interval_beside_recall() -> None:
    dataset = with_baselines(build_publish_fixture(users=2, queries_per_user=2))
    report = judged_report(dataset, [1.0, 1.0, 0.5, 0.0], samples=500)  # won, won, split, lost
    (row,) = report.rows
    card = card_for(dataset, win_rates=report)

    assert "#### Answer-level Win Rate" in card
    assert "twice with the positions swapped" in card
    assert "95% percentile bootstrap over queries (500 resamples)" in card
    interval = f"{100 * row.win_rate_low:.1f}..{100 * row.win_rate_high:.1f}%"
    assert (
        f"| `pgr_tot` | `bm25` | 4 | {row.recall:.3f} | {row.recall_exact:.3f} | "
        f"{row.baseline_recall:.3f} | {row.baseline_recall_exact:.3f} | 62.5% ({interval}) | "
        f"{100 * row.length_controlled:.1f}% ({100 * row.length_controlled_low:.1f}.."
        f"{100 * row.length_controlled_high:.1f}%) | 25.0% | 0 / 0 | 2 / 1 / 1 |"
    ) in card
    assert 0.0 <= row.win_rate_low < 0.625 < row.win_rate_high <= 1.0
    headline = card[card.index("## Headline results") : card.index("## Provenance")]
    assert f"BM25 62.5% (95% CI {interval}, 4 queries)" in headline
    assert "is the model that wrote this dataset" not in card  # an unnamed judge
    own = report.model_copy(update={"judge_model": "gpt-x", "generator_model": "gpt-x"})
    assert "**The judge (`gpt-x`) is the model that wrote this dataset**" in card_for(
        dataset, win_rates=own
    )
    # Without a Win Rate report the card says nothing about answers.
    assert "Win Rate" not in card_for(dataset)


# --------------------------------------------------------------------------- judges and the reviewer


def graded_by(dataset: GeneratedDataset, **endpoint: str) -> GeneratedDataset:
    """The fixture as if a real model had written it, with the review on and its tally kept."""
    settings = Settings(generation={"review": True}, endpoint={"chat_model": "gpt-4o", **endpoint})
    assert dataset.manifest is not None
    copy = dataset.model_copy(deep=True)
    copy.manifest = dataset.manifest.model_copy(
        update={
            "simulated": False,
            "backend": "openai",
            "chat_model": "gpt-4o",
            "settings": settings.masked(),
            "review": ReviewTally(sessions_reviewed=48, sessions_flagged=12),
        }
    )
    return copy


def test_the_card_names_the_reviewer_its_flag_rate_and_whether_the_author_graded_itself() -> None:
    dataset = build_publish_fixture(users=2, queries_per_user=2)
    section = "### Judges and the blind reviewer"

    apart = card_for(graded_by(dataset, judge_model="gpt-4o-mini"))
    assert section in apart
    assert "| blind reviewer (`session_review`) | yes | `gpt-4o-mini` | no |" in apart
    assert "`gpt-4o-mini` read 48 conversations" in apart and "in 12 (25.0%)" in apart
    assert "also graded it" not in apart

    itself = card_for(graded_by(dataset))
    assert "| blind reviewer (`session_review`) | yes | `gpt-4o` | yes |" in itself
    assert "| relevance judge (`reference_relevance`) | yes | `gpt-4o` | yes |" in itself
    assert "**The model that wrote the data, `gpt-4o`, also graded it**" in itself

    # Offline, the simulator wrote and graded everything; no review ran, so no flag rate.
    assert dataset.manifest is not None and dataset.manifest.review is None
    offline = card_for(dataset)
    assert "| blind reviewer (`session_review`) | no |  |  |" in offline
    assert f"**The model that wrote the data, `{dataset.manifest.chat_model}`" in offline
    assert "Blind reviewer:" not in offline


# --------------------------------------------------------------------------- a `pgr run` in the card


@pytest.fixture(scope="module")
def evaluated(
    generated_dataset: GeneratedDataset, tmp_path_factory: pytest.TempPathFactory
) -> tuple[Path, Path]:
    """The pipeline's dataset on disk, and the record of a real offline `pgr run` of it that kept
    its results and measured its two non-exact judges (every default baseline at PGR's budget)."""
    root = tmp_path_factory.mktemp("evaluated")
    directory = generated_dataset.save(root / "dataset")
    out = root / "run" / "pgr.jsonl"
    judges = ("--judge", "provenance", "--judge", "embedding", "--judge", "llm")
    settings = ("--set", f"cache.directory={root / 'cache'}", "--set", "pgr.max_iterations=2")
    code = main(
        ["pgr", "run", str(directory), *settings, "--method", "pgr_cot", *judges]
        + ["--output", str(out)]
    )
    assert code == 0
    return directory, out.with_name("pgr.run.json")


def run_lines(path: Path) -> list[dict[str, object]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def section_of(card: str) -> str:
    return card[card.index("### PGR evaluation run") : card.index("## Validity audit")]


def expected_baseline_cells(lines: list[dict[str, object]], samples: int) -> dict[str, str]:
    """(baseline, judge) -> the card's row for it, worked out from the results file's raw lines."""
    own = {
        (line["judge"], line["query_id"]): line
        for line in lines
        if line["method"] == "pgr_cot" and line["baseline_for"] is None
    }
    cells = {}
    for baseline in {str(line["method"]) for line in lines if line["baseline_for"] == "pgr_cot"}:
        for judge in ("provenance", "embedding", "llm"):
            rows = [
                line
                for line in lines
                if line["method"] == baseline
                and line["baseline_for"] == "pgr_cot"
                and line["judge"] == judge
            ]
            ours = [float(own[(judge, r["query_id"])]["recall"]) for r in rows]  # type: ignore[arg-type]
            theirs = [float(r["recall"]) for r in rows]  # type: ignore[arg-type]
            low, high = bootstrap_ci(theirs, samples)
            d_low, d_high = paired_bootstrap_ci(ours, theirs, samples)
            difference = fmean(a - b for a, b in zip(ours, theirs, strict=True))
            budget = fmean(int(r["budget"]) for r in rows)  # type: ignore[call-overload]
            cells[f"{baseline}/{judge}"] = (
                f"| PGR-CoT | `{baseline}` | `{judge}` | {len(rows)} | {budget:.1f} | "
                f"{fmean(theirs):.3f} ({low:.3f}..{high:.3f}) | "
                f"{difference:+.3f} ({d_low:+.3f}..{d_high:+.3f}) |"
            )
    return cells


def expected_judge_cell(row: dict[str, int]) -> str:
    """The false-accept cells of one judge, from the calibration file's counts."""
    wrong = row["other_query"] + row["near_miss"]
    accepted = row["accepted_other_query"] + row["accepted_near_miss"]
    low, high = wilson_interval(accepted, wrong)
    return (
        f"{100 * accepted / wrong:.1f}% ({100 * low:.1f}..{100 * high:.1f}%) | "
        f"{accepted} / {wrong} | {row['accepted_other_query']} / {row['other_query']} | "
        f"{row['accepted_near_miss']} / {row['near_miss']} |"
    )


def expected_retrieval_cell(lines: list[dict[str, object]], judge: str) -> str:
    """The judge on the run's own retrievals: references provenance did not find that it did."""
    verdicts: dict[tuple[object, ...], dict[object, bool]] = {}
    for line in lines:
        for judgement in line["judgements"]:  # type: ignore[attr-defined]
            key = (
                line["query_id"],
                line["method"],
                line["baseline_for"],
                judgement["reference_id"],
            )
            verdicts.setdefault(key, {})[line["judge"]] = judgement["found"]
    unsupported = [v[judge] for v in verdicts.values() if not v["provenance"]]
    low, high = wilson_interval(sum(unsupported), len(unsupported))
    share = sum(unsupported) / len(unsupported)
    return (
        f"{100 * share:.1f}% ({100 * low:.1f}..{100 * high:.1f}%), "
        f"{sum(unsupported)} / {len(unsupported)} |"
    )


def test_the_card_shows_every_baseline_at_pgrs_budget_and_each_judges_false_accept_rate(
    generated_dataset: GeneratedDataset, evaluated: tuple[Path, Path]
) -> None:
    _, record_path = evaluated
    run = read_evaluation_run(record_path)
    section = section_of(card_for(generated_dataset, evaluation=run))
    lines = run_lines(record_path.with_name("pgr.jsonl"))

    # The run is named: its record, results and calibration files and the dataset it evaluated.
    assert (
        "`pgr.run.json` (results `pgr.jsonl`, judges' calibration `pgr.calibration.json`)"
        in section
    )
    assert generated_dataset.manifest is not None
    assert f"run `{generated_dataset.manifest.run_id}`" in section

    # Every baseline the run was set, under every judge, at PGR's own budget for each query.
    pgr_budget = {
        (line["judge"], line["query_id"]): len(line["retrieved_fids"])  # type: ignore[arg-type]
        for line in lines
        if line["method"] == "pgr_cot" and line["baseline_for"] is None
    }
    matched = [line for line in lines if line["baseline_for"] == "pgr_cot"]
    assert {line["method"] for line in matched} == set(run.record.budget_baselines)
    assert len(run.record.budget_baselines) == 6
    assert all(line["budget"] == pgr_budget[(line["judge"], line["query_id"])] for line in matched)
    cells = expected_baseline_cells(lines, run.record.bootstrap_samples)
    assert len(cells) == 6 * 3
    for cell in cells.values():
        assert cell in section
    assert "| PGR-CoT | `pgr_cot` (itself) | `provenance` |" in section

    # Each non-exact judge's false-accept rate, with its interval and its counts.
    calibration = json.loads(
        record_path.with_name("pgr.calibration.json").read_text(encoding="utf-8")
    )
    assert sorted(row["judge"] for row in calibration["judges"]) == ["embedding", "llm"]
    for row in calibration["judges"]:
        assert row["other_query"] + row["near_miss"] > 0
        assert f"| `{row['judge']}` |" in section
        assert expected_judge_cell(row) in section
        assert expected_retrieval_cell(lines, row["judge"]) in section
    assert "Cohen's κ" in section
    assert (
        str(record_path.parent.parent) not in section
    )  # the card names files, not this machine's paths


def test_the_card_follows_the_runs_records(
    generated_dataset: GeneratedDataset, evaluated: tuple[Path, Path], tmp_path: Path
) -> None:
    """Change one result and one count of the run's files: the card's row for each changes."""
    _, record_path = evaluated
    for file in record_path.parent.iterdir():
        shutil.copy(file, tmp_path / file.name)
    record = tmp_path / record_path.name
    before = section_of(card_for(generated_dataset, evaluation=read_evaluation_run(record)))
    results = tmp_path / "pgr.jsonl"
    lines = run_lines(results)
    target = next(
        line
        for line in lines
        if line["method"] == "random"
        and line["baseline_for"] == "pgr_cot"
        and line["judge"] == "provenance"
        and float(line["recall"]) < 1.0  # type: ignore[arg-type]
    )
    target["recall"] = 1.0
    results.write_text("".join(json.dumps(line) + "\n" for line in lines), encoding="utf-8")
    calibration_path = tmp_path / "pgr.calibration.json"
    calibration = json.loads(calibration_path.read_text(encoding="utf-8"))
    (judge,) = [row for row in calibration["judges"] if row["judge"] == "embedding"]
    judge["accepted_near_miss"] = judge["near_miss"] - judge["accepted_near_miss"]
    calibration_path.write_text(json.dumps(calibration), encoding="utf-8")

    after = section_of(card_for(generated_dataset, evaluation=read_evaluation_run(record)))
    samples = read_evaluation_run(record).record.bootstrap_samples
    old_cells = expected_baseline_cells(run_lines(record_path.with_name("pgr.jsonl")), samples)
    new_cells = expected_baseline_cells(lines, samples)
    assert old_cells["random/provenance"] != new_cells["random/provenance"]
    assert old_cells["random/provenance"] in before and old_cells["random/provenance"] not in after
    assert new_cells["random/provenance"] in after
    assert old_cells["bm25/provenance"] == new_cells["bm25/provenance"]
    assert old_cells["bm25/provenance"] in after
    assert expected_judge_cell(judge) in after and expected_judge_cell(judge) not in before


def test_publish_keeps_the_run_it_shows_and_refuses_another_datasets(
    generated_dataset: GeneratedDataset, evaluated: tuple[Path, Path], tmp_path: Path
) -> None:
    directory, record_path = evaluated
    destination = tmp_path / "published"
    code = main(
        ["publish", str(directory), "--output", str(destination), "--allow-failed-audit"]
        + ["--pgr-run", str(record_path)]
    )
    assert code == 0
    card = (destination / "README.md").read_text(encoding="utf-8")
    assert "#### Judges' error rates" in card and "`pgr.run.json`" in card
    assert (
        json.loads((destination / "evaluation" / "pgr.run.json").read_text(encoding="utf-8"))[
            "dataset_run_id"
        ]
        == json.loads(record_path.read_text(encoding="utf-8"))["dataset_run_id"]
    )
    assert (destination / "evaluation" / "pgr.calibration.json").is_file()

    # A run of another dataset (another generation run) is refused, and nothing is written.
    run = read_evaluation_run(record_path)
    stranger = EvaluationRun(
        **{**run.__dict__, "record": run.record.model_copy(update={"dataset_run_id": "other"})}
    )
    with pytest.raises(PublishError, match="evaluated the dataset of run other"):
        publish_dataset(generated_dataset, tmp_path / "refused", Settings(), evaluation=stranger)
    assert not (tmp_path / "refused").exists()


def test_a_run_the_card_cannot_show_is_one_line_naming_the_file(
    evaluated: tuple[Path, Path], tmp_path: Path
) -> None:
    _, record_path = evaluated
    for file in record_path.parent.iterdir():
        shutil.copy(file, tmp_path / file.name)
    record = tmp_path / record_path.name
    document = json.loads(record.read_text(encoding="utf-8"))

    def rewritten(**changes: object) -> Path:
        record.write_text(json.dumps({**document, **changes}), encoding="utf-8")
        return record

    with pytest.raises(EvaluationRunError, match="names no results file.*--output NAME.jsonl"):
        read_evaluation_run(rewritten(outputs=["pgr.calibration.json"]))
    with pytest.raises(EvaluationRunError, match=r"a run of memory systems \(--memory\)"):
        read_evaluation_run(rewritten(memory_systems={"turns": "1"}))
    with pytest.raises(EvaluationRunError, match="is not a run record"):
        read_evaluation_run(rewritten(record_version=2))
    results = tmp_path / "pgr.jsonl"
    lines = results.read_text(encoding="utf-8").splitlines()
    broken = json.loads(lines[1])
    broken["recall"] = "most"
    results.write_text("\n".join([lines[0], json.dumps(broken), *lines[2:]]), encoding="utf-8")
    with pytest.raises(EvaluationRunError, match=r"pgr.jsonl, line 2, is not a result.*recall"):
        read_evaluation_run(rewritten())
