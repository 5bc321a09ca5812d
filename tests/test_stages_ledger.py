"""The dialogue stage's ledger: what the user said before, and the contradiction rule."""

from __future__ import annotations

import datetime as dt

from memoryquest.contracts import Role, Turn
from memoryquest.stages.ledger import NO_LEDGER, Ledger, LedgerFact, contradiction, ledger_for

try:
    from tests.generation_fixture import generated
except ModuleNotFoundError:  # tests/ is not a package: pytest puts it on sys.path
    from generation_fixture import generated


def test_the_ledger_holds_what_was_said_before_and_still_holds() -> None:
    dataset = generated().dataset
    queries = dataset.queries
    references = sorted((r for q in queries for r in q.references), key=lambda r: r.date)
    middle = references[len(references) // 2].date
    ledger = ledger_for(middle, queries, dataset.timelines)
    assert ledger.facts and all(f.said_on < middle for f in ledger.facts)
    assert all(f.until is None or f.until >= middle for f in ledger.facts)
    assert all(date < middle for date, _ in ledger.earlier)
    lines = ledger.shown()
    assert lines == sorted(lines) and all(line[:10] < middle.isoformat() for line in lines)
    assert ledger_for(references[0].date, queries, []).facts == ()


def test_a_session_that_takes_back_a_fact_in_force_is_a_contradiction() -> None:
    session = next(s for s in generated().dataset.sessions if s.reference_id is None)
    fact = LedgerFact(dt.date(2024, 1, 5), "Gave up red meat to bring down high cholesterol", None)
    ledger = Ledger((fact,), ())
    assert contradiction(session, ledger) is None and contradiction(session, NO_LEDGER) is None
    taken_back = "These days I eat red meat again, and it does bring my cholesterol down."
    turns = [*session.turns]
    turns[0] = Turn(role=Role.USER, content=f"{turns[0].content} {taken_back}")
    clash = contradiction(session.model_copy(update={"turns": turns}), ledger)
    assert clash is not None and "red meat" in clash and "2024-01-05" in clash
    # The same words said by the assistant are not the user's word.
    turns[0], turns[1] = session.turns[0], Turn(role=Role.ASSISTANT, content=taken_back)
    assert contradiction(session.model_copy(update={"turns": turns}), ledger) is None
