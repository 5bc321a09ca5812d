"""expand_dialogues and merge_history on real personas: one session per event, turns, conveyance."""

from __future__ import annotations

import re
import statistics

import pytest

from memoryquest.contracts import EventKind, RejectionReason, Role, Session
from memoryquest.generation.ledger import SaidLedger, restates, said_sentence, told_clauses
from memoryquest.ids import make_id
from memoryquest.llm.factory import shared_local_embedder
from memoryquest.settings import GenerationSettings
from memoryquest.stages.dialogues import (
    DialogueDraft,
    NewsSaid,
    check_dialogue,
    dialogue_inputs,
    expand_dialogues,
    final_text_problem,
    framing_problems,
    restatement,
    said_gamma,
)
from memoryquest.stages.dialogues_contracts import DialogueInputs
from memoryquest.stages.history import merge_history
from memoryquest.text import contains_verbatim, split_sentences

try:
    from tests.generation_fixture import GeneratedRun, generated, simulated_client
    from tests.test_text import ANNOUNCING, POINTING_AHEAD
except ModuleNotFoundError:  # tests/ is not a package: pytest puts it on sys.path
    from generation_fixture import GeneratedRun, generated, simulated_client
    from test_text import ANNOUNCING, POINTING_AHEAD


@pytest.fixture(scope="module")
def run() -> GeneratedRun:
    return generated()


def sessions_of(run: GeneratedRun, query_id: str) -> list[Session]:
    return run.dialogues[query_id].sessions


def test_one_session_per_event_matching_the_event(run: GeneratedRun) -> None:
    """The kept queries' conversations passed every rule at the first attempt; the two
    framing models, learned checks, may have asked again for a few (at most one in fifty
    each: one in twenty-five)."""
    asked_again = []
    for q in run.kept():
        timeline = run.timelines[q.query_id].timeline
        assert timeline is not None
        sessions = sessions_of(run, q.query_id)
        assert len(sessions) == len(timeline.events)
        asked_again.extend(run.dialogues[q.query_id].rejected)
        for event, session in zip(timeline.events, sessions, strict=True):
            assert session.session_id == make_id("session", event.event_id, event.description)
            assert (session.event_id, session.date, session.domain, session.reference_id) == (
                event.event_id,
                event.date,
                event.domain,
                event.reference_id,
            )
            assert (session.persona_id, session.query_id) == (q.persona_id, q.query_id)
    conversations = sum(len(sessions_of(run, q.query_id)) for q in run.kept())
    framing = {
        RejectionReason.MARKED: "announces the news it tells",
        RejectionReason.FORESHADOW: "points ahead from the news it tells",
    }
    assert all(r.reason in framing and framing[r.reason] in r.detail for r in asked_again), [
        r.detail for r in asked_again
    ]
    assert len(asked_again) * 25 <= conversations, [r.detail for r in asked_again]


def test_turns_alternate_within_bounds_about_six_exchanges(run: GeneratedRun) -> None:
    g = run.settings.generation
    lengths = []
    for session in run.dataset.sessions:
        lengths.append(len(session.turns))
        assert g.turns_min <= len(session.turns) <= g.turns_max
        assert [t.role for t in session.turns] == [
            Role.USER if i % 2 == 0 else Role.ASSISTANT for i in range(len(session.turns))
        ]
    assert 8 <= statistics.mean(lengths) <= 14  # shorter when an event brings little news
    assert len(set(lengths)) >= 5


def test_references_are_conveyed_in_the_named_user_turn_never_verbatim(run: GeneratedRun) -> None:
    g = run.settings.generation
    pairs = []
    for q in run.kept():
        references = {r.reference_id: r for r in q.references}
        for session in sessions_of(run, q.query_id):
            for turn in session.turns:
                assert not any(contains_verbatim(turn.content, r.text) for r in q.references)
            if session.reference_id is None:
                assert session.reference_turn_indices == []
                continue
            assert session.reference_turn_indices
            for index in session.reference_turn_indices:
                assert session.turns[index].role == Role.USER
                sentences = split_sentences(session.turns[index].content)
                pairs.append((references[session.reference_id].text, sentences))
    texts = sorted({t for ref, sentences in pairs for t in (ref, *sentences)})
    vectors = dict(zip(texts, shared_local_embedder().embed_sync(texts), strict=True))
    for ref, sentences in pairs:
        assert (
            max(float(vectors[ref] @ vectors[s]) for s in sentences)
            >= g.reference_turn_similarity_min
        )


