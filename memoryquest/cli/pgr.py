"""``memoryquest pgr run``: query-only retrieval and PGR over a dataset, scored by the judges."""

from __future__ import annotations

import argparse
import asyncio
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from memoryquest.cli.main import settings_from_args
from memoryquest.contracts import Fact, JudgeKind, Persona, Query, RetrievalMethod, ValidationResult
from memoryquest.dataset import GeneratedDataset
from memoryquest.pgr.metrics import PGRSummary, summarise
from memoryquest.pgr.runner import validate_queries
from memoryquest.settings import Settings


@dataclass(frozen=True)
class PGRInputs:
    """What the runner needs from a dataset, whatever its on-disk form."""

    queries: list[Query]
    facts: list[Fact]
    personas: list[Persona]
    source: str


def load_for_pgr(path: Path) -> PGRInputs:
    """Queries, facts and personas from a dataset directory.

    Today: the working directory ``memoryquest generate`` writes (one JSONL
    file per table). A published Parquet dataset is the next form to read;
    add it here so every caller gets it.
    """
    path = Path(path)
    if path.is_dir() and (path / "queries.jsonl").exists():
        dataset = GeneratedDataset.load(path)
        if not dataset.facts:
            raise ValueError(f"{path} has no facts.jsonl rows: run the memory stage before PGR")
        return PGRInputs(dataset.queries, dataset.facts, dataset.personas, f"generated dataset {path}")
    if path.is_dir() and any(path.glob("**/*.parquet")):
        raise ValueError(
            f"{path} looks like a published Parquet dataset; `pgr run` reads the generated dataset "
            "directory (the output of `memoryquest generate`) for now"
        )
    raise ValueError(f"{path} is not a dataset directory (no queries.jsonl)")


def select_users(inputs: PGRInputs, users: list[str] | None) -> list[Query]:
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
    """Plain-text table: one line per method × judge (the paper's Tables 1 and 7 side by side)."""
    header = (
        f"{'method':<11} {'judge':<10} {'n':>4} {'Recall':>7} {'RecallExact':>11} "
        f"{'LLM calls/q':>11} {'embed req/q':>11} {'facts/q':>8} {'Ph-1 facts':>10} {'Ph-2 new':>8}"
    )
    lines = [header, "-" * len(header)]
    for row in summary.rows:
        phase1 = "-" if row.phase1_facts is None else f"{row.phase1_facts:.2f}"
        phase2 = "-" if row.phase2_new_facts is None else f"{row.phase2_new_facts:.2f}"
        lines.append(
            f"{row.method.value:<11} {row.judge.value:<10} {row.n:>4} {row.recall:>7.3f} {row.recall_exact:>11.3f} "
            f"{row.llm_calls:>11.2f} {row.embedding_calls:>11.2f} {row.facts_retrieved:>8.2f} {phase1:>10} {phase2:>8}"
        )
    return "\n".join(lines)


def joined_rows(results: list[ValidationResult], queries: list[Query], personas: list[Persona]) -> list[dict[str, Any]]:
    """Each result with its query's text, date, domain, γ and user, ready for JSONL."""
    by_id = {q.query_id: q for q in queries}
    users = {p.persona_id: p.source_user_id for p in personas}
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
                "embedder": query.embedder,
            }
        )
    return rows


def register(subparsers: Any, common: argparse.ArgumentParser) -> None:
    pgr = subparsers.add_parser("pgr", help="run the bundled Prospection-Guided Retrieval (PGR) runner")
    actions = pgr.add_subparsers(dest="action", metavar="ACTION", required=True)
    run = actions.add_parser(
        "run",
        parents=[common],
        help="score query-only retrieval and PGR on a dataset",
        description=(
            "Run query-only retrieval and PGR (chain or tree prospection) for every query of a dataset "
            "over the memory as it stood on the query date, judge the recall of the required references "
            "and print the means per method and judge. Hyper-parameters: --set pgr.step_k=5 ..."
        ),
    )
    run.add_argument("--dataset", type=Path, required=True, help="dataset directory written by `memoryquest generate`")
    run.add_argument(
        "--method",
        dest="methods",
        action="append",
        choices=[m.value for m in RetrievalMethod],
        help="retrieval method (repeatable; default: pgr.methods)",
    )
    run.add_argument(
        "--judge",
        dest="judges",
        action="append",
        choices=[j.value for j in JudgeKind],
        help="recall judge (repeatable; default: pgr.judges)",
    )
    run.add_argument("--users", nargs="+", metavar="USER", help="only these users (e.g. user0 or a persona id)")
    run.add_argument("--out", type=Path, help="write every result, joined to its query, as JSONL here")
    run.add_argument("--answers", action="store_true", default=None, help="also generate answers (PAG)")
    run.set_defaults(func=_run)


def _run(args: argparse.Namespace) -> int:
    settings = settings_from_args(
        args,
        pgr__methods=args.methods,
        pgr__judges=args.judges,
        pgr__generate_answers=args.answers,
    )
    inputs = load_for_pgr(args.dataset)
    queries = select_users(inputs, args.users)
    results = asyncio.run(_validate(queries, inputs.facts, settings))
    users = len({q.persona_id for q in queries})
    print(f"PGR over {len(queries)} queries of {users} user(s) from {inputs.source}")
    print(summary_table(summarise(results)))
    if args.out is not None:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        with args.out.open("w", encoding="utf-8") as handle:
            for row in joined_rows(results, queries, inputs.personas):
                handle.write(json.dumps(row, ensure_ascii=False) + "\n")
        print(f"wrote {len(results)} results to {args.out}")
    return 0


async def _validate(queries: list[Query], facts: list[Fact], settings: Settings) -> list[ValidationResult]:
    from memoryquest.llm.factory import build_client

    client = build_client(settings)
    try:
        return await validate_queries(queries, facts, client, settings.pgr)
    finally:
        await client.aclose()
