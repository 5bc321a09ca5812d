"""The dataset card (README.md): Hugging Face YAML front matter plus a readable body.

Everything in the card is derived from the tables, the run manifest and the
publish settings — never from the clock or the destination path — so the same
input gives the same bytes.

The headline claims only what the numbers support: a PGR method is said to
beat retrieval without prospection only when the 95% bootstrap interval of its
paired recall difference with the best baseline *given the same number of
facts* lies above 0. Recall at unequal budgets (query-only at K = 20, PGR at
whatever it retrieved) is shown, labelled with the budget, but never compared.
When ``memoryquest pgr run --win-rate`` was run, the answer-level Win Rate of
each PGR method against each baseline at its budget is shown beside recall,
with its interval, and claims nothing beyond it.

Given a ``memoryquest pgr run`` (its record ``NAME.run.json``), the card names
it and shows, recomputed from the run's own rows, every baseline at each PGR
method's budget with its interval, and from the run's calibration each judge's
false-accept and false-reject rate with its Wilson interval and its counts.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import pyarrow as pa

from memoryquest.contracts import (
    READABLE_TABLES,
    SCHEMA_VERSION,
    JudgeKind,
    RetrievalMethod,
    RunManifest,
)
from memoryquest.pgr.calibration_contracts import JudgeCalibrationReport, wilson_interval
from memoryquest.pgr.metrics import BudgetComparison, judge_errors_on_retrievals, summarise
from memoryquest.pgr.run_record import EvaluationRun
from memoryquest.pgr.winrate_contracts import WinRateReport
from memoryquest.publish.arrow import describe_columns
from memoryquest.publish.splits import SPLITS
from memoryquest.publish.stats import DatasetStatistics, Distribution
from memoryquest.settings import PublishSettings

PRETTY_NAME = "MemoryQuest (regenerated)"
DEFAULT_CONFIG = "queries"

PGR_PAPER_BIBTEX = """@misc{chopra2026thinkingahead,
  title         = {Thinking Ahead: Prospection-Guided Retrieval of Memory with Language Models},
  author        = {Chopra, Harshita and Chintalapudi, Krishna and Nath, Suman and White, Ryen and Shah, Chirag},
  year          = {2026},
  eprint        = {2605.14177},
  archivePrefix = {arXiv},
  url           = {https://arxiv.org/abs/2605.14177}
}"""

PERSONALENS_BIBTEX = """@inproceedings{zhao2025personalens,
  title     = {PersonaLens: A Benchmark for Personalization Evaluation in Conversational {AI} Assistants},
  author    = {Zhao, Zheng and Vania, Clara and Kayal, Subhradeep and Khan, Naila and Cohen, Shay B. and Yilmaz, Emine},
  booktitle = {Findings of the Association for Computational Linguistics: ACL 2025},
  year      = {2025},
  url       = {https://github.com/amazon-science/PersonaLens}
}"""

CONFIG_DESCRIPTIONS: dict[str, str] = {
    "personas": "one row per user: PersonaLens demographics, interests, affinities, interaction summaries and tasks",
    "queries": "the in-situ planning requests as a system under test gets them: id, user, date, text",
    "query_labels": "each query's answer key: its 3–5 required references, per-reference cosine, γ, the embedder, the query's domain",
    "timelines": "per query, the dated events that embed each reference exactly once, plus filler events",
    "history": "each user's conversations in date order: session id, date, turns as a list of {role, content}; no label",
    "session_labels": "per session: the query and timeline event it was expanded from, its domain and place in the history, the reference it carries and the turns and spans that say it",
    "facts": "the final memory store with provenance, revisions (replayable to any date) and merge history; no credited reference",
    "fact_labels": "per fact, the references credited to it, as a whole and per revision",
    "validation": "per query × retrieval method × judge: retrieved facts, per-reference judgements, Recall, RecallExact, prospection trace",
    "rejected": "every generated candidate that did not make it into the dataset, with the reason and the raw JSON",
}


@dataclass(frozen=True)
class CardInputs:
    manifest: RunManifest  # already redacted
    statistics: DatasetStatistics
    publish: PublishSettings
    gamma_threshold: float
    row_counts: Mapping[str, Mapping[str, int]]  # config -> split -> rows
    users_per_split: Mapping[str, int]
    schemas: Mapping[str, pa.Schema]
    plots: Sequence[tuple[str, str]]  # (relative path, alt text)
    has_personalens: bool
    licence_file: str | None
    audit_markdown: str | None = None  # the validity audit's table (memoryquest audit)
    audit_failures: Sequence[
        str
    ] = ()  # failed gates, when publishing anyway (--allow-failed-audit)
    audit_targets_missed: Sequence[str] = ()  # benchmark targets the audit found missed
    win_rates: WinRateReport | None = None  # answer-level Win Rate (memoryquest pgr run --win-rate)
    evaluation: EvaluationRun | None = None  # a `memoryquest pgr run` with its results (--pgr-run)


def _q(text: str) -> str:
    """A YAML double-quoted scalar (JSON strings are valid YAML)."""
    return json.dumps(text, ensure_ascii=False)


def _size_category(rows: int) -> str:
    for limit, label in (
        (1_000, "n<1K"),
        (10_000, "1K<n<10K"),
        (100_000, "10K<n<100K"),
        (1_000_000, "100K<n<1M"),
    ):
        if rows < limit:
            return label
    return "1M<n<10M"


def data_files(row_counts: Mapping[str, Mapping[str, int]]) -> dict[str, list[tuple[str, str]]]:
    """config -> [(split, path glob)] for every non-empty split (empty configs are left out)."""
    layout: dict[str, list[tuple[str, str]]] = {}
    for config, counts in row_counts.items():
        splits = [
            (split, f"data/{config}/{split}-*") for split in SPLITS if counts.get(split, 0) > 0
        ]
        if splits:
            layout[config] = splits
    return layout


def front_matter(inputs: CardInputs) -> str:
    layout = data_files(inputs.row_counts)
    default = DEFAULT_CONFIG if DEFAULT_CONFIG in layout else next(iter(layout), None)
    tags = [
        "long-term-memory",
        "personalization",
        "retrieval",
        "multi-session",
        "dialogue",
        "synthetic",
    ]
    if inputs.manifest.simulated:
        tags.append("simulated")
    lines = [
        "---",
        f"pretty_name: {_q(PRETTY_NAME)}",
        "license: cc-by-nc-4.0",
        "language:",
        "- en",
        "task_categories:",
        "- question-answering",
        "- text-retrieval",
        "tags:",
        *[f"- {tag}" for tag in tags],
        "size_categories:",
        f"- {_q(_size_category(inputs.statistics.queries))}",
        "configs:",
    ]
    for config, splits in layout.items():
        lines.append(f"- config_name: {config}")
        if config == default:
            lines.append("  default: true")
        lines.append("  data_files:")
        for split, path in splits:
            lines.append(f"  - split: {split}")
            lines.append(f"    path: {_q(path)}")
    lines.append("---")
    return "\n".join(lines) + "\n"


def _fmt(value: float, digits: int = 3) -> str:
    return f"{value:.{digits}f}"


METHOD_NAMES: dict[str, str] = {
    RetrievalMethod.QUERY_ONLY.value: "dense query-only",
    RetrievalMethod.PGR_COT.value: "PGR-CoT",
    RetrievalMethod.PGR_TOT.value: "PGR-ToT",
    RetrievalMethod.BM25.value: "BM25",
    RetrievalMethod.RANDOM.value: "random",
    RetrievalMethod.RECENCY.value: "recency",
    RetrievalMethod.MULTI_QUERY.value: "multi-query expansion",
    RetrievalMethod.HYPOTHETICAL_FACTS.value: "hypothetical-fact expansion (HyDE)",
}
PGR_METHODS = (RetrievalMethod.PGR_COT.value, RetrievalMethod.PGR_TOT.value)


def _name(method: str) -> str:
    return METHOD_NAMES.get(method, method)


def _ci(low: float, high: float, signed: bool = False) -> str:
    return f"{low:+.3f}..{high:+.3f}" if signed else f"{low:.3f}..{high:.3f}"


def _with_ci(value: float, low: float, high: float, signed: bool = False) -> str:
    """A figure and its interval, as every table shows them: ``0.512 (0.401..0.620)``."""
    return f"{value:{'+' if signed else ''}.3f} ({_ci(low, high, signed)})"


def headline_judge(comparisons: Sequence[BudgetComparison]) -> str | None:
    """The judge the headline speaks for: provenance (exact) when it was run, else the first one."""
    judges = [c.judge.value for c in comparisons]
    if not judges:
        return None
    return JudgeKind.PROVENANCE.value if JudgeKind.PROVENANCE.value in judges else judges[0]


def verdict(method: str, comparisons: Sequence[BudgetComparison]) -> str:
    """One sentence: does ``method`` beat its best budget-matched baseline? Only an interval above 0 says yes."""
    best = max(comparisons, key=lambda c: c.baseline_recall)  # first (enum order) wins a tie
    difference = f"{best.difference:+.3f} (95% CI {_ci(best.difference_low, best.difference_high, signed=True)})"
    if best.beats:
        return (
            f"{_name(method)} beats the best budget-matched baseline ({_name(best.baseline.value)}) by "
            f"{best.difference:.3f} (95% CI {_ci(best.difference_low, best.difference_high)})."
        )
    where = "lies below 0" if best.difference_high < 0 else "includes 0"
    return (
        f"{_name(method)} does not beat the best budget-matched baseline ({_name(best.baseline.value)}, "
        f"Recall {best.baseline_recall:.3f}) at an equal budget: the difference is {difference}, which {where}."
    )


def _percent(value: float) -> str:
    return f"{100 * value:.1f}%"


def _win_rate(low: float, high: float) -> str:
    return f"{100 * low:.1f}..{100 * high:.1f}%"


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
            f"{_name(s.method)} {s.mean_retrieved:.1f}"
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
            f"{_name(c.baseline.value)} {_with_ci(c.baseline_recall, c.baseline_low, c.baseline_high)}"
            for c in rows
        )
        lines += [
            f"- **{_name(method)}**: Recall {first.method_recall:.3f} (95% CI {_ci(first.method_low, first.method_high)}) "
            f"with {first.budget:.1f} facts retrieved per query, over {first.n} queries. At the same budget: {baselines}.",
            f"  {verdict(method, rows)}",
        ]
        answers = [r for r in (win_rates.rows if win_rates else []) if r.method.value == method]
        if answers:
            lines.append(
                "  Win Rate of its answers over the baselines' at the same budget (pairwise judge, both orders): "
                + "; ".join(
                    f"{_name(r.baseline.value)} {_percent(r.win_rate)} (95% CI {_win_rate(r.win_rate_low, r.win_rate_high)}, {r.n} queries)"
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
    return f"| {label} | {_fmt(dist.min, digits)} | {_fmt(dist.median, digits)} | {_fmt(dist.mean, digits)} | {_fmt(dist.max, digits)} |"


def _table(header: Sequence[str], rows: Sequence[Sequence[object]]) -> list[str]:
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    lines += [
        "| " + " | ".join(str(cell).replace("|", "\\|").replace("\n", " ") for cell in row) + " |"
        for row in rows
    ]
    return lines


def _settings_rows(settings: Mapping[str, Any], sections: Sequence[str]) -> list[tuple[str, str]]:
    rows: list[tuple[str, str]] = []
    for section in sections:
        values = settings.get(section)
        if isinstance(values, Mapping):
            for key, value in values.items():
                rows.append(
                    (f"{section}.{key}", json.dumps(value, ensure_ascii=False, sort_keys=True))
                )
    return rows


def _provenance(inputs: CardInputs) -> list[str]:
    manifest = inputs.manifest
    lines: list[str] = []
    if manifest.simulated:
        lines += [
            "> [!WARNING]",
            "> **SIMULATED DATA.** Every text in this dataset — queries, references, timelines, dialogues,",
            "> facts and prospection traces — comes from memoryquest's offline, deterministic, persona-grounded",
            "> simulator, **not from a language model**. It exercises the whole pipeline and keeps every",
            "> structural invariant, but it is not a substitute for the benchmark generated with a real model.",
            f"> Embeddings (and therefore every cosine and γ) come from the real embedder `{manifest.embedder}`.",
            "",
        ]
    endpoint = manifest.base_url or f"the default endpoint of the `{manifest.backend}` backend"
    lines += [
        "## Provenance",
        "",
        f"- Generator: memoryquest {manifest.package_version}, run `{manifest.run_id}`, created {manifest.created_at.isoformat()}",
    ]
    if manifest.simulated:
        lines.append(
            f"- Text: offline simulator (backend `{manifest.backend}`; no language model was called)"
        )
    else:
        lines.append(
            f"- Text: chat model `{manifest.chat_model}` via `{manifest.backend}` at {endpoint}"
        )
    lines += [
        f"- Embedder: `{manifest.embedder}`",
        f"- Seed: {manifest.seed}; wall time {manifest.wall_seconds:.1f} s; total cost ${manifest.total_cost_usd:.4f}"
        + (
            f" over {manifest.attempts} attempts (${manifest.cost_this_attempt_usd:.4f} in the last one, "
            f"${manifest.reused_cost_usd:.4f} spent earlier and reused from the cache)"
            if manifest.attempts > 1
            else ""
        ),
        f"- Personas: {len(manifest.persona_ids)} in the run",
        "- Full details (every threshold, prompt version, token count and sha256 of every file): `manifest.json`",
        "",
    ]
    if manifest.prompts:
        lines += ["### Prompt templates", ""]
        lines += _table(
            ["template", "version", "sha256"],
            [
                (p.template_id, p.version, f"`{p.sha256[:16]}…`")
                for p in sorted(manifest.prompts, key=lambda p: p.template_id)
            ],
        )
        lines.append("")
    threshold_rows = _settings_rows(manifest.settings, ("generation", "pgr"))
    if threshold_rows:
        lines += ["### Thresholds and constants", ""]
        lines += _table(["setting", "value"], threshold_rows)
        lines.append("")
    if manifest.usage:
        lines += ["### Usage", ""]
        lines += _table(
            [
                "stage",
                "requests",
                "cache hits",
                "input tokens",
                "output tokens",
                "embedding requests",
                "cost (USD)",
                "seconds",
            ],
            [
                (
                    u.stage,
                    u.requests,
                    u.cache_hits,
                    u.input_tokens,
                    u.output_tokens,
                    u.embedding_requests,
                    f"{u.cost_usd:.4f}",
                    f"{u.seconds:.1f}",
                )
                for u in manifest.usage
            ],
        )
        lines.append("")
    return lines


def _splits_section(inputs: CardInputs) -> list[str]:
    publish = inputs.publish
    lines = [
        "## Splits",
        "",
        "Splits are **by user**: every row of every table follows its persona's split, so no user",
        'appears in two splits. Users are ordered by `sha256("<split_seed>:<persona_id>")` and cut by the',
        f"ratios train {publish.train:g} / validation {publish.validation:g} / test {publish.test:g} (split seed {publish.split_seed}).",
        "Split sizes use the largest-remainder method; a split with a positive ratio that would be empty",
        "takes one user from the largest split while that split keeps at least one. Empty splits have no file.",
        "",
    ]
    header = ["config", *SPLITS]
    rows: list[list[object]] = [["users", *[inputs.users_per_split.get(s, 0) for s in SPLITS]]]
    rows += [
        [f"`{config}`", *[counts.get(s, 0) for s in SPLITS]]
        for config, counts in inputs.row_counts.items()
    ]
    lines += _table(header, rows)
    lines.append("")
    return lines


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
        *_table(
            ["", "this dataset (mean)", "published set"],
            [
                (name, _fmt(dist.mean, 1) if dist is not None else "–", PAPER_SHAPE[name])
                for name, dist in ours.items()
            ],
        ),
    ]


def _statistics_section(inputs: CardInputs) -> list[str]:
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
    lines += _table(["type", "facts"], list(stats.facts_by_type.items()))
    if stats.facts_by_status:
        lines += [
            "",
            "Facts by status: "
            + ", ".join(f"{k} {v}" for k, v in stats.facts_by_status.items())
            + ".",
        ]
    lines += ["", "### Rejected candidates by reason", ""]
    lines += _table(["reason", "candidates"], list(stats.rejected_by_reason.items()))
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
        lines += _table(
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
                    _fmt(s.mean_recall),
                    _ci(s.recall_low, s.recall_high),
                    _fmt(s.recall_exact),
                    _fmt(s.mean_llm_calls, 2),
                    _fmt(s.mean_retrieved, 1),
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
            lines += _table(
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
                        _fmt(c.budget, 1),
                        _with_ci(c.method_recall, c.method_low, c.method_high),
                        _with_ci(c.baseline_recall, c.baseline_low, c.baseline_high),
                        _with_ci(c.difference, c.difference_low, c.difference_high, signed=True),
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
    lines += _table(
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
                _fmt(r.recall),
                _fmt(r.recall_exact),
                _fmt(r.baseline_recall),
                _fmt(r.baseline_recall_exact),
                f"{_percent(r.win_rate)} ({_win_rate(r.win_rate_low, r.win_rate_high)})",
                f"{_percent(r.length_controlled)} "
                f"({_win_rate(r.length_controlled_low, r.length_controlled_high)})",
                _percent(r.flip_rate),
                f"{r.pgr_words:.0f} / {r.baseline_words:.0f}",
                f"{r.wins} / {r.ties} / {r.losses}",
            )
            for r in report.rows
        ],
    )
    if report.unjudged:
        lines += ["", f"{len(report.unjudged)} pair(s) could not be judged and are left out."]
    return lines


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
                _with_ci(own.recall, own.recall_low, own.recall_high),
                "",
            ),
            *(
                (
                    f"`{c.baseline.value}`",
                    c.n,
                    c.budget,
                    _with_ci(c.baseline_recall, c.baseline_low, c.baseline_high),
                    _with_ci(c.difference, c.difference_low, c.difference_high, signed=True),
                )
                for c in matched
            ),
        ]
        rows += [
            (
                _name(own.method.value),
                retrieval,
                f"`{own.judge.value}`",
                n,
                _fmt(budget, 1),
                recall,
                gain,
            )
            for retrieval, n, budget, recall, gain in retrievals
        ]
    lines += _table(
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
    return f"{_percent(part / whole)} ({_win_rate(low, high)})"


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
    lines += _table(
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
            f"- `{pair.first.value}` and `{pair.second.value}` agree on {_percent(pair.agreement)} of "
            f"{pair.verdicts} reference verdicts on the run's retrievals; Cohen's κ {kappa}."
        )
    if report.unjudged:
        lines.append(
            f"- {len(report.unjudged)} query(ies) could not be put to the model judge and are left out."
        )
    return [*lines, ""]


def judge_model(manifest: RunManifest) -> str:
    """The model that answered the judges: ``endpoint.judge_model``, else the chat model."""
    endpoint = manifest.settings.get("endpoint")
    named = endpoint.get("judge_model") if isinstance(endpoint, dict) else None
    return str(named or manifest.chat_model)


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


# --------------------------------------------------------------------------- judges and the reviewer


def _grader_model(manifest: RunManifest) -> str:
    """Who answered the judges' and the reviewer's requests (the simulator answers all of them offline)."""
    return manifest.chat_model if manifest.simulated else judge_model(manifest)


def judges_and_reviewer_lines(inputs: CardInputs) -> list[str]:
    """Which model graded the data (relevance, PGR and pairwise judges, the blind reviewer),
    whether that is the model that wrote it, and the reviewer's flag rate."""
    manifest = inputs.manifest
    generation = manifest.settings.get("generation")
    relevance = isinstance(generation, dict) and bool(generation.get("judge_relevance"))
    author, grader = manifest.chat_model, _grader_model(manifest)
    graders = [
        ("relevance judge (`reference_relevance`)", relevance),
        (
            "PGR reference judge (`judge_references`)",
            any(s.judge == JudgeKind.LLM.value for s in inputs.statistics.validation),
        ),
        ("pairwise judge (`judge_pairwise`)", inputs.win_rates is not None),
        ("blind reviewer (`session_review`)", manifest.review is not None),
    ]
    ran = [name for name, used in graders if used]
    lines = ["### Judges and the blind reviewer", ""]
    if not ran:
        return [*lines, "No model judge or reviewer ran for this dataset.", ""]
    lines += _table(
        ["grader", "ran", "model", "the model that wrote the data?"],
        [
            (name, "yes", f"`{grader}`", "yes" if grader == author else "no")
            if used
            else (name, "no", "", "")
            for name, used in graders
        ],
    )
    lines.append("")
    if grader == author:
        lines += [
            f"**The model that wrote the data, `{author}`, also graded it** ({', '.join(ran)}): a judge or "
            "reviewer shares its author's blind spots, so what it passes is weaker evidence than an "
            "independent model's verdict (set `endpoint.judge_model`).",
            "",
        ]
    review = manifest.review
    if review is not None:
        reviewer = review.reviewer_model or grader
        share = (
            f" ({review.sessions_flagged / review.sessions_reviewed:.1%})"
            if review.sessions_reviewed
            else ""
        )
        lines += [
            f"Blind reviewer: `{reviewer}` read {review.sessions_reviewed} conversations, each without its "
            "references, query or any label, and flagged a sentence that points ahead, announces itself or "
            f"retells an earlier conversation in {review.sessions_flagged}{share}. A flagged conversation was "
            "written again; one still flagged after the last regeneration is among the rejected candidates "
            "with the reason `flagged`.",
            "",
        ]
    return lines


def _readable_section(inputs: CardInputs) -> list[str]:
    readable = [config for config in inputs.schemas if config in READABLE_TABLES]
    scoring = [config for config in inputs.schemas if config not in READABLE_TABLES]
    return [
        "## What a system under test may read",
        "",
        "A memory system under test reads "
        + ", ".join(f"`{c}`" for c in readable)
        + ": each user's conversation history (persona, session id, date, turns, in date order),",
        "the requests (query id, user, date, text) and, for a retrieval method over extracted memory, the",
        "facts. None of them says which sessions belong to which query, which turn says a reference or which",
        "fact is credited with one; session ids are opaque hashes that carry no order by query.",
        "",
        "Ground truth and generation records, for scoring only: "
        + ", ".join(f"`{c}`" for c in scoring)
        + ". A system that reads them is no longer being tested; nor is one that reads the",
        "`explorer/` folder, which shows every session and fact joined with its labels.",
        "`memoryquest.publish.load_readable(root)` reads only the configs a system under test may read.",
        "",
    ]


def _loading_section(inputs: CardInputs) -> list[str]:
    config = (
        DEFAULT_CONFIG
        if DEFAULT_CONFIG in data_files(inputs.row_counts)
        else next(iter(data_files(inputs.row_counts)), DEFAULT_CONFIG)
    )
    return [
        "## Loading",
        "",
        "`root` is the folder that holds this README (or the dataset's Hub id for `datasets`).",
        "",
        "```python",
        'root = "path/to/this/dataset"',
        "",
        "# Hugging Face datasets: through the configs above ...",
        "from datasets import load_dataset",
        f'{config} = load_dataset(root, "{config}")',
        "# ... or straight from the Parquet files of one config",
        f'{config} = load_dataset("parquet", data_dir=f"{{root}}/data/{config}")',
        "",
        "# pandas",
        "import pandas as pd",
        f'train = pd.read_parquet(f"{{root}}/data/{config}/train-00000-of-00001.parquet")',
        "",
        "# DuckDB (all splits of a config at once)",
        "import duckdb",
        f"duckdb.sql(f\"SELECT * FROM read_parquet('{{root}}/data/{config}/*.parquet')\").df()",
        "",
        "# polars",
        "import polars as pl",
        f'df = pl.read_parquet(f"{{root}}/data/{config}/*.parquet")',
        "",
        "# what a system under test may read: history, queries, facts (no labels config is opened)",
        "from memoryquest.publish import load_readable, load_published",
        "readable = load_readable(root)",
        "# every config, the history joined with its labels (for `memoryquest pgr run` / `validate`)",
        "dataset = load_published(root)",
        "```",
        "",
        "A JSON Lines mirror of every split is in `jsonl/<config>/<split>.jsonl`.",
        "",
    ]


def _schema_section(inputs: CardInputs) -> list[str]:
    lines = [
        "## Schema",
        "",
        f"Every row carries `schema_version` (currently `{SCHEMA_VERSION}`); ids are opaque, stable strings",
        "with a type prefix (`p_` persona, `q_` query, `r_` reference, `e_` event, `s_` session, `f_` fact,",
        "`x_` rejected, `v_` validation result); dates are ISO-8601; nested values are Arrow lists and structs.",
        "`rejected.payload_json` is deliberately raw JSON text: it holds whatever was generated, valid or not.",
        "",
    ]
    for config, schema in inputs.schemas.items():
        rows_total = sum(inputs.row_counts.get(config, {}).values())
        description = CONFIG_DESCRIPTIONS.get(config, "")
        lines += [
            f"<details><summary><code>{config}</code> — {description} ({rows_total} rows)</summary>",
            "",
        ]
        lines += _table(
            ["column", "type", "nullable", "description"],
            [
                (f"`{path}`", f"`{kind}`", "yes" if nullable else "no", desc)
                for path, kind, nullable, desc in describe_columns(schema)
            ],
        )
        lines += ["", "</details>", ""]
    lines += [
        "## Ground truth",
        "",
        "Each query's answer depends on its required references, kept as an explicit chain so recall can be",
        "scored at several levels:",
        "",
        "```",
        "query_labels.references[].reference_id",
        "  -> timelines.events[] (kind = reference, reference_id)  .event_id",
        "  -> session_labels (event_id, reference_id)               .session_id  (a `history` row)",
        "  -> session_labels.reference_turn_indices, reference_spans  (turns and sentences that convey it)",
        "  -> fact_labels (source_reference_ids; per revision too)  .fid         (a `facts` row)",
        "```",
        "",
        "Each labels config joins its readable config on the id: `queries` and `query_labels` on `query_id`,",
        "`history` and `session_labels` on `session_id`, `facts` and `fact_labels` on `fid`",
        "(`fact_labels.revisions` lists the same revisions, in the same order, as `facts.revisions`).",
        "A user's sessions across all queries form one chronological history (`session_labels.position`).",
        "`facts.revisions` replays the memory store to any date: a fact is visible on a query date when its",
        "first revision is on or before that date and it was not retired (`retired_on`) by then; its content",
        "is the latest revision dated on or before the query date, and the references it is credited with then",
        "are that revision's `fact_labels.revisions[].source_reference_ids`. `validation.judgements[].supporting_fids`",
        "point at the retrieved facts that carried each reference.",
        "",
    ]
    return lines


def _licence_section(inputs: CardInputs) -> list[str]:
    lines = ["## Licence and attribution", ""]
    if inputs.has_personalens:
        lines += [
            "The personas, and therefore every generated record, derive from **PersonaLens**",
            "(Zhao et al., *PersonaLens: A Benchmark for Personalization Evaluation in Conversational AI",
            "Assistants*, Findings of ACL 2025; data from",
            "[amazon-science/PersonaLens](https://github.com/amazon-science/PersonaLens)), licensed",
            "[CC BY-NC 4.0](https://creativecommons.org/licenses/by-nc/4.0/). This dataset is released under the",
            "same licence: attribution required, **non-commercial use only**.",
        ]
    else:
        lines += [
            "Released under [CC BY-NC 4.0](https://creativecommons.org/licenses/by-nc/4.0/):",
            "attribution required, non-commercial use only.",
        ]
    if inputs.licence_file:
        lines.append(f"The full licence text is in `{inputs.licence_file}`.")
    lines += [
        "",
        "MemoryQuest and Prospection-Guided Retrieval are described in Chopra et al., *Thinking Ahead:",
        "Prospection-Guided Retrieval of Memory with Language Models* (arXiv 2605.14177).",
        "",
        "## Citation",
        "",
        "```bibtex",
        PGR_PAPER_BIBTEX,
        "",
        PERSONALENS_BIBTEX,
        "```",
        "",
    ]
    return lines


def _stamp(lead: str, items: Sequence[str], tail: str) -> list[str]:
    """One bold line naming ``items`` (none: no line)."""
    return [f"**{lead}: " + "; ".join(items) + f".** {tail}", ""] if items else []


def _audit_stamp(inputs: CardInputs) -> list[str]:
    """A dataset that failed its audit, or missed one of its targets, says so before anything else."""
    return _stamp(
        "WARNING: this dataset FAILED its validity audit and was published anyway (--allow-failed-audit)",
        inputs.audit_failures,
        "Results on it may reward shortcuts rather than memory retrieval.",
    ) + _stamp(
        "Note: this dataset misses benchmark targets of its validity audit",
        inputs.audit_targets_missed,
        "See the Validity audit section for what each target guards against.",
    )


def _audit_section(inputs: CardInputs) -> list[str]:
    if inputs.audit_markdown is None:
        return [
            "## Validity audit",
            "",
            "No audit was run on this dataset (`memoryquest audit`).",
            "",
        ]
    verdict = "failed" if inputs.audit_failures else "passed"
    # An unmeasured target (no query-only rows, say) is neither met nor missed.
    targets = (
        f" It missed {len(inputs.audit_targets_missed)} of the targets a usable benchmark meets"
        if inputs.audit_targets_missed
        else " It missed none of the targets a usable benchmark meets that it could measure"
    )
    return [
        "## Validity audit",
        "",
        f"The dataset {verdict} `memoryquest audit`, which looks for shortcuts a generator can leave without "
        "breaking any invariant: wording that marks the turns stating a reference (n-grams found only there, "
        "and a classifier trained on other users), where references sit (classifiers on the reference "
        "turn's index, the session's length and news items, the event's place in its timeline and the "
        "domain relative to the query's), query words that already point at the references "
        "(BM25 beside dense query-only recall), templated text (distinct n-grams, repeated sentences), and "
        "references that memory does not cover on the query date or that expired before it."
        + targets
        + ": dense query-only recall inside a band (below it the query finds its references hardly better "
        "than chance, so the set measures noise; above it the set is trivial), and varied user turns "
        "(distinct-2 on a fixed-size sample, few repeated sentences). A missed target fails nothing. "
        "When the table is followed by the per-item tell filter's lines, queries whose reference items "
        "stood out to those classifiers, one by one, were withdrawn (reason `tell`, in the rejected "
        "table) before publishing; the lines give how many, in how many rounds, and each AUC before and after.",
        "",
        inputs.audit_markdown.strip(),
        "",
    ]


def render_card(inputs: CardInputs) -> str:
    body = [
        *_audit_stamp(inputs),
        f"# {PRETTY_NAME}",
        "",
        "MemoryQuest is a multi-session long-term-memory benchmark: each in-situ planning query depends on",
        "3–5 dated, atomic facts about the user that are spread over a long, chronologically consistent",
        "conversation history and are semantically far from the query (low γ), so similarity-only retrieval",
        "struggles. This copy was regenerated from PersonaLens personas with the `memoryquest` generator and",
        "checked with its bundled Prospection-Guided Retrieval (PGR) runner.",
        "",
        "Configs: " + ", ".join(f"`{c}`" for c in inputs.schemas) + ".",
        "",
    ]
    body += headline_lines(inputs.statistics, inputs.manifest.simulated, inputs.win_rates)
    body += _provenance(inputs)
    body += judges_and_reviewer_lines(inputs)
    body += _readable_section(inputs)
    body += _splits_section(inputs)
    body += _statistics_section(inputs)
    body += _audit_section(inputs)
    body += _loading_section(inputs)
    body += _schema_section(inputs)
    body += _licence_section(inputs)
    return front_matter(inputs) + "\n" + "\n".join(body).rstrip("\n") + "\n"


# --------------------------------------------------------------------------- the Hub


HUB_LINE = "- Hub: "
"""The Provenance line of a pushed card (:mod:`memoryquest.publish.hub` writes it after the push)."""


def with_hub_provenance(card: str, hub: Mapping[str, str] | None) -> str:
    """``card`` with its Provenance list naming the Hub commit of its data files (``hub``), or
    naming no push (None): an earlier push's line is replaced either way."""
    lines = [line for line in card.split("\n") if not line.startswith(HUB_LINE)]
    if hub is None:
        return "\n".join(lines)
    heading = "## Provenance"
    if heading not in lines:
        raise ValueError(f"the dataset card has no {heading!r} section to record the push in")
    at = lines.index(heading) + 2  # after the heading and its blank line
    lines.insert(
        at,
        f"{HUB_LINE}[`{hub['repo_id']}`]({hub['url']}), revision `{hub['revision']}`; the data "
        f"files are those of commit `{hub['data_commit']}` (this card and `manifest.json` were "
        "committed right after it, to name it; `publish.hub` in `manifest.json`)",
    )
    return "\n".join(lines)
