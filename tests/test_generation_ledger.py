"""The dialogue stage's ledger: what the user said before, and the contradiction rule."""

from __future__ import annotations

import asyncio
import datetime as dt

import pytest

from memoryquest.contracts import Role, Session, Turn
from memoryquest.generation.ledger import (
    NO_LEDGER,
    Ledger,
    LedgerFact,
    SaidLedger,
    contradiction,
    date_bands,
    ledger_for,
    restates,
    said_sentence,
    told_clauses,
)
from memoryquest.settings import GenerationSettings
from memoryquest.stages.dialogues import expand_dialogues

try:
    from tests.generation_fixture import generated, simulated_client
except ModuleNotFoundError:  # tests/ is not a package: pytest puts it on sys.path
    from generation_fixture import generated, simulated_client


def test_the_ledger_holds_what_was_said_before_and_still_holds() -> None:
    dataset = generated().dataset
    queries = dataset.queries
    references = sorted((r for q in queries for r in q.references), key=lambda r: r.date)
    middle = references[len(references) // 2].date
    ledger = ledger_for(middle, queries, dataset.timelines, dataset.sessions)
    assert ledger.facts and all(f.said_on < middle for f in ledger.facts)
    assert all(f.until is None or f.until >= middle for f in ledger.facts)
    assert all(date < middle for date, _ in ledger.earlier)
    lines = ledger.shown()
    assert lines == sorted(lines) and all(line[:10] < middle.isoformat() for line in lines)
    assert ledger_for(references[0].date, queries, [], dataset.sessions).facts == ()
    # What the user said, not the plan: every fact is a sentence of the history, no drafted text.
    said = {said_sentence(s) for s in dataset.sessions}
    assert all(f.text in said for f in ledger.facts)
    assert not {f.text for f in ledger.facts} & {r.text for r in references}
    assert ledger_for(middle, queries, dataset.timelines).facts == ()  # nothing said yet


def test_date_bands_cut_the_dates_into_runs_of_about_equal_size() -> None:
    days = [dt.date(2024, 1, d) for d in (1, 1, 2, 3, 3, 3, 4, 5, 6, 7, 8, 9)]
    assert date_bands(days, 1) == [days[0]]
    # the 0th, 4th and 8th date: each band starts at a date and takes all of it
    assert date_bands(days, 3) == [dt.date(2024, 1, 1), dt.date(2024, 1, 3), dt.date(2024, 1, 6)]
    assert date_bands([days[0]] * 5, 4) == [days[0]]  # a date never straddles two bands
    assert date_bands([], 4) == []


async def test_a_band_waits_until_every_earlier_band_is_settled() -> None:
    dataset = generated().dataset
    timelines = dataset.timelines[:2]
    book = SaidLedger(dataset.queries, timelines, 3)
    events = sorted((e for t in timelines for e in t.events), key=lambda e: e.date)
    assert book.bands == 3 and [book.band_of(e) for e in events] == sorted(
        book.band_of(e) for e in events
    )
    first = [e for e in events if book.band_of(e) == 0]
    waiting = asyncio.create_task(book.ready(1))
    await asyncio.sleep(0)
    book.settle(first[:-1])
    await asyncio.sleep(0)
    assert not waiting.done()
    book.settle(first[-1:])
    await asyncio.wait_for(waiting, 1)
    assert not asyncio.create_task(book.finished()).done()


@pytest.fixture(scope="module")
def written_together() -> tuple[SaidLedger, list]:
    """Three queries of one user, written together in three bands of dates."""
    run = generated()
    persona = run.personas[0]
    queries = [q for q in run.kept() if q.persona_id == persona.persona_id][:3]
    timelines = [run.timelines[q.query_id].timeline for q in queries]
    settings = GenerationSettings(ledger_waves=3)
    book = SaidLedger(queries, timelines, settings.ledger_waves)

    async def write() -> list:
        return await asyncio.wait_for(
            asyncio.gather(
                *(
                    expand_dialogues(persona, q, t, simulated_client(), settings, said=book)
                    for q, t in zip(queries, timelines, strict=True)
                )
            ),
            120,
        )

    return book, asyncio.run(write())


def test_queries_written_together_see_what_the_earlier_bands_said(written_together) -> None:
    book, results = written_together
    # A query may be given up (the simulator's filler can retell another query's reference, which
    # `restated` refuses); the others are written, and the book holds exactly their sessions.
    assert sum(bool(r.sessions) for r in results) >= 2
    sessions = book.sessions()
    assert sorted(s.session_id for r in results for s in r.sessions) == sorted(
        s.session_id for s in sessions
    )
    later = [e for t in book.timelines for e in t.events if book.band_of(e) == book.bands - 1]
    event = later[-1]
    shown = book.ledger_on(event).facts
    # What earlier bands said: the kept sessions, and those of a query given up in the last band
    # (written, and standing, when the last band's ledgers were drawn).
    given_up = [
        Session.model_validate_json(r.payload_json)
        for result in results
        for r in result.rejected
        if "dropped with its query" in r.detail
    ]
    earlier = {
        said_sentence(s)
        for s in [*sessions, *given_up]
        if book.band_of_date(s.date) < book.bands - 1
    }
    assert shown and {f.text for f in shown} <= earlier
    references = {r.text for q in book.queries for r in q.references}
    assert not {f.text for f in shown} & references


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


def test_taking_back_the_clause_a_fact_was_told_in_is_a_contradiction() -> None:
    """A fact told with a consequence: taking back its main clause alone says too few of the
    whole sentence's words, but most of the clause's."""
    session = next(s for s in generated().dataset.sessions if s.reference_id is None)
    told = (
        "Started eating red meat again to build up strength after surgery, which now makes "
        "dinners out with colleagues and long lunches at the steakhouse easier"
    )
    assert told_clauses(told) == [
        "Started eating red meat again to build up strength after surgery"
    ]
    ledger = Ledger((LedgerFact(dt.date(2024, 1, 5), told, None),), ())
    taken_back = (
        "Honestly I never started eating red meat again to build up strength after surgery."
    )
    assert not restates(taken_back, told) and restates(taken_back, told, by_clause=True)
    turns = [*session.turns]
    turns[0] = Turn(role=Role.USER, content=f"{turns[0].content} {taken_back}")
    clash = contradiction(session.model_copy(update={"turns": turns}), ledger)
    assert clash is not None and "2024-01-05" in clash
    # A short clause, or one that comments on the one before, states nothing of its own.
    assert told_clauses("I walk, so it takes longer, which means fewer outings on weekdays") == []
