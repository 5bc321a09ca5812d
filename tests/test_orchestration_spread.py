"""Generation beyond one machine: shards over two Prefect workers, and a Dask cluster.

Both are the generation flow with its ``spread`` parameter set. Both
end-to-end tests use a real Prefect server on 127.0.0.1 (the module's
``prefect_api`` fixture). The sharded run goes through ``prefect.yaml``:
a process work pool, ``prefect deploy``, two workers, and the ``sharded``
deployment, given its spread as JSON on the command line, launching one
child run of ``memoryquest-generate/offline`` per shard. The Dask run uses a
``distributed.LocalCluster`` with two worker processes and must produce
exactly what the in-process pipeline produces.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Any

import pytest
from prefect.client.schemas.objects import FlowRun
from prefect.states import Completed, Crashed, Failed

from memoryquest.dataset import GeneratedDataset
from memoryquest.intake import PersonaSelection, load_personas
from memoryquest.llm.factory import build_client
from memoryquest.orchestration.flow import generate_benchmark
from memoryquest.orchestration.shards import ShardFailedError, check_shard_runs, plan_shards
from memoryquest.orchestration.spread import DaskSpread, ShardSpread, merge_parts, sum_usage
from memoryquest.pipeline import generate_dataset
from memoryquest.publish import load_published
from memoryquest.settings import load_settings

REPO = Path(__file__).resolve().parents[1]
PREFECT = str(Path(sys.executable).with_name("prefect"))
USERS = ["user0", "user1"]
SMALL: dict[str, Any] = {
    "generation": {"queries_per_user": 2, "candidates_per_user": 8},
    "pgr": {"methods": ["query_only", "pgr_tot"], "judges": ["provenance"]},
    # A run that publishes withdraws queries the tell filter flags; the in-process reference does
    # not publish. These tests are about running and merging, not about the dataset's validity.
    "audit": {"filter_tells": False},
}
TABLE_NAMES = ("personas", "queries", "timelines", "sessions", "facts", "validation", "rejected")


def rows(dataset: GeneratedDataset, table: str) -> list[dict[str, Any]]:
    return [row.model_dump(mode="json") for row in getattr(dataset, table)]


def stop_process_group(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()


def clean_env(base: dict[str, str]) -> dict[str, str]:
    """No endpoint settings from the caller's shell reach the runs."""
    return {
        k: v
        for k, v in base.items()
        if not k.startswith(("MEMORYQUEST_", "OPENAI_", "AZURE_OPENAI_"))
    }


# --------------------------------------------------------------------------- the spread parameter


def test_the_flow_reads_its_spread_from_json_as_a_deployment_gives_it() -> None:
    from prefect.exceptions import ParameterTypeError

    given = generate_benchmark.validate_parameters(
        {"count": 3, "spread": {"kind": "shards", "shards": 4, "poll_seconds": 1}}
    )
    assert given["spread"] == ShardSpread(shards=4, poll_seconds=1)
    assert given["spread"].deployment == "memoryquest-generate/offline"
    given = generate_benchmark.validate_parameters(
        {"spread": {"kind": "dask", "scheduler_address": "tcp://host:8786"}}
    )
    assert given["spread"] == DaskSpread(scheduler_address="tcp://host:8786")
    assert generate_benchmark.validate_parameters({"count": 3})["spread"] is None
    for wrong in (
        {"kind": "mpi"},
        {"shards": 2},  # no kind
        {"kind": "shards", "shard": 2},  # misspelt
        {"kind": "shards", "shards": 0},
        {"kind": "dask", "shards": 2},  # another kind's field
    ):
        with pytest.raises(ParameterTypeError):
            generate_benchmark.validate_parameters({"spread": wrong})


def test_a_spread_run_refuses_settings_it_could_not_hand_on(tmp_path: Path) -> None:
    settings = load_settings(overrides={"output_dir": str(tmp_path)})
    with pytest.raises(ValueError, match="a spread run takes output/persona_source"):
        asyncio.run(generate_benchmark.fn(settings=settings, spread=DaskSpread()))
    assert not any(tmp_path.iterdir())