def test_sessions_are_recognisably_this_persona(run: GeneratedRun) -> None:
    for persona in run.personas:
        values_by_domain = {}
        for a in persona.affinities:
            values_by_domain.setdefault(a.domain, []).extend(v for v in a.values if len(v) > 2)
        sessions = [s for s in run.dataset.sessions if s.persona_id == persona.persona_id]
        grounded = 0
        for session in sessions:
            text = " ".join(t.content for t in session.turns)
            grounded += any(v in text for v in values_by_domain.get(session.domain, []))
            users = [t.content for t in session.turns if t.role == Role.USER]
            assert any(
                re.search(
                    r"\b(?:I(?:'m| am| have| prefer| like| love| usually| need| want)?|[Mm]y|[Mm]e)\b",
                    u,
                )
                for u in users
            )
        assert grounded / len(sessions) > 0.9
    user0 = run.persona("user0")
    text = " ".join(
        t.content for s in run.dataset.sessions if s.persona_id == user0.persona_id for t in s.turns
    )
    assert "Toronto" in text


def test_history_is_chronological_per_persona(run: GeneratedRun) -> None:
    for persona in run.personas:
        history = [s for s in run.dataset.sessions if s.persona_id == persona.persona_id]
        assert [s.position for s in history] == list(range(len(history)))
        assert [s.date for s in history] == sorted(s.date for s in history)
        assert 75 <= len(history) <= 150


def test_merge_history_orders_by_date_then_query_and_keeps_event_order(run: GeneratedRun) -> None:
    q = run.kept()[0]
    sessions = sessions_of(run, q.query_id)
    same_day = [s.model_copy(update={"date": sessions[0].date}) for s in sessions]
    merged = merge_history(same_day)
    assert [s.session_id for s in merged] == [
        s.session_id for s in sessions
    ]  # event order kept within a day
    assert [s.position for s in merged] == list(range(len(sessions)))
    with pytest.raises(ValueError, match="appears twice"):
        merge_history(sessions + sessions[:1])
    # gathered in any order, the history is the same
    everyone = run.dataset.sessions
    by_query: dict[str, list[Session]] = {}
    for s in everyone:
        by_query.setdefault(s.query_id, []).append(s)
    reordered = [s for qid in sorted(by_query, reverse=True) for s in by_query[qid]]
    assert [s.session_id for s in merge_history(reordered)] == [s.session_id for s in everyone]


# --------------------------------------------------------------------------- broken conversations


@pytest.fixture(scope="module")
def reference_case(run: GeneratedRun) -> tuple:
    q = run.kept()[0]
    timeline = run.timelines[q.query_id].timeline
    session = next(s for s in sessions_of(run, q.query_id) if s.reference_id)
    event = next(e for e in timeline.events if e.event_id == session.event_id)
    span = session.reference_spans[0]
    reference = next(r for r in q.references if r.reference_id == event.reference_id)
    said = NewsSaid(news_index=event.news.index(reference.text), turn_index=span.turn_index)
    draft = DialogueDraft(
        turns=[t.content for t in session.turns],
        news_said=[said],
    )
    persona = next(p for p in run.personas if p.persona_id == q.persona_id)
    return persona, q, event, draft, session


def test_the_real_draft_rebuilds_the_same_session(reference_case: tuple) -> None:
    """Up to its sentence span, which the conveyance check settles."""
    persona, q, event, draft, session = reference_case
    checked = check_dialogue(draft, persona, q, event, GenerationSettings())
    assert checked.problems == []
    assert checked.session == session.model_copy(update={"reference_spans": []})


