"""Server profiles, refused fields, context budgeting and sized timeouts, against a loopback server
that answers the way llama.cpp's, vLLM's and Ollama's servers do."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest

from memoryquest.contracts import RejectionReason
from memoryquest.intake import load_personas
from memoryquest.llm.backends import OutputMode
from memoryquest.llm.budget import PromptMeter, Throughput
from memoryquest.llm.client import LLMContextLengthError, ModelClient
from memoryquest.llm.factory import build_client, describe_endpoint, embeddings_from_endpoint
from memoryquest.llm.limiter import RetryPolicy
from memoryquest.llm.openai_backend import OpenAIChatBackend
from memoryquest.llm.openai_errors import context_overflow, refused_field
from memoryquest.llm.request import LLMRequest
from memoryquest.llm.servers import guess_kind, known_window, llamacpp_props, ollama_window
from memoryquest.settings import ServerKind, Settings
from memoryquest.stages.queries import generate_queries
from memoryquest.stages.queries_contracts import RelevanceAnswer
from memoryquest.testing import FakeOpenAIServer, Fault
from memoryquest.testing.fake_openai.exchange import ErrorAnswer, LoggedRequest

FAST = RetryPolicy(max_retries=3, base_delay=0.001, max_delay=0.01)


class LlamaCppLike:
    """Wraps the fake server's routes the way llama-cpp-python's server answers.

    ``/v1/models`` owns its model as ``me``; ``/extras/tokenize/count`` counts
    whitespace-separated pieces twice over (a tokenizer finer than ours); a
    ``json_schema`` response format is refused with HTTP 500; a prompt longer
    than ``window`` is refused with the server's context-length message.
    """

    def __init__(self, server: FakeOpenAIServer, window: int = 1_000_000) -> None:
        self.server = server
        self.window = window
        self.largest_prompt = 0
        chat = server.routes[("POST", "/v1/chat/completions")]

        def models(
            entry: LoggedRequest, headers: dict[str, str]
        ) -> tuple[int, Any, dict[str, str]]:
            return 200, {"object": "list", "data": [{"id": "smol", "owned_by": "me"}]}, {}

        def count(entry: LoggedRequest, headers: dict[str, str]) -> tuple[int, Any, dict[str, str]]:
            return 200, {"count": self.tokens(entry.body["input"])}, {}

        def completions(
            entry: LoggedRequest, headers: dict[str, str]
        ) -> tuple[int, Any, dict[str, str]]:
            body = entry.body
            if (body.get("response_format") or {}).get("type") == "json_schema":
                raise ErrorAnswer(
                    500,
                    "1 validation error: ('body', 'response_format', 'type') "
                    "Input should be 'text' or 'json_object'",
                )
            prompt = sum(self.tokens(m["content"]) + 8 for m in body["messages"]) + 16
            self.largest_prompt = max(self.largest_prompt, prompt + body.get("max_tokens", 0))
            if prompt >= self.window:
                raise ErrorAnswer(
                    400,
                    f"This model's maximum context length is {self.window} tokens. However, you "
                    f"requested {prompt} tokens ({prompt} in the messages, 0 in the completion).",
                    code="context_length_exceeded",
                    param="messages",
                )
            return chat(entry, headers)

        server.routes[("GET", "/v1/models")] = models
        server.routes[("POST", "/extras/tokenize/count")] = count
        server.routes[("POST", "/v1/chat/completions")] = completions

    @staticmethod
    def tokens(text: str) -> int:
        return 2 * len(text.split())


@pytest.fixture
def server() -> Iterator[FakeOpenAIServer]:
    with FakeOpenAIServer() as fake:
        yield fake


@pytest.fixture
async def clients(clean_settings_env: pytest.MonkeyPatch) -> AsyncIterator[list[ModelClient]]:
    made: list[ModelClient] = []
    yield made
    for client in made:
        await client.aclose()


def settings_for(fake: FakeOpenAIServer, tmp_path: Path, **endpoint: Any) -> Settings:
    return Settings(
        output_dir=tmp_path,
        endpoint={
            "base_url": fake.url,
            "simulator_hints": True,
            "chat_model": "smol",
            "timeout_seconds": 5.0,
            **endpoint,
        },
        limits={"requests_per_minute": 60_000, "tokens_per_minute": 50_000_000},
        cache={"enabled": False},
    )


def relevance_request() -> LLMRequest[RelevanceAnswer]:
    variables = {
        "query": "Plan a weekend in Lisbon for me",
        "query_date": "2024-06-01",
        "query_domain": "Travel",
        "references": [
            {"index": 0, "text": "I broke my ankle", "date": "2024-05-01", "domain": "Health"}
        ],
    }
    return LLMRequest("reference_relevance", variables, RelevanceAnswer, stage="queries")


def chat_bodies(server: FakeOpenAIServer) -> list[dict[str, Any]]:
    return [r.body for r in server.requests if r.path.endswith("/chat/completions")]


# --- telling servers apart --------------------------------------------------------------------


def test_the_kind_comes_from_the_settings_then_the_url() -> None:
    assert guess_kind(ServerKind.AUTO, None, None) == "openai"
    assert guess_kind(ServerKind.AUTO, "https://api.openai.com/v1", None) == "openai"
    assert guess_kind(ServerKind.AUTO, None, "https://x.openai.azure.com") == "azure"
    assert guess_kind(ServerKind.AUTO, "http://127.0.0.1:11434/v1", None) == "ollama"
    assert guess_kind(ServerKind.AUTO, "http://127.0.0.1:8000/v1", None) == "compatible"
    assert guess_kind(ServerKind.LLAMACPP, "http://127.0.0.1:8000/v1", None) == "llamacpp"


def test_windows_are_read_from_what_each_server_says() -> None:
    props = {"default_generation_settings": {"n_ctx": 8192}, "total_slots": 4}
    assert llamacpp_props(props) == (8192, 4)
    assert ollama_window({"parameters": "stop <|im_end|>\nnum_ctx 16384"}) == 16384
    assert ollama_window({"model_info": {"llama.context_length": 131072}}) == 131072
    assert ollama_window({"parameters": "stop x"}) is None
    assert known_window("gpt-4o-mini") == 128_000 and known_window("smollm2") is None


def test_refusals_are_told_apart_whatever_their_status() -> None:
    llama = "1 validation error: ('body', 'response_format', 'type') input should be 'text'"
    assert refused_field(llama, 500, OutputMode.JSON_SCHEMA) == "response_format"
    assert refused_field(llama, 500, None) is None  # nothing structured was asked for
    seed = "unrecognized request argument supplied: seed"
    assert refused_field(seed, 400, OutputMode.TEXT, frozenset({"seed"})) == "seed"
    assert refused_field(seed, 400, OutputMode.TEXT, frozenset()) is None  # not sent: not refused
    assert refused_field("the server had an error", 500, OutputMode.JSON_SCHEMA) is None
    assert context_overflow("this model's maximum context length is 8192 tokens. however") == 8192
    assert context_overflow("requested tokens (9000) exceed context window of 4096") == 4096
    assert context_overflow("rate limit reached") is None


async def test_a_llamacpp_server_is_recognised_and_sent_json_object_with_its_schema(
    server: FakeOpenAIServer, tmp_path: Path, clients: list[ModelClient]
) -> None:
    LlamaCppLike(server)
    client = build_client(settings_for(server, tmp_path), retry=FAST)
    clients.append(client)
    answer = await client.complete(relevance_request())
    assert isinstance(answer, RelevanceAnswer)
    (body,) = chat_bodies(server)  # no refused first attempt
    assert body["response_format"]["type"] == "json_object"
    assert body["response_format"]["schema"]["type"] == "object"
    assert "prompt_cache_key" not in body and "max_tokens" in body
    assert client.limiter is not None and client.limiter.max_concurrency == 1  # one slot


@pytest.mark.parametrize(
    ("models", "extra_route", "kind", "window"),
    [
        ({"id": "smol", "owned_by": "vllm", "max_model_len": 32768}, None, "vllm", 32768),
        (
            {"id": "smol", "owned_by": "llamacpp"},
            ("GET", "/props", {"default_generation_settings": {"n_ctx": 4096}, "total_slots": 2}),
            "llamacpp",
            4096,
        ),
        (
            {"id": "smol", "owned_by": "library"},
            ("POST", "/api/show", {"parameters": "num_ctx 12288"}),
            "ollama",
            12288,
        ),
    ],
    ids=["vllm", "llama.cpp", "ollama"],
)
async def test_auto_asks_the_server_what_it_is_and_how_long_its_window_is(
    server: FakeOpenAIServer,
    tmp_path: Path,
    clients: list[ModelClient],
    models: dict[str, Any],
    extra_route: tuple[str, str, Any] | None,
    kind: str,
    window: int,
) -> None:
    def listing(entry: LoggedRequest, headers: dict[str, str]) -> tuple[int, Any, dict[str, str]]:
        return 200, {"object": "list", "data": [models]}, {}

    server.routes[("GET", "/v1/models")] = listing
    if extra_route is not None:
        method, path, answer = extra_route
        server.routes[(method, path)] = lambda entry, headers: (200, answer, {})
    client = build_client(settings_for(server, tmp_path), retry=FAST)
    clients.append(client)
    await client.complete(relevance_request())
    backend = client.chat_backend
    assert isinstance(backend, OpenAIChatBackend)
    assert (backend.profile.kind, client.context_window) == (kind, window)
    (body,) = chat_bodies(server)
    expected = "json_object" if kind == "llamacpp" else "json_schema"
    assert body["response_format"]["type"] == expected


async def test_a_refused_response_format_is_dropped_not_retried_unchanged(
    server: FakeOpenAIServer, tmp_path: Path, clients: list[ModelClient]
) -> None:
    LlamaCppLike(server)
    # Told it is vLLM, the client first asks for json_schema; the 500 is a refusal, not an outage.
    client = build_client(settings_for(server, tmp_path, server="vllm"), retry=FAST)
    clients.append(client)
    await client.complete(relevance_request())
    await client.complete(relevance_request())
    kinds = [b["response_format"]["type"] for b in chat_bodies(server)]
    assert kinds == ["json_schema", "json_object", "json_object"]


async def test_a_refused_optional_field_is_left_out_from_then_on(
    server: FakeOpenAIServer, tmp_path: Path, clients: list[ModelClient]
) -> None:
    chat = server.routes[("POST", "/v1/chat/completions")]

    def no_seed(entry: LoggedRequest, headers: dict[str, str]) -> tuple[int, Any, dict[str, str]]:
        if "seed" in entry.body:
            raise ErrorAnswer(422, "Unrecognized request argument supplied: seed")
        return chat(entry, headers)

    server.routes[("POST", "/v1/chat/completions")] = no_seed
    client = build_client(settings_for(server, tmp_path), retry=FAST)
    clients.append(client)
    await client.complete(relevance_request())
    await client.complete(relevance_request())
    assert ["seed" in b for b in chat_bodies(server)] == [True, False, False]


# --- context budgeting ------------------------------------------------------------------------


async def test_a_request_that_cannot_fit_fails_alone_before_it_is_sent(
    server: FakeOpenAIServer, tmp_path: Path, clients: list[ModelClient]
) -> None:
    LlamaCppLike(server)
    client = build_client(settings_for(server, tmp_path, context_window=600), retry=FAST)
    clients.append(client)
    with pytest.raises(LLMContextLengthError, match="600-token context window"):
        await client.complete(relevance_request())  # 512 output tokens + a prompt of hundreds
    assert chat_bodies(server) == []


async def test_the_servers_own_refusal_names_the_window_and_fails_the_item_alone(
    server: FakeOpenAIServer, tmp_path: Path, clients: list[ModelClient]
) -> None:
    LlamaCppLike(server, window=300)  # the server's window; the settings name none
    client = build_client(settings_for(server, tmp_path), retry=FAST)
    clients.append(client)
    with pytest.raises(LLMContextLengthError):
        await client.complete(relevance_request())
    assert client.context_window == 300  # learned: later requests are measured against it
    assert len(chat_bodies(server)) == 1  # refused once, not retried


async def test_query_generation_splits_and_trims_until_every_prompt_fits(
    server: FakeOpenAIServer, tmp_path: Path, clients: list[ModelClient]
) -> None:
    fake = LlamaCppLike(server)
    window = 6000
    settings = settings_for(server, tmp_path, context_window=window)
    client = build_client(settings, retry=FAST)
    clients.append(client)
    persona = load_personas(settings.persona_source, None).personas[0]
    generation = settings.generation.model_copy(
        update={"candidates_per_user": 4, "queries_per_user": 1, "max_regenerations": 0}
    )
    result = await generate_queries(persona, client, generation)
    generations = [
        b for b in chat_bodies(server) if "candidates" in json.dumps(b["response_format"])
    ]
    assert len(generations) >= 2  # fewer candidates per call, several calls
    assert fake.largest_prompt <= window  # prompt and allowance, by the server's count
    shown = generations[0]["messages"][1]["content"]
    assert len(shown) < len(json.dumps([t.description for t in persona.tasks]))  # trimmed
    assert all(r.reason is not RejectionReason.CONTEXT_LENGTH for r in result.rejected)


async def test_a_window_learned_from_a_refusal_plans_the_refused_request_again(
    server: FakeOpenAIServer, tmp_path: Path, clients: list[ModelClient]
) -> None:
    """As a new user runs it: no window in the settings, and a server that names its window only
    when it refuses. The refused request is split and trimmed under that window, as when the
    window is known, instead of rejecting its persona as ``context_length``."""
    LlamaCppLike(server, window=6000)
    settings = settings_for(server, tmp_path)
    client = build_client(settings, retry=FAST)
    clients.append(client)
    persona = load_personas(settings.persona_source, None).personas[0]
    generation = settings.generation.model_copy(
        update={"candidates_per_user": 4, "queries_per_user": 1, "max_regenerations": 0}
    )
    result = await generate_queries(persona, client, generation)
    refused = [
        r for r in server.requests if r.path.endswith("/chat/completions") and r.status == 400
    ]
    assert len(refused) == 1  # the first, sized without a window
    assert client.context_window == 6000  # learned from the refusal
    generations = [
        b for b in chat_bodies(server) if "candidates" in json.dumps(b["response_format"])
    ]
    planned_again = generations[1:]
    assert len(planned_again) >= 2  # fewer candidates per call, several calls
    shown = planned_again[0]["messages"][1]["content"]
    assert len(shown) < len(generations[0]["messages"][1]["content"])  # trimmed
    assert all(r.reason is not RejectionReason.CONTEXT_LENGTH for r in result.rejected)
    assert result.queries  # the simulator's candidates were answered, checked and kept


async def test_a_judge_refused_for_a_window_it_did_not_know_splits_its_union_under_it(
    server: FakeOpenAIServer, tmp_path: Path, clients: list[ModelClient]
) -> None:
    """The LLM judge plans its parts of the union by the window; learned from a refusal, the
    window plans the refused request again, in parts, instead of failing the query."""
    import datetime as dt

    from test_pgr_judges import QUERY

    from memoryquest.contracts import FactType
    from memoryquest.llm.prompts import load_template
    from memoryquest.memory.snapshot import MemoryItem
    from memoryquest.pgr.judges import LLMJudge, judge_request

    words = [
        "walks",
        "the",
        "dog",
        "along",
        "the",
        "canal",
        "before",
        "work",
        "and",
        "keeps",
        "a",
        "notebook",
        "of",
        "birds",
        "seen",
    ]
    union = [
        MemoryItem(
            fid=f"F{n}",
            info=" ".join(f"{word}{n}" for word in words * 8),
            type=FactType.ACTIVITY,
            date=dt.date(2024, 3, n + 1),
            related_entities=(),
            session_ids=(),
            source_reference_ids=(),
        )
        for n in range(8)
    ]
    rendered = load_template("judge_references").render(judge_request(QUERY, union).variables)
    whole = sum(LlamaCppLike.tokens(m["content"]) + 8 for m in rendered) + 16
    fake = LlamaCppLike(server, window=whole - 1)  # the whole union is refused, by a token
    client = build_client(settings_for(server, tmp_path), retry=FAST)
    clients.append(client)
    judge = LLMJudge()
    (judgements,) = await judge.judge_sets(QUERY, [union], None, client)  # type: ignore[arg-type]
    assert client.context_window == fake.window  # learned from the refusal
    judged = [b for b in chat_bodies(server) if "verdicts" in json.dumps(b["response_format"])]
    assert len(judged) >= 3  # the refused whole, then its parts
    assert len(judgements) == len(QUERY.references)


async def test_a_window_too_small_for_any_trim_rejects_with_context_length(
    server: FakeOpenAIServer, tmp_path: Path, clients: list[ModelClient]
) -> None:
    LlamaCppLike(server)
    settings = settings_for(server, tmp_path, context_window=900)
    client = build_client(settings, retry=FAST)
    clients.append(client)
    persona = load_personas(settings.persona_source, None).personas[0]
    result = await generate_queries(persona, client, settings.generation)
    assert result.queries == []
    assert [r.reason for r in result.rejected] == [RejectionReason.CONTEXT_LENGTH]
    assert chat_bodies(server) == []  # nothing over the window was sent


# --- timeouts ---------------------------------------------------------------------------------


def test_timeouts_grow_with_the_allowance_and_the_measured_speed() -> None:
    speed = Throughput(assumed_tokens_per_second=10.0)
    assert speed.timeout(1000, 60.0) == pytest.approx(60.0 + 200.0)
    speed.observe(500, 1.0)  # 500 tokens/s measured
    assert speed.timeout(1000, 60.0) == pytest.approx(64.0)


async def test_a_slow_long_answer_is_waited_for_not_sent_twice(
    server: FakeOpenAIServer, tmp_path: Path, clients: list[ModelClient]
) -> None:
    # The base timeout alone (0.3 s) is shorter than the answer takes; its allowance buys the time.
    client = build_client(settings_for(server, tmp_path, timeout_seconds=0.3), retry=FAST)
    clients.append(client)
    server.script(Fault.slow(1.0))
    await client.complete(relevance_request())
    assert len(chat_bodies(server)) == 1


def test_a_foreign_tokenizer_is_counted_long_until_the_server_says() -> None:
    meter = PromptMeter(exact=False)
    assert meter.estimate(1000) > 1000
    meter.observe(1000, 1600)
    assert meter.estimate(1000) >= 1600


# --- embeddings -------------------------------------------------------------------------------


def test_a_non_openai_server_embeds_locally_unless_an_embeddings_server_is_named(
    tmp_path: Path, clean_settings_env: pytest.MonkeyPatch
) -> None:
    local = Settings(output_dir=tmp_path, endpoint={"base_url": "http://127.0.0.1:8080/v1"})
    assert not embeddings_from_endpoint(local)
    assert "local all-MiniLM" in (describe_endpoint(local) or "")
    named = Settings(
        output_dir=tmp_path,
        endpoint={
            "base_url": "http://127.0.0.1:8080/v1",
            "embedding_base_url": "http://127.0.0.1:8081/v1",
            "embedding_model": "bge-small",
        },
    )
    assert embeddings_from_endpoint(named)
    assert "bge-small at http://127.0.0.1:8081/v1" in (describe_endpoint(named) or "")
    hosted = Settings(output_dir=tmp_path, endpoint={"api_key": "sk-test"})
    assert embeddings_from_endpoint(hosted)


# --- a judge that is not the author -----------------------------------------------------------


async def test_judges_are_answered_by_the_judge_model_and_the_rest_by_the_author(
    server: FakeOpenAIServer, tmp_path: Path, clients: list[ModelClient]
) -> None:
    settings = settings_for(server, tmp_path, judge_model="judge-large")
    client = build_client(settings, retry=FAST)
    clients.append(client)
    persona = load_personas(settings.persona_source, None).personas[0]
    generation = settings.generation.model_copy(
        update={"candidates_per_user": 3, "queries_per_user": 1, "max_regenerations": 0}
    )
    await generate_queries(persona, client, generation)

    def kind(body: dict[str, Any]) -> str:
        return "relevance" if "verdicts" in json.dumps(body["response_format"]) else "generation"

    models = {kind(b): b["model"] for b in chat_bodies(server)}
    assert models == {"generation": "smol", "relevance": "judge-large"}
    # One ledger: the judge's spending is the run's.
    assert sum(row.requests for row in client.usage()) == len(chat_bodies(server))


def test_answer_schemas_state_iso_dates_and_the_domains_for_servers_that_enforce_them() -> None:
    """A grammar (llama.cpp) or strict schema then writes 2024-06-01, never '2024-12-31 Tue 23:57';
    pydantic does not enforce them, so one bad item is still refused alone by its stage."""
    import re

    from memoryquest.contracts import Domain
    from memoryquest.llm.schema import strict_json_schema
    from memoryquest.prompt_inputs import ISO_DATE_PATTERN
    from memoryquest.stages.queries_contracts import QueryCandidateDraft, QueryCandidatesDraft

    schema = strict_json_schema(QueryCandidatesDraft)
    assert schema is not None
    for model, item in (("QueryCandidateDraft", "query_date"), ("ReferenceDraft", "date")):
        assert schema["$defs"][model]["properties"][item]["pattern"] == ISO_DATE_PATTERN
        assert schema["$defs"][model]["properties"]["domain"]["enum"] == [d.value for d in Domain]
    until = schema["$defs"]["ReferenceDraft"]["properties"]["valid_until"]["anyOf"]
    assert {"type": "string", "pattern": ISO_DATE_PATTERN} in until
    assert re.fullmatch(ISO_DATE_PATTERN.strip("^$"), "2024-06-01")
    for wrong in ("2024-6-1", "2024-13-01", "2024-06-32", "2024-12-31 Tue", "June 2024"):
        assert not re.fullmatch(ISO_DATE_PATTERN.strip("^$"), wrong), wrong
    loose = QueryCandidateDraft(
        query="q", query_date="soon", reasoning="r", domain="x", references=[]
    )
    assert loose.query_date == "soon"  # left to the stage's check, item by item


def test_answer_schemas_state_the_counts_and_indices_the_inputs_bound(tmp_path: Path) -> None:
    """What a stage counts (candidates, references, verdicts, turns, news said, slots) is in the
    schema its request sends, from the settings and the inputs; validation stays the model's."""
    from memoryquest.llm.schema import strict_json_schema
    from memoryquest.stages.dialogues_contracts import DialogueInputs
    from memoryquest.stages.queries import generation_request
    from memoryquest.stages.queries_contracts import ReferenceRelevanceInputs

    settings = Settings(
        output_dir=tmp_path,
        generation={"candidates_per_user": 3, "references_min": 2, "references_max": 4},
    )
    persona = load_personas(settings.persona_source, None).personas[0]
    request = generation_request(persona, settings.generation, 0, [])
    schema = strict_json_schema(request.response_model)
    assert schema is not None
    candidates = schema["properties"]["candidates"]
    assert (candidates["minItems"], candidates["maxItems"]) == (3, 3)
    references = schema["$defs"]["QueryCandidateDraft"]["properties"]["references"]
    assert (references["minItems"], references["maxItems"]) == (2, 4)
    assert generation_request(persona, settings.generation, 1, []).response_model is (
        request.response_model
    )  # one model per statement: its schema and grammar are built once

    judge = ReferenceRelevanceInputs(
        query="q",
        query_date="2024-06-01",
        query_domain="Travel",
        references=[
            {"index": i, "text": "t", "date": "2024-05-01", "domain": "Books"} for i in range(3)
        ],
    ).request()
    verdicts = judge.response_model.model_json_schema()
    assert verdicts["properties"]["verdicts"]["minItems"] == 3
    assert verdicts["$defs"]["RelevanceVerdict"]["properties"]["index"]["enum"] == [0, 1, 2]

    dialogue = DialogueInputs(
        event={"date": "2024-05-01", "weekday": "Wednesday", "domain": "Books", "description": "d"},
        news=["reads a lot", "moved house"],
        demographics={},
        interaction_summary=None,
        affinities=[],
        situations=[],
        turns_min=4,
        turns_max=6,
    ).request()
    said = dialogue.response_model.model_json_schema()
    turns = said["properties"]["turns"]
    assert (turns["minItems"], turns["maxItems"]) == (4, 6)
    news_said = said["$defs"]["NewsSaid"]["properties"]
    assert news_said["news_index"]["enum"] == [0, 1]
    assert news_said["turn_index"]["enum"] == [0, 2, 4]  # the user's turns
    # Stated, not enforced: an answer with too few turns still parses, for the stage to refuse.
    assert dialogue.response_model.model_validate({"turns": ["hi"]}).turns == ["hi"]