# --------------------------------------------------------------------------- planning and checking


def test_shards_are_contiguous_and_never_empty(tmp_path: Path) -> None:
    plan = plan_shards(["u0", "u1", "u2", "u3", "u4"], 2, tmp_path)
    assert [s.users for s in plan] == [["u0", "u1", "u2"], ["u3", "u4"]]
    assert [s.output for s in plan] == [tmp_path / "0", tmp_path / "1"]
    assert [s.users for s in plan_shards(["u0", "u1"], 5, tmp_path)] == [["u0"], ["u1"]]
    with pytest.raises(ValueError, match="shards must be at least 1, got 0"):
        plan_shards(["u0"], 0, tmp_path)


def test_a_failed_child_is_named_with_its_users_and_reason(tmp_path: Path) -> None:
    plan = plan_shards(["user0", "user1", "user2"], 3, tmp_path)
    runs = [
        FlowRun(name="p-shard-0", flow_id=uuid.uuid4(), state=Completed()),
        FlowRun(
            name="p-shard-1",
            flow_id=uuid.uuid4(),
            state=Failed(message="Flow run encountered an exception: boom"),
        ),
        FlowRun(
            name="p-shard-2", flow_id=uuid.uuid4(), state=Crashed(message="worker process exited")
        ),
    ]
    with pytest.raises(ShardFailedError) as caught:
        check_shard_runs(plan, runs)
    text = str(caught.value)
    assert text.startswith("2 of 3 shards failed")
    assert (
        f"shard 1 (users user1): flow run 'p-shard-1' ({runs[1].id}) ended Failed: Flow run encountered an exception: boom"
        in text
    )
    assert (
        "shard 2 (users user2): flow run 'p-shard-2'" in text
        and "ended Crashed: worker process exited" in text
    )
    assert "shard 0" not in text
    check_shard_runs(plan[:1], runs[:1])  # all completed: no error


# --------------------------------------------------------------------------- shards over two workers


def _run(args: list[str], env: dict[str, str], timeout: float = 180) -> str:
    done = subprocess.run(args, env=env, cwd=REPO, capture_output=True, text=True, timeout=timeout)
    assert done.returncode == 0, f"{' '.join(args)} failed:\n{done.stdout}\n{done.stderr}"
    return done.stdout


async def _flow_runs() -> list[FlowRun]:
    from prefect.client.orchestration import get_client

    async with get_client() as client:
        return list(await client.read_flow_runs())


async def _launch_times(flow_run_id: Any) -> list[Any]:
    """When the parent run logged launching each shard (the client's clock, not the server's)."""
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.filters import LogFilter, LogFilterFlowRunId

    async with get_client() as client:
        logs = await client.read_logs(
            log_filter=LogFilter(flow_run_id=LogFilterFlowRunId(any_=[flow_run_id]))
        )
    return sorted(log.timestamp for log in logs if log.message.startswith("launching shard"))