@pytest.mark.parametrize(
    ("corrupt", "words"),
    [
        (
            lambda d, ref: d.turns.__setitem__(0, f"Hi. {ref}."),
            "word for word",
        ),
        (lambda d, ref: d.turns.__delitem__(slice(4, None)), "4 turns; need 5-30"),
        (lambda d, ref: setattr(d, "news_said", []), "no turn is named"),
        (lambda d, ref: setattr(d.news_said[0], "news_index", 99), "no turn is named"),
        (lambda d, ref: setattr(d.news_said[0], "turn_index", 1), "not a user turn"),
        (lambda d, ref: setattr(d.news_said[0], "turn_index", 99), "does not exist"),
        (lambda d, ref: d.turns.__setitem__(2, "  "), "is empty"),
    ],
)
def test_broken_conversations_are_caught(reference_case: tuple, corrupt, words: str) -> None:
    persona, q, event, draft, _ = reference_case
    reference = next(r for r in q.references if r.reference_id == event.reference_id)
    broken = draft.model_copy(deep=True)
    corrupt(broken, reference.text)
    checked = check_dialogue(broken, persona, q, event, GenerationSettings())
    assert checked.session is None
    assert any(words in p for p in checked.problems), checked.problems


@pytest.mark.parametrize(
    ("rewrite", "reason"),
    [
        (lambda s: "By the way, " + s[:1].lower() + s[1:], RejectionReason.MARKED),
        (lambda s: s.rstrip(".") + ", worth remembering for later.", RejectionReason.FORESHADOW),
    ],
    ids=["announced", "pointing-ahead"],
)
def test_any_news_sentence_that_marks_itself_is_refused(
    run: GeneratedRun, rewrite, reason: RejectionReason
) -> None:
    """A filler conversation's news is held to the same rule as a reference's: if only the
    references were said plainly, an announcement would tell the rest apart."""
    q = run.kept()[0]
    timeline = run.timelines[q.query_id].timeline
    event = next(e for e in timeline.events if e.reference_id is None and e.news)
    session = next(s for s in sessions_of(run, q.query_id) if s.event_id == event.event_id)
    draft = DialogueDraft(
        turns=[t.content for t in session.turns],
        news_said=[NewsSaid(news_index=0, turn_index=0)],
    )
    persona = next(p for p in run.personas if p.persona_id == q.persona_id)
    assert check_dialogue(draft, persona, q, event, GenerationSettings()).session is not None
    sentence = split_sentences(session.turns[0].content)[-1]
    draft.turns[0] = draft.turns[0].replace(sentence, rewrite(sentence))
    checked = check_dialogue(draft, persona, q, event, GenerationSettings())
    assert checked.session is None and checked.reason is reason, checked.problems


@pytest.mark.parametrize(
    ("frame", "reason"),
    [
        (lambda s: "Fresh news from me: " + s[:1].lower() + s[1:], RejectionReason.MARKED),
        (lambda s: s.rstrip(".") + " (thought this was worth passing on).", RejectionReason.MARKED),
        (lambda s: "Some recent news. " + s, RejectionReason.MARKED),
        (
            lambda s: s.rstrip(".") + ", which will feed into later choices.",
            RejectionReason.FORESHADOW,
        ),
        (
            lambda s: s.rstrip(".") + " (which will feed into my next choices).",
            RejectionReason.FORESHADOW,
        ),
        (lambda s: "That will weigh on what I pick next time. " + s, RejectionReason.FORESHADOW),
    ],
    ids=[
        "announcing-lead",
        "announcing-aside",
        "announcing-sentence-beside",
        "pointing-tail",
        "pointing-aside",
        "pointing-sentence-beside",
    ],
)
async def test_a_news_sentence_framed_as_marked_is_refused_by_meaning(
    reference_case: tuple, frame, reason: RejectionReason
) -> None:
    """Frames the word rules of :func:`marked_turn` miss (written for this test, not taken
    from the frames file) are still found: the sentence telling the news is scored by what
    its frame means, as announcing it or as pointing ahead from it."""
    persona, q, event, draft, session = reference_case
    settings = GenerationSettings()
    assert await framing_problems([(0, event, draft)], settings) == {}
    span = session.reference_spans[0]
    sentence = session.turns[span.turn_index].content[span.start : span.end]
    framed = draft.model_copy(deep=True)
    framed.turns[span.turn_index] = framed.turns[span.turn_index].replace(sentence, frame(sentence))
    checked = check_dialogue(framed, persona, q, event, settings)
    assert checked.session is not None, "the word rules alone let it through"
    problems = await framing_problems([(3, event, framed)], settings)
    assert set(problems) == {3}
    found, detail = problems[3]
    assert found is reason and f"turn {span.turn_index} (user)" in detail
    # Each check has its own setting; 1 turns that check off, and the other lets the frame by.
    own = {
        RejectionReason.MARKED: "announcing_probability_max",
        RejectionReason.FORESHADOW: "pointing_probability_max",
    }[reason]
    off = settings.model_copy(update={own: 1.0})
    assert await framing_problems([(3, event, framed)], off) == {}


