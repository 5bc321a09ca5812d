"""Issue #13, secrets row: a server that echoes the key never gets it printed, logged or stored.

Unit level: the one redactor (``memoryquest.redaction``), every client-layer
error and log record passing through it, and 401/403 turning into one
"authentication failed for <base_url>" error sent once and never retried
(neither by the client nor by Prefect). The whole command line against such a
server, with stderr, logs, the Prefect database, the cache and the output
searched for the key, is in ``test_hardening_runs.py``.
"""

from __future__ import annotations

import logging
import random
import traceback
import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest
from prefect.states import Failed
from pydantic import BaseModel

from memoryquest.llm.client import ModelClient, check_access
from memoryquest.llm.errors import (
    BackendError,
    CircuitOpenError,
    LLMAuthenticationError,
    LLMConfigurationError,
    LLMTransportError,
    TransientBackendError,
    retry_unless_permanent,
)
from memoryquest.llm.factory import build_chat_backend, build_client
from memoryquest.llm.limiter import RetryPolicy
from memoryquest.llm.request import LLMRequest
from memoryquest.publish.redact import redact as publish_redact
from memoryquest.redaction import MASK, RedactingFilter, redact, redact_text, register_secret
from memoryquest.settings import Settings
from memoryquest.simulator import simulates
from memoryquest.testing import FakeOpenAIServer, Fault

TEMPLATE_ID = "test_hardening_secrets_echo"
TEMPLATE = f"""---
id: {TEMPLATE_ID}
version: 1
purpose: echo a word (test-only template)
---
## system
You repeat words.
## user
Repeat $word.
"""
RIGHT_KEY = f"sk-right-{uuid.uuid4().hex}"
WRONG_KEY = f"sk-wrong-{uuid.uuid4().hex}"


class Echo(BaseModel):
    word: str


@simulates(TEMPLATE_ID)
def _echo(variables: dict[str, Any], rng: random.Random) -> dict[str, Any]:
    return {"word": variables["word"]}


# --------------------------------------------------------------------------- the redactor


@pytest.mark.parametrize(
    ("text", "leaked"),
    [
        (
            "Incorrect API key provided: sk-proj-abcdefghijklmnop1234",
            "sk-proj-abcdefghijklmnop1234",
        ),
        ("Authorization: Bearer eyJhbGciOiJIUzI1NiJ9.payload.sig", "eyJhbGciOiJIUzI1NiJ9"),
        ("header: Basic dXNlcjpwYXNzd29yZDEyMzQ1Ng==", "dXNlcjpwYXNzd29yZDEyMzQ1Ng=="),
        ("bad key: 0123456789abcdef0123456789abcdef", "0123456789abcdef0123456789abcdef"),
        ("api_key=AbCdEf0123456789AbCdEf0123", "AbCdEf0123456789AbCdEf0123"),
        ('{"x-api-key": "Zm9vYmFyYmF6cXV4MTIzNDU2Nzg5MA=="}', "Zm9vYmFyYmF6cXV4MTIzNDU2Nzg5MA=="),
        (
            "token provided: ghp_16C7e42F292c6912E7710c838347Ae178B4a",
            "ghp_16C7e42F292c6912E7710c838347Ae178B4a",
        ),
        (
            "GET https://user:hunter2hunter2@example.org/v1?api_key=s3cr3tvalue&x=1",
            "hunter2hunter2",
        ),
        ("GET https://example.org/v1?api_key=s3cr3tvalue&x=1", "s3cr3tvalue"),
    ],
)
def test_key_shaped_text_is_masked(text: str, leaked: str) -> None:
    clean = redact_text(text)
    assert leaked not in clean and MASK in clean, clean


@pytest.mark.parametrize(
    "text",
    [
        "stage queries: 1234 input_tokens, 56 output_tokens, tokens_per_minute=400000",
        "cannot read /work/main/output/run/.cache/chat/ab/cdef0123456789.json",
        "the key 'demographics' appears twice",
        "persona_id p_0123456789abcdef with sha256 9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08",
        "http://127.0.0.1:8080/v1 answered HTTP 500",
    ],
)
def test_ordinary_text_is_left_alone(text: str) -> None:
    assert redact_text(text) == text


