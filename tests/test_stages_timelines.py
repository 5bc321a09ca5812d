"""synthesise_timeline on real personas: slots planned by code, blind prompts, one news form,
filler guards."""

from __future__ import annotations

import dataclasses
import re
from collections import Counter

import pytest

from memoryquest.contracts import EventKind, RejectionReason, Timeline
from memoryquest.ids import make_id
from memoryquest.llm.factory import shared_local_embedder
from memoryquest.settings import GenerationSettings
from memoryquest.simulator.persona_grounding import split_sentences
from memoryquest.stages.news_form import news_form_problem
from memoryquest.stages.timeline_slots import Slot, plan_slots
from memoryquest.stages.timelines import (
    EventDraft,
    TimelineDraft,
    build_events,
    event_news,
    filler_similarity_problems,
    synthesise_timeline,
    timeline_inputs,
    timeline_request,
)
from memoryquest.stages.timelines_contracts import TimelineInputs
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
        persona = next(p for p in run.personas if p.persona_id == q.persona_id)
        slots = plan_slots(persona, q, run.settings.generation)
        for slot, event in zip(slots, t.events, strict=True):
            assert (slot.event_id, slot.date, slot.domain) == (
                event.event_id,
                event.date,
                event.domain,
            )
            assert len(event.news) == slot.news_count
            if slot.reference is not None:
                assert event.news[slot.reference_position or 0] == slot.reference.text


def test_filler_is_persona_grounded_and_never_carries_a_reference(run: GeneratedRun) -> None:
    g = run.settings.generation
    pairs: list[tuple[str, str]] = []
    shares_a_reference_domain = 0
    for q, t in timelines(run):
        persona = next(p for p in run.personas if p.persona_id == q.persona_id)
        task_openings = {split_sentences(task.description)[0] for task in persona.tasks}
        fillers = [e for e in t.events if e.kind == EventKind.FILLER]
        if len(fillers) >= 2:
            assert len({e.domain for e in fillers}) >= 2
        shares_a_reference_domain += any(
            e.domain in {r.domain for r in q.references} for e in fillers
        )
        for e in fillers:
            assert e.reference_id is None and e.domain != q.domain
            assert e.description.split(" Chatting ")[0] in task_openings
            assert not any(contains_verbatim(e.description, r.text) for r in q.references)
            assert not any(contains_verbatim(n, r.text) for n in e.news for r in q.references)
        pairs.extend((e.description, r.text) for e in fillers for r in q.references)
    # Filler may share a reference's domain, so a domain does not mark the reference events.
    assert shares_a_reference_domain >= len(timelines(run)) // 4
    texts = sorted({text for pair in pairs for text in pair})
    vectors = dict(zip(texts, shared_local_embedder().embed_sync(texts), strict=True))
    worst = max(float(vectors[a] @ vectors[b]) for a, b in pairs)
    assert worst <= g.filler_similarity_max


def test_reference_and_filler_news_share_one_form(run: GeneratedRun) -> None:
    """On an offline run, every news item is in the one form, and an item's length says little
    about whether it is a reference (AUC of length, reference vs model-written, near 0.5)."""
    g = run.settings.generation
    reference_lengths: list[int] = []
    written_lengths: list[int] = []
    for q, t in timelines(run):
        texts = {r.text for r in q.references}
        for e in t.events:
            for item in e.news:
                assert news_form_problem(item, g) is None, item
                (reference_lengths if item in texts else written_lengths).append(len(item.split()))
    assert len(reference_lengths) > 50 and len(written_lengths) > 50
    wins = sum((r > w) + 0.5 * (r == w) for r in reference_lengths for w in written_lengths)
    auc = wins / (len(reference_lengths) * len(written_lengths))
    assert 0.4 <= auc <= 0.6, auc


# --------------------------------------------------------------------------- slots planned by code


def _variants(run: GeneratedRun, count: int) -> list[tuple]:
    """The run's queries under many other ids: what the plan does across queries."""
    out = []
    queries = run.kept()
    for n in range(count):
        q = queries[n % len(queries)]
        persona = next(p for p in run.personas if p.persona_id == q.persona_id)
        out.append((persona, q.model_copy(update={"query_id": make_id("query", "variant", n)})))
    return out


def test_slots_keep_the_event_rules_and_give_each_reference_its_date_and_domain(
    run: GeneratedRun,
) -> None:
    g = run.settings.generation
    for persona, q in _variants(run, 200):
        slots = plan_slots(persona, q, g)
        assert g.events_min <= len(slots) <= g.events_max
        dates = [s.date for s in slots]
        assert dates == sorted(dates) and dates[-1] < q.query_date
        assert 0 <= (min(r.date for r in q.references) - dates[0]).days <= g.lead_days_max
        carried = [s.reference for s in slots if s.reference is not None]
        assert sorted(r.reference_id for r in carried) == sorted(
            r.reference_id for r in q.references
        )
        for s in slots:
            assert g.news_per_event_min <= s.news_count <= g.news_per_event_max
            if s.reference is not None:
                assert (s.date, s.domain) == (s.reference.date, s.reference.domain)
                assert s.reference_position is not None and 0 <= s.reference_position < s.news_count
        # filler days are days of their own: none shared with a reference or with other filler
        filler = [s.date for s in slots if s.reference is None]
        assert len(set(filler)) == len(filler)
        assert not set(filler) & {r.date for r in q.references}
        assert plan_slots(persona, q, g) == slots  # from ids: the same every time


