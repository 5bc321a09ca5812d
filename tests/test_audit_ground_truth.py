"""Covered, uncovered and stale references against the memory as it stood on the query date."""

from __future__ import annotations

import datetime as dt

from memoryquest.audit.ground_truth import ground_truth
from memoryquest.contracts import Domain, Fact, FactRevision, FactState, FactType, Query, Reference
from memoryquest.ids import make_id
from memoryquest.memory.snapshot import memory_as_of

PERSONA = make_id("persona", "one")
QUERY_DATE = dt.date(2024, 5, 1)


def reference(number: int, valid_until: dt.date | None = None) -> Reference:
    return Reference(
        reference_id=make_id("reference", number),
        date=dt.date(2024, 4, 1),
        text=f"Statement {number}",
        domain=Domain.TRAVEL,
        cosine=0.1,
        valid_until=valid_until,
    )


def fact(number: int, day: dt.date, *references: str) -> Fact:
    revision = FactRevision(
        valid_from=day,
        info=f"Fact {number}",
        type=FactType.EVENT,
        frequency=1,
        related_entities=[],
        session_ids=[make_id("session", number)],
        source_reference_ids=list(references),
        state=FactState.ADD,
    )
    return Fact(
        fid=make_id("fact", number),
        persona_id=PERSONA,
        info=revision.info,
        type=revision.type,
        frequency=1,
        related_entities=[],
        session_ids=revision.session_ids,
        source_reference_ids=list(references),
        state=FactState.ADD,
        created_on=day,
        updated_on=day,
        revisions=[revision],
    )


def test_references_are_covered_only_by_facts_visible_on_the_query_date() -> None:
    refs = [
        reference(0),
        reference(1),
        reference(2, valid_until=dt.date(2024, 4, 30)),
        reference(3, valid_until=QUERY_DATE),
    ]
    query = Query(
        query_id=make_id("query", 0),
        persona_id=PERSONA,
        query_date=QUERY_DATE,
        text="Plan my trip",
        reasoning="",
        domain=Domain.TRAVEL,
        references=refs,
        gamma=0.1,
        embedder="test",
        rank=0,
    )
    facts = [
        fact(0, dt.date(2024, 4, 2), refs[0].reference_id),
        fact(1, dt.date(2024, 5, 2), refs[1].reference_id),  # learnt the day after the query
        fact(2, dt.date(2024, 4, 2), refs[2].reference_id, refs[3].reference_id),
    ]
    result = ground_truth([query], {query.query_id: memory_as_of(facts, QUERY_DATE)})
    assert (result.references, result.covered, result.uncovered, result.stale) == (4, 3, 1, 1)
    assert [i.reference_id for i in result.uncovered_references] == [refs[1].reference_id]
    # valid until the day before the query is stale; valid through the query date is not
    assert [i.reference_id for i in result.stale_references] == [refs[2].reference_id]
    assert result.stale_references[0].detail == "valid until 2024-04-30, query on 2024-05-01"
    # A reference recovered by asking again counts only when it ends up covered.
    reasked = {refs[0].reference_id, refs[1].reference_id}
    again = ground_truth([query], {query.query_id: memory_as_of(facts, QUERY_DATE)}, reasked)
    assert again.recovered_by_reask == 1
