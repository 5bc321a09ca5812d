"""The card's headline and Statistics sections: the dataset's shape, its facts and rejected
candidates, and what the validation shows about PGR.

The headline claims only what the numbers support: a PGR method is said to
beat retrieval without prospection only when the 95% bootstrap interval of its
paired recall difference with the best baseline *given the same number of
facts* lies above 0. Recall at unequal budgets (query-only at K = 20, PGR at
whatever it retrieved) is shown, labelled with the budget, but never compared.
When ``memoryquest pgr run --win-rate`` was run, the answer-level Win Rate of
each PGR method against each baseline at its budget is shown beside recall,
with its interval, and claims nothing beyond it.
"""

from __future__ import annotations

from collections.abc import Sequence

from memoryquest.contracts import JudgeKind
from memoryquest.pgr.metrics import BudgetComparison
from memoryquest.pgr.winrate_contracts import WinRateReport
from memoryquest.publish.card.evaluation import evaluation_run_lines
from memoryquest.publish.card.format import (
    PGR_METHODS,
    decimals,
    interval_text,
    markdown_table,
    method_name,
    percent,
    percent_interval,
    with_interval,
)
from memoryquest.publish.card.inputs import CardInputs
from memoryquest.publish.card.judges import judge_model
from memoryquest.publish.stats import DatasetStatistics, Distribution


def headline_judge(comparisons: Sequence[BudgetComparison]) -> str | None:
    """The judge the headline speaks for: provenance (exact) when it was run, else the first one."""
    judges = [c.judge.value for c in comparisons]
    if not judges:
        return None
    return JudgeKind.PROVENANCE.value if JudgeKind.PROVENANCE.value in judges else judges[0]


def verdict(method: str, comparisons: Sequence[BudgetComparison]) -> str:
    """One sentence: does ``method`` beat its best budget-matched baseline? Only an interval above 0 says yes."""
    best = max(comparisons, key=lambda c: c.baseline_recall)  # first (enum order) wins a tie
    difference = f"{best.difference:+.3f} (95% CI {interval_text(best.difference_low, best.difference_high, signed=True)})"
    if best.beats:
        return (
            f"{method_name(method)} beats the best budget-matched baseline ({method_name(best.baseline.value)}) by "
            f"{best.difference:.3f} (95% CI {interval_text(best.difference_low, best.difference_high)})."
        )
    where = "lies below 0" if best.difference_high < 0 else "includes 0"
    return (
        f"{method_name(method)} does not beat the best budget-matched baseline ({method_name(best.baseline.value)}, "
        f"Recall {best.baseline_recall:.3f}) at an equal budget: the difference is {difference}, which {where}."
    )


def headline_lines(
    stats: DatasetStatistics, simulated: bool, win_rates: WinRateReport | None = None
) -> list[str]:
    """What the validation shows about PGR, stated only as strongly as the intervals allow."""
    pgr_scores = [s for s in stats.validation if s.method in PGR_METHODS]
    if not pgr_scores:
        return []
    lines = ["## Headline results", ""]
    judge = headline_judge(stats.budget_matched)
    if judge is None:
        first_judge = stats.validation[0].judge
        budgets = ", ".join(
            f"{method_name(s.method)} {s.mean_retrieved:.1f}"
            for s in stats.validation
            if s.judge == first_judge
        )
        lines += [
            "No budget-matched baselines were run for this dataset, so this card makes no claim that PGR",
            "retrieves the required references better than retrieval without prospection. Methods returned",
            f"different numbers of facts per query ({budgets}), and recall grows with that number.",
            "",
        ]
        return lines
    lines += [
        f"Recall under the `{judge}` judge, with 95% bootstrap intervals over queries. Each baseline was",
        "given exactly as many facts as the PGR method retrieved for the same query, over the same memory",
        "snapshot, so the comparison is at an equal budget.",
        "",
    ]
    for method in PGR_METHODS:
        rows = [
            c for c in stats.budget_matched if c.method.value == method and c.judge.value == judge
        ]
        if not rows:
            continue
        first = rows[0]
        baselines = "; ".join(
            f"{method_name(c.baseline.value)} {with_interval(c.baseline_recall, c.baseline_low, c.baseline_high)}"
            for c in rows
        )
        lines += [
            f"- **{method_name(method)}**: Recall {first.method_recall:.3f} (95% CI {interval_text(first.method_low, first.method_high)}) "
            f"with {first.budget:.1f} facts retrieved per query, over {first.n} queries. At the same budget: {baselines}.",
            f"  {verdict(method, rows)}",
        ]
        answers = [r for r in (win_rates.rows if win_rates else []) if r.method.value == method]
        if answers:
            lines.append(
                "  Win Rate of its answers over the baselines' at the same budget (pairwise judge, both orders): "
                + "; ".join(
                    f"{method_name(r.baseline.value)} {percent(r.win_rate)} (95% CI {percent_interval(r.win_rate_low, r.win_rate_high)}, {r.n} queries)"
                    for r in answers
                )
                + "."
            )
    lines.append("")
    if simulated:
        lines += [
            "These numbers come from simulated text (see the warning below); they exercise the runner and say",
            "nothing about PGR on text from a language model.",
            "",
        ]
    return lines


