"""The printout of ``pgr run``: every method at its own budget, the budget-matched comparison
with bootstrap intervals, the judges' calibration and the Win Rate."""

from __future__ import annotations

from typing import TYPE_CHECKING

from memoryquest.pgr.metrics import PGRSummary

if TYPE_CHECKING:
    from memoryquest.pgr.calibration_contracts import JudgeCalibrationReport
    from memoryquest.pgr.winrate_contracts import WinRateReport


def summary_table(summary: PGRSummary) -> str:
    """Plain-text table: one line per method × judge (the paper's Tables 1 and 7 side by side),
    then the budget-matched comparison (:func:`comparison_table`)."""
    header = (
        f"{'method':<11} {'judge':<10} {'n':>4} {'Recall':>7} {'RecallExact':>11} "
        f"{'LLM calls/q':>11} {'embed req/q':>11} {'facts/q':>8} {'Ph-1 facts':>10} {'Ph-2 new':>8} "
        f"{'Recall 95% CI':>15}"
    )
    lines = [header, "-" * len(header)]
    for row in summary.rows:
        phase1 = "-" if row.phase1_facts is None else f"{row.phase1_facts:.2f}"
        phase2 = "-" if row.phase2_new_facts is None else f"{row.phase2_new_facts:.2f}"
        interval = f"[{row.recall_low:.3f},{row.recall_high:.3f}]"
        lines.append(
            f"{row.method.value:<11} {row.judge.value:<10} {row.n:>4} {row.recall:>7.3f} {row.recall_exact:>11.3f} "
            f"{row.llm_calls:>11.2f} {row.embedding_calls:>11.2f} {row.facts_retrieved:>8.2f} {phase1:>10} {phase2:>8} "
            f"{interval:>15}"
        )
    lines.append(
        "facts/q = mean facts retrieved per query: each method's own budget (query-only: K; PGR: what it "
        "found). Recall grows with it, so compare methods at equal budgets:"
    )
    comparison = comparison_table(summary)
    lines += ["", comparison] if comparison else ["(no budget-matched baselines in these results)"]
    return "\n".join(lines)


def comparison_table(summary: PGRSummary) -> str:
    """Each PGR method beside its budget-matched baselines: recall, 95% intervals, paired difference."""
    if not summary.comparisons:
        return ""
    header = (
        f"  {'method':<8} {'baseline':<11} {'judge':<10} {'n':>4} {'budget':>7} {'method recall [95% CI]':>24} "
        f"{'baseline recall [95% CI]':>24} {'difference [95% CI]':>26}  verdict"
    )
    lines = [
        f"Budget-matched: baselines retrieve exactly as many facts as the PGR method did for each query "
        f"(95% percentile bootstrap over queries, {summary.bootstrap_samples} resamples; difference paired by query)",
        header,
        "  " + "-" * (len(header) - 2),
    ]
    for c in summary.comparisons:
        ours = f"{c.method_recall:.3f} [{c.method_low:.3f},{c.method_high:.3f}]"
        theirs = f"{c.baseline_recall:.3f} [{c.baseline_low:.3f},{c.baseline_high:.3f}]"
        difference = f"{c.difference:+.3f} [{c.difference_low:+.3f},{c.difference_high:+.3f}]"
        verdict = "beats" if c.beats else "does not beat"
        lines.append(
            f"  {c.method.value:<8} {c.baseline.value:<11} {c.judge.value:<10} {c.n:>4} {c.budget:>7.2f} "
            f"{ours:>24} {theirs:>24} {difference:>26}  {verdict}"
        )
    return "\n".join(lines)