def test_the_prompt_does_not_tell_a_reference_event_from_filler(reference_case: tuple) -> None:
    """The same event, carrying its reference or not, is asked for with the same prompt."""
    persona, q, event, _, _ = reference_case
    as_filler = event.model_copy(update={"kind": EventKind.FILLER, "reference_id": None})
    settings = GenerationSettings()
    carrying = dialogue_inputs(persona, q, event, settings).request(seed=0)
    plain = dialogue_inputs(persona, q, as_filler, settings).request(seed=0)
    assert carrying.variables == plain.variables
    prompt = DialogueInputs.template().render(carrying.variables)[-1]["content"]
    reference = next(r for r in q.references if r.reference_id == event.reference_id)
    assert reference.text in prompt and not re.search(r"\breferences?\b", prompt, re.IGNORECASE)


async def test_unconveyed_reference_drops_the_whole_query(run: GeneratedRun) -> None:
    q = run.kept()[3]
    persona = next(p for p in run.personas if p.persona_id == q.persona_id)
    timeline = run.timelines[q.query_id].timeline
    settings = GenerationSettings(reference_turn_similarity_min=0.999, max_regenerations=1)
    result = await expand_dialogues(persona, q, timeline, simulated_client(), settings)
    assert result.sessions == []
    # The events are written band by band; the first band with a reference fails, and no later
    # band is asked for.
    book = SaidLedger.of(q, timeline, settings.ledger_waves)
    failing = min(book.band_of(e) for e in timeline.events if e.reference_id)
    asked = [e for e in timeline.events if book.band_of(e) <= failing]
    carrying = [e for e in asked if e.reference_id]
    weak = [r for r in result.rejected if "reaches cosine" in r.detail]
    assert len(weak) == 2 * len(carrying)  # every reference session asked, on both attempts
    dropped = [r for r in result.rejected if "dropped with its query" in r.detail]
    assert len(dropped) == len(asked) - len(carrying)
    assert {r.reason for r in result.rejected} == {RejectionReason.INVARIANT}
    assert all(Session.model_validate_json(r.payload_json) for r in dropped)


async def test_same_seed_same_sessions(run: GeneratedRun) -> None:
    q = run.kept()[1]
    persona = next(p for p in run.personas if p.persona_id == q.persona_id)
    timeline = run.timelines[q.query_id].timeline
    again = await expand_dialogues(
        persona, q, timeline, simulated_client(), run.settings.generation
    )
    assert again.sessions == sessions_of(run, q.query_id)
    other = await expand_dialogues(
        persona, q, timeline, simulated_client(), run.settings.generation, seed=4
    )
    assert [s.turns for s in other.sessions] != [s.turns for s in again.sessions]


async def test_a_timeline_of_another_query_is_refused(run: GeneratedRun) -> None:
    first, second = run.kept()[:2]
    persona = next(p for p in run.personas if p.persona_id == first.persona_id)
    with pytest.raises(ValueError, match="belongs to query"):
        await expand_dialogues(
            persona,
            first,
            run.timelines[second.query_id].timeline,
            simulated_client(),
            GenerationSettings(),
        )


# --- the sentence as said passes the gates the drafted reference passed -----------------------


def test_the_real_sentence_passes_the_final_text_gates(reference_case: tuple) -> None:
    _, q, _, _, session = reference_case
    assert final_text_problem(said_sentence(session), 0.1, q, GenerationSettings()) is None


