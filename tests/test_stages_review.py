"""The blind review (generation.review): what it reads, what the simulator's reader flags, and how
the dialogue loop treats a flagged conversation, offline and through an OpenAI-compatible server."""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from memoryquest.contracts import Query, RejectionReason, Role, Session, Timeline
from memoryquest.llm.factory import build_client, shared_local_embedder
from memoryquest.settings import GenerationSettings, Settings
from memoryquest.simulator import simulate
from memoryquest.stages.dialogues import expand_dialogues
from memoryquest.stages.review import review_inputs
from memoryquest.stages.review_contracts import ReviewFlag, SessionReview, SessionReviewInputs
from memoryquest.testing import FakeOpenAIServer
from memoryquest.text import normalise_text, split_sentences

try:
    from tests.generation_fixture import GeneratedRun, generated, simulated_client
except ModuleNotFoundError:  # tests/ is not a package: pytest puts it on sys.path
    from generation_fixture import GeneratedRun, generated, simulated_client

TEMPLATE = SessionReviewInputs.template_id


@pytest.fixture(scope="module")
def run() -> GeneratedRun:
    return generated()


def timeline_of(run: GeneratedRun, query: Query) -> Timeline:
    timeline = run.timelines[query.query_id].timeline
    assert timeline is not None
    return timeline


def sessions_of(run: GeneratedRun, query: Query) -> list[Session]:
    return sorted(run.dialogues[query.query_id].sessions, key=lambda s: s.date)


def read(session: Session, earlier: list[Session] | None = None) -> SessionReview:
    """The simulator's review of ``session`` as the stage asks for it."""
    inputs = review_inputs(session, earlier or [])
    return SessionReview.model_validate_json(simulate(TEMPLATE, inputs.variables()))


def with_user_sentence(session: Session, turn_index: int, sentence: str) -> Session:
    """``session`` with ``sentence`` added at the end of one of its user turns."""
    assert session.turns[turn_index].role is Role.USER
    turns = list(session.turns)
    turn = turns[turn_index]
    turns[turn_index] = turn.model_copy(update={"content": f"{turn.content} {sentence}"})
    return session.model_copy(update={"turns": turns})


# --------------------------------------------------------------------------- what the reviewer reads


def test_the_prompt_carries_no_reference_query_or_label(run: GeneratedRun) -> None:
    """Rendered as a model reads it: no reference's text, no query, no id, no named turn."""
    rendered = 0
    for query in run.kept():
        sessions = sessions_of(run, query)
        for index, session in enumerate(sessions):
            inputs = review_inputs(session, sessions[:index])
            text = "\n".join(m["content"] for m in inputs.template().render(inputs.variables()))
            flat = normalise_text(text)
            for reference in query.references:
                assert normalise_text(reference.text) not in flat
                assert reference.reference_id not in text
            assert normalise_text(query.text) not in flat
            for label in (session.session_id, session.query_id, session.event_id, "news_said"):
                assert label not in text
            # Only what was said: the session's turns, and the earlier user turns.
            for turn in session.turns:
                assert json.dumps(turn.content, ensure_ascii=False) in text
            rendered += 1
    assert rendered >= 20
    assert set(SessionReviewInputs.model_fields) == {"date", "turns", "earlier"}


def test_earlier_conversations_lend_only_their_user_turns_oldest_first(run: GeneratedRun) -> None:
    query = next(q for q in run.kept() if len(sessions_of(run, q)) >= 3)
    first, second, third = sessions_of(run, query)[:3]
    inputs = review_inputs(third, [second, first])
    said = [t.content for s in (first, second) for t in s.turns if t.role is Role.USER]
    assert [turn["text"] for turn in inputs.earlier] == said
    assert [turn["index"] for turn in inputs.turns] == list(range(len(third.turns)))


# --------------------------------------------------------------------------- the simulator's reader


def test_the_simulated_reader_flags_what_is_added_to_a_real_conversation(
    run: GeneratedRun,
) -> None:
    """Mutate real conversations: each added sentence is flagged where it was added, for what it
    does; the conversation's own sentences are read as before."""
    query = next(q for q in run.kept() if len(sessions_of(run, q)) >= 2)
    earlier, session = sessions_of(run, query)[:2]
    before = read(session).flagged
    additions = {
        ReviewFlag.POINTS_AHEAD: "I suppose that will matter once the holidays come around.",
        ReviewFlag.ANNOUNCES: "Just so you know, my sister moved in with me last week.",
    }
    for kind, sentence in additions.items():
        flags = read(with_user_sentence(session, 2, sentence)).flagged
        added = [f for f in flags if f not in before]
        assert [(f.turn_index, f.sentence, f.kind) for f in added] == [(2, sentence, kind)]
    # Retelling needs the earlier conversation: the same update told again is caught with it.
    told = next(
        s
        for t in earlier.turns
        if t.role is Role.USER
        for s in split_sentences(t.content)
        if len(s.split()) >= 10
    )
    retold = with_user_sentence(session, 2, told)
    assert not any(
        f.kind is ReviewFlag.RETELLS and f.sentence == told for f in read(retold).flagged
    )
    flags = read(retold, [earlier]).flagged
    assert any(
        f.kind is ReviewFlag.RETELLS and f.turn_index == 2 and f.sentence == told for f in flags
    )


