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

This module holds the command's options and its two flows; the rest is beside it:
the dataset it reads (:mod:`~memoryquest.cli.pgr_inputs`), the evaluation under the
progress display (:mod:`~memoryquest.cli.pgr_evaluation`), the printed tables
(:mod:`~memoryquest.cli.pgr_tables`) and the files it writes (:mod:`~memoryquest.cli.pgr_outputs`).
"""

from __future__ import annotations

import argparse
import asyncio
import json
from enum import StrEnum
from pathlib import Path
from typing import Any

from memoryquest.cli.generate import add_progress_options, check_progress_options
from memoryquest.cli.inputs import (
    add_dataset_argument,
    add_output_option,
    add_users_option,
    check_output_target,
    dataset_dir,
)
from memoryquest.cli.main import add_common_options, settings_from_args
from memoryquest.cli.pgr_evaluation import Display, evaluate_queries
from memoryquest.cli.pgr_inputs import load_for_pgr, select_users
from memoryquest.cli.pgr_outputs import (
    joined_rows,
    where_read,
    win_rate_path,
    write_atomically,
    write_run_record,
)
from memoryquest.cli.pgr_tables import calibration_table, summary_table, win_rate_table
from memoryquest.cli.run_log import add_verbose_option, command_log, log_dir_of_dataset
from memoryquest.contracts import JudgeKind, RetrievalMethod
from memoryquest.intake import PersonaSelection
from memoryquest.pgr.calibration_contracts import CALIBRATION_SUFFIX
from memoryquest.pgr.metrics import summarise
from memoryquest.pgr.winrate_contracts import WIN_RATE_FILE, WIN_RATE_SUFFIX
from memoryquest.progress import ProgressMode
from memoryquest.settings import PGRSettings, Settings

PGR_METHODS = (RetrievalMethod.PGR_COT.value, RetrievalMethod.PGR_TOT.value)
PGR_LOG = "pgr.log"  # in the logs directory of the run that wrote the dataset


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
            evaluate_queries(
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
        print(f"wrote the Win Rate report to {report_target}{where_read(report_target, dataset)}")
        written.append(report_target)
    if written:
        write_run_record(
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
        write_run_record(
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