@pytest.mark.parametrize(
    ("mutate", "reason", "words"),
    [
        # foreshadowing: the request's date, in either order, or its domain
        (
            lambda s, q: f"{s} That matters for {q.query_date:%B} {q.query_date.day}th.",
            RejectionReason.FORESHADOW,
            "names the request's date",
        ),
        (
            lambda s, q: f"{s} It is all ahead of the {q.query_date.day} {q.query_date:%B}.",
            RejectionReason.FORESHADOW,
            "names the request's date",
        ),
        # the request's own words said back
        (lambda s, q: f"{s} {q.text}", RejectionReason.WORD_OVERLAP, "content words"),
    ],
    ids=["month-day", "day-month", "request-words"],
)
def test_a_sentence_that_gives_the_request_away_is_refused(
    reference_case: tuple, mutate, reason: RejectionReason, words: str
) -> None:
    _, q, _, _, session = reference_case
    sentence = mutate(said_sentence(session), q)
    problem = final_text_problem(sentence, 0.1, q, GenerationSettings())
    assert problem is not None and problem[0] is reason and words in problem[1], problem


def test_a_sentence_too_close_to_the_request_is_a_leak(reference_case: tuple) -> None:
    _, q, _, _, session = reference_case
    settings = GenerationSettings()
    problem = final_text_problem(
        said_sentence(session), settings.reference_cosine_max + 0.01, q, settings
    )
    assert problem is not None and problem[0] is RejectionReason.REFERENCE_LEAK


# --- every turn is held to the marker rules, in shapes beyond the idiom lists ------------------


@pytest.mark.parametrize(
    ("role", "added", "reason"),
    [
        # The assistant's turns, never named for any news, are held to the same rules.
        (Role.ASSISTANT, "That will matter when you book the hotel.", RejectionReason.FORESHADOW),
        (Role.ASSISTANT, "Unrelated, but the museum is free on Sundays.", RejectionReason.MARKED),
        # A user turn the model did not name as telling news.
        (
            Role.USER,
            "It could come into play once I plan the next trip.",
            RejectionReason.FORESHADOW,
        ),
        (Role.USER, "On a different note, I changed jobs in spring.", RejectionReason.MARKED),
        # A user tying what they tell to their own later occasion, in no idiom of the lists.
        (
            Role.USER,
            "My cousin has a van, and that is how we'll shift things once we move flats.",
            RejectionReason.FORESHADOW,
        ),
    ],
    ids=["assistant-ahead", "assistant-aside", "user-ahead", "user-aside", "user-later"],
)
def test_any_turn_that_marks_itself_or_points_ahead_is_refused(
    reference_case: tuple, role: Role, added: str, reason: RejectionReason
) -> None:
    persona, q, event, draft, session = reference_case
    named = {item.turn_index for item in draft.news_said}
    turn = next(
        i for i, t in enumerate(session.turns) if t.role is role and i not in named and i > 0
    )
    marked = draft.model_copy(deep=True)
    marked.turns[turn] = f"{marked.turns[turn]} {added}"
    checked = check_dialogue(marked, persona, q, event, GenerationSettings())
    assert checked.session is None and checked.reason is reason, checked.problems
    assert f"turn {turn} ({role.value})" in checked.problems[0]


@pytest.mark.parametrize(
    ("added", "reason"),
    [(s, RejectionReason.MARKED) for s in ANNOUNCING]
    + [(s, RejectionReason.FORESHADOW) for s in POINTING_AHEAD],
)
@pytest.mark.parametrize("role", [Role.USER, Role.ASSISTANT])
def test_every_development_example_in_a_real_conversation_is_refused(
    reference_case: tuple, role: Role, added: str, reason: RejectionReason
) -> None:
    """The shape detectors' own examples (tests/test_text.py), written into a real candidate: the
    turn that tells the reference, or the assistant's answer to it."""
    persona, q, event, draft, session = reference_case
    telling = draft.news_said[0].turn_index
    turn = telling if role is Role.USER else telling + 1
    marked = draft.model_copy(deep=True)
    marked.turns[turn] = f"{marked.turns[turn]} {added}"
    checked = check_dialogue(marked, persona, q, event, GenerationSettings())
    assert checked.session is None and checked.reason is reason, checked.problems


def test_an_assistant_saying_what_it_will_do_later_points_nowhere(reference_case: tuple) -> None:
    """The user's later occasion is the user's: an assistant promising to act is no pointer."""
    persona, q, event, draft, session = reference_case
    turn = next(i for i, t in enumerate(session.turns) if t.role is Role.ASSISTANT)
    promised = draft.model_copy(deep=True)
    promised.turns[turn] = f"{promised.turns[turn]} I'll hold that for you until next week."
    assert check_dialogue(promised, persona, q, event, GenerationSettings()).session is not None
    said_by_user = draft.model_copy(deep=True)
    user_turn = next(i for i, t in enumerate(session.turns) if t.role is Role.USER)
    said_by_user.turns[user_turn] += " I'll hold that for you until next week."
    refused = check_dialogue(said_by_user, persona, q, event, GenerationSettings())
    assert refused.session is None and refused.reason is RejectionReason.FORESHADOW