def test_the_simulated_reader_does_not_see_meaning(run: GeneratedRun) -> None:
    """What its docstring says it misses: an aside or a forward pointer in words outside its forms."""
    query = run.kept()[0]
    session = sessions_of(run, query)[0]
    before = read(session).flagged
    for unseen in (
        "Not that it's a big deal, but I gave up sugar in March.",
        "It'll probably figure in when I book the next one.",
    ):
        assert read(with_user_sentence(session, 0, unseen)).flagged == before


async def test_review_on_offline_flagged_conversations_are_regenerated_or_rejected_flagged(
    run: GeneratedRun,
) -> None:
    """The simulator path with the review on: every rejection it causes names the reviewer's
    flags; every conversation kept passes the simulated reader; the tally counts both."""
    settings = GenerationSettings(review=True)
    client = simulated_client()
    persona = run.persona("user0")
    queries = [q for q in run.kept() if q.persona_id == persona.persona_id][:4]
    flagged = reviewed = kept = 0
    for query in queries:
        result = await expand_dialogues(persona, query, timeline_of(run, query), client, settings)
        assert result.review is not None
        reasons = Counter(r.reason for r in result.rejected)
        flags = [r for r in result.rejected if r.reason is RejectionReason.FLAGGED]
        for rejection in flags:
            assert "the blind reviewer flagged" in rejection.detail
            session = Session.model_validate_json(rejection.payload_json)
            assert read(session).flagged or "retells" in rejection.detail
        for session in result.sessions:
            looked = read(session).flagged  # without earlier turns: no retelling to find
            assert looked == []
        assert result.review.sessions_flagged == reasons[RejectionReason.FLAGGED]
        flagged += result.review.sessions_flagged
        reviewed += result.review.sessions_reviewed
        kept += len(result.sessions)
    usage = {u.stage: u for u in client.usage()}
    assert usage["review"].requests == reviewed
    assert reviewed >= flagged + kept
    assert flagged > 0  # the simulator's own asides ("If it helps, ...") are read as such


# --------------------------------------------------------------------------- a real endpoint


@pytest.fixture(scope="module")
def server() -> Iterator[FakeOpenAIServer]:
    with FakeOpenAIServer() as server:
        yield server


def endpoint_settings(server: FakeOpenAIServer, tmp_path: Path) -> Settings:
    return Settings(
        output_dir=tmp_path,
        cache={"enabled": False},
        # One band: every event written at once, so a query given up leaves each of its other
        # conversations written and dropped with it (with bands, later ones are never asked).
        generation={"review": True, "max_regenerations": 2, "ledger_waves": 1},
        endpoint={
            "backend": "openai",
            "base_url": server.url,
            "simulator_hints": True,  # the fake server answers from the simulator
            "embedder": "local",
            "chat_model": "author-model",
            "judge_model": "judge-model",
            "context_window": 128_000,
        },
    )


