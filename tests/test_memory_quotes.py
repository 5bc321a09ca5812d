"""Sentence-level ground truth: a fact is credited to a reference only when quoted from its sentence."""

from __future__ import annotations

import datetime as dt

import pytest
from test_memory_history import make_session, user0_persona

from memoryquest.contracts import Domain, Fact, FactType, Query, Reference, ReferenceSpan, Session
from memoryquest.ids import make_id
from memoryquest.memory.coverage import uncovered_references, withdraw_uncovered
from memoryquest.memory.extraction import (
    QUOTE_WORDS,
    check_answer,
    quote_span,
)
from memoryquest.memory.extraction_contracts import (
    Evidence,
    ExtractedFact,
    ExtractionAnswer,
)
from memoryquest.memory.store import FactStore
from memoryquest.text import opening_words

REFERENCE_SENTENCE = (
    "I found out last month that I'm allergic to tree nuts, so menus need checking."
)
OTHER_SENTENCE = "I like going to dinner on my own best."


@pytest.fixture
def session() -> Session:
    persona = user0_persona()
    plain = make_session(
        persona,
        0,
        dt.date(2024, 3, 10),
        Domain.RESTAURANTS,
        ["Could you find a place for dinner on Friday?", f"{OTHER_SENTENCE} {REFERENCE_SENTENCE}"],
        reference_turn=1,
        reference_key="nut-allergy",
    )
    content = plain.turns[2].content
    start = content.index(REFERENCE_SENTENCE)
    span = ReferenceSpan(turn_index=2, start=start, end=start + len(REFERENCE_SENTENCE))
    return plain.model_copy(update={"reference_spans": [span]})


def fact(fid: str, info: str, session: Session, quote: str) -> ExtractedFact:
    return ExtractedFact(
        fid=fid,
        info=info,
        type=FactType.PREFERENCE,
        related_entities=[],
        evidence=[Evidence(session_id=session.session_id, turn_indices=[2], quote=quote)],
    )


def test_only_the_fact_from_the_reference_sentence_is_credited(session: Session) -> None:
    answer = ExtractionAnswer(
        facts=[
            fact("NEW_1", "Likes solo dinners best", session, OTHER_SENTENCE),
            fact("NEW_2", "Is allergic to tree nuts", session, REFERENCE_SENTENCE),
        ]
    )
    changes, problems = check_answer(answer, [session], set())
    assert problems == []
    assert [c.credits(session) for c in changes] == [False, True]
    store = FactStore(session.persona_id, [session])
    solo = store.add(changes[0], session.session_id, 0)
    nuts = store.add(changes[1], session.session_id, 1)
    assert solo.source_reference_ids == []
    assert nuts.source_reference_ids == [session.reference_id]


def test_a_turn_level_citation_without_the_sentence_is_not_enough(session: Session) -> None:
    answer = ExtractionAnswer(
        facts=[fact("NEW_1", "Likes solo dinners best", session, OTHER_SENTENCE)]
    )
    changes, problems = check_answer(answer, [session], set())
    assert len(changes) == 1
    assert any("quoted by no fact" in p for p in problems)


def test_a_quote_that_is_not_in_the_turn_is_a_problem(session: Session) -> None:
    answer = ExtractionAnswer(
        facts=[
            fact("NEW_1", "Is allergic to tree nuts", session, REFERENCE_SENTENCE),
            fact("NEW_2", "Owns a sailboat", session, "I keep a sailboat at the marina."),
        ]
    )
    changes, problems = check_answer(answer, [session], set())
    assert [c.info for c in changes] == ["Is allergic to tree nuts"]
    assert any("is not in turns [2]" in p for p in problems)


def test_a_lightly_trimmed_quote_still_finds_its_sentence(session: Session) -> None:
    trimmed = "found out last month that I'm allergic to tree nuts so menus need checking"
    span = quote_span(session, [2], trimmed)
    assert span is not None
    turn, start, end = span
    assert session.turns[turn].content[start:end] == REFERENCE_SENTENCE


def test_a_quote_of_the_opening_words_names_the_whole_sentence(session: Session) -> None:
    opening = opening_words(REFERENCE_SENTENCE, QUOTE_WORDS)
    assert opening == "I found out last month that"
    span = quote_span(session, [2], opening)
    assert span is not None
    turn, start, end = span
    assert session.turns[turn].content[start:end] == REFERENCE_SENTENCE
    answer = ExtractionAnswer(
        facts=[
            fact("NEW_1", "Likes solo dinners best", session, opening_words(OTHER_SENTENCE, 6)),
            fact("NEW_2", "Is allergic to tree nuts", session, opening),
        ]
    )
    changes, problems = check_answer(answer, [session], set())
    assert problems == []
    assert [c.credits(session) for c in changes] == [False, True]


def test_opening_words_of_another_turn_are_not_found(session: Session) -> None:
    asked = session.turns[0].content
    assert quote_span(session, [2], opening_words(asked, QUOTE_WORDS)) is None


def query_for(session: Session) -> Query:
    assert session.reference_id is not None
    reference = Reference(
        reference_id=session.reference_id,
        date=session.date,
        text="Allergic to tree nuts",
        domain=Domain.RESTAURANTS,
        cosine=0.1,
    )
    return Query(
        query_id=make_id("query", "quotes", "q"),
        persona_id=session.persona_id,
        query_date=dt.date(2024, 4, 1),
        text="Plan a birthday picnic for me",
        reasoning="r",
        domain=Domain.EVENTS,
        references=[reference],
        gamma=0.1,
        embedder="test",
        rank=0,
    )


def stored(session: Session, quote: str) -> list[Fact]:
    changes, _ = check_answer(
        ExtractionAnswer(facts=[fact("NEW_1", "x", session, quote)]), [session], set()
    )
    store = FactStore(session.persona_id, [session])
    store.add(changes[0], session.session_id, 0)
    return store.all()


def test_coverage_needs_a_credited_fact_visible_on_the_query_date(session: Session) -> None:
    query = query_for(session)
    assert uncovered_references(query, stored(session, REFERENCE_SENTENCE)) == []
    assert uncovered_references(query, stored(session, OTHER_SENTENCE)) == [session.reference_id]
    early = query.model_copy(update={"query_date": session.date - dt.timedelta(days=1)})
    assert uncovered_references(early, stored(session, REFERENCE_SENTENCE)) == [
        session.reference_id
    ]


def test_an_uncovered_query_is_withdrawn_with_its_reason(session: Session) -> None:
    query = query_for(session)
    withdrawn, rejections = withdraw_uncovered([query], stored(session, OTHER_SENTENCE))
    assert withdrawn == [query.query_id]
    assert [r.reason.value for r in rejections] == ["uncovered"]
    assert Query.model_validate_json(rejections[0].payload_json) == query
    assert withdraw_uncovered([query], stored(session, REFERENCE_SENTENCE)) == ([], [])
