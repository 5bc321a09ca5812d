"""Sentence-level ground truth: a fact is credited to a reference only when it cites its sentence."""

from __future__ import annotations

import datetime as dt

import pytest
from test_memory_history import make_session, user0_persona

from memoryquest.contracts import Domain, Fact, FactType, Query, Reference, ReferenceSpan, Session
from memoryquest.ids import make_id
from memoryquest.memory.coverage import uncovered_references, withdraw_uncovered
from memoryquest.memory.extraction import check_answer, numbered_sentences, session_views
from memoryquest.memory.extraction_contracts import ExtractedFact, ExtractionAnswer
from memoryquest.memory.store import FactStore

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


def sentence_id(session: Session, sentence: str) -> int:
    """The id the prompt shows ``sentence`` under."""
    shown = {
        text: int(number)
        for turn in session_views([session])[0]["turns"]
        for number, text in turn.get("sentences", {}).items()
    }
    return shown[sentence]


def fact(fid: str, info: str, session: Session, sentence: str) -> ExtractedFact:
    return ExtractedFact(
        fid=fid,
        info=info,
        type=FactType.PREFERENCE,
        related_entities=[],
        sentences=[sentence_id(session, sentence)],
    )


def test_user_sentences_are_shown_under_the_ids_that_name_their_spans(session: Session) -> None:
    numbered = numbered_sentences([session])
    assert list(numbered) == list(range(1, len(numbered) + 1))
    views = session_views([session])
    assert [t["role"] for t in views[0]["turns"]] == [t.role.value for t in session.turns]
    for number, ref in numbered.items():
        assert session.turns[ref.turn].role.value == "user"
        text = session.turns[ref.turn].content[ref.start : ref.end]
        assert views[0]["turns"][ref.turn]["sentences"][str(number)] == text
    assert sentence_id(session, REFERENCE_SENTENCE) == sentence_id(session, OTHER_SENTENCE) + 1


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
    turn, start, end = changes[1].quotes[session.session_id][0]
    assert session.turns[turn].content[start:end] == REFERENCE_SENTENCE
    assert changes[1].evidence == {session.session_id: [2]}
    store = FactStore(session.persona_id, [session])
    solo = store.add(changes[0], session.session_id, 0)
    nuts = store.add(changes[1], session.session_id, 1)
    assert solo.source_reference_ids == []
    assert nuts.source_reference_ids == [session.reference_id]


def test_a_fact_from_another_sentence_of_the_turn_is_not_enough(session: Session) -> None:
    answer = ExtractionAnswer(
        facts=[fact("NEW_1", "Likes solo dinners best", session, OTHER_SENTENCE)]
    )
    changes, problems = check_answer(answer, [session], set())
    assert len(changes) == 1
    assert any("quoted by no fact" in p for p in problems)


def test_a_sentence_id_the_call_did_not_show_is_a_problem(session: Session) -> None:
    unknown = len(numbered_sentences([session])) + 1
    answer = ExtractionAnswer(
        facts=[
            fact("NEW_1", "Is allergic to tree nuts", session, REFERENCE_SENTENCE),
            ExtractedFact(
                fid="NEW_2",
                info="Owns a sailboat",
                type=FactType.PREFERENCE,
                related_entities=[],
                sentences=[unknown],
            ),
            ExtractedFact(
                fid="NEW_3",
                info="Owns a kayak",
                type=FactType.PREFERENCE,
                related_entities=[],
                sentences=[],
            ),
        ]
    )
    changes, problems = check_answer(answer, [session], set())
    assert [c.info for c in changes] == ["Is allergic to tree nuts"]
    assert any(f"sentence ids [{unknown}] are not user sentences" in p for p in problems)
    assert any("cites no sentence" in p for p in problems)


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