def test_no_kept_turn_marks_itself_or_points_ahead(run: GeneratedRun) -> None:
    from memoryquest.stages.dialogues import marked_turn

    assert all(marked_turn(s.turns) is None for s in run.dataset.sessions)


# --- γ over the sentences said, and references told twice ---------------------------------------


async def test_gamma_over_the_said_sentences_is_held_to_gamma_max(run: GeneratedRun) -> None:
    q = run.kept()[1]
    persona = next(p for p in run.personas if p.persona_id == q.persona_id)
    timeline = run.timelines[q.query_id].timeline
    said = [said_sentence(s) for s in sessions_of(run, q.query_id) if s.reference_id]
    vectors = shared_local_embedder().embed_sync([q.text, *said])
    gamma = said_gamma([float(v @ vectors[0]) for v in vectors[1:]])
    assert 0 < gamma <= GenerationSettings().gamma_max
    strict = GenerationSettings(gamma_max=gamma - 0.005, max_regenerations=0)
    result = await expand_dialogues(persona, q, timeline, simulated_client(), strict)
    refused = [r for r in result.rejected if r.reason is RejectionReason.SIMILARITY]
    assert result.sessions == [] and refused and "γ over the sentences" in refused[0].detail
    loose = GenerationSettings(gamma_max=gamma + 0.005, max_regenerations=0)
    kept = await expand_dialogues(persona, q, timeline, simulated_client(), loose)
    assert not any(r.reason is RejectionReason.SIMILARITY for r in kept.rejected)


async def test_a_reference_told_again_in_another_session_is_caught(run: GeneratedRun) -> None:
    q = run.kept()[0]
    told = next(s for s in sessions_of(run, q.query_id) if s.reference_id)
    other = next(
        s
        for s in run.dataset.sessions
        if s.persona_id == told.persona_id and s.session_id != told.session_id
    )
    settings, client = GenerationSettings(), simulated_client()
    assert await restatement(told, [other], client, settings, {}) is None
    said = said_sentence(told)
    assert said is not None
    turns = [*other.turns]
    turns[0] = turns[0].model_copy(update={"content": f"{turns[0].content} {said}"})
    retelling = other.model_copy(update={"turns": turns})
    # Either way round: the reference's session against the other, the other against it.
    found = await restatement(told, [retelling], client, settings, {})
    assert found is not None and other.session_id in found
    assert await restatement(retelling, [told], client, settings, {}) is not None
    # The cosine alone counts too: at a threshold every sentence reaches, any session retells.
    anything = GenerationSettings(restated_cosine=-1.0)
    assert await restatement(told, [other], client, anything, {}) is not None


async def test_a_session_that_retells_only_the_clause_a_reference_is_in_is_caught(
    run: GeneratedRun,
) -> None:
    """The said sentence carries its fact in one clause and a consequence in others; a sentence
    that retells the clause with words of its own around it says too few of the whole
    sentence's words, and is caught by its cosine to the clause."""
    told = next(
        s
        for s in run.dataset.sessions
        if (said := said_sentence(s)) is not None and told_clauses(said)
    )
    said = said_sentence(told)
    assert said is not None
    clause = told_clauses(said)[0]
    other = next(
        s
        for s in run.dataset.sessions
        if s.persona_id == told.persona_id and s.session_id != told.session_id
    )
    settings, client = GenerationSettings(), simulated_client()
    assert await restatement(told, [other], client, settings, {}) is None
    retold = f"As I told you a while back, {clause[0].lower()}{clause[1:]}, and that is the same."
    assert not restates(retold, said)
    turns = [*other.turns]
    turns[0] = turns[0].model_copy(update={"content": f"{turns[0].content} {retold}"})
    retelling = other.model_copy(update={"turns": turns})
    found = await restatement(told, [retelling], client, settings, {})
    assert found is not None and other.session_id in found
