"""The card's section on one ``memoryquest pgr run`` of the dataset.

Given a ``memoryquest pgr run`` (its record ``NAME.run.json``), the card names
it and shows, recomputed from the run's own rows, every baseline at each PGR
method's budget with its interval, and from the run's calibration each judge's
false-accept and false-reject rate with its Wilson interval and its counts.
"""

from __future__ import annotations

from collections.abc import Sequence

from memoryquest.contracts import JudgeKind, RunManifest
from memoryquest.pgr.calibration_contracts import JudgeCalibrationReport, wilson_interval
from memoryquest.pgr.metrics import judge_errors_on_retrievals, summarise
from memoryquest.pgr.run_record import EvaluationRun
from memoryquest.publish.card.format import (
    decimals,
    markdown_table,
    method_name,
    percent,
    percent_interval,
    with_interval,
)


def evaluation_run_lines(run: EvaluationRun | None, manifest: RunManifest) -> list[str]:
    """The figures of one ``memoryquest pgr run``, named by its record and recomputed from its
    rows: every baseline at each PGR method's budget, and each judge's measured error."""
    lines = ["### PGR evaluation run", ""]
    if run is None:
        return [
            *lines,
            "No run of `memoryquest pgr run` was given (`memoryquest publish --pgr-run NAME.run.json`),",
            "so this card reports no judge's measured error rate.",
            "",
        ]
    record = run.record
    files = f"results `{run.results_file}`" + (
        f", judges' calibration `{run.calibration_file}`" if run.calibration_file else ""
    )
    same = (
        " — the same model, so part of a dense method's gap to PGR is built in: the queries were "
        "kept for being far from their references under it"
        if record.embedder == manifest.embedder
        else ""
    )
    lines += [
        f"From the run recorded in `{run.record_file}` ({files}): `memoryquest pgr run` of "
        f"{_listed(record.methods)} under the judges {_listed(record.judges)}, with the baselines "
        f"{_listed(record.budget_baselines)}; memoryquest {record.package_version}, "
        f"{record.created_at.isoformat()}, over {record.queries} "
        f"queries of {record.users} user(s) of the dataset written by run `{record.dataset_run_id}` "
        f"(its files' sha256 `{record.dataset_sha256[:16]}…`). Chat model `{record.chat_model}`, "
        f"judge model `{record.judge_model}`. The facts were retrieved with `{record.embedder}`; "
        f"γ was computed with `{manifest.embedder}`{same}. The figures below are computed here from "
        "the run's rows; the record also holds its command line, seeds, prompt versions and cost.",
        "",
    ]
    lines += _baselines_at_budget(run)
    lines += _judge_error_lines(run.calibration, run)
    return lines


def _listed(names: Sequence[str]) -> str:
    return ", ".join(f"`{name}`" for name in names) or "none"


def _baselines_at_budget(run: EvaluationRun) -> list[str]:
    summary = summarise(run.results, samples=run.record.bootstrap_samples)
    lines = ["#### Every baseline at PGR's budget", ""]
    if not summary.comparisons:
        return [*lines, "The run holds no baseline at a PGR method's budget.", ""]
    lines += [
        "For every query, each baseline was asked for exactly as many facts as the PGR method retrieved",
        "for it (`budget`: the facts its augmentation, Phase 1 and Phase 2 accumulated, not",
        "`pgr.query_only_k`), over the same memory snapshot. Recall with 95% percentile bootstrap",
        f"intervals over queries ({summary.bootstrap_samples} resamples, the run's `pgr.bootstrap_samples`);",
        "the difference is paired by query. `random` is chance at the same budget.",
        "",
    ]
    rows: list[tuple[object, ...]] = []
    for own in summary.rows:
        matched = [
            c for c in summary.comparisons if c.method is own.method and c.judge is own.judge
        ]
        if not matched:
            continue
        # The PGR method's own recall first, then each baseline at its budget, in one row layout.
        retrievals = [
            (
                f"`{own.method.value}` (itself)",
                own.n,
                own.facts_retrieved,
                with_interval(own.recall, own.recall_low, own.recall_high),
                "",
            ),
            *(
                (
                    f"`{c.baseline.value}`",
                    c.n,
                    c.budget,
                    with_interval(c.baseline_recall, c.baseline_low, c.baseline_high),
                    with_interval(c.difference, c.difference_low, c.difference_high, signed=True),
                )
                for c in matched
            ),
        ]
        rows += [
            (
                method_name(own.method.value),
                retrieval,
                f"`{own.judge.value}`",
                n,
                decimals(budget, 1),
                recall,
                gain,
            )
            for retrieval, n, budget, recall, gain in retrievals
        ]
    lines += markdown_table(
        [
            "PGR method",
            "retrieval",
            "judge",
            "queries",
            "budget (facts / query)",
            "Recall (95% CI)",
            "PGR − baseline (95% CI)",
        ],
        rows,
    )
    return [*lines, ""]


