"""synthesise_timeline on real personas: event rules, reference placement, filler guards."""

from __future__ import annotations

import datetime as dt

import pytest

from memoryquest.contracts import EventKind, RejectionReason, Timeline
from memoryquest.ids import make_id
from memoryquest.llm.factory import shared_local_embedder
from memoryquest.settings import GenerationSettings
from memoryquest.simulator.persona_grounding import split_sentences
from memoryquest.stages.timelines import (
    EventDraft,
    TimelineDraft,
    build_events,
    event_news,
    filler_similarity_problems,
    synthesise_timeline,
    timeline_request,
)
from memoryquest.text import contains_verbatim

try:
    from tests.generation_fixture import GeneratedRun, generated, simulated_client
except ModuleNotFoundError:  # tests/ is not a package: pytest puts it on sys.path
    from generation_fixture import GeneratedRun, generated, simulated_client


@pytest.fixture(scope="module")
def run() -> GeneratedRun:
    return generated()


def timelines(run: GeneratedRun) -> list[tuple]:
    out = []
    for q in run.kept():
        result = run.timelines[q.query_id]
        assert result.timeline is not None, result.rejected
        out.append((q, result.timeline))
    return out


def test_every_kept_query_gets_a_timeline_within_the_event_rules(run: GeneratedRun) -> None:
    g = run.settings.generation
    counts = []
    for q, t in timelines(run):
        assert isinstance(t, Timeline)
        assert t.timeline_id == make_id("timeline", q.query_id) and t.persona_id == q.persona_id
        counts.append(len(t.events))
        assert g.events_min <= len(t.events) <= g.events_max
        dates = [e.date for e in t.events]
        assert dates == sorted(dates)
        earliest = min(r.date for r in q.references)
        assert 0 <= (earliest - dates[0]).days <= g.lead_days_max
        assert dates[-1] < q.query_date
        assert [e.event_id for e in t.events] == [
            make_id("event", q.query_id, i) for i in range(len(t.events))
        ]
    assert len(set(counts)) >= 3  # lengths vary across queries
    # dates spread over weeks before the query
    spans = [(q.query_date - t.events[0].date).days for q, t in timelines(run)]
    assert sum(spans) / len(spans) > 21


def test_each_reference_is_carried_by_exactly_one_matching_event(run: GeneratedRun) -> None:
    for q, t in timelines(run):
        for r in q.references:
            carriers = [e for e in t.events if e.reference_id == r.reference_id]
            assert len(carriers) == 1
            (event,) = carriers
            assert event.kind == EventKind.REFERENCE
            assert (event.date, event.domain) == (r.date, r.domain)
            assert event.news.count(r.text) == 1
        assert sum(e.kind == EventKind.REFERENCE for e in t.events) == len(q.references)


def test_filler_is_persona_grounded_and_never_carries_a_reference(run: GeneratedRun) -> None:
    g = run.settings.generation
    pairs: list[tuple[str, str]] = []
    for q, t in timelines(run):
        persona = next(p for p in run.personas if p.persona_id == q.persona_id)
        task_openings = {split_sentences(task.description)[0] for task in persona.tasks}
        fillers = [e for e in t.events if e.kind == EventKind.FILLER]
        ref_domains = {r.domain for r in q.references}
        if len(fillers) >= 2:
            assert len({e.domain for e in fillers}) >= 2
        for e in fillers:
            assert e.reference_id is None and e.domain not in ref_domains
            assert e.description.split(" Chatting ")[0] in task_openings
            assert not any(contains_verbatim(e.description, r.text) for r in q.references)
            assert not any(contains_verbatim(n, r.text) for n in e.news for r in q.references)
        pairs.extend((e.description, r.text) for e in fillers for r in q.references)
    texts = sorted({text for pair in pairs for text in pair})
    vectors = dict(zip(texts, shared_local_embedder().embed_sync(texts), strict=True))
    worst = max(float(vectors[a] @ vectors[b]) for a, b in pairs)
    assert worst <= g.filler_similarity_max


# --------------------------------------------------------------------------- broken drafts


@pytest.fixture(scope="module")
def real_pair(run: GeneratedRun) -> tuple:
    q, t = timelines(run)[0]
    draft = TimelineDraft(
        events=[
            EventDraft(
                date=e.date.isoformat(),
                domain=e.domain.value,
                description=e.description,
                reference_index=next(
                    (i for i, r in enumerate(q.references) if r.reference_id == e.reference_id),
                    None,
                ),
                news=e.news,
            )
            for e in t.events
        ]
    )
    return q, t, draft


