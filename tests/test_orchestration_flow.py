"""The Prefect generation flow end to end on the offline default, and resume after a kill."""

from __future__ import annotations

import inspect
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from prefect.serializers import Serializer
from prefect.testing.utilities import prefect_test_harness

from memoryquest.dataset import GeneratedDataset
from memoryquest.invariants import check_invariants
from memoryquest.orchestration.flow import generate_benchmark
from memoryquest.settings import load_settings

try:
    from tests.generation_fixture import load_users
except ModuleNotFoundError:  # tests/ is not a package: pytest puts it on sys.path
    from generation_fixture import load_users

SMALL = {
    "generation": {"queries_per_user": 2, "candidates_per_user": 8},
    "pgr": {"methods": ["query_only", "pgr_tot"], "judges": ["provenance"]},
}


@pytest.fixture(scope="module")
def harness():
    with prefect_test_harness(server_startup_timeout=120):
        yield


@pytest.fixture(scope="module")
def small_run(harness, tmp_path_factory) -> Path:
    output = tmp_path_factory.mktemp("flow") / "run"
    import asyncio

    asyncio.run(
        generate_benchmark(
            output=str(output), users=["user0", "user1"], overrides=SMALL, publish=False
        )
    )
    return output


def test_flow_writes_a_dataset_that_validates(small_run: Path) -> None:
    dataset = GeneratedDataset.load(small_run / "dataset")
    assert {p.source_user_id for p in dataset.personas} == {"user0", "user1"}
    assert dataset.queries and dataset.sessions and dataset.facts and dataset.validation
    assert dataset.manifest is not None and dataset.manifest.simulated
    settings = load_settings(overrides=SMALL)
    violations = check_invariants(dataset, settings)
    assert violations == [], violations[:5]


def test_flow_rerun_is_served_from_task_cache(small_run: Path, harness) -> None:
    """Re-running the same flow recomputes nothing: every stage comes from Prefect's cache."""
    import asyncio

    before = GeneratedDataset.load(small_run / "dataset")
    asyncio.run(
        generate_benchmark(
            output=str(small_run), users=["user0", "user1"], overrides=SMALL, publish=False
        )
    )
    after = GeneratedDataset.load(small_run / "dataset")
    report = json.loads((small_run / "run_report.json").read_text())
    assert report["state_counts"] == {"Cached": 2 * 4}
    # Each task's wall time is reported, for the one it ran and the one it served.
    assert {user: sorted(seconds) for user, seconds in report["stage_seconds"].items()} == {
        user: sorted(states) for user, states in report["stage_states"].items()
    }
    assert all(0 < s < 60 for seconds in report["stage_seconds"].values() for s in seconds.values())
    assert after.manifest is not None and before.manifest is not None
    assert sum(u.requests for u in after.manifest.usage_this_attempt) == 0  # nothing asked again
    # The manifest still reports what the run spent: the first attempt's usage, reused.
    assert after.manifest.attempts == before.manifest.attempts + 1
    assert [(u.stage, u.requests) for u in after.manifest.usage] == [
        (u.stage, u.requests) for u in before.manifest.usage
    ]
    assert [u.model_dump(exclude={"seconds"}) for u in after.manifest.reused_from_cache] == [
        u.model_dump(exclude={"seconds"}) for u in before.manifest.usage
    ]
    assert [q.query_id for q in after.queries] == [q.query_id for q in before.queries]
    assert [f.fid for f in after.facts] == [f.fid for f in before.facts]


def _count_results(output: Path) -> int:
    """Stage results a re-run can load: the cache record and the result it names are complete
    (a kill can land between writing one and the other, or inside either)."""
    keys = output / ".prefect" / "keys"
    if not keys.is_dir():
        return 0
    complete = 0
    for path in keys.iterdir():
        if path.name.endswith(".lock"):
            continue
        try:
            record = json.loads(path.read_text(encoding="utf-8"))
            blob = Path(record["storage_key"]).read_bytes()
            Serializer(**record["serializer"]).loads(blob)
        except Exception:  # half-written: the re-run computes this stage again
            continue
        complete += 1
    return complete


