"""``memoryquest pgr run``: query-only retrieval and PGR over a dataset, scored by the judges.

The printout has two tables: every method at its own budget (labelled with
the facts it retrieved per query), and each PGR method beside the baselines
given exactly its budget, with bootstrap intervals — the comparison to read.
With ``--win-rate`` a third compares answers (:mod:`memoryquest.pgr.winrate`):
PGR's, from its facts and prospection summary, against each baseline's at the
same budget, judged pairwise in both orders; the report is written next to
``--output`` as ``<name>.winrate.json``, or without ``--output`` beside the
dataset as ``pgr.winrate.json``, where ``memoryquest publish`` and
``memoryquest explore`` look for it (elsewhere, give them ``--win-rate-report``).

While it runs, progress is shown per query (:mod:`memoryquest.progress`): each
query is validated on its own, all of them concurrently over one shared
snapshot cache, so the results come in the order they always did. Its log goes
to the ``logs`` directory of the run that wrote the dataset (``pgr.log``), and
to stderr only with ``--verbose`` (:mod:`memoryquest.cli.run_log`).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING, Any

from memoryquest.cli.generate import add_progress_options, check_progress_options
from memoryquest.cli.inputs import (
    add_dataset_argument,
    add_output_option,
    add_users_option,
    check_output_target,
    dataset_dir,
    load_generated,
)
from memoryquest.cli.main import add_common_options, settings_from_args
from memoryquest.cli.run_log import add_verbose_option, command_log, log_dir_of_dataset
from memoryquest.contracts import Fact, JudgeKind, Persona, Query, RetrievalMethod, ValidationResult
from memoryquest.intake import PersonaSelection
from memoryquest.pgr.metrics import PGRSummary, query_difficulty, summarise
from memoryquest.pgr.runner import validate_queries
from memoryquest.pgr.winrate_contracts import WIN_RATE_FILE, WIN_RATE_SUFFIX
from memoryquest.progress import ProgressMode, RunFigures, showing
from memoryquest.progress.display import DEFAULT_EVERY_SECONDS
from memoryquest.progress.figures import request_limit
from memoryquest.settings import PGRSettings, Settings

if TYPE_CHECKING:
    from memoryquest.pgr.winrate_contracts import WinRateReport

PGR_METHODS = (RetrievalMethod.PGR_COT.value, RetrievalMethod.PGR_TOT.value)


@dataclass(frozen=True)
class PGRInputs:
    """What the runner needs from a dataset, whatever its on-disk form."""

    queries: list[Query]
    facts: list[Fact]
    personas: list[Persona]
    source: str


def load_for_pgr(path: Path) -> PGRInputs:
    """Queries, facts and personas from a dataset directory: the working directory
    ``memoryquest generate`` writes, or a published one (its configs joined back with their
    labels, which only the judges read)."""
    from memoryquest.audit.source import dataset_kind
    from memoryquest.dataset import DatasetError

    path = Path(path)
    try:
        published = dataset_kind(path) == "published"
    except DatasetError:
        published = False
    if published:
        from memoryquest.publish import load_published

        dataset = load_published(path)
        source = f"published dataset {path}"
    else:
        dataset = load_generated(path)
        source = f"generated dataset {path}"
    if not dataset.facts:
        raise ValueError(f"{path} has no facts: run the memory stage before PGR")
    return PGRInputs(dataset.queries, dataset.facts, dataset.personas, source)


def select_users(inputs: PGRInputs, users: Sequence[str] | None) -> list[Query]:
    """Queries of the named users (PersonaLens user ids such as 'user0', or persona ids)."""
    if not users:
        return inputs.queries
    aliases: dict[str, str] = {}
    for persona in inputs.personas:
        aliases[persona.source_user_id] = persona.persona_id
        aliases[persona.persona_id] = persona.persona_id
    for query in inputs.queries:
        aliases.setdefault(query.persona_id, query.persona_id)
    unknown = [u for u in users if u not in aliases]
    if unknown:
        raise ValueError(f"no such user(s) in the dataset: {', '.join(unknown)}")
    wanted = {aliases[u] for u in users}
    selected = [q for q in inputs.queries if q.persona_id in wanted]
    if not selected:
        raise ValueError(f"the dataset has no queries for {', '.join(users)}")
    return selected


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
    and the Win Rate of PGR's answers over the baseline's, with its interval."""
    if not report.rows:
        return "Win Rate: no pair of answers could be judged" + _unjudged_note(report)
    judge = report.rows[0].judge.value
    header = (
        f"  {'method':<8} {'baseline':<11} {'n':>4} {'Recall':>7} {'RecallExact':>11} "
        f"{'baseline Recall':>15} {'baseline RecallExact':>20} {'Win Rate % [95% CI]':>22} "
        f"{'won/tied/lost':>13}"
    )
    lines = [
        "Win Rate (answer level): PGR's answer (its facts and prospection summary) against each "
        "baseline's answer at the same budget (its facts alone), judged pairwise in both orders "
        "(win 1, tie 0.5, loss 0, averaged over the orders)",
        f"  interval: {report.interval} ({report.bootstrap_samples} resamples); "
        f"Recall and RecallExact under the {judge} judge, over the same queries",
        header,
        "  " + "-" * (len(header) - 2),
    ]
    for row in report.rows:
        rate = (
            f"{100 * row.win_rate:.1f} [{100 * row.win_rate_low:.1f},{100 * row.win_rate_high:.1f}]"
        )
        tally = f"{row.wins}/{row.ties}/{row.losses}"
        lines.append(
            f"  {row.method.value:<8} {row.baseline.value:<11} {row.n:>4} {row.recall:>7.3f} "
            f"{row.recall_exact:>11.3f} {row.baseline_recall:>15.3f} {row.baseline_recall_exact:>20.3f} "
            f"{rate:>22} {tally:>13}"
        )
    return "\n".join(lines) + _unjudged_note(report)