def test_the_real_draft_rebuilds_the_same_events(real_pair: tuple) -> None:
    q, t, draft = real_pair
    built = build_events(draft, q, GenerationSettings())
    assert built.problems == []
    assert built.events == t.events


def _drop_reference(draft: TimelineDraft) -> None:
    draft.events = [e for e in draft.events if e.reference_index != 0]


def _swap_first_two(draft: TimelineDraft) -> None:
    draft.events[0], draft.events[1] = draft.events[1], draft.events[0]


def _late_last(q):
    def change(draft: TimelineDraft) -> None:
        draft.events[-1].date = q.query_date.isoformat()

    return change


def _early_first(draft: TimelineDraft) -> None:
    first = dt.date.fromisoformat(draft.events[0].date)
    draft.events[0].date = (first - dt.timedelta(days=60)).isoformat()


def _twice(draft: TimelineDraft) -> None:
    filler = next(e for e in draft.events if e.reference_index is None)
    filler.reference_index = 0


def _filler_in_reference_domain(q):
    def change(draft: TimelineDraft) -> None:
        filler = next(e for e in draft.events if e.reference_index is None)
        filler.domain = q.references[0].domain.value

    return change


def _filler_repeats(q):
    def change(draft: TimelineDraft) -> None:
        filler = next(e for e in draft.events if e.reference_index is None)
        filler.description += " " + q.references[1].text

    return change


def _filler_news_repeats(q):
    def change(draft: TimelineDraft) -> None:
        filler = next(e for e in draft.events if e.reference_index is None)
        filler.news = [*filler.news, q.references[1].text]

    return change


@pytest.mark.parametrize(
    ("corrupt", "words"),
    [
        (lambda q: _drop_reference, "reference 0 is carried by 0 events"),
        (lambda q: _swap_first_two, "not in ascending order"),
        (_late_last, "is not before the query date"),
        (lambda q: _early_first, "more than 14 days before the earliest reference"),
        (lambda q: _twice, "reference 0 is carried by 2 events"),
        (_filler_in_reference_domain, "a domain one of the references is about"),
        (_filler_repeats, "filler repeats reference 1"),
        (_filler_news_repeats, "filler repeats reference 1"),
    ],
)
def test_broken_timelines_are_caught(real_pair: tuple, corrupt, words: str) -> None:
    q, _, draft = real_pair
    broken = draft.model_copy(deep=True)
    corrupt(q)(broken)
    problems = build_events(broken, q, GenerationSettings()).problems
    assert any(words in p for p in problems), problems


async def test_an_impossible_timeline_is_regenerated_then_rejected(run: GeneratedRun) -> None:
    q = run.kept()[0]
    persona = run.persona("user0")
    settings = GenerationSettings(
        events_min=2, events_max=2, max_regenerations=2
    )  # fewer events than references
    result = await synthesise_timeline(persona, q, simulated_client(), settings)
    assert result.timeline is None
    assert len(result.rejected) == 3
    assert all(
        r.reason == RejectionReason.INVARIANT and r.stage == "timelines" for r in result.rejected
    )
    assert all("events; need 2-2" in r.detail for r in result.rejected)
    assert len({r.rejected_id for r in result.rejected}) == 3
    assert all(TimelineDraft.model_validate_json(r.payload_json).events for r in result.rejected)


async def test_filler_too_close_to_a_reference_is_rejected(run: GeneratedRun) -> None:
    q = run.kept()[1]
    settings = GenerationSettings(filler_similarity_max=-1.0, max_regenerations=0)
    result = await synthesise_timeline(run.persona("user0"), q, simulated_client(), settings)
    assert result.timeline is None
    assert "similar to reference" in result.rejected[0].detail


