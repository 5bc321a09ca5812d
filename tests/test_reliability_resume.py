"""SIGKILL the generation at three points, resume, and get the uninterrupted result without paying twice.

The generation runs in a subprocess (``generate_benchmark``) against a loopback
OpenAI-compatible server that answers from the simulator and logs every request.
It is killed

1. once the first stage result (queries) is persisted under ``<output>/.prefect/keys``,
2. in the middle of the conversations stage (dialogues being answered, stage not persisted),
3. in the middle of the memory stage (extraction being answered, stage not persisted),

and resumed after each kill; the last run completes. Then

* the dataset equals the one an uninterrupted run produces (the offline
  pipeline, which the loopback server reproduces answer for answer);
* no request the server answered before a kill is sent again afterwards —
  the client's per-request cache under ``<output>/.cache`` guarantees it;
* the API key (from the environment, as in production) is nowhere in the
  output, the logs, or what the Prefect server stored.

An answer still travelling back to the client when the process dies cannot be
saved by anyone; to make "answered" mean "reached the client", the server holds
new answers back just before each kill until every answer it gave is in the
client's cache. Nothing else is staged.
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
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from memoryquest.dataset import GeneratedDataset
from memoryquest.intake import PersonaSelection, load_personas
from memoryquest.llm.factory import build_client
from memoryquest.pipeline import generate_dataset
from memoryquest.publish import load_published
from memoryquest.settings import load_settings
from memoryquest.testing import FakeOpenAIServer, LoggedRequest

USERS = ["user0"]
SMALL: dict[str, Any] = {
    "generation": {"queries_per_user": 2, "candidates_per_user": 8},
    "pgr": {"methods": ["query_only", "pgr_tot"], "judges": ["provenance"]},
    # A run that publishes withdraws queries the tell filter flags; the in-process reference does
    # not publish. These tests are about running and merging, not about the dataset's validity.
    "audit": {"filter_tells": False},
}
TABLE_NAMES = ("personas", "queries", "timelines", "sessions", "facts", "validation", "rejected")
API_KEY = f"sk-test-{uuid.uuid4().hex}"
LATENCY = 0.2  # seconds per answer: with 4 requests in flight, a stage spans several round trips
HOLD = 20.0  # answer latency while a kill is being prepared
SCRIPT = (
    "import asyncio, json, sys\n"
    "from memoryquest.orchestration.flow import generate_benchmark\n"
    "asyncio.run(generate_benchmark(output=sys.argv[1], users=json.loads(sys.argv[2]),"
    " overrides=json.loads(sys.argv[3]), publish=True, allow_failed_audit=True))\n"
)


def http_overrides(base_url: str) -> dict[str, Any]:
    return {
        **SMALL,
        "endpoint": {
            "backend": "openai",
            "base_url": base_url,
            "simulator_hints": True,  # the fake server answers from the simulator
            "embedder": "local",
            "timeout_seconds": 60,
            "max_retries": 6,
        },
        "limits": {
            "requests_per_minute": 60_000,
            "tokens_per_minute": 50_000_000,
            "max_concurrency": 4,
            "retry_base_seconds": 0.05,
            "retry_max_seconds": 0.5,
        },
    }


@pytest.fixture(scope="module")
def reference(tmp_path_factory: pytest.TempPathFactory) -> GeneratedDataset:
    """The uninterrupted result: the whole pipeline in process, offline."""
    settings = load_settings(
        overrides={**SMALL, "output_dir": str(tmp_path_factory.mktemp("reference"))}
    )
    personas = load_personas(settings.persona_source, PersonaSelection(user_ids=USERS)).personas
    return asyncio.run(generate_dataset(personas, build_client(settings), settings))


def request_key(request: LoggedRequest) -> str:
    return request.path + " " + json.dumps(request.body, sort_keys=True)


def answered_work(request: LoggedRequest) -> bool:
    """An answered model request (not the client's look at what the server is, sent again by each run)."""
    return request.status == 200 and not request.path.endswith("/models")


def finished_stages(output: Path) -> int:
    keys = output / ".prefect" / "keys"
    return len([p for p in keys.iterdir() if not p.name.endswith(".lock")]) if keys.is_dir() else 0


def cached_answers(output: Path) -> int:
    chat = output / ".cache" / "chat"
    return (
        len([p for p in chat.rglob("*.json") if not p.name.startswith(".tmp-")])
        if chat.is_dir()
        else 0
    )


@dataclass
class Kill:
    """What the server had answered when a run was killed, and where its log stood."""

    at_request: int
    answered: set[str]
    stages_persisted: int


class Generation:
    """One output directory, generated by successive subprocess runs that the test may kill."""

    def __init__(
        self, server: FakeOpenAIServer, output: Path, env: dict[str, str], logs: Path
    ) -> None:
        self.server = server
        self.output = output
        self.env = env
        self.logs = logs
        self.runs = 0
        self.run_start = 0  # index of the current run's first request in the server's log
        self.answered: set[str] = set()  # requests answered to a run that has ended or been killed

    def start(self) -> tuple[subprocess.Popen[bytes], int]:
        self.runs += 1
        out = open(self.logs / f"run{self.runs}.out", "wb")  # noqa: SIM115 - the child owns it
        err = open(self.logs / f"run{self.runs}.err", "wb")  # noqa: SIM115
        args = [
            sys.executable,
            "-c",
            SCRIPT,
            str(self.output),
            json.dumps(USERS),
            json.dumps(http_overrides(self.server.url)),
        ]
        self.run_start = len(self.server.requests)
        proc = subprocess.Popen(args, env=self.env, stdout=out, stderr=err, start_new_session=True)
        out.close()
        err.close()
        return proc, self.run_start

    def answered_since(self, start: int, template: str) -> int:
        return sum(
            1 for r in self.server.requests[start:] if r.template_id == template and r.status == 200
        )

    def kill_when(
        self, proc: subprocess.Popen[bytes], condition: Callable[[], bool], what: str
    ) -> Kill:
        deadline = time.monotonic() + 600
        try:
            while not condition():
                assert proc.poll() is None, f"the run ended before {what}; see {self.logs}"
                assert time.monotonic() < deadline, f"no {what} within 600 s"
                time.sleep(0.05)
            return self._kill(proc, what)
        finally:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()

    def _kill(self, proc: subprocess.Popen[bytes], what: str) -> Kill:
        self.server.latency = HOLD  # new requests wait; answers already on their way arrive
        held = time.monotonic()
        deadline = held + 60
        while True:
            requests = list(self.server.requests)
            # Only this run's answers count: a request held at an earlier kill may still be
            # answered now, to a process that no longer exists.
            answered = self.answered | {
                request_key(r) for r in requests[self.run_start :] if answered_work(r)
            }
            settled = time.monotonic() - held > 2 * LATENCY and cached_answers(self.output) == len(
                answered
            )
            if settled:
                break
            assert time.monotonic() < deadline, (
                f"{what}: {len(answered)} answers given but {cached_answers(self.output)} in the client's cache after 60 s"
            )
            time.sleep(0.05)
        stages = finished_stages(self.output)
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
        self.server.latency = LATENCY
        self.answered = answered
        return Kill(at_request=len(requests), answered=answered, stages_persisted=stages)

    def finish(self, proc: subprocess.Popen[bytes]) -> None:
        try:
            code = proc.wait(timeout=900)
        finally:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
        assert code == 0, (self.logs / f"run{self.runs}.err").read_text(errors="replace")[-5000:]


async def _flow_runs_and_logs() -> tuple[list[Any], list[Any]]:
    from prefect.client.orchestration import get_client

    async with get_client() as client:
        logs: list[Any] = []
        while page := await client.read_logs(limit=200, offset=len(logs)):
            logs.extend(page)
        return list(await client.read_flow_runs()), logs


def rows(dataset: GeneratedDataset, table: str) -> list[dict[str, Any]]:
    return [row.model_dump(mode="json") for row in getattr(dataset, table)]


@pytest.mark.slow
def test_three_kills_resume_to_the_uninterrupted_result_without_repeating_a_request(
    prefect_api: dict[str, str],
    prefect_in_process: dict[str, str],
    reference: GeneratedDataset,
    tmp_path: Path,
) -> None:
    logs = tmp_path / "logs"
    logs.mkdir()
    client_home = tmp_path / "prefect-client-home"
    client_home.mkdir()
    env = {
        k: v
        for k, v in prefect_api.items()
        if not k.startswith(("MEMORYQUEST_", "OPENAI_", "AZURE_OPENAI_"))
    }
    env.update(
        OPENAI_API_KEY=API_KEY,
        PREFECT_HOME=str(client_home),
        PREFECT_LOGGING_LEVEL="INFO",
        PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS="180",
    )
    output = tmp_path / "run"
    started = time.perf_counter()
    with FakeOpenAIServer(api_key=API_KEY, latency=LATENCY) as server:
        generation = Generation(server, output, env, logs)
        kills: list[Kill] = []

        proc, _ = generation.start()
        kills.append(
            generation.kill_when(
                proc, lambda: finished_stages(output) >= 1, "a persisted queries result"
            )
        )

        proc, since = generation.start()
        kills.append(
            generation.kill_when(
                proc,
                lambda: generation.answered_since(since, "dialogue_expansion") >= 5,
                "dialogues being answered",
            )
        )

        proc, since = generation.start()
        kills.append(
            generation.kill_when(
                proc,
                lambda: generation.answered_since(since, "memory_extraction") >= 2,
                "memory extraction under way",
            )
        )

        proc, _ = generation.start()
        generation.finish(proc)
        requests = list(server.requests)
    print(f"4 runs, 3 kills: {time.perf_counter() - started:.1f} s, {len(requests)} requests")

    # The kills landed where intended: after queries, inside conversations, inside memory.
    assert [k.stages_persisted for k in kills] == [1, 1, 2]
    for number, kill in enumerate(kills, start=1):
        assert kill.answered, f"kill {number}: nothing had been answered"
        repeated = [
            r.template_id
            for r in requests[kill.at_request :]
            if answered_work(r) and request_key(r) in kill.answered
        ]
        assert repeated == [], (
            f"after kill {number}, requests answered before it were sent again: {repeated}"
        )
    # Each resumed run picked up work the killed one had left (held requests included).
    for kill, nxt in zip(kills, [*[k.at_request for k in kills[1:]], len(requests)], strict=True):
        assert any(r.status == 200 for r in requests[kill.at_request : nxt])

    # Every distinct request was answered, and paid, as often as in one uninterrupted run.
    assert reference.manifest is not None
    answered = {request_key(r) for r in requests if answered_work(r)}
    assert len(answered) == sum(u.requests for u in reference.manifest.usage)

    resumed = GeneratedDataset.load(output / "dataset")
    for table in TABLE_NAMES:
        assert rows(resumed, table) == rows(reference, table), table
    published = load_published(output / "published")
    assert [p.source_user_id for p in published.personas] == USERS

    # The key was used (the server refuses requests without it) but never written down.
    assert resumed.manifest is not None
    assert resumed.manifest.settings["endpoint"]["api_key"] == "****"
    assert all(r.headers.get("authorization") == f"Bearer {API_KEY}" for r in requests)
    leaks = [
        str(p)
        for p in [*output.rglob("*"), *logs.iterdir()]
        if p.is_file() and API_KEY.encode() in p.read_bytes()
    ]
    assert leaks == []
    assert "Flow run" in "".join(
        p.read_text(errors="replace") for p in logs.iterdir()
    )  # the logs were captured
    flow_runs, run_logs = asyncio.run(_flow_runs_and_logs())
    assert len(flow_runs) == 4 and run_logs
    stored = json.dumps([r.model_dump(mode="json") for r in [*flow_runs, *run_logs]])
    assert API_KEY not in stored
