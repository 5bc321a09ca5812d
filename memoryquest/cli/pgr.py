"""``memoryquest pgr run``: query-only retrieval and PGR over a dataset, scored by the judges.

The printout has two tables: every method at its own budget (labelled with
the facts it retrieved per query), and each PGR method beside the baselines
given exactly its budget, with bootstrap intervals — the comparison to read.
With ``--win-rate`` a third compares answers (:mod:`memoryquest.pgr.winrate`):
PGR's against each baseline's at the same budget, both from their facts alone,
judged pairwise in both orders by a judge who knows the user's profile but not
the references (unless ``--judge-sees-references``); the report is written next to
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
from dataclasses import dataclass, field
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
from memoryquest.contracts import (
    Domain,
    Fact,
    JudgeKind,
    Persona,
    Query,
    RetrievalMethod,
    RunManifest,
    Session,
    Stage,
    StageUsage,
    ValidationResult,
)
from memoryquest.intake import PersonaSelection
from memoryquest.pgr.calibration_contracts import CALIBRATION_SUFFIX
from memoryquest.pgr.metrics import PGRSummary, query_difficulty, summarise
from memoryquest.pgr.run_record import RUN_RECORD_SUFFIX, evaluation_record
from memoryquest.pgr.runner import validate_queries
from memoryquest.pgr.winrate_contracts import WIN_RATE_FILE, WIN_RATE_SUFFIX
from memoryquest.progress import ProgressMode, RunFigures, showing
from memoryquest.progress.display import DEFAULT_EVERY_SECONDS
from memoryquest.progress.figures import request_limit
from memoryquest.settings import PGRSettings, Settings

if TYPE_CHECKING:
    from memoryquest.pgr.calibration_contracts import JudgeCalibrationReport
    from memoryquest.pgr.winrate_contracts import WinRateReport

PGR_METHODS = (RetrievalMethod.PGR_COT.value, RetrievalMethod.PGR_TOT.value)


@dataclass(frozen=True)
class PGRInputs:
    """What the runner needs from a dataset, whatever its on-disk form."""

    queries: list[Query]
    facts: list[Fact]
    personas: list[Persona]
    source: str
    manifest: RunManifest | None = None  # of the run that wrote the dataset, when it has one
    session_domains: dict[str, Domain] = field(default_factory=dict)  # for the judges' near misses
    sessions: list[Session] = field(default_factory=list)  # the history, for memory systems

    @property
    def generator_model(self) -> str:
        """The chat model that wrote the dataset ('' when no manifest says)."""
        return self.manifest.chat_model if self.manifest is not None else ""


def load_for_pgr(path: Path, *, need_facts: bool = True) -> PGRInputs:
    """Queries, facts and personas from a dataset directory: the working directory
    ``memoryquest generate`` writes, or a published one (its configs joined back with their
    labels, which only the judges read)."""
    from memoryquest.cli.open_dataset import dataset_kind
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
    if need_facts and not dataset.facts:
        raise ValueError(f"{path} has no facts: run the memory stage before PGR")
    return PGRInputs(
        dataset.queries,
        dataset.facts,
        dataset.personas,
        source,
        dataset.manifest,
        {session.session_id: session.domain for session in dataset.sessions},
        dataset.sessions,
    )


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
        help="also compare answers: PGR's against each budget-matched baseline's, both written from "
        "their retrieved facts alone, judged pairwise in both orders by a judge who knows the user's "
        "profile but not the references; prints the raw and length-controlled Win Rate with 95%% "
        "bootstrap intervals, the flip rate and answer lengths beside Recall and RecallExact, and "
        f"writes it next to --output (NAME{WIN_RATE_SUFFIX}), or without --output to "
        f"DATASET_DIR/{WIN_RATE_FILE}, where `memoryquest publish` and `memoryquest explore` find it",
    )
    run.add_argument(
        "--memory",
        dest="memories",
        action="append",
        metavar="NAME",
        help="evaluate a memory system from the history alone instead of the PGR methods "
        "(repeatable): facts, turns, long_context, a name from the memoryquest.memory_systems "
        "entry points, or module:attribute; recall by the model judge, per query category",
    )
    run.add_argument(
        "--budget",
        type=int,
        default=None,
        metavar="N",
        help="with --memory: texts each system may return per query (default: pgr.query_only_k)",
    )
    run.add_argument(
        "--judge-sees-references",
        action="store_true",
        help="with --win-rate: show the pairwise judge each query's references (the answer key); "
        "the report and the card say so",
    )
    add_progress_options(run)
    add_verbose_option(run)
    run.set_defaults(func=_run)


def _run(args: argparse.Namespace) -> int:
    settings = settings_from_args(
        args,
        pgr__methods=args.methods,
        pgr__judges=args.judges,
        pgr__generate_answers=args.answers,
    )
    if args.judge_sees_references and not args.win_rate:
        raise ValueError("--judge-sees-references goes with --win-rate")
    if args.memories:
        return _run_memories(args, settings)
    if args.budget is not None:
        raise ValueError("--budget goes with --memory")
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
        evaluation = asyncio.run(
            _validate(
                queries,
                inputs,
                settings,
                display,
                win_rate=args.win_rate,
                judge_sees_references=args.judge_sees_references,
            )
        )
    results, report, calibration = evaluation.results, evaluation.win_rates, evaluation.calibration
    users = len({q.persona_id for q in queries})
    print(f"PGR over {len(queries)} queries of {users} user(s) from {inputs.source}")
    print(summary_table(summarise(results, samples=settings.pgr.bootstrap_samples)))
    if calibration is not None:
        print("")
        print(calibration_table(calibration))
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
        if calibration is not None:
            target = args.output.with_name(args.output.stem + CALIBRATION_SUFFIX)
            write_atomically(target, [calibration.model_dump_json(indent=2) + "\n"])
            print(f"wrote the judges' calibration to {target}")
    written = [args.output] if args.output is not None else []
    if calibration is not None and args.output is not None:
        written.append(args.output.with_name(args.output.stem + CALIBRATION_SUFFIX))
    if report is not None and report_target is not None:
        write_atomically(report_target, [report.model_dump_json(indent=2) + "\n"])
        print(f"wrote the Win Rate report to {report_target}{_where_read(report_target, dataset)}")
        written.append(report_target)
    if written:
        _write_record(
            args,
            inputs,
            settings,
            queries,
            written,
            models=(evaluation.chat_model, evaluation.judge_model, evaluation.embedder),
            usage=evaluation.usage,
        )
    return 0


def _run_memories(args: argparse.Namespace, settings: Settings) -> int:
    """``pgr run DATASET --memory NAME ...``: each system replays the history, then is asked."""
    from memoryquest.llm.factory import build_client
    from memoryquest.pgr.memory_systems import (
        MemoryResources,
        build_memory_system,
        dated_sessions,
        evaluate_memory,
        memory_factory,
        recall_cells,
    )

    if args.win_rate:
        raise ValueError("--win-rate compares PGR's answers: it does not go with --memory")
    budget = args.budget if args.budget is not None else settings.pgr.query_only_k
    if budget < 1:
        raise ValueError(f"--budget must be at least 1, got {budget}")
    for name in args.memories:
        memory_factory(name)  # an unknown name fails before any work
    if args.output is not None:
        check_output_target(args.output, directory=False)
    dataset = dataset_dir(args)
    inputs = load_for_pgr(dataset, need_facts="facts" in args.memories)
    queries = select_users(inputs, PersonaSelection.parse(users=args.users).user_ids)
    history = dated_sessions(inputs.sessions)

    async def evaluate() -> tuple[list[Any], list[str], Any]:
        client = build_client(settings)
        try:
            results: list[Any] = []
            unjudged: list[str] = []
            for name in args.memories:
                system = build_memory_system(name, MemoryResources(client, inputs.facts))
                rows, missed = await evaluate_memory(system, queries, history, budget, client)
                results += rows
                unjudged += missed
            return results, unjudged, client
        finally:
            await client.aclose()

    with command_log(args, log_dir_of_dataset(dataset) / PGR_LOG):
        results, unjudged, client = asyncio.run(evaluate())
    users = len({q.persona_id for q in queries})
    print(
        f"Memory systems over {len(queries)} queries of {users} user(s) from {inputs.source}, "
        f"{budget} texts each (long_context: all); recall by the {client.judge_model_name} judge "
        "against the references, 95% bootstrap intervals over queries (references for age)"
    )
    header = f"  {'system':<14} {'category':<34} {'n':>5} {'Recall [95% CI]':>22}"
    print(header)
    print("  " + "-" * (len(header) - 2))
    for cell in recall_cells(results, queries, settings.pgr.bootstrap_samples):
        rate = f"{cell.recall:.3f} [{cell.low:.3f},{cell.high:.3f}]"
        print(f"  {cell.system:<14} {cell.category:<34} {cell.n:>5} {rate:>22}")
    if unjudged:
        print(f"  {len(unjudged)} retrieval(s) could not be judged; the first: {unjudged[0]}")
    if args.output is not None:
        write_atomically(args.output, [row.model_dump_json() + "\n" for row in results])
        print(f"wrote {len(results)} results to {args.output}")
        _write_record(
            args,
            inputs,
            settings,
            queries,
            [args.output],
            models=(client.chat_backend.model, client.judge_model_name, client.embedder_name),
            usage=client.usage(),
            memory_systems={row.system: row.system_version for row in results},
        )
    return 0


def _write_record(
    args: argparse.Namespace,
    inputs: PGRInputs,
    settings: Settings,
    queries: Sequence[Query],
    written: Sequence[Path],
    *,
    models: tuple[str, str, str],
    usage: Sequence[StageUsage],
    memory_systems: dict[str, str] | None = None,
) -> None:
    """The run record beside the first file written (``NAME.run.json``)."""
    chat_model, judge_model, embedder = models
    record = evaluation_record(
        command=["memoryquest", *args.argv],
        dataset=dataset_dir(args),
        manifest=inputs.manifest,
        settings=settings,
        queries=len(queries),
        users=len({q.persona_id for q in queries}),
        chat_model=chat_model,
        judge_model=judge_model,
        embedder=embedder,
        usage=usage,
        outputs=written,
        memory_systems=memory_systems,
    )
    path = written[0].with_name(written[0].name.split(".")[0] + RUN_RECORD_SUFFIX)
    write_atomically(path, [record.model_dump_json(indent=2) + "\n"])
    print(f"wrote the run record (dataset hash, models, prompt versions, seeds, cost) to {path}")


def _where_read(report: Path, dataset: Path) -> str:
    """How publish and explore find ``report``: by themselves beside the dataset, else by name."""
    if report.absolute() == (dataset / WIN_RATE_FILE).absolute():
        return " (`memoryquest publish` and `memoryquest explore` show it)"
    return f" (give it to `memoryquest publish` and `memoryquest explore` as --win-rate-report {report})"


@dataclass(frozen=True)
class Display:
    mode: ProgressMode = ProgressMode.AUTO
    every_seconds: float = DEFAULT_EVERY_SECONDS


PGR_STAGE = Stage.PGR  # the bar of `pgr run`: queries validated
WIN_RATE_STAGE = "win rate"  # with --win-rate: queries whose answers were judged
PGR_LOG = "pgr.log"  # in the logs directory of the run that wrote the dataset


@dataclass(frozen=True)
class Evaluation:
    """What one ``pgr run`` produced, and with what."""

    results: list[ValidationResult]
    win_rates: WinRateReport | None
    calibration: JudgeCalibrationReport | None
    usage: list[StageUsage]
    chat_model: str
    judge_model: str
    embedder: str


async def _validate(
    queries: list[Query],
    inputs: PGRInputs,
    settings: Settings,
    display: Display = Display(),
    *,
    win_rate: bool = False,
    judge_sees_references: bool = False,
) -> Evaluation:
    from memoryquest.llm.factory import build_client
    from memoryquest.pgr.calibration import calibrate_queries, calibration_report
    from memoryquest.pgr.judges import build_judges
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
            [query], inputs.facts, client, settings.pgr, index_cache=snapshots
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
            calibration = None
            judges = [j for j in settings.pgr.judges if j != JudgeKind.PROVENANCE.value]
            if judges and settings.pgr.calibration_facts:
                indexes = {
                    q.query_id: await snapshots.get(
                        q.persona_id, q.query_date, inputs.facts, client
                    )
                    for q in queries
                }
                items, unjudged = await calibrate_queries(
                    queries,
                    indexes,
                    build_judges(judges, settings.pgr),
                    client,
                    inputs.session_domains,
                    settings.pgr.calibration_facts,
                )
                calibration = calibration_report(
                    items, results, settings.pgr.calibration_facts, unjudged
                )
            win_rates = None
            if win_rate:
                judged = await answer_level(
                    queries,
                    inputs.personas,
                    inputs.facts,
                    results,
                    client,
                    samples=settings.pgr.bootstrap_samples,
                    query_done=lambda: figures.unit_done(WIN_RATE_STAGE),
                    judge_sees_references=judge_sees_references,
                    generator_model=inputs.generator_model,
                )
                results, win_rates = judged.results, judged.report
        return Evaluation(
            results,
            win_rates,
            calibration,
            client.usage(),
            client.chat_backend.model,
            client.judge_model_name,
            client.embedder_name,
        )
    finally:
        await client.aclose()