async def test_a_reviewer_on_the_endpoint_flags_regenerates_and_rejects_flagged(
    run: GeneratedRun, server: FakeOpenAIServer, tmp_path: Path
) -> None:
    """The judge model on an OpenAI-compatible server flags one event's conversation every time
    and another's once: the first is asked for max_regenerations + 1 times and rejected
    ``flagged`` (its query goes), the second is written again and passes."""
    server.reset()
    query = next(
        q
        for q in run.kept()
        if len({e.date for e in timeline_of(run, q).events}) == len(timeline_of(run, q).events) >= 3
    )
    persona = next(p for p in run.personas if p.persona_id == query.persona_id)
    events = timeline_of(run, query).events
    stubborn, once = events[1].date.isoformat(), events[2].date.isoformat()
    seen: Counter[str] = Counter()

    def reviewer(variables: dict[str, Any], model: str) -> dict[str, Any]:
        date = variables["date"]
        seen[date] += 1
        first = split_sentences(variables["turns"][0]["text"])[0]
        flag = {"turn_index": 0, "sentence": first, "reason": "an aside", "kind": "announces"}
        if date == stubborn or (date == once and seen[date] == 1):
            return {"flagged": [flag]}
        return {"flagged": []}

    server.answer_with(TEMPLATE, reviewer)
    settings = endpoint_settings(server, tmp_path)
    client = build_client(settings, embedder=shared_local_embedder())
    try:
        result = await expand_dialogues(
            persona, query, timeline_of(run, query), client, settings.generation
        )
    finally:
        await client.aclose()
        server.answer_with(TEMPLATE, None)
    attempts = settings.generation.max_regenerations + 1
    assert result.sessions == []  # the stubborn event has no conversation: its query goes
    of_stubborn = [r for r in result.rejected if f"event {events[1].event_id}," in r.detail]
    assert len(of_stubborn) == attempts  # every attempt refused, the reviewer's among them
    flagged = [r for r in result.rejected if r.reason is RejectionReason.FLAGGED]
    by_date = Counter(Session.model_validate_json(r.payload_json).date.isoformat() for r in flagged)
    assert by_date == {stubborn: seen[stubborn], once: 1} and seen[stubborn] >= 1
    assert all("the blind reviewer flagged turn 0 announces" in r.detail for r in flagged)
    dropped = [r for r in result.rejected if "dropped with its query" in r.detail]
    assert len(dropped) == len(events) - 1  # the once-flagged one among them, rewritten
    rewritten = Session.model_validate_json(
        next(r.payload_json for r in dropped if f"{events[2].event_id}" in r.payload_json)
    )
    assert seen[once] >= 2 and rewritten.date.isoformat() == once
    assert result.review is not None
    assert result.review.sessions_flagged == len(flagged)
    assert result.review.sessions_reviewed == sum(seen.values())
    # The judge model answered the review, the chat model wrote the conversations: one
    # conversation per event, and one more for every refusal but the stubborn event's last.
    models = Counter(
        (r.template_id, r.body["model"]) for r in server.requests if r.template_id is not None
    )
    assert models[(TEMPLATE, "judge-model")] == sum(seen.values())
    assert models[(TEMPLATE, "author-model")] == 0
    refused = len(result.rejected) - len(dropped)
    assert models[("dialogue_expansion", "author-model")] == len(events) + refused - 1
    usage = {u.stage: u for u in client.usage()}
    assert usage["review"].requests == sum(seen.values())
    # What went over the wire holds no reference and no query.
    for request in server.requests:
        if request.template_id == TEMPLATE:
            wire = normalise_text(json.dumps(request.body["messages"], ensure_ascii=False))
            assert all(normalise_text(r.text) not in wire for r in query.references)
            assert normalise_text(query.text) not in wire


# --------------------------------------------------------------------------- the run's tally


async def test_the_run_manifest_keeps_the_tally_across_a_save(tmp_path: Path) -> None:
    """Through the whole pipeline: the reviewer's model, what it read and what it flagged reach
    the manifest, and a saved dataset reads them back (a merge of shards sums them from there)."""
    from memoryquest.dataset import GeneratedDataset
    from memoryquest.pipeline import generate_dataset

    try:
        from tests.generation_fixture import load_users
    except ModuleNotFoundError:
        from generation_fixture import load_users

    settings = Settings(
        output_dir=tmp_path,
        cache={"enabled": False},
        generation={"review": True, "queries_per_user": 2, "candidates_per_user": 8},
        pgr={"methods": []},
    )
    client = simulated_client()
    dataset = await generate_dataset(load_users("user3"), client, settings)
    assert dataset.manifest is not None and dataset.manifest.review is not None
    tally = dataset.manifest.review
    assert tally.reviewer_model == dataset.manifest.chat_model  # offline: the simulator
    flagged = [r for r in dataset.rejected if r.reason is RejectionReason.FLAGGED]
    assert tally.sessions_flagged == len(flagged)
    assert tally.sessions_reviewed == {u.stage: u for u in client.usage()}["review"].requests
    assert tally.sessions_reviewed >= len(dataset.sessions) + len(flagged)
    reloaded = GeneratedDataset.load(dataset.save(tmp_path / "dataset"))
    assert reloaded.review == tally and reloaded.manifest == dataset.manifest
    off = await generate_dataset(
        load_users("user3"),
        simulated_client(),
        settings.model_copy(
            update={"generation": GenerationSettings(queries_per_user=2, candidates_per_user=8)}
        ),
    )
    assert off.manifest is not None and off.manifest.review is None
    assert "review" not in {u.stage for u in off.manifest.usage}
