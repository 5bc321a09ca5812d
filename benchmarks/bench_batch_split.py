"""Batch rounds under a low enqueued-token limit (issue #38, item 1): same dataset, more files.

Runs the plain pipeline in Batch API mode against the bundled fake server
(``memoryquest.testing.FakeOpenAIServer`` answering every line from the
offline simulator, as in ``benchmarks/bench_batch_rounds.py``), first with
no enqueued-token limit, then with a low one, each with an empty cache:

* ``split``: the client is told the limit (``endpoint.batch_enqueued_tokens_max``)
  and the server enforces the same limit;
* ``refused``: only the server enforces it; the client believes the published
  tier-1 figure, so its first files are refused (``token_limit_exceeded``) and
  go again, or are cut smaller in the next round.

The limit defaults to a quarter of the largest round of the unlimited run (at
least its largest line, which must fit alone). For each run it prints the rounds (a set's
round: the files of one ``round`` of one collected set), the batch files per
round, the refused batches, the online chat requests, and whether the dataset
tables the run saved (queries, timelines, history, facts and the rest, ``.jsonl``)
are byte for byte those of the unlimited run.

    .venv/bin/python benchmarks/bench_batch_split.py --personas 3
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import os
import re
import shutil
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

REPO_ROOT = Path(__file__).resolve().parent.parent
SMALL = {
    "generation": {"queries_per_user": 2, "candidates_per_user": 8},
    "pgr": {"methods": ["query_only", "pgr_tot"], "judges": ["provenance"]},
}
FILE_NAME = re.compile(r"memoryquest-(?P<set>\w+)-round(?P<round>\d+)-part\d+\.jsonl")


@dataclass
class Run:
    name: str
    limit: int | None
    files_per_round: list[int]  # in the order the rounds were first created
    creates: int
    refused: int
    online: int
    largest_round: int  # prompt tokens, as the server counts them
    largest_line: int
    largest_file: int
    seconds: float


def overrides(url: str, output: Path, client_limit: int | None) -> dict[str, Any]:
    endpoint: dict[str, Any] = {
        "base_url": url,
        "api_key": "bench",
        "simulator_hints": True,  # the fake server answers from the simulator
        "embedder": "local",
        "chat_model": "gpt-4o-mini",
        "batch": True,
        "batch_poll_seconds": 0.01,
        "batch_max_poll_seconds": 0.05,
        "batch_collect_seconds": 0.5,
    }
    if client_limit is not None:
        endpoint["batch_enqueued_tokens_max"] = client_limit
    return {
        **SMALL,
        "output_dir": str(output),
        # The cache (empty: a fresh output each run) names each set's files by its digest.
        "endpoint": endpoint,
        "limits": {"requests_per_minute": 60_000, "tokens_per_minute": 50_000_000},
    }


async def generate(users: list[str], settings_overrides: dict[str, Any]) -> None:
    from memoryquest.intake import PersonaSelection, load_personas
    from memoryquest.llm.factory import build_client
    from memoryquest.pipeline import generate_dataset
    from memoryquest.settings import load_settings

    settings = load_settings(overrides=settings_overrides)
    personas = load_personas(
        REPO_ROOT / "personas" / "personalens", PersonaSelection(user_ids=users)
    ).personas
    client = build_client(settings)
    try:
        dataset = await generate_dataset(personas, client, settings)
    finally:
        await client.aclose()
    dataset.save(settings.output_dir / "dataset")


def measure(
    name: str, server: Any, output: Path, users: list[str], client: int | None, limit: int | None
) -> Run:
    from memoryquest.testing.fake_openai.chat import billed_prompt_tokens

    server.reset()
    server.batch_enqueued_tokens_max = limit
    shutil.rmtree(output, ignore_errors=True)
    started = time.perf_counter()
    asyncio.run(generate(users, overrides(server.url, output, client)))
    seconds = time.perf_counter() - started
    created = [r for r in server.requests if r.method == "POST" and r.path == "/v1/batches"]
    files: dict[tuple[str, str], set[str]] = collections.defaultdict(set)
    round_tokens: collections.Counter[tuple[str, str]] = collections.Counter()
    largest_line = largest_file = 0
    for request in created:
        file_id = request.body["input_file_id"]
        match = FILE_NAME.fullmatch(server.files[file_id].filename)
        assert match is not None, server.files[file_id].filename
        key = (match["set"], match["round"])
        tokens = [billed_prompt_tokens(line["body"]) for line in server.file_lines(file_id)]
        if file_id not in files[key]:
            round_tokens[key] += sum(tokens)
        files[key].add(file_id)
        largest_line = max(largest_line, *tokens)
        largest_file = max(largest_file, sum(tokens))
    refused = sum(
        1
        for batch in server.batches.values()
        if batch["errors"]
        and any(e["code"] == "token_limit_exceeded" for e in batch["errors"]["data"])
    )
    online = [r for r in server.requests if r.path == "/v1/chat/completions"]
    return Run(
        name,
        limit,
        [len(ids) for ids in files.values()],
        len(created),
        refused,
        len(online),
        max(round_tokens.values(), default=0),
        largest_line,
        largest_file,
        seconds,
    )


def dataset_files(output: Path) -> dict[str, bytes]:
    """Every table the run saved (``GeneratedDataset.save``), by file name."""
    return {path.name: path.read_bytes() for path in sorted((output / "dataset").rglob("*.jsonl"))}


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--personas", type=int, default=3)
    parser.add_argument("--limit", type=int, help="enqueued prompt tokens (default: see above)")
    args = parser.parse_args()
    users = [f"user{i}" for i in range(args.personas)]

    with tempfile.TemporaryDirectory(prefix="bench-batch-split-") as temp:
        work = Path(temp)
        os.environ.setdefault("PREFECT_HOME", str(work / "prefect-home"))
        os.environ.setdefault("PREFECT_LOGGING_LEVEL", "WARNING")
        from memoryquest.testing import FakeOpenAIServer

        runs: list[Run] = []
        datasets: dict[str, dict[str, bytes]] = {}
        with FakeOpenAIServer() as server:
            plain = measure("unlimited", server, work / "unlimited", users, None, None)
            runs.append(plain)
            datasets[plain.name] = dataset_files(work / "unlimited")
            limit = args.limit or max(plain.largest_round // 4, plain.largest_line)
            for name, client in (("split", limit), ("refused", None)):
                runs.append(measure(name, server, work / name, users, client, limit))
                datasets[name] = dataset_files(work / name)

    reference = datasets["unlimited"]
    print(f"{args.personas} personas, in-process pipeline, fake Batch API, gpt-4o-mini")
    print(f"dataset files compared: {', '.join(reference) or 'none found'}")
    print(
        "| run | server limit | client limit | rounds | files per round (max / mean) | batches "
        "created | refused | online chat | largest round tokens | largest file tokens | "
        "same dataset | wall s |"
    )
    print("|---|---:|---:|---:|---|---:|---:|---:|---:|---:|---|---:|")
    for run in runs:
        per_round = run.files_per_round
        client = "-" if run.name != "split" else f"{run.limit:,}"
        print(
            f"| {run.name} | {f'{run.limit:,}' if run.limit else '-'} | {client} | {len(per_round)} | "
            f"{max(per_round)} / {sum(per_round) / len(per_round):.2f} | {run.creates} | "
            f"{run.refused} | {run.online} | {run.largest_round:,} | {run.largest_file:,} | "
            f"{datasets[run.name] == reference} | {run.seconds:.1f} |"
        )
    for run in runs:
        histogram = collections.Counter(run.files_per_round)
        print(
            f"{run.name}: rounds by files per round: "
            + ", ".join(f"{files} file(s): {n}" for files, n in sorted(histogram.items()))
        )
    different = [name for name, files in datasets.items() if files != reference]
    print("same dataset in every run" if not different else f"DIFFERENT datasets: {different}")


if __name__ == "__main__":
    main()