def test_killed_run_resumes_without_recomputing_finished_stages(harness, tmp_path: Path) -> None:
    """SIGKILL the flow once some stages finished; the re-run replays them from Prefect's cache."""
    output = tmp_path / "run"
    overrides = json.dumps({**SMALL, "cache": {"enabled": False}})
    script = (
        "import asyncio, json, sys\n"
        "from memoryquest.orchestration.flow import generate_benchmark\n"
        "asyncio.run(generate_benchmark(output=sys.argv[1], users=['user0','user1','user2'],"
        " overrides=json.loads(sys.argv[2]), publish=False))\n"
    )
    env = {
        **os.environ,
        "PREFECT_HOME": str(tmp_path / "prefect-home"),
        "PREFECT_LOGGING_LEVEL": "WARNING",
        "PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS": "180",
    }
    env.pop("PREFECT_API_URL", None)
    proc = subprocess.Popen(
        [sys.executable, "-c", script, str(output), overrides], env=env, start_new_session=True
    )
    deadline = time.monotonic() + 240
    try:
        while _count_results(output) < 2 and time.monotonic() < deadline and proc.poll() is None:
            time.sleep(0.2)
        assert proc.poll() is None, (
            "the run finished before it could be interrupted; make it longer"
        )
        assert _count_results(output) >= 2, "no stage finished within the deadline"
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
    finished_before_kill = _count_results(output)
    assert not (output / "dataset").exists()

    # The resumed run uses this module's test API (nesting a second harness hangs on exit).
    import asyncio

    asyncio.run(
        generate_benchmark(
            output=str(output),
            users=["user0", "user1", "user2"],
            overrides=json.loads(overrides),
            publish=False,
        )
    )
    resumed = GeneratedDataset.load(output / "dataset")
    assert len(resumed.personas) == 3 and resumed.validation
    # 3 personas x 4 stage groups. Those persisted before the kill come back Cached, the rest run.
    counts = json.loads((output / "run_report.json").read_text())["state_counts"]
    assert counts.get("Cached", 0) == finished_before_kill
    assert counts.get("Completed", 0) == 3 * 4 - finished_before_kill


# --------------------------------------------------------------------------- cache key


def test_the_cache_key_digest_covers_the_state_and_every_setting() -> None:
    """The state and settings enter the key through their digest, so any change must move it."""
    from memoryquest.orchestration.flow import inputs_digest
    from memoryquest.stages.state import PersonaState

    persona, other_persona = load_users("user0", "user1")
    settings = load_settings(overrides=SMALL)
    state = PersonaState(persona=persona)
    digest = inputs_digest(state, settings)

    assert inputs_digest(PersonaState(persona=persona), settings) == digest
    assert inputs_digest(PersonaState(persona=other_persona), settings) != digest
    renamed = persona.model_copy(update={"source_user_id": "user0-edited"})
    assert inputs_digest(PersonaState(persona=renamed), settings) != digest
    other = load_settings(overrides={**SMALL, "generation": {"queries_per_user": 3}})
    assert inputs_digest(state, other) != digest


def test_the_large_inputs_stay_out_of_prefects_own_hashing() -> None:
    """Prefect hashes only the small inputs; the state and settings are in ``inputs`` (their digest)."""
    from prefect.cache_policies import CompoundCachePolicy, Inputs

    from memoryquest.orchestration.flow import STAGE_CACHE, stage_task

    assert isinstance(STAGE_CACHE, CompoundCachePolicy)
    inputs = [p for p in STAGE_CACHE.policies if isinstance(p, Inputs)]
    assert len(inputs) == 1 and set(inputs[0].exclude) == {"client", "state", "settings"}
    assert {"stage", "fingerprint", "inputs"} <= set(inspect.signature(stage_task.fn).parameters)


# --------------------------------------------------------------------------- task retries


def test_prefect_retries_infrastructure_failures_but_never_llm_or_user_errors(harness) -> None:
    """Real Prefect task runs with the stage tasks' retry options: only an OSError comes back."""
    import asyncio

    from prefect import flow, task

    from memoryquest.llm.errors import (
        CircuitOpenError,
        LLMAuthenticationError,
        LLMOutputError,
        LLMTransportError,
    )
    from memoryquest.orchestration.flow import STAGE_TASKS
    from memoryquest.orchestration.task_retries import retry_on_infrastructure_failure

    stage_task = STAGE_TASKS["queries"]
    attempts: list[str] = []

    def fails_once_with(error: Exception):  # type: ignore[no-untyped-def]
        @task(
            retries=stage_task.retries,
            retry_delay_seconds=0,
            retry_condition_fn=stage_task.retry_condition_fn,
            persist_result=False,
        )
        async def flaky() -> str:
            attempts.append(type(error).__name__)
            if attempts.count(type(error).__name__) == 1:
                raise error
            return "done"

        return flaky

    @flow
    async def attempt(error: Exception) -> str:
        state = await fails_once_with(error)(return_state=True)
        return str(state.type.value)

    assert stage_task.retry_condition_fn is retry_on_infrastructure_failure
    for error in (
        LLMAuthenticationError("HTTP 401: invalid key"),
        LLMTransportError("gave up after 7 attempts", 7, ConnectionError("reset")),
        LLMOutputError("the answer did not fit the schema"),
        CircuitOpenError("10 consecutive failures"),
        ValueError("a bad setting"),
    ):
        attempts.clear()
        assert asyncio.run(attempt(error)) == "FAILED", error
        assert len(attempts) == 1, f"{error!r} was retried"
    for error in (
        ConnectionResetError("the Prefect API went away"),
        OSError(28, "No space left on device"),
    ):
        attempts.clear()
        assert asyncio.run(attempt(error)) == "COMPLETED", error
        assert len(attempts) == 2, f"{error!r} was not retried"


def test_the_dask_persona_task_retries_infrastructure_failures_only() -> None:
    from memoryquest.orchestration.dask_personas import generate_persona_on_worker
    from memoryquest.orchestration.task_retries import retry_on_infrastructure_failure

    assert generate_persona_on_worker.retries == 2
    assert generate_persona_on_worker.retry_condition_fn is retry_on_infrastructure_failure