def _rate(part: int, whole: int) -> str:
    """``part`` of ``whole`` as a percentage with its 95% Wilson interval."""
    if not whole:
        return "– (none judged)"
    low, high = wilson_interval(part, whole)
    return f"{percent(part / whole)} ({percent_interval(low, high)})"


def _judge_error_lines(report: JudgeCalibrationReport | None, run: EvaluationRun) -> list[str]:
    lines = ["#### Judges' error rates", ""]
    if report is None or not report.judges:
        return [
            *lines,
            "This run measured no judge's error: it ran only the exact `provenance` judge, or",
            "`pgr.calibration_facts` was 0.",
            "",
        ]
    threshold = run.record.pgr_settings.get("embedding_judge_threshold")
    answered_by = {
        JudgeKind.EMBEDDING: f"`{run.record.embedder}`, cosine ≥ {threshold}",
        JudgeKind.LLM: f"`{run.record.judge_model}`",
    }
    on_retrievals = {row.judge: row for row in judge_errors_on_retrievals(run.results)}
    lines += [
        "A recall is as good as its judge. The `provenance` judge is exact (a fact descends from the",
        "reference or it does not) and is the ground truth here. Every other judge was given facts whose",
        f"answer provenance knows, each alone, for every reference of {report.queries} queries (up to",
        f"{report.facts_per_kind} per reference and kind, from `{run.calibration_file}`): facts credited to",
        "the reference (right), facts of the same user credited to another query's reference, and near",
        "misses (same user, a session in the reference's domain, credited to none of the query's",
        "references). The false-accept rate is the share of the wrong facts (both kinds) it accepted,",
        "the false-reject rate the share of right facts it rejected; 95% Wilson intervals. Facts drawn",
        "at random are easier to turn down than the ones a method retrieves, so the last column gives",
        "the same judge on the run's own retrievals: of the references provenance found no supporting",
        "fact for, the share this judge said were found.",
        "",
    ]
    rows = []
    for row in report.judges:
        seen = on_retrievals.get(row.judge)
        rows.append(
            (
                f"`{row.judge.value}`",
                answered_by.get(row.judge, ""),
                _rate(
                    row.accepted_other_query + row.accepted_near_miss,
                    row.other_query + row.near_miss,
                ),
                f"{row.accepted_other_query + row.accepted_near_miss} / "
                f"{row.other_query + row.near_miss}",
                f"{row.accepted_other_query} / {row.other_query}",
                f"{row.accepted_near_miss} / {row.near_miss}",
                _rate(row.rejected_right, row.right),
                f"{row.rejected_right} / {row.right}",
                "–"
                if seen is None
                else f"{_rate(seen.accepted_unsupported, seen.unsupported)}, "
                f"{seen.accepted_unsupported} / {seen.unsupported}",
            )
        )
    lines += markdown_table(
        [
            "judge",
            "answered by",
            "false-accept (95% CI)",
            "wrong accepted / judged",
            "other query's",
            "near misses",
            "false-reject (95% CI)",
            "right rejected / judged",
            "on the run's retrievals: found without provenance (95% CI), n",
        ],
        rows,
    )
    lines.append("")
    for pair in report.agreement:
        kappa = (
            "undefined (one judge gave a single verdict)"
            if pair.kappa is None
            else f"{pair.kappa:.3f}"
        )
        lines.append(
            f"- `{pair.first.value}` and `{pair.second.value}` agree on {percent(pair.agreement)} of "
            f"{pair.verdicts} reference verdicts on the run's retrievals; Cohen's κ {kappa}."
        )
    if report.unjudged:
        lines.append(
            f"- {len(report.unjudged)} query(ies) could not be put to the model judge and are left out."
        )
    return [*lines, ""]
