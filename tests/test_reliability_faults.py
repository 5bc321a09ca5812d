"""A generation against a badly behaved endpoint ends with the fault-free dataset, and the key stays secret.

The loopback OpenAI-compatible server answers from the simulator and injects,
per request: 22% 429 with Retry-After, 5% 500, 2% timeouts, 5% malformed
JSON, 5% schema-invalid JSON and 2% truncated answers, after one scripted
fault of each kind so every kind is exercised on every run. The flow runs in
this process against a real Prefect server, with the API key in the
environment as in production; afterwards the key must be absent from every
output file, every log record (captured at DEBUG for the HTTP libraries), the
manifest, the published dataset, and everything the Prefect server stored:
flow run parameters, logs and artifacts (read back through the Prefect client).
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
import uuid
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from memoryquest.dataset import GeneratedDataset
from memoryquest.intake import PersonaSelection, load_personas
from memoryquest.llm.factory import build_client
from memoryquest.orchestration.flow import generate_benchmark
from memoryquest.pipeline import generate_dataset
from memoryquest.publish import load_published
from memoryquest.settings import load_settings
from memoryquest.testing import FakeOpenAIServer, Fault, FaultKind

USERS = ["user0"]
SMALL: dict[str, Any] = {
    "generation": {"queries_per_user": 2, "candidates_per_user": 8},
    "pgr": {"methods": ["query_only", "pgr_tot"], "judges": ["provenance"]},
}
TABLE_NAMES = ("personas", "queries", "timelines", "sessions", "facts", "validation", "rejected")
API_KEY = f"sk-test-{uuid.uuid4().hex}"
FAULT_RATES = {
    FaultKind.RATE_LIMIT: 0.22,
    FaultKind.SERVER_ERROR: 0.05,
    FaultKind.TIMEOUT: 0.02,
    FaultKind.MALFORMED_JSON: 0.05,
    FaultKind.SCHEMA_INVALID: 0.05,
    FaultKind.TRUNCATED: 0.02,
}
CLIENT_TIMEOUT = 3.0  # a stalled request (the server's timeout fault) is abandoned after this
BAD_ANSWERS = {FaultKind.MALFORMED_JSON, FaultKind.SCHEMA_INVALID, FaultKind.TRUNCATED}


class FlakyServer(FakeOpenAIServer):
    """The fault-injecting server, within the client's budget of bad answers per request.

    The client repairs a malformed or schema-invalid answer twice and retries a
    truncated one twice, then records the request as rejected — bounded on
    purpose, and tested with the client. At these rates about 0.3% of requests
    would draw a third bad answer of one kind in a row, which would (correctly)
    change the dataset; this test is about recovery within the budget, so such
    a third draw is replaced by a good answer. Transport faults are not
    capped. ``capped`` counts the times the cap applied.
    """

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.bad_answers: Counter[tuple[str, str]] = Counter()
        self.capped = 0

    def _next_fault(self, endpoint: str, body: Any = None) -> Fault | None:
        fault = super()._next_fault(endpoint, body)
        if fault is None or fault.kind not in BAD_ANSWERS or not isinstance(body, dict):
            return fault
        # A repair resends the original system and user messages with the bad answer appended.
        conversation = json.dumps([body.get("messages", [])[:2], body.get("seed")], sort_keys=True)
        budget = (conversation, "truncation" if fault.kind is FaultKind.TRUNCATED else "repair")
        if self.bad_answers[budget] >= 2:
            self.capped += 1
            return None
        self.bad_answers[budget] += 1
        return fault


def http_overrides(base_url: str) -> dict[str, Any]:
    return {
        **SMALL,
        "endpoint": {
            "backend": "openai",
            "base_url": base_url,
            "simulator_hints": True,  # the fake server answers from the simulator
            "embedder": "local",
            "timeout_seconds": CLIENT_TIMEOUT,
            "max_retries": 12,
        },
        "limits": {
            "requests_per_minute": 60_000,
            "tokens_per_minute": 50_000_000,
            "max_concurrency": 16,
            "retry_base_seconds": 0.02,
            "retry_max_seconds": 0.2,
        },
    }


@pytest.fixture(scope="module")
def reference(tmp_path_factory: pytest.TempPathFactory) -> GeneratedDataset:
    """The fault-free result: the whole pipeline in process, offline (the loopback server reproduces it)."""
    settings = load_settings(
        overrides={**SMALL, "output_dir": str(tmp_path_factory.mktemp("reference"))}
    )
    personas = load_personas(settings.persona_source, PersonaSelection(user_ids=USERS)).personas
    return asyncio.run(generate_dataset(personas, build_client(settings), settings))


class Captured(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(logging.Formatter("%(name)s %(levelname)s %(message)s").format(record))


@pytest.fixture(scope="module")
def fault_run(
    prefect_in_process: dict[str, str], tmp_path_factory: pytest.TempPathFactory
) -> Iterator[dict[str, Any]]:
    """One flow run against the faulty server, with everything it left behind."""
    output = tmp_path_factory.mktemp("faults") / "run"
    monkeypatch = pytest.MonkeyPatch()
    for name in (
        "OPENAI_BASE_URL",
        "OPENAI_ORG_ID",
        "AZURE_OPENAI_API_KEY",
        "AZURE_OPENAI_ENDPOINT",
    ):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("OPENAI_API_KEY", API_KEY)  # as in production: never a flow parameter
    handler = Captured()
    logger_names = ("openai", "httpx", "httpcore", "memoryquest")
    noisy = [logging.getLogger(name) for name in logger_names]
    listened = [logging.getLogger(), logging.getLogger("prefect"), *noisy]
    levels = {logger: logger.level for logger in noisy}
    try:
        for logger in noisy:
            logger.setLevel(logging.DEBUG)
        for logger in listened:
            logger.addHandler(handler)
        with FlakyServer(api_key=API_KEY, seed=11) as server:
            # One of each kind first, so every run sees every kind; then the random mix.
            server.script(
                Fault.rate_limit(0.05),
                Fault.server_error(),
                Fault.timeout(CLIENT_TIMEOUT + 5),
                Fault.malformed_json(),
                Fault.schema_invalid(),
                Fault.truncated(),
            )
            server.set_fault_rates(FAULT_RATES, seed=11)
            started = time.perf_counter()
            state = asyncio.run(
                generate_benchmark(
                    output=str(output),
                    users=USERS,
                    overrides=http_overrides(server.url),
                    publish=True,
                    allow_failed_audit=True,  # about recovering from faults, not the dataset's validity
                    return_state=True,
                )
            )
            seconds = time.perf_counter() - started
            stored = stored_by_prefect(state.state_details.flow_run_id)
            requests = list(server.requests)
            capped = server.capped
    finally:
        for logger in listened:
            logger.removeHandler(handler)
        for logger, level in levels.items():
            logger.setLevel(level)
        monkeypatch.undo()
    assert state.is_completed(), state
    faults = Counter(r.fault for r in requests if r.fault is not None)
    print(
        f"fault run: {seconds:.1f} s, {len(requests)} requests, faults {dict(faults)}, cap applied {capped}x"
    )
    yield {
        "output": output,
        "requests": requests,
        "faults": faults,
        "logs": handler.lines,
        "stored": stored,
        "flow_run_id": state.state_details.flow_run_id,
    }


async def _stored_by_prefect() -> dict[str, list[Any]]:
    from prefect.client.orchestration import get_client

    async with get_client() as client:
        logs: list[Any] = []
        while page := await client.read_logs(limit=200, offset=len(logs)):
            logs.extend(page)
        return {
            "flow_runs": list(await client.read_flow_runs()),
            "task_runs": list(await client.read_task_runs()),
            "logs": logs,
            "artifacts": list(await client.read_artifacts()),
        }


def stored_by_prefect(flow_run_id: Any) -> dict[str, list[Any]]:
    """What the server holds, once the flow's own last log line has arrived (logs are shipped in batches)."""
    deadline = time.monotonic() + 30
    while True:
        stored = asyncio.run(_stored_by_prefect())
        final = [
            log
            for log in stored["logs"]
            if log.flow_run_id == flow_run_id
            and log.task_run_id is None
            and "Finished in state" in log.message
        ]
        if final or time.monotonic() > deadline:
            return stored
        time.sleep(0.5)