def test_slot_order_news_counts_and_positions_say_nothing_of_the_reference(
    run: GeneratedRun,
) -> None:
    """Over many queries the reference's slot index and its position among the news are spread,
    and reference slots ask for as many news items as filler slots."""
    g = run.settings.generation
    indices: Counter[int] = Counter()
    positions: Counter[tuple[int, int]] = Counter()
    counts: dict[bool, Counter[int]] = {True: Counter(), False: Counter()}
    for persona, q in _variants(run, 400):
        slots = plan_slots(persona, q, g)
        for index, s in enumerate(slots):
            counts[s.reference is not None][s.news_count] += 1
            if s.reference is not None:
                indices[index] += 1
                positions[(s.news_count, s.reference_position or 0)] += 1
    assert len(indices) >= g.events_max - 1 and max(indices.values()) < 0.3 * indices.total()
    for news_count in range(g.news_per_event_min, g.news_per_event_max + 1):
        seen = [positions[(news_count, p)] for p in range(news_count)]
        assert min(seen) > 0.6 * sum(seen) / news_count, (news_count, seen)
    shares = {
        kind: {n: c / counter.total() for n, c in counter.items()}
        for kind, counter in counts.items()
    }
    for n in range(g.news_per_event_min, g.news_per_event_max + 1):
        assert abs(shares[True].get(n, 0) - shares[False].get(n, 0)) < 0.05, shares


def test_a_slots_place_in_its_timeline_says_nothing_of_the_reference(run: GeneratedRun) -> None:
    """At every (index, slots after it) — which gives the timeline's length too — the share of
    slots that carry a reference stays near one half, so a classifier on a slot's place in its
    timeline learns nothing."""
    g = run.settings.generation
    seen: dict[tuple[int, int], Counter[bool]] = {}
    for persona, q in _variants(run, 600):
        slots = plan_slots(persona, q, g)
        for index, s in enumerate(slots):
            place = (index, len(slots) - 1 - index)
            seen.setdefault(place, Counter())[s.reference is not None] += 1
    lengths: dict[int, Counter[bool]] = {}
    for (index, after), counter in seen.items():
        lengths.setdefault(index + after + 1, Counter()).update(counter)
    for length, counter in lengths.items():
        assert counter[True] / counter.total() == pytest.approx(0.5, abs=0.02), (length, counter)
    for place, counter in seen.items():
        if counter.total() >= 60:
            assert 0.3 <= counter[True] / counter.total() <= 0.7, (place, counter)


def test_the_prompt_is_the_same_whichever_slots_carry_the_references(run: GeneratedRun) -> None:
    """The model is blind: moving the references to other slots (same dates, domains and counts)
    leaves every variable of the request as it was."""
    g = run.settings.generation
    queries = [q for q in run.kept() if q.persona_id == run.persona("user0").persona_id]
    persona = run.persona("user0")
    for q in queries[:5]:
        slots = plan_slots(persona, q, g)
        carried = [s for s in slots if s.reference is not None]
        moved = [dataclasses.replace(s, reference=None, reference_position=None) for s in slots]
        fillers = [i for i, s in enumerate(slots) if s.reference is None]
        for i, s in zip(fillers, carried, strict=False):  # each reference onto a filler slot
            moved[i] = dataclasses.replace(moved[i], reference=s.reference, reference_position=0)
        assert [s.reference for s in moved] != [s.reference for s in slots]
        told = timeline_inputs(persona, q, slots, g, queries).variables()
        assert timeline_inputs(persona, q, moved, g, queries).variables() == told
        assert told == timeline_request(persona, q, g, 0, queries).variables
        template = TimelineInputs.template()
        rendered = "\n".join(m["content"] for m in template.render(told))
        assert not re.search(r"\breferences?\b", rendered, re.IGNORECASE)


# --------------------------------------------------------------------------- broken drafts


@pytest.fixture(scope="module")
def real_pair(run: GeneratedRun) -> tuple:
    q, t = timelines(run)[0]
    persona = next(p for p in run.personas if p.persona_id == q.persona_id)
    slots = plan_slots(persona, q, run.settings.generation)
    draft = TimelineDraft(
        events=[
            EventDraft(slot=index, description=e.description, news=e.news)
            for index, e in enumerate(t.events)
        ]
    )
    return q, t, draft, slots


def test_the_real_draft_rebuilds_the_same_events(real_pair: tuple) -> None:
    q, t, draft, slots = real_pair
    built = build_events(draft, slots, q, GenerationSettings())
    assert built.problems == []
    assert built.events == t.events


def _filler(draft: TimelineDraft, slots: list[Slot]) -> EventDraft:
    return next(e for e in draft.events if slots[e.slot].reference is None)