def _dist_row(label: str, dist: Distribution | None, digits: int = 2) -> str:
    if dist is None:
        return f"| {label} | – | – | – | – |"
    return f"| {label} | {decimals(dist.min, digits)} | {decimals(dist.median, digits)} | {decimals(dist.mean, digits)} | {decimals(dist.max, digits)} |"


# The published MemoryQuest set (Section 4 of the PGR paper): 50 users, 535 queries.
PAPER_SHAPE = {
    "queries per user": "10.7",
    "sessions per user": "77.6",
    "exchanges per session": "6.2",
    "references per query": "3–5",
}


def _shape_lines(stats: DatasetStatistics) -> list[str]:
    """This dataset's shape beside the published set's: a regenerated set should be comparable."""
    ours = {
        "queries per user": stats.queries_per_user,
        "sessions per user": stats.sessions_per_user,
        "exchanges per session": stats.exchanges_per_session,
        "references per query": stats.references_per_query,
    }
    return [
        "Shape beside the published MemoryQuest set (50 users, 535 queries):",
        "",
        *markdown_table(
            ["", "this dataset (mean)", "published set"],
            [
                (name, decimals(dist.mean, 1) if dist is not None else "–", PAPER_SHAPE[name])
                for name, dist in ours.items()
            ],
        ),
    ]


def statistics_section(inputs: CardInputs) -> list[str]:
    stats = inputs.statistics
    lines = [
        "## Statistics",
        "",
        f"{stats.users} users, {stats.queries} queries, {stats.sessions} sessions, {stats.facts} facts, "
        f"{stats.rejected} rejected candidates.",
        "",
        "| | min | median | mean | max |",
        "|---|---|---|---|---|",
        _dist_row("queries per user", stats.queries_per_user),
        _dist_row("sessions per user", stats.sessions_per_user),
        _dist_row("turns per session", stats.turns_per_session),
        _dist_row("exchanges per session (user turns)", stats.exchanges_per_session),
        _dist_row("references per query", stats.references_per_query),
        _dist_row("γ (mean query–reference cosine)", stats.gamma, digits=3),
        _dist_row("γ as said (query–sentence said in the session)", stats.gamma_said, digits=3),
        "",
        f"γ is computed with `{inputs.manifest.embedder}`; queries were kept when γ ≤ {inputs.gamma_threshold:g}.",
        "",
        *_shape_lines(stats),
        "",
        "### Facts by type",
        "",
    ]
    lines += markdown_table(["type", "facts"], list(stats.facts_by_type.items()))
    if stats.facts_by_status:
        lines += [
            "",
            "Facts by status: "
            + ", ".join(f"{k} {v}" for k, v in stats.facts_by_status.items())
            + ".",
        ]
    lines += ["", "### Rejected candidates by reason", ""]
    lines += markdown_table(["reason", "candidates"], list(stats.rejected_by_reason.items()))
    lines += ["", "### Validation (bundled PGR runner)", ""]
    if stats.validation:
        lines += [
            "Recall = fraction of a query's required references found among the retrieved facts;",
            "RecallExact = fraction of queries with every reference found. Memory is replayed to each query's",
            "date, so no fact from a later session is visible.",
            "",
        ]
        lines += [
            "Each method at its own budget: query-only returns its K best facts, PGR whatever its steps found.",
            "Recall grows with the budget, so these rows are not a comparison of methods; see the",
            "budget-matched table below.",
            "",
        ]
        lines += markdown_table(
            [
                "method",
                "judge",
                "queries",
                "mean Recall",
                "Recall 95% CI",
                "RecallExact",
                "LLM calls / query",
                "budget: facts retrieved / query",
            ],
            [
                (
                    f"`{s.method}`",
                    f"`{s.judge}`",
                    s.queries,
                    decimals(s.mean_recall),
                    interval_text(s.recall_low, s.recall_high),
                    decimals(s.recall_exact),
                    decimals(s.mean_llm_calls, 2),
                    decimals(s.mean_retrieved, 1),
                )
                for s in stats.validation
            ],
        )
        lines += ["", *_agreement_lines(inputs)]
        lines += ["", "#### Budget-matched baselines", ""]
        if stats.budget_matched:
            lines += [
                "Rows of `validation` with `baseline_for` set: dense query-only, BM25 and seeded random retrieval,",
                "each given exactly the number of facts the PGR method retrieved for that query (`budget`).",
                f"Intervals are 95% percentile bootstrap over queries ({stats.bootstrap_samples} resamples); the",
                "difference is paired by query.",
                "",
            ]
            lines += markdown_table(
                [
                    "method",
                    "baseline",
                    "judge",
                    "queries",
                    "budget (facts / query)",
                    "method Recall (95% CI)",
                    "baseline Recall (95% CI)",
                    "difference (95% CI)",
                ],
                [
                    (
                        f"`{c.method.value}`",
                        f"`{c.baseline.value}`",
                        f"`{c.judge.value}`",
                        c.n,
                        decimals(c.budget, 1),
                        with_interval(c.method_recall, c.method_low, c.method_high),
                        with_interval(c.baseline_recall, c.baseline_low, c.baseline_high),
                        with_interval(
                            c.difference, c.difference_low, c.difference_high, signed=True
                        ),
                    )
                    for c in stats.budget_matched
                ],
            )
        else:
            lines.append("No budget-matched baselines were run for this dataset.")
        if inputs.win_rates is not None:
            lines += ["", *win_rate_lines(inputs.win_rates)]
    else:
        lines.append("No validation results in this dataset.")
    lines.append("")
    for path, alt in inputs.plots:
        lines += [f"![{alt}]({path})", ""]
    lines += evaluation_run_lines(inputs.evaluation, inputs.manifest)
    return lines