def rows(dataset: GeneratedDataset, table: str) -> list[dict[str, Any]]:
    return [row.model_dump(mode="json") for row in getattr(dataset, table)]


@pytest.mark.slow
def test_faulty_endpoint_gives_the_fault_free_dataset(
    fault_run: dict[str, Any], reference: GeneratedDataset
) -> None:
    requests = fault_run["requests"]
    faults: Counter[FaultKind] = fault_run["faults"]
    assert set(faults) == set(FAULT_RATES), faults
    assert sum(faults.values()) >= 0.2 * len(requests), faults
    assert faults[FaultKind.RATE_LIMIT] >= 0.05 * len(requests), faults
    assert all(r.status == 429 for r in requests if r.fault is FaultKind.RATE_LIMIT)

    dataset = GeneratedDataset.load(fault_run["output"] / "dataset")
    for table in TABLE_NAMES:
        assert rows(dataset, table) == rows(reference, table), table
    assert dataset.manifest is not None and reference.manifest is not None
    # Bad answers were asked again and paid for; the answers kept are the fault-free ones.
    assert sum(u.requests for u in dataset.manifest.usage) > sum(
        u.requests for u in reference.manifest.usage
    )
    published = load_published(fault_run["output"] / "published")
    assert [p.source_user_id for p in published.personas] == USERS


@pytest.mark.slow
def test_the_api_key_is_never_written_logged_or_stored(fault_run: dict[str, Any]) -> None:
    output: Path = fault_run["output"]
    requests = fault_run["requests"]
    # The key was in use: the server refuses any request without it.
    assert requests and all(r.headers.get("authorization") == f"Bearer {API_KEY}" for r in requests)

    files = [p for p in output.rglob("*") if p.is_file()]
    assert any(p.parent.name == "published" for p in files) and any(
        ".cache" in p.parts for p in files
    )
    assert [str(p) for p in files if API_KEY.encode() in p.read_bytes()] == []
    manifest = json.loads((output / "dataset" / "manifest.json").read_text(encoding="utf-8"))
    assert manifest["settings"]["endpoint"]["api_key"] == "****"

    logs: list[str] = fault_run["logs"]
    assert any(line.startswith("httpx ") for line in logs) and any(
        "persona user0 done" in line for line in logs
    )
    assert [line for line in logs if API_KEY in line] == []

    stored = fault_run["stored"]
    flow_run = next(r for r in stored["flow_runs"] if r.id == fault_run["flow_run_id"])
    assert flow_run.parameters["overrides"]["endpoint"]["base_url"].startswith("http://127.0.0.1:")
    keys = {a.key for a in stored["artifacts"]}
    assert {"memoryquest-progress", "memoryquest-personas", "memoryquest-pgr"} <= keys, keys
    assert any("persona user0 done" in log.message for log in stored["logs"]), [
        log.message for log in stored["logs"]
    ]
    for kind, items in stored.items():
        text = json.dumps([item.model_dump(mode="json") for item in items])
        assert API_KEY not in text, f"the API key is in the Prefect server's {kind}"