def win_rate_table(report: WinRateReport) -> str:
    """The paper's Table 1 for this run: each baseline's Recall and RecallExact beside PGR's,
    and the Win Rate of PGR's answers over the baseline's, raw and length-controlled, with their
    intervals, the share of verdicts that flipped with the order, and each side's answer length."""
    if not report.rows:
        return "Win Rate: no pair of answers could be judged" + _unjudged_note(report)
    judge = report.rows[0].judge.value
    header = (
        f"  {'method':<8} {'baseline':<11} {'n':>4} {'Recall':>7} {'RecallExact':>11} "
        f"{'baseline Recall':>15} {'baseline RecallExact':>20} {'Win Rate % [95% CI]':>22} "
        f"{'length-controlled %':>22} {'flips':>6} {'words PGR/base':>15} {'won/tied/lost':>13}"
    )
    lines = [
        f"Win Rate (answer level): PGR's answer against each baseline's at the same budget, both "
        f"from {report.answer_context}, judged pairwise in both orders (win 1, tie 0.5, loss 0, "
        "averaged over the orders)",
        f"  judge: {report.judge_model or 'unnamed'}, "
        + (
            "shown the references (--judge-sees-references)"
            if report.judge_sees_references
            else "shown the user's profile, not the references"
        ),
        f"  interval: {report.interval} ({report.bootstrap_samples} resamples); "
        f"length control: {report.length_control}; "
        f"Recall and RecallExact under the {judge} judge, over the same queries",
        *(
            [f"  WARNING: the judge ({report.judge_model}) is the model that wrote the dataset"]
            if report.judge_is_generator
            else []
        ),
        header,
        "  " + "-" * (len(header) - 2),
    ]
    for row in report.rows:
        rate = (
            f"{100 * row.win_rate:.1f} [{100 * row.win_rate_low:.1f},{100 * row.win_rate_high:.1f}]"
        )
        controlled = (
            f"{100 * row.length_controlled:.1f} [{100 * row.length_controlled_low:.1f},"
            f"{100 * row.length_controlled_high:.1f}]"
        )
        words = f"{row.pgr_words:.0f}/{row.baseline_words:.0f}"
        tally = f"{row.wins}/{row.ties}/{row.losses}"
        lines.append(
            f"  {row.method.value:<8} {row.baseline.value:<11} {row.n:>4} {row.recall:>7.3f} "
            f"{row.recall_exact:>11.3f} {row.baseline_recall:>15.3f} {row.baseline_recall_exact:>20.3f} "
            f"{rate:>22} {controlled:>22} {row.flip_rate:>6.0%} {words:>15} {tally:>13}"
        )
    return "\n".join(lines) + _unjudged_note(report)


def calibration_table(report: JudgeCalibrationReport) -> str:
    """Each model-free or model judge's error on facts whose answer the provenance judge knows."""
    lines = [
        f"Judges' error on known facts ({report.queries} queries, up to {report.facts_per_kind} facts "
        "per reference and kind, each judged alone; 95% Wilson intervals)"
    ]
    header = (
        f"  {'judge':<10} {'false-accept % [95% CI]':>24} {'other query':>12} {'near miss':>10} "
        f"{'false-reject % [95% CI]':>24}"
    )
    lines += [header, "  " + "-" * (len(header) - 2)]
    for row in report.judges:
        accept = (
            f"{100 * row.false_accept:.1f} [{100 * row.false_accept_low:.1f},"
            f"{100 * row.false_accept_high:.1f}]"
        )
        reject = (
            f"{100 * row.false_reject:.1f} [{100 * row.false_reject_low:.1f},"
            f"{100 * row.false_reject_high:.1f}]"
        )
        other = f"{row.accepted_other_query}/{row.other_query}"
        near = f"{row.accepted_near_miss}/{row.near_miss}"
        lines.append(f"  {row.judge.value:<10} {accept:>24} {other:>12} {near:>10} {reject:>24}")
    for pair in report.agreement:
        kappa = "n/a" if pair.kappa is None else f"{pair.kappa:.3f}"
        lines.append(
            f"  {pair.first.value} vs {pair.second.value}: agree on {pair.agreement:.1%} of "
            f"{pair.verdicts} verdicts, Cohen's kappa {kappa}"
        )
    if report.unjudged:
        lines.append(
            f"  {len(report.unjudged)} query(ies) could not be judged: {report.unjudged[0]}"
        )
    return "\n".join(lines)


def _unjudged_note(report: WinRateReport) -> str:
    if not report.unjudged:
        return ""
    return (
        f"\n  {len(report.unjudged)} pair(s) could not be judged and are left out "
        f"(each named in the report's 'unjudged'); the first: {report.unjudged[0]}"
    )