def test_a_registered_secret_is_cut_out_whatever_its_shape() -> None:
    secret = f"plainword{uuid.uuid4().hex[:6]}"  # no key shape at all
    assert redact_text(f"server said {secret}!") == f"server said {secret}!"
    register_secret(secret)
    assert redact_text(f"server said {secret}!") == f"server said {MASK}!"
    register_secret("short")  # too short to be a secret: never masked
    assert redact_text("a short word") == "a short word"


def test_json_like_values_mask_secret_keys_and_strings() -> None:
    value = {
        "endpoint": {"api_key": "anything", "base_url": "https://u:p4ssw0rd@h/v1"},
        "note": f"key {RIGHT_KEY}",
    }
    for redactor in (redact, publish_redact):  # the publishing module re-exports the one redactor
        clean = redactor(value, [RIGHT_KEY])
        assert clean["endpoint"]["api_key"] == MASK
        assert "p4ssw0rd" not in clean["endpoint"]["base_url"]
        assert RIGHT_KEY not in str(clean)


def test_client_errors_and_logs_redact_themselves(caplog: pytest.LogCaptureFixture) -> None:
    register_secret(RIGHT_KEY)
    for error in (
        LLMConfigurationError(f"rejected {RIGHT_KEY}"),
        LLMTransportError(f"gave up: {RIGHT_KEY}", 3),
        CircuitOpenError(f"stopping: {RIGHT_KEY}"),
        BackendError(f"HTTP 401: {RIGHT_KEY}", status=401),
        TransientBackendError(f"HTTP 500: {RIGHT_KEY}", kind="server"),
    ):
        assert RIGHT_KEY not in str(error) and RIGHT_KEY not in repr(error)
    logger = logging.getLogger("memoryquest.llm.batch")  # filtered by the client module at import
    assert any(isinstance(f, RedactingFilter) for f in logger.filters)
    with caplog.at_level(logging.INFO, logger="memoryquest.llm.batch"):
        logger.info("resuming with key %s", RIGHT_KEY)
    assert caplog.records and RIGHT_KEY not in caplog.text


# --------------------------------------------------------------------------- 401/403 against a server that echoes the key


@pytest.fixture(scope="module")
def prompts_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    directory = tmp_path_factory.mktemp("prompts")
    (directory / f"{TEMPLATE_ID}.md").write_text(TEMPLATE, encoding="utf-8")
    return directory


@pytest.fixture
def server() -> Iterator[FakeOpenAIServer]:
    with FakeOpenAIServer(api_key=RIGHT_KEY, echo_key=True) as server:
        yield server


def settings_for(server: FakeOpenAIServer, key: str, tmp_path: Path) -> Settings:
    return Settings(
        output_dir=tmp_path,
        endpoint={
            "backend": "openai",
            "base_url": server.url,
            "simulator_hints": True,  # the fake server answers from the simulator
            "api_key": key,
            "chat_model": "gpt-4o-mini",
            "embedder": "local",
            "max_retries": 5,
        },
        limits={"retry_base_seconds": 0.01, "retry_max_seconds": 0.02},
    )


@pytest.fixture
async def make_client(
    server: FakeOpenAIServer,
    prompts_dir: Path,
    tmp_path: Path,
    clean_settings_env: pytest.MonkeyPatch,
) -> AsyncIterator[Any]:
    made: list[ModelClient] = []

    def make(key: str) -> ModelClient:
        settings = settings_for(server, key, tmp_path)
        made.append(
            build_client(
                settings,
                retry=RetryPolicy(max_retries=5, base_delay=0.01, max_delay=0.02),
                prompts_dir=prompts_dir,
            )
        )
        return made[-1]

    yield make
    for client in made:
        await client.aclose()


def request(word: str) -> LLMRequest[Echo]:
    return LLMRequest(TEMPLATE_ID, {"word": word}, Echo, stage="queries")


def _whole_story(exc: BaseException) -> str:
    """Everything a traceback (chained causes included) or a repr would show."""
    return (
        "".join(traceback.format_exception(exc))
        + repr(exc)
        + repr(getattr(exc, "__context__", None))
    )