async def test_a_paraphrase_hidden_in_a_long_filler_description_is_caught(
    run: GeneratedRun,
) -> None:
    """The check reads filler sentence by sentence: one paraphrase among many sentences is not diluted."""
    q, timeline = timelines(run)[0]
    filler = next(e for e in timeline.events if e.kind == EventKind.FILLER)
    reference = q.references[0].text.rstrip(".")
    paraphrase = f"Lately the user mentioned this: {reference[:1].lower()}{reference[1:]}."
    padding = " ".join(split_sentences(e.description)[0] for e in timeline.events)
    hidden = filler.model_copy(
        update={"description": f"{filler.description} {padding} {paraphrase} {padding}"}
    )
    events = [hidden if e.event_id == filler.event_id else e for e in timeline.events]
    client = simulated_client()
    settings = GenerationSettings()
    assert await filler_similarity_problems(timeline.events, q, client, settings) == []
    problems = await filler_similarity_problems(events, q, client, settings)
    assert len(problems) == 1 and filler.event_id in problems[0] and "Lately" in problems[0]
    # The description's one vector would have diluted it below the limit.
    whole, ref = shared_local_embedder().embed_sync([hidden.description, q.references[0].text])
    assert float(whole @ ref) < settings.filler_similarity_max


async def test_a_paraphrase_among_a_fillers_news_is_caught(run: GeneratedRun) -> None:
    """The news list is what the conversation is asked to tell, so it is read as well."""
    q, timeline = timelines(run)[0]
    filler = next(e for e in timeline.events if e.kind == EventKind.FILLER)
    reference = q.references[0].text.rstrip(".")
    paraphrase = f"Lately, {reference[:1].lower()}{reference[1:]}"
    hidden = filler.model_copy(update={"news": [*filler.news, paraphrase]})
    events = [hidden if e.event_id == filler.event_id else e for e in timeline.events]
    problems = await filler_similarity_problems(events, q, simulated_client(), GenerationSettings())
    assert len(problems) == 1 and filler.event_id in problems[0] and "Lately" in problems[0]


def test_an_events_news_holds_its_reference_word_for_word() -> None:
    reference = "Started a night shift at the bakery in March."
    # The model's restatement gives way to the reference, in its place.
    assert event_news(
        ["Bought a bike", "started a night shift at the bakery in March", "Got a cat"],
        reference,
        "e_1",
    ) == ["Bought a bike", reference, "Got a cat"]
    # Left out, it goes in at a place drawn from the event id, not always first or last.
    places = {event_news(["A", "B", "C"], reference, f"e_{i}").index(reference) for i in range(40)}
    assert places == {0, 1, 2, 3}
    assert event_news(["  Got   a cat ", ""], None, "e_1") == ["Got a cat"]


def test_every_timeline_of_a_user_sends_the_same_persona_block_under_one_cache_key(
    run: GeneratedRun,
) -> None:
    """The user's material, requests and references come first and are the same for each of their
    timelines, so the provider caches them once per persona."""
    queries = [q for q in run.kept() if q.persona_id == run.persona("user0").persona_id]
    persona = run.persona("user0")
    requests = [
        timeline_request(persona, q, run.settings.generation, 0, queries) for q in queries[:3]
    ]
    assert {r.prompt_cache_scope() for r in requests} == {f"persona:{persona.persona_id}"}
    blocks = [
        {k: v for k, v in r.variables.items() if k not in ("query", "references")} for r in requests
    ]
    assert blocks[0]["user_requests"] and all(b == blocks[0] for b in blocks)


async def test_same_seed_same_timeline(run: GeneratedRun) -> None:
    q = run.kept()[2]
    persona = run.persona("user0")
    settings = run.settings.generation
    again = await synthesise_timeline(persona, q, simulated_client(), settings)
    assert again.timeline == run.timelines[q.query_id].timeline
    other = await synthesise_timeline(persona, q, simulated_client(), settings, seed=9)
    assert other.timeline is not None and other.timeline != again.timeline


def test_the_timeline_prompt_is_blind_to_the_request(run: GeneratedRun) -> None:
    """The model is told when the history ends, never what the user will ask or why, nor the
    user's other requests: it cannot write an event that looks ahead to them."""
    from memoryquest.stages.timelines import timeline_request
    from memoryquest.stages.timelines_contracts import TimelineInputs

    queries = run.kept()
    query = queries[0]
    persona = next(p for p in run.personas if p.persona_id == query.persona_id)
    request = timeline_request(persona, query, GenerationSettings(), 0, queries)
    prompt = "\n".join(m["content"] for m in TimelineInputs.template().render(request.variables))
    assert query.query_date.isoformat() in prompt
    for other in queries:
        assert other.text not in prompt and other.reasoning not in prompt
    assert all(ref.text in prompt for ref in query.references)
    # The simulator still gets every variable: the offline data does not change.
    assert request.variables["query"]["text"] == query.text
    assert [r["text"] for r in request.variables["user_requests"]] == [q.text for q in queries]