def _unjudged_note(report: WinRateReport) -> str:
    if not report.unjudged:
        return ""
    return (
        f"\n  {len(report.unjudged)} pair(s) could not be judged and are left out "
        f"(each named in the report's 'unjudged'); the first: {report.unjudged[0]}"
    )


def win_rate_path(output: Path) -> Path:
    """Where the Win Rate report goes: beside the results file (pgr.jsonl -> pgr.winrate.json)."""
    return output.with_name(output.stem + WIN_RATE_SUFFIX)


def check_win_rate(settings: PGRSettings) -> None:
    """Before any work: the Win Rate compares a PGR method with its budget-matched baselines."""
    if not any(m in PGR_METHODS for m in settings.methods):
        raise ValueError(
            "--win-rate compares PGR's answers with those of its budget-matched baselines: "
            f"run a PGR method (--method {' or --method '.join(PGR_METHODS)})"
        )
    if not settings.budget_baselines:
        raise ValueError(
            "--win-rate needs budget-matched baselines, but pgr.budget_baselines is empty"
        )


def write_atomically(path: Path, lines: Sequence[str]) -> None:
    """Write ``lines`` to ``path`` whole: a failure leaves the earlier file (or none), never half."""
    handle, staging = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.absolute().parent)
    try:
        with os.fdopen(handle, "w", encoding="utf-8") as stream:
            stream.writelines(lines)
        os.replace(staging, path)
    except BaseException:
        Path(staging).unlink(missing_ok=True)
        raise


def joined_rows(
    results: list[ValidationResult], queries: list[Query], personas: list[Persona]
) -> list[dict[str, Any]]:
    """Each result with its query's text, date, domain, γ, difficulty and user, ready for JSONL.

    ``difficulty`` is recomputed from these results (query-only recall under
    the provenance judge) when they hold it, else the dataset's own value.
    """
    by_id = {q.query_id: q for q in queries}
    users = {p.persona_id: p.source_user_id for p in personas}
    difficulty = query_difficulty(results)
    rows = []
    for result in results:
        query = by_id[result.query_id]
        rows.append(
            {
                **result.model_dump(mode="json"),
                "user": users.get(result.persona_id),
                "query_text": query.text,
                "query_date": query.query_date.isoformat(),
                "query_domain": query.domain.value,
                "gamma": query.gamma,
                "difficulty": difficulty.get(query.query_id, query.difficulty),
                "embedder": query.embedder,
            }
        )
    return rows


def _add_list_option(
    parser: argparse.ArgumentParser, name: str, kind: type[StrEnum], what: str
) -> None:
    """``--<name>``, given once per value, each one of ``kind``: the list setting ``pgr.<name>s``
    (where the parsed values go, for :func:`settings_from_args`)."""
    setting = f"{name}s"
    parser.add_argument(
        f"--{name}",
        dest=setting,
        action="append",
        choices=[value.value for value in kind],
        help=f"{what} (repeatable; default: pgr.{setting})",
    )


def configure(parser: argparse.ArgumentParser) -> None:
    actions = parser.add_subparsers(dest="action", metavar="ACTION", required=True)
    run = actions.add_parser(
        "run",
        help="score query-only retrieval and PGR on a dataset",
        description=(
            "Run query-only retrieval and PGR (chain or tree prospection) for every query of a dataset "
            "over the memory as it stood on the query date, judge the recall of the required references "
            "and print the means per method and judge. Each PGR method is also compared with dense "
            "query-only, BM25 and random retrieval given exactly its budget (facts retrieved per query), "
            "with 95% bootstrap intervals (pgr.budget_baselines, pgr.baseline_seed, "
            "pgr.bootstrap_samples). Hyper-parameters: --set pgr.step_k=5 ..."
        ),
    )
    add_common_options(run)
    add_dataset_argument(
        run,
        "dataset directory written by `memoryquest generate`, or a published one",
        old="--dataset",
    )
    _add_list_option(run, "method", RetrievalMethod, "retrieval method")
    _add_list_option(run, "judge", JudgeKind, "recall judge")
    add_users_option(run, "or persona ids; only their queries")
    add_output_option(
        run, "write every result, joined to its query, to this JSONL file", old=["--out"]
    )
    run.add_argument(
        "--answers", action="store_true", default=None, help="also generate answers (PAG)"
    )
    run.add_argument(
        "--win-rate",
        action="store_true",
        help="also compare answers: PGR's (with its prospection summary) against each budget-matched "
        "baseline's, judged pairwise in both orders; prints the Win Rate with 95%% bootstrap intervals "
        f"beside Recall and RecallExact and writes it next to --output (NAME{WIN_RATE_SUFFIX}), "
        f"or without --output to DATASET_DIR/{WIN_RATE_FILE}, where `memoryquest publish` "
        "and `memoryquest explore` find it",
    )
    add_progress_options(run)
    add_verbose_option(run)
    run.set_defaults(func=_run)