def win_rate_lines(report: WinRateReport) -> list[str]:
    """The answer-level comparison (the paper's Win Rate), beside each side's recall."""
    lines = ["#### Answer-level Win Rate", ""]
    if not report.rows:
        return [*lines, "`memoryquest pgr run --win-rate` could judge no pair of answers."]
    judge = report.rows[0].judge.value
    shown = (
        "the user's profile and the query's references (`--judge-sees-references`)"
        if report.judge_sees_references
        else "the user's profile, not the references"
    )
    lines += [
        "From `memoryquest pgr run --win-rate`: an answer is generated by the same prompt from each",
        f"retrieval — a PGR method's and each baseline's at the PGR method's budget — from {report.answer_context}.",
        f"A pairwise judge (`{report.judge_model or 'unnamed'}`), playing the user and shown {shown}, picks the",
        "more useful answer or a tie, twice with the positions swapped. A win counts 1, a tie 0.5, a loss 0,",
        "averaged over both orders; the Win Rate is PGR's mean over queries (50% = no preference), with a",
        f"{report.interval} ({report.bootstrap_samples} resamples). The length-controlled Win Rate is the",
        f'{report.length_control}; "flipped" is the share of queries whose verdict changed with the order.',
        f"Recall is under the `{judge}` judge, over the same queries.",
        "",
    ]
    if report.judge_is_generator:
        lines += [
            f"**The judge (`{report.judge_model}`) is the model that wrote this dataset**: it grades text",
            "of its own kind, a known source of bias; set `endpoint.judge_model` to another model.",
            "",
        ]
    lines += markdown_table(
        [
            "method",
            "baseline",
            "queries",
            "Recall",
            "RecallExact",
            "baseline Recall",
            "baseline RecallExact",
            "Win Rate (95% CI)",
            "length-controlled (95% CI)",
            "flipped",
            "words (PGR / baseline)",
            "won / tied / lost",
        ],
        [
            (
                f"`{r.method.value}`",
                f"`{r.baseline.value}`",
                r.n,
                decimals(r.recall),
                decimals(r.recall_exact),
                decimals(r.baseline_recall),
                decimals(r.baseline_recall_exact),
                f"{percent(r.win_rate)} ({percent_interval(r.win_rate_low, r.win_rate_high)})",
                f"{percent(r.length_controlled)} "
                f"({percent_interval(r.length_controlled_low, r.length_controlled_high)})",
                percent(r.flip_rate),
                f"{r.pgr_words:.0f} / {r.baseline_words:.0f}",
                f"{r.wins} / {r.ties} / {r.losses}",
            )
            for r in report.rows
        ],
    )
    if report.unjudged:
        lines += ["", f"{len(report.unjudged)} pair(s) could not be judged and are left out."]
    return lines


def _agreement_lines(inputs: CardInputs) -> list[str]:
    agreement = inputs.statistics.judge_agreement
    if agreement is None:
        return ["The LLM judge and the provenance judge were not both run: no agreement to report."]
    model = judge_model(inputs.manifest)
    author = " (the model that wrote the data)" if model == inputs.manifest.chat_model else ""
    return [
        f"The LLM judge (`{model}`{author}) agrees with the provenance judge on "
        f"{agreement.agree} of {agreement.verdicts} reference verdicts ({agreement.share:.1%}); "
        f"found by the LLM judge only: {agreement.llm_only}, by provenance only: "
        f"{agreement.provenance_only}.",
    ]