async def test_a_wrong_key_is_one_request_and_one_clear_line(
    server: FakeOpenAIServer, make_client: Any
) -> None:
    client = make_client(WRONG_KEY)
    with pytest.raises(LLMAuthenticationError) as caught:
        await client.complete(request("alpha"))
    message = str(caught.value)
    assert message.startswith(f"authentication failed for {server.url} (HTTP 401: ")
    assert f"Incorrect API key provided: {MASK}" in message
    assert "\n" not in message
    assert WRONG_KEY not in _whole_story(caught.value)
    assert server.count() == 1  # not retried
    # Nothing more is sent with a refused key: later requests fail at once.
    with pytest.raises(LLMAuthenticationError):
        await client.complete_all([request("beta"), request("gamma")])
    assert server.count() == 1


async def test_a_key_revoked_mid_run_is_not_echoed(
    server: FakeOpenAIServer, make_client: Any
) -> None:
    client = make_client(RIGHT_KEY)
    assert (await client.complete(request("alpha"))).word == "alpha"
    server.script(Fault.unauthorized(403))
    with pytest.raises(LLMAuthenticationError) as caught:
        await client.complete(request("beta"))
    assert "authentication failed for" in str(caught.value) and "(HTTP 403:" in str(caught.value)
    assert RIGHT_KEY not in _whole_story(caught.value)
    chat = [r.status for r in server.requests if r.path.endswith("/chat/completions")]
    assert chat == [200, 403]


async def test_embeddings_share_the_rule(
    server: FakeOpenAIServer, prompts_dir: Path, tmp_path: Path
) -> None:
    settings = settings_for(server, WRONG_KEY, tmp_path).model_copy(
        update={
            "endpoint": settings_for(server, WRONG_KEY, tmp_path).endpoint.model_copy(
                update={"embedder": "openai"}
            )
        }
    )
    client = build_client(settings, prompts_dir=prompts_dir)
    try:
        with pytest.raises(LLMAuthenticationError) as caught:
            await client.embed(["some text"], stage="queries")
    finally:
        await client.aclose()
    assert WRONG_KEY not in _whole_story(caught.value)
    assert server.count() == 1


async def test_check_access_is_one_free_request(server: FakeOpenAIServer, tmp_path: Path) -> None:
    wrong = build_chat_backend(settings_for(server, WRONG_KEY, tmp_path))
    with pytest.raises(LLMAuthenticationError) as caught:
        await check_access(wrong)
    assert WRONG_KEY not in _whole_story(caught.value)
    right = build_chat_backend(settings_for(server, RIGHT_KEY, tmp_path))
    await check_access(right)
    assert [(r.method, r.path, r.status) for r in server.requests] == [
        ("GET", "/v1/models", 401),
        ("GET", "/v1/models", 200),
    ]
    simulated = build_chat_backend(Settings(output_dir=tmp_path))
    await check_access(simulated)  # nothing to check, nothing sent
    assert server.count("/models") == 2


async def test_check_access_is_inconclusive_without_a_models_route(
    server: FakeOpenAIServer, tmp_path: Path
) -> None:
    del server.routes[("GET", "/v1/models")]
    # A 404 proves nothing about the key.
    await check_access(build_chat_backend(settings_for(server, WRONG_KEY, tmp_path)))


def test_prefect_does_not_retry_a_permanent_error() -> None:
    assert (
        retry_unless_permanent(
            None, None, Failed(data=LLMAuthenticationError("authentication failed"))
        )
        is False
    )
    assert (
        retry_unless_permanent(None, None, Failed(data=LLMConfigurationError("model not found")))
        is False
    )
    assert retry_unless_permanent(None, None, Failed(data=CircuitOpenError("stopping"))) is False
    assert retry_unless_permanent(None, None, Failed(data=LLMTransportError("gave up", 7))) is True
    assert retry_unless_permanent(None, None, Failed(data=RuntimeError("a bug"))) is True


def test_every_stage_task_carries_the_retry_condition() -> None:
    from memoryquest.orchestration.flow import STAGE_TASKS
    from memoryquest.orchestration.task_retries import retry_on_infrastructure_failure
    from memoryquest.pipeline import STAGE_GROUPS

    assert list(STAGE_TASKS) == [stage.name for stage in STAGE_GROUPS]
    for name, task in STAGE_TASKS.items():
        assert task.name == name
        assert task.retries == 2, task.name
        assert task.retry_condition_fn is retry_on_infrastructure_failure, task.name