def _mutate_news(mutate):
    """A filler slot's first news item, changed by ``mutate``."""

    def change(q, slots, draft: TimelineDraft) -> None:
        filler = _filler(draft, slots)
        filler.news[0] = mutate(filler.news[0])

    return change


def _drop_slot(q, slots, draft: TimelineDraft) -> None:
    draft.events = draft.events[1:]


def _twice(q, slots, draft: TimelineDraft) -> None:
    draft.events.append(draft.events[0].model_copy(deep=True))


def _unknown_slot(q, slots, draft: TimelineDraft) -> None:
    draft.events[-1].slot = len(slots) + 3


def _short(q, slots, draft: TimelineDraft) -> None:
    _filler(draft, slots).news.pop()


def _empty_description(q, slots, draft: TimelineDraft) -> None:
    draft.events[0].description = "  "


def _filler_repeats(q, slots, draft: TimelineDraft) -> None:
    _filler(draft, slots).description += " " + q.references[1].text


def _filler_news_repeats(q, slots, draft: TimelineDraft) -> None:
    _filler(draft, slots).news[0] = q.references[1].text


@pytest.mark.parametrize(
    ("corrupt", "words"),
    [
        (_drop_slot, "slot 0 is written 0 times"),
        (_twice, "slot 0 is written 2 times"),
        (_unknown_slot, "which were not asked for"),
        (_short, "news items; asked for"),
        (_empty_description, "slot 0: empty description"),
        (_filler_repeats, "repeats reference 1"),
        (_filler_news_repeats, "repeats reference 1"),
        (_mutate_news(lambda t: "I " + t[0].lower() + t[1:]), "out of form (in the first"),
        (_mutate_news(lambda t: "The user " + t[0].lower() + t[1:]), "out of form (names its"),
        (_mutate_news(lambda t: t + " and will keep at it"), "out of form (stated as a plan"),
        (_mutate_news(lambda t: " ".join([t] * 3)), "out of form ("),
        (_mutate_news(lambda t: " ".join(t.split()[:2])), "out of form (2 words"),
        (_mutate_news(lambda t: t + "?"), "out of form (not a plain statement"),
    ],
)
def test_broken_timelines_are_caught(real_pair: tuple, corrupt, words: str) -> None:
    q, _, draft, slots = real_pair
    broken = draft.model_copy(deep=True)
    corrupt(q, slots, broken)
    problems = build_events(broken, slots, q, GenerationSettings()).problems
    assert any(words in p for p in problems), problems


def test_more_references_than_events_allowed_is_refused(
    run: GeneratedRun, real_pair: tuple
) -> None:
    q, _, draft, _ = real_pair
    persona = next(p for p in run.personas if p.persona_id == q.persona_id)
    settings = GenerationSettings(events_min=2, events_max=len(q.references) - 1)
    slots = plan_slots(persona, q, settings)
    assert len(slots) == len(q.references)  # one per reference, no filler: one too many
    problems = build_events(draft, slots, q, settings).problems
    assert f"{len(slots)} events; need 2-{len(q.references) - 1}" in problems


def test_what_the_model_wrote_where_a_reference_goes_is_not_held_to_the_form(
    real_pair: tuple,
) -> None:
    """Code replaces it with the reference, so it is not read."""
    q, t, draft, slots = real_pair
    index = next(i for i, s in enumerate(slots) if s.reference is not None)
    changed = draft.model_copy(deep=True)
    (event,) = [e for e in changed.events if e.slot == index]
    event.news[slots[index].reference_position or 0] = "i will tell you MY news?"
    built = build_events(changed, slots, q, GenerationSettings())
    assert built.problems == [] and built.events == t.events


async def test_an_impossible_timeline_is_regenerated_then_rejected(run: GeneratedRun) -> None:
    q = run.kept()[0]
    persona = run.persona("user0")
    settings = GenerationSettings(
        news_words_min=1, news_words_max=2, max_regenerations=2
    )  # no update of the simulator's is this short
    result = await synthesise_timeline(persona, q, simulated_client(), settings)
    assert result.timeline is None
    assert len(result.rejected) == 3
    assert all(
        r.reason == RejectionReason.INVARIANT and r.stage == "timelines" for r in result.rejected
    )
    assert all("news items; asked for" in r.detail for r in result.rejected)
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


def test_an_events_news_holds_its_reference_word_for_word(real_pair: tuple) -> None:
    q, _, _, slots = real_pair
    slot = next(s for s in slots if s.reference is not None)
    written = [f"Item {n} of the model's own" for n in range(slot.news_count)]
    news = event_news(written, slot)
    assert news[slot.reference_position or 0] == slot.reference.text
    assert len(news) == slot.news_count and news.count(slot.reference.text) == 1
    filler = next(s for s in slots if s.reference is None)
    assert event_news(written[: filler.news_count], filler) == written[: filler.news_count]


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
        {k: v for k, v in r.variables.items() if k not in ("query", "slots", "own_references")}
        for r in requests
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
    assert all(ref.text in prompt for ref in query.references)  # among the user's statements
    # The simulator still gets every variable: the offline data does not change.
    assert request.variables["query"]["text"] == query.text
    assert [r["text"] for r in request.variables["user_requests"]] == [q.text for q in queries]