@pytest.mark.slow
def test_sharded_run_on_two_workers_merges_both_shards(
    prefect_api: dict[str, str],
    prefect_in_process: dict[str, str],
    working_tree_repository: dict[str, str],
    tmp_path: Path,
) -> None:
    env = {
        **clean_env(prefect_api),
        **working_tree_repository,  # the runs clone the code under test
        "PREFECT_WORKER_QUERY_SECONDS": "1",
        "PREFECT_LOGGING_LEVEL": "INFO",
    }
    _run([PREFECT, "work-pool", "create", "memoryquest", "--type", "process"], env)
    deployed = _run(
        [PREFECT, "--no-prompt", "deploy", "--name", "offline", "--name", "sharded"], env
    )
    assert "memoryquest-generate/sharded" in deployed, deployed
    workers, logs = [], []
    for name in ("worker-a", "worker-b"):
        log = open(tmp_path / f"{name}.log", "wb")  # noqa: SIM115 - closed below
        logs.append(log)
        workers.append(
            subprocess.Popen(
                # Two slots each: the parent run holds one while its children run.
                [
                    PREFECT,
                    "worker",
                    "start",
                    "--pool",
                    "memoryquest",
                    "--name",
                    name,
                    "--limit",
                    "2",
                ],
                env=env,
                cwd=REPO,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        )
    output = tmp_path / "sharded"
    params = {
        "output": str(output),
        "users": USERS,
        "count": None,
        "overrides": SMALL,
        "allow_failed_audit": True,  # about sharding and merging, not the dataset's validity
    }
    # The spread as a nested JSON parameter, in place of the deployment's own (which polls every 5 s).
    spread = {"kind": "shards", "shards": 2, "poll_seconds": 1}
    started = time.perf_counter()
    try:
        done = subprocess.run(
            [
                PREFECT,
                "deployment",
                "run",
                "memoryquest-generate/sharded",
                "--params",
                json.dumps(params),
                "--param",
                f"spread={json.dumps(spread)}",
                "--watch",
            ],
            env=env,
            cwd=REPO,
            capture_output=True,
            text=True,
            timeout=900,
        )
    finally:
        for worker in workers:  # workers first, then (in the fixture) the server
            stop_process_group(worker)
        for log in logs:
            log.close()
    print(f"sharded run of {len(USERS)} users on 2 workers: {time.perf_counter() - started:.1f} s")
    worker_logs = "".join(
        (tmp_path / f"{n}.log").read_text(errors="replace") for n in ("worker-a", "worker-b")
    )
    assert done.returncode == 0 and "Completed" in done.stdout, (
        done.stdout + done.stderr + worker_logs
    )

    runs = asyncio.run(_flow_runs())
    parent = next(r for r in runs if r.parameters.get("spread"))
    assert parent.parameters["spread"] == spread
    children = sorted(
        (r for r in runs if r.name.startswith(f"{parent.name}-shard-")), key=lambda r: r.name
    )
    assert [c.name for c in children] == [f"{parent.name}-shard-0", f"{parent.name}-shard-1"]
    for index, child in enumerate(children):
        assert child.state is not None and child.state.is_completed(), child.state
        assert child.parameters["users"] == [USERS[index]]
        assert child.parameters["output"] == str(output / "shards" / str(index))
        assert child.parameters["publish"] is False
        assert child.parameters["spread"] is None  # in the child's own process
        assert child.parent_task_run_id is not None  # linked to the parent as a sub-flow
        assert str(child.id) in worker_logs
    first, second = children
    assert first.end_time and second.end_time
    # Fan-out: the parent launched both shards before either finished. Its own log times
    # say so; on a starved machine the server may record the second run late, and whether
    # two busy workers then overlap in time is the machine's doing, so neither is asserted.
    launched = asyncio.run(_launch_times(parent.id))
    assert len(launched) == 2, launched
    assert launched[-1] < min(first.end_time, second.end_time), (
        "the parent waited for one shard before launching the other"
    )

    shards = [GeneratedDataset.load(output / "shards" / str(i) / "dataset") for i in range(2)]
    assert [[p.source_user_id for p in s.personas] for s in shards] == [["user0"], ["user1"]]
    merged = GeneratedDataset.load(output / "dataset")
    assert [p.source_user_id for p in merged.personas] == USERS
    for table in TABLE_NAMES:
        assert rows(merged, table) == rows(shards[0], table) + rows(shards[1], table), table
    assert merged.queries and merged.sessions and merged.facts and merged.validation
    assert (
        merged.manifest is not None
        and shards[0].manifest is not None
        and shards[1].manifest is not None
    )
    assert merged.manifest.usage == sum_usage(
        [*shards[0].manifest.usage, *shards[1].manifest.usage]
    )
    assert sum(u.requests for u in merged.manifest.usage) == sum(
        u.requests for s in shards if s.manifest for u in s.manifest.usage
    )
    assert merged.manifest.persona_ids == [p.persona_id for p in merged.personas]
    published = load_published(output / "published")
    assert sorted(p.source_user_id for p in published.personas) == USERS
    report = assert_reported_as_one_run(output, [output / "shards" / str(i) for i in range(2)])
    assert set(report["stage_states"]) == set(USERS)

    # Parts from workers running other code are refused, naming the shard.
    assert shards[1].manifest is not None
    shards[1].manifest = shards[1].manifest.model_copy(update={"package_version": "0.0.0-other"})
    with pytest.raises(
        ValueError, match="shard 1 was generated with a different package_version than shard 0"
    ):
        merge_parts(
            shards, ["shard 0", "shard 1"], load_settings(overrides=SMALL), time.perf_counter()
        )


# --------------------------------------------------------------------------- Dask


@pytest.mark.slow
def test_dask_run_equals_the_in_process_pipeline(
    prefect_in_process: dict[str, str], tmp_path: Path
) -> None:
    from distributed import LocalCluster

    output = tmp_path / "dask"
    started = time.perf_counter()
    with LocalCluster(
        n_workers=2, threads_per_worker=1, host="127.0.0.1", dashboard_address=None, processes=True
    ) as cluster:
        assert len(cluster.workers) == 2
        asyncio.run(
            generate_benchmark(
                output=str(output),
                spread=DaskSpread(scheduler_address=cluster.scheduler_address),
                users=USERS,
                overrides=SMALL,
                publish=True,
                allow_failed_audit=True,  # about running on Dask, not the dataset's validity
            )
        )
    dask_seconds = time.perf_counter() - started
    dask_run = GeneratedDataset.load(output / "dataset")

    settings = load_settings(overrides={**SMALL, "output_dir": str(tmp_path / "in-process")})
    personas = load_personas(settings.persona_source, PersonaSelection(user_ids=USERS)).personas
    started = time.perf_counter()
    reference = asyncio.run(generate_dataset(personas, build_client(settings), settings))
    print(
        f"2 users: Dask (2 worker processes) {dask_seconds:.1f} s, in process {time.perf_counter() - started:.1f} s"
    )

    assert [p.source_user_id for p in dask_run.personas] == USERS
    for table in TABLE_NAMES:
        assert rows(dask_run, table) == rows(reference, table), table
    assert dask_run.queries and dask_run.sessions and dask_run.facts and dask_run.validation
    assert dask_run.manifest is not None and reference.manifest is not None
    assert {u.stage: u.requests for u in dask_run.manifest.usage} == {
        u.stage: u.requests for u in reference.manifest.usage
    }
    assert {u.stage: u.input_tokens for u in dask_run.manifest.usage} == {
        u.stage: u.input_tokens for u in reference.manifest.usage
    }
    assert dask_run.manifest.simulated and dask_run.manifest.settings["output_dir"] == str(output)
    assert sorted(p.source_user_id for p in load_published(output / "published").personas) == USERS
    # Each persona journalled its usage and progress on its worker; the run reports their sum.
    assert_reported_as_one_run(output, [output / "parts" / user for user in USERS])


def test_merged_shards_sum_the_blind_reviewers_tallies(tmp_path: Path) -> None:
    """Each shard's manifest keeps what its reviewer read and flagged; the merge adds them up."""
    from memoryquest.contracts import ReviewTally

    try:
        from tests.publish_fixture import build_publish_fixture
    except ModuleNotFoundError:
        from publish_fixture import build_publish_fixture

    whole = build_publish_fixture(users=2, queries_per_user=1)
    assert whole.manifest is not None
    tallies = [
        ReviewTally(sessions_reviewed=30, sessions_flagged=4),
        ReviewTally(sessions_reviewed=20, sessions_flagged=1),
    ]
    parts = []
    for index, (persona, tally) in enumerate(zip(whole.personas, tallies, strict=True)):
        part = GeneratedDataset(personas=[persona])
        for table in ("queries", "timelines", "sessions", "facts", "validation", "rejected"):
            setattr(
                part,
                table,
                [r for r in getattr(whole, table) if r.persona_id == persona.persona_id],
            )
        part.manifest = whole.manifest.model_copy(
            update={"persona_ids": [persona.persona_id], "review": tally}
        )
        parts.append(GeneratedDataset.load(part.save(tmp_path / f"shard{index}")))
    settings = load_settings(
        overrides={**SMALL, "generation": {**SMALL["generation"], "review": True}}
    )
    merged = merge_parts(parts, ["shard 0", "shard 1"], settings, time.perf_counter())
    assert merged.manifest is not None and merged.manifest.review is not None
    review = merged.manifest.review
    assert (review.sessions_reviewed, review.sessions_flagged) == (50, 5)
    assert review.reviewer_model == merged.manifest.chat_model  # offline: the simulator


# --------------------------------------------------------------------------- reported as one run


def card_usage(published: Path) -> dict[str, dict[str, str]]:
    """The dataset card's usage table: stage -> column -> cell."""
    lines = (published / "README.md").read_text(encoding="utf-8").splitlines()
    start = lines.index("### Usage") + 2
    header = [cell.strip() for cell in lines[start].strip("|").split("|")]
    table: dict[str, dict[str, str]] = {}
    for line in lines[start + 2 :]:
        if not line.startswith("|"):
            break
        cells = [cell.strip() for cell in line.strip("|").split("|")]
        table[cells[0]] = dict(zip(header, cells, strict=True))
    return table


def assert_reported_as_one_run(output: Path, children: list[Path]) -> dict[str, Any]:
    """``output/run_report.json`` and the card count what the children's usage journals hold,
    summed, and the combined progress counts every child's personas as done."""
    from memoryquest.llm.accounting import USAGE_FILE, UsageJournal, merge_usage
    from memoryquest.progress import ProgressSnapshot

    journals = [UsageJournal.read(child / USAGE_FILE) for child in children]
    assert all(j.rows and j.attempts >= 1 for j in journals), [str(c) for c in children]
    expected = {row.stage: row for row in merge_usage(*(j.rows for j in journals))}
    report = json.loads((output / "run_report.json").read_text())
    usage = {row["stage"]: row for row in report["usage"]}
    assert usage.keys() == expected.keys() and {"queries", "memory"} <= usage.keys()
    counters = ("requests", "cache_hits", "input_tokens", "output_tokens", "embedding_requests")
    for stage, row in expected.items():
        for name in counters:
            assert usage[stage][name] == getattr(row, name), (stage, name)
        assert usage[stage]["cost_usd"] == pytest.approx(row.cost_usd, abs=1e-6)
    assert sum(row.requests for row in expected.values()) > 0
    assert [c["output"] for c in report["children"]] == [str(c) for c in children]
    for entry, journal in zip(report["children"], journals, strict=True):
        assert entry["usage"] == [row.model_dump(mode="json") for row in journal.rows]

    card = card_usage(output / "published")
    assert card.keys() == expected.keys()
    for stage, row in expected.items():
        assert int(card[stage]["requests"]) == row.requests
        assert int(card[stage]["input tokens"]) == row.input_tokens
        assert int(card[stage]["output tokens"]) == row.output_tokens
        assert int(card[stage]["embedding requests"]) == row.embedding_requests

    final = ProgressSnapshot.model_validate_json((output / "progress.json").read_text())
    summary = report["summary"]
    personas = sum(len(entry["users"]) for entry in report["children"])
    assert final.personas_done == final.personas_total == summary["personas_done"] == personas
    assert final.fraction == 1.0 and final.eta_seconds == 0.0
    assert summary["requests"] == final.requests > 0
    assert summary["input_tokens"] == final.input_tokens
    return report


@pytest.mark.slow
def test_merged_shards_are_reported_as_one_run(
    prefect_in_process: dict[str, str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Two one-persona shards, run as a worker would run them, then merged as the parent does:
    one run report and one card whose usage is the sum of the shards' usage journals."""
    from prefect import flow

    from memoryquest.cli.main import main
    from memoryquest.orchestration.lifecycle import open_run
    from memoryquest.orchestration.shards import SHARDED_RUN, merge_shards
    from memoryquest.orchestration.spread import SpreadRun, watching
    from memoryquest.progress.files import read_snapshot

    output = tmp_path / "sharded"
    plan = plan_shards(USERS, 2, output / "shards")
    for shard in plan:
        asyncio.run(
            generate_benchmark(
                output=str(shard.output),
                users=shard.users,
                overrides=SMALL,
                publish=False,
                progress="off",
            )
        )
    request = SpreadRun(
        output=str(output),
        persona_source=None,
        config_file=None,
        overrides=SMALL,
        selection=PersonaSelection(user_ids=USERS),
        publish=True,
        allow_failed_audit=True,  # about merging and reporting, not the dataset's validity
    )

    @flow
    async def parent() -> None:
        with open_run(request.settings(), request.selection, SHARDED_RUN) as run:
            async with watching(run, plan, every_seconds=60):
                pass  # the children are done: the final combined line is written on leaving
            await merge_shards(run, plan, request)

    asyncio.run(parent())
    report = assert_reported_as_one_run(output, [shard.output for shard in plan])
    assert report["summary"]["personas_done"] == 2
    assert set(report["stage_states"]) == set(USERS)
    children_reports = [json.loads((s.output / "run_report.json").read_text()) for s in plan]
    assert report["summary"]["requests"] == sum(r["summary"]["requests"] for r in children_reports)

    # One line over both shards, from their files, as `memoryquest progress` prints it.
    capsys.readouterr()
    assert main(["progress", *(str(shard.output) for shard in plan)]) == 0
    both = capsys.readouterr().out
    snapshots = [read_snapshot(shard.output) for shard in plan]
    requests = sum(s.requests + s.embedding_requests for s in snapshots if s is not None)
    assert "personas 2/2" in both and f"requests {requests:,} " in both, both
    assert main(["progress", str(output)]) == 0
    assert f"requests {requests:,} " in capsys.readouterr().out


def test_combined_progress_counts_a_child_not_started_as_work_to_do(tmp_path: Path) -> None:
    """While one shard has written nothing, the combined line still counts its personas: half the
    work is done, and the ETA is the parent's elapsed time again."""
    from memoryquest.orchestration.lifecycle import Run
    from memoryquest.orchestration.spread import spread_progress
    from memoryquest.pipeline import enabled_groups
    from memoryquest.progress import ProgressSnapshot, StageProgress
    from memoryquest.progress.files import write_snapshot

    settings = load_settings(overrides={**SMALL, "output_dir": str(tmp_path)})
    stages = [group.name for group in enabled_groups(settings)]
    plan = plan_shards(USERS, 2, tmp_path / "shards")
    plan[0].output.mkdir(parents=True)
    write_snapshot(
        plan[0].output,
        ProgressSnapshot(
            personas_total=1,
            personas_done=1,
            stages=[StageProgress(stage=s, done=1, total=1) for s in stages],
            requests=40,
            input_tokens=9_000,
            cost_usd=0.25,
            rejected={"similarity": 2},
        ),
    )
    run = Run(settings, tmp_path, [], started=time.perf_counter() - 100.0)
    combined = spread_progress(run, plan)
    assert (combined.personas_done, combined.personas_total) == (1, 2)
    assert (combined.steps_done, combined.steps_total) == (len(stages), 2 * len(stages))
    assert (combined.requests, combined.input_tokens, combined.rejected) == (
        40,
        9_000,
        {"similarity": 2},
    )
    assert combined.cost_usd == pytest.approx(0.25)
    assert combined.eta_seconds == pytest.approx(100.0, rel=0.05)