def _run(args: argparse.Namespace) -> int:
    settings = settings_from_args(
        args,
        pgr__methods=args.methods,
        pgr__judges=args.judges,
        pgr__generate_answers=True if args.win_rate else args.answers,
    )
    if args.win_rate:
        check_win_rate(settings.pgr)
    if args.output is not None:
        check_output_target(args.output, directory=False)
        if args.win_rate:
            check_output_target(win_rate_path(args.output), directory=False)
    check_progress_options(args)
    dataset = dataset_dir(args)
    inputs = load_for_pgr(dataset)
    queries = select_users(inputs, PersonaSelection.parse(users=args.users).user_ids)
    report_target: Path | None = None
    if args.win_rate:
        report_target = (
            win_rate_path(args.output) if args.output is not None else dataset / WIN_RATE_FILE
        )
        if args.output is None:
            check_output_target(report_target, directory=False)
    display = Display(ProgressMode(args.progress), args.progress_seconds)
    with command_log(args, log_dir_of_dataset(dataset) / PGR_LOG):
        results, report = asyncio.run(
            _validate(queries, inputs.facts, settings, display, win_rate=args.win_rate)
        )
    users = len({q.persona_id for q in queries})
    print(f"PGR over {len(queries)} queries of {users} user(s) from {inputs.source}")
    print(summary_table(summarise(results, samples=settings.pgr.bootstrap_samples)))
    if report is not None:
        print("")
        print(win_rate_table(report))
    if args.output is not None:
        write_atomically(
            args.output,
            [
                json.dumps(row, ensure_ascii=False) + "\n"
                for row in joined_rows(results, queries, inputs.personas)
            ],
        )
        print(f"wrote {len(results)} results to {args.output}")
    if report is not None and report_target is not None:
        write_atomically(report_target, [report.model_dump_json(indent=2) + "\n"])
        print(f"wrote the Win Rate report to {report_target}{_where_read(report_target, dataset)}")
    return 0


def _where_read(report: Path, dataset: Path) -> str:
    """How publish and explore find ``report``: by themselves beside the dataset, else by name."""
    if report.absolute() == (dataset / WIN_RATE_FILE).absolute():
        return " (`memoryquest publish` and `memoryquest explore` show it)"
    return f" (give it to `memoryquest publish` and `memoryquest explore` as --win-rate-report {report})"


@dataclass(frozen=True)
class Display:
    mode: ProgressMode = ProgressMode.AUTO
    every_seconds: float = DEFAULT_EVERY_SECONDS


PGR_STAGE = "pgr"  # the bar of `pgr run`: queries validated
WIN_RATE_STAGE = "win rate"  # with --win-rate: queries whose answers were judged
PGR_LOG = "pgr.log"  # in the logs directory of the run that wrote the dataset


async def _validate(
    queries: list[Query],
    facts: list[Fact],
    settings: Settings,
    display: Display = Display(),
    *,
    win_rate: bool = False,
) -> tuple[list[ValidationResult], WinRateReport | None]:
    from memoryquest.llm.factory import build_client
    from memoryquest.pgr.retrieval import IndexCache
    from memoryquest.pgr.winrate import answer_level

    client = build_client(settings)
    figures = RunFigures(
        [PGR_STAGE, WIN_RATE_STAGE] if win_rate else [PGR_STAGE],
        len(queries),
        unit="queries",
        client=client,
        requests_per_minute_limit=request_limit(client, settings.limits.requests_per_minute),
    )
    snapshots = IndexCache()

    async def one(query: Query) -> list[ValidationResult]:
        results = await validate_queries(
            [query], facts, client, settings.pgr, index_cache=snapshots
        )
        figures.unit_done(PGR_STAGE)
        return results

    try:
        async with showing(
            figures,
            display.mode,
            title=f"pgr run: {len(queries)} queries",
            every_seconds=display.every_seconds,
        ):
            groups = await asyncio.gather(*(one(q) for q in queries))
            results = [result for group in groups for result in group]
            if not win_rate:
                return results, None
            judged = await answer_level(
                queries,
                facts,
                results,
                client,
                samples=settings.pgr.bootstrap_samples,
                query_done=lambda: figures.unit_done(WIN_RATE_STAGE),
            )
        return judged.results, judged.report
    finally:
        await client.aclose()
