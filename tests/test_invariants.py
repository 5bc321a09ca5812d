"""check_invariants and ``memoryquest validate`` on real generated output, clean and corrupted."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import numpy as np
import pytest

from memoryquest.cli.main import main
from memoryquest.contracts import (
    Fact,
    FactRevision,
    FactState,
    FactStatus,
    FactType,
    ReferenceSpan,
    Turn,
)
from memoryquest.dataset import GeneratedDataset
from memoryquest.ids import make_id
from memoryquest.invariants import (
    EmbeddingFunction,
    Rule,
    Violation,
    check_invariants,
    queries_not_recomputed,
)
from memoryquest.llm.factory import shared_local_embedder
from memoryquest.settings import GenerationSettings, Settings
from memoryquest.stages.history import merge_history
from memoryquest.text import shared_content_words

try:
    from tests.generation_fixture import GeneratedRun, generated, simulated_client
except ModuleNotFoundError:  # tests/ is not a package: pytest puts it on sys.path
    from generation_fixture import GeneratedRun, generated, simulated_client


def facts_for(dataset: GeneratedDataset) -> list[Fact]:
    """Facts as an extractor leaves them: one per reference session (so every reference is covered), plus one merged pair."""
    facts: list[Fact] = []
    for session in [s for s in dataset.sessions if s.reference_id]:
        turn = session.turns[session.reference_turn_indices[0]].content
        revision = FactRevision(
            valid_from=session.date,
            info=turn,
            type=FactType.EVENT,
            frequency=1,
            related_entities=[session.domain.value],
            session_ids=[session.session_id],
            source_reference_ids=[session.reference_id],
            state=FactState.ADD,
        )
        facts.append(
            Fact(
                fid=make_id("fact", session.session_id),
                persona_id=session.persona_id,
                info=turn,
                type=FactType.EVENT,
                frequency=1,
                related_entities=[session.domain.value],
                session_ids=[session.session_id],
                source_reference_ids=[session.reference_id],
                state=FactState.ADD,
                created_on=session.date,
                updated_on=session.date,
                revisions=[revision],
            )
        )
    a, b = [
        s
        for s in dataset.sessions
        if s.reference_id is None and s.persona_id == dataset.personas[0].persona_id
    ][:2]
    old_fid, new_fid = make_id("fact", "old", a.session_id), make_id("fact", "new", b.session_id)

    def revision(session_ids: list[str], date: dt.date) -> FactRevision:
        return FactRevision(
            valid_from=date,
            info="Prefers evening appointments",
            type=FactType.PREFERENCE,
            frequency=1,
            related_entities=["evening"],
            session_ids=session_ids,
            state=FactState.ADD,
        )

    facts.append(
        Fact(
            fid=old_fid,
            persona_id=a.persona_id,
            info="Prefers evening appointments",
            type=FactType.PREFERENCE,
            frequency=1,
            related_entities=["evening"],
            session_ids=[a.session_id],
            state=FactState.ADD,
            status=FactStatus.MERGED,
            merged_into=new_fid,
            created_on=a.date,
            updated_on=a.date,
            retired_on=b.date,
            revisions=[revision([a.session_id], a.date)],
        )
    )
    facts.append(
        Fact(
            fid=new_fid,
            persona_id=a.persona_id,
            info="Prefers evening appointments",
            type=FactType.PREFERENCE,
            frequency=2,
            related_entities=["evening"],
            session_ids=[a.session_id, b.session_id],
            merged_fids=[old_fid],
            state=FactState.UPDATE,
            created_on=b.date,
            updated_on=b.date,
            revisions=[revision([a.session_id, b.session_id], b.date)],
        )
    )
    return facts


@pytest.fixture(scope="module")
def run() -> GeneratedRun:
    return generated()


@pytest.fixture(scope="module")
def dataset(run: GeneratedRun) -> GeneratedDataset:
    data = run.dataset.model_copy(deep=True)
    data.facts = facts_for(data)
    return data


@pytest.fixture(scope="module")
def embedder() -> EmbeddingFunction:
    """The local model, remembering texts it has seen: corrupted copies share most of them."""
    model = EmbeddingFunction.of(shared_local_embedder())
    seen: dict[str, np.ndarray] = {}

    def embed(texts: list[str]) -> np.ndarray:
        missing = [t for t in dict.fromkeys(texts) if t not in seen]
        if missing:
            seen.update(zip(missing, model.embed(missing), strict=True))
        return np.stack([seen[t] for t in texts])

    return EmbeddingFunction(name=model.name, embed=embed)


@pytest.fixture(scope="module")
def settings() -> Settings:
    return Settings()


def rules(violations: list[Violation]) -> set[Rule]:
    return {v.rule for v in violations}


def test_real_output_has_no_violations(
    dataset: GeneratedDataset, settings: Settings, embedder: EmbeddingFunction
) -> None:
    assert len(dataset.sessions) > 150 and dataset.facts and dataset.rejected
    assert check_invariants(dataset, settings, embedder) == []
    assert queries_not_recomputed(dataset, embedder) == []


def test_the_cli_accepts_a_saved_real_dataset(
    dataset: GeneratedDataset, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    directory = dataset.save(tmp_path / "clean")
    assert main(["validate", str(directory), "--no-audit"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("ok: no violations") and f"{len(dataset.sessions)} sessions" in out


# --------------------------------------------------------------------------- corruptions


def corrupt(dataset: GeneratedDataset, change) -> GeneratedDataset:
    copy = dataset.model_copy(deep=True)
    change(copy)
    return copy


def first_query(d: GeneratedDataset):
    return d.queries[0]


def timeline_of(d: GeneratedDataset, query_id: str):
    return next(t for t in d.timelines if t.query_id == query_id)


def drop_reference_event(d: GeneratedDataset) -> None:
    # A timeline with events to spare, and not its first event (which may open the timeline on
    # the earliest reference's date), so that only the reference rules can fire.
    t = next(
        t
        for t in d.timelines
        if len(t.events) > GenerationSettings().events_min
        and any(e.reference_id for e in t.events[1:])
    )
    event = next(e for e in t.events[1:] if e.reference_id)
    t.events = [e for e in t.events if e is not event]
    d.sessions = [s for s in d.sessions if s.event_id != event.event_id]
    d.facts = [f for f in d.facts if event.reference_id not in f.source_reference_ids]
    for persona_id in {s.persona_id for s in d.sessions}:
        for position, s in enumerate(
            sorted((s for s in d.sessions if s.persona_id == persona_id), key=lambda s: s.position)
        ):
            s.position = position


def reorder_events(d: GeneratedDataset) -> None:
    t = timeline_of(d, first_query(d).query_id)
    t.events[1], t.events[2] = t.events[2], t.events[1]


def verbatim_reference(d: GeneratedDataset) -> None:
    session = next(s for s in d.sessions if s.reference_id)
    query = next(q for q in d.queries if q.query_id == session.query_id)
    reference = next(r for r in query.references if r.reference_id == session.reference_id)
    index = session.reference_turn_indices[0]
    said = f"{reference.text}."
    session.turns[index] = Turn(role=session.turns[index].role, content=f"Quick update: {said}")
    # The span still marks the sentence that states it, so only the verbatim rule can fire.
    start = session.turns[index].content.index(said)
    session.reference_spans = [ReferenceSpan(turn_index=index, start=start, end=start + len(said))]


def too_few_turns(d: GeneratedDataset) -> None:
    session = next(s for s in d.sessions if s.reference_id is None)
    session.turns = session.turns[:4]


def dangling_event(d: GeneratedDataset) -> None:
    session = next(s for s in d.sessions if s.reference_id is None)
    session.event_id = make_id("event", "no such event")


def swapped_roles(d: GeneratedDataset) -> None:
    session = next(s for s in d.sessions if s.reference_id is None)
    session.turns[0], session.turns[1] = session.turns[1], session.turns[0]


def positions_out_of_order(d: GeneratedDataset) -> None:
    history = sorted(
        (s for s in d.sessions if s.persona_id == d.personas[0].persona_id),
        key=lambda s: s.position,
    )
    early, late = history[0], history[-1]
    early.position, late.position = late.position, early.position


def tampered_cosine(d: GeneratedDataset) -> None:
    last = max(
        (q for q in d.queries if q.persona_id == d.personas[0].persona_id), key=lambda q: q.rank
    )
    last.references[0].cosine += 0.05
    last.gamma = sum(r.cosine for r in last.references) / len(last.references)


def reference_turn_on_assistant(d: GeneratedDataset) -> None:
    session = next(s for s in d.sessions if s.reference_id)
    session.reference_turn_indices = [1]


def reference_turn_past_the_end(d: GeneratedDataset) -> None:
    session = next(s for s in d.sessions if s.reference_id)
    session.reference_turn_indices = [*session.reference_turn_indices, len(session.turns)]


def empty_reference_span(d: GeneratedDataset) -> None:
    span = next(s for s in d.sessions if s.reference_spans).reference_spans[0]
    span.end = span.start


def session_on_query_date(d: GeneratedDataset) -> None:
    """The conversation carrying a reference happens on the query date itself (history re-merged)."""
    q = first_query(d)
    session = next(s for s in d.sessions if s.reference_id == q.references[0].reference_id)
    session.date = q.query_date
    d.sessions = merge_history(d.sessions)


def fact_with_missing_session(d: GeneratedDataset) -> None:
    d.facts[0].session_ids = [*d.facts[0].session_ids, make_id("session", "gone")]


def fact_with_foreign_reference(d: GeneratedDataset) -> None:
    other = next(
        r
        for q in d.queries
        for r in q.references
        if r.reference_id not in d.facts[0].source_reference_ids
    )
    d.facts[0].source_reference_ids = [*d.facts[0].source_reference_ids, other.reference_id]


def dangling_merged_fid(d: GeneratedDataset) -> None:
    merged = next(f for f in d.facts if f.merged_fids)
    merged.merged_fids = [make_id("fact", "never existed")]


def uncovered_reference(d: GeneratedDataset) -> None:
    """The only fact credited to a reference is gone: no method could find it."""
    reference = first_query(d).references[0].reference_id
    d.facts = [f for f in d.facts if reference not in f.source_reference_ids]


def stale_reference(d: GeneratedDataset) -> None:
    q = first_query(d)
    q.references[0].valid_until = q.query_date - dt.timedelta(days=1)


def reference_on_query_date(d: GeneratedDataset) -> None:
    """A reference dated the query's own day: not before it (its event keeps the old date)."""
    q = first_query(d)
    q.references[0].date = q.query_date


def last_event_on_query_date(d: GeneratedDataset) -> None:
    """The timeline runs into the query's own day (its event no longer matches its session)."""
    timeline_of(d, first_query(d).query_id).events[-1].date = first_query(d).query_date


def two_events_on_one_day(d: GeneratedDataset) -> None:
    """Same-day events are in order; only their sessions and references no longer match."""
    events = timeline_of(d, first_query(d).query_id).events
    events[1].date = events[0].date


def echo_reference(d: GeneratedDataset) -> None:
    """A reference that repeats the request's own words (its cosine is kept: the word rule alone fires)."""
    q = first_query(d)
    q.references[0].text = q.text


@pytest.mark.parametrize(
    ("change", "expected"),
    [
        (drop_reference_event, {Rule.REFERENCE_IN_ONE_EVENT, Rule.REFERENCE_UNCOVERED}),
        (reorder_events, {Rule.EVENT_ORDER}),
        (verbatim_reference, {Rule.REFERENCE_VERBATIM}),
        (too_few_turns, {Rule.TURN_COUNT}),
        (dangling_event, {Rule.DANGLING_ID, Rule.SESSION_PER_EVENT}),
        (swapped_roles, {Rule.TURN_ROLES}),
        (positions_out_of_order, {Rule.HISTORY_POSITIONS}),
        (tampered_cosine, {Rule.COSINE_RECOMPUTED}),
        (reference_turn_on_assistant, {Rule.REFERENCE_TURN_INDICES, Rule.REFERENCE_SPAN}),
        (reference_turn_past_the_end, {Rule.REFERENCE_TURN_INDICES}),
        (empty_reference_span, {Rule.REFERENCE_SPAN}),
        (session_on_query_date, {Rule.SESSION_MATCHES_EVENT, Rule.REFERENCE_LEAK}),
        (fact_with_missing_session, {Rule.FACT_PROVENANCE}),
        (fact_with_foreign_reference, {Rule.FACT_REFERENCE_CONSISTENCY}),
        (dangling_merged_fid, {Rule.MERGED_FIDS}),
        (uncovered_reference, {Rule.REFERENCE_UNCOVERED}),
        (stale_reference, {Rule.REFERENCE_STALE}),
        (reference_on_query_date, {Rule.REFERENCE_DATE, Rule.REFERENCE_EVENT_MATCH}),
        (
            last_event_on_query_date,
            {Rule.TIMELINE_END, Rule.REFERENCE_EVENT_MATCH, Rule.SESSION_MATCHES_EVENT},
        ),
        (two_events_on_one_day, {Rule.REFERENCE_EVENT_MATCH, Rule.SESSION_MATCHES_EVENT}),
        (echo_reference, {Rule.REFERENCE_WORD_OVERLAP, Rule.COSINE_RECOMPUTED}),
    ],
    ids=lambda value: getattr(value, "__name__", None),
)
def test_each_corruption_is_reported_under_its_rule(
    dataset: GeneratedDataset,
    settings: Settings,
    embedder: EmbeddingFunction,
    change,
    expected: set[Rule],
) -> None:
    violations = check_invariants(corrupt(dataset, change), settings, embedder)
    assert rules(violations) == expected, [str(v) for v in violations]


@pytest.mark.parametrize(
    ("overrides", "expected"),
    [
        ({"gamma_max": 0.05}, Rule.GAMMA_THRESHOLD),
        ({"references_min": 5}, Rule.REFERENCE_COUNT),
        ({"queries_per_user": 10}, Rule.QUERIES_PER_USER),
        ({"events_max": 6}, Rule.EVENT_COUNT),
        ({"turns_max": 12}, Rule.TURN_COUNT),
        ({"lead_days_max": 1}, Rule.TIMELINE_START),
    ],
)
def test_stricter_settings_are_enforced(
    dataset: GeneratedDataset, overrides: dict, expected: Rule
) -> None:
    strict = Settings(generation=Settings().generation.model_copy(update=overrides))
    assert rules(check_invariants(dataset, strict)) == {expected}


def test_settings_at_the_datasets_own_extremes_pass(dataset: GeneratedDataset) -> None:
    """Every bound is inclusive: a dataset that touches each limit exactly breaks none."""
    events = [len(t.events) for t in dataset.timelines]
    turns = [len(s.turns) for s in dataset.sessions]
    references = [len(q.references) for q in dataset.queries]
    lead = max(
        (min(r.date for r in q.references) - min(e.date for e in t.events)).days
        for t in dataset.timelines
        for q in dataset.queries
        if q.query_id == t.query_id
    )
    tight = Settings().generation.model_copy(
        update={
            "gamma_max": max(q.gamma for q in dataset.queries),
            "reference_cosine_max": max(r.cosine for q in dataset.queries for r in q.references),
            "cosine_tolerance": 0.0,  # gamma is stored as the mean of the stored cosines
            "shared_words_max": max(
                len(shared_content_words(q.text, r.text))
                for q in dataset.queries
                for r in q.references
            ),
            "references_min": min(references),
            "references_max": max(references),
            "events_min": min(events),
            "events_max": max(events),
            "turns_min": min(turns),
            "turns_max": max(turns),
            "lead_days_max": lead,
        }
    )
    assert check_invariants(dataset, Settings(generation=tight)) == []


def test_duplicate_rows_and_gamma_inconsistency(
    dataset: GeneratedDataset, settings: Settings
) -> None:
    doubled = corrupt(dataset, lambda d: d.sessions.append(d.sessions[0].model_copy()))
    assert {Rule.DUPLICATE_ID, Rule.SESSION_PER_EVENT} <= rules(check_invariants(doubled, settings))

    def off_mean(d: GeneratedDataset) -> None:
        d.queries[0].gamma -= 0.01

    assert Rule.GAMMA_MEAN in rules(check_invariants(corrupt(dataset, off_mean), settings))


def test_another_embedder_is_not_recomputed(
    dataset: GeneratedDataset, settings: Settings, embedder: EmbeddingFunction
) -> None:
    def other_model(d: GeneratedDataset) -> None:
        tampered_cosine(d)
        for q in d.queries:
            q.embedder = "text-embedding-3-small"

    changed = corrupt(dataset, other_model)
    assert check_invariants(changed, settings, embedder) == []
    assert len(queries_not_recomputed(changed, embedder)) == len(changed.queries)


async def test_a_model_client_can_recompute_too(
    dataset: GeneratedDataset, settings: Settings
) -> None:
    client_embedder = EmbeddingFunction.of(simulated_client())
    assert client_embedder.name == shared_local_embedder().name
    few = dataset.model_copy(update={"queries": dataset.queries[:2]})
    assert Rule.COSINE_RECOMPUTED not in rules(check_invariants(few, settings, client_embedder))
    tampered = corrupt(
        few,
        lambda d: setattr(
            d.queries[0].references[0], "cosine", d.queries[0].references[0].cosine + 0.2
        ),
    )
    assert Rule.COSINE_RECOMPUTED in rules(check_invariants(tampered, settings, client_embedder))


def test_the_cli_reports_violations_by_id_and_exits_1(
    dataset: GeneratedDataset, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    broken = corrupt(dataset, too_few_turns)
    session = next(s for s in broken.sessions if len(s.turns) == 4)
    directory = broken.save(tmp_path / "broken")
    assert main(["validate", str(directory), "--no-audit"]) == 1
    out = capsys.readouterr().out.splitlines()
    assert any(line.startswith(f"sessions {session.session_id} [turn_count]") for line in out)
    assert out[-1].startswith("1 violations in") and out[-1].endswith("turn_count 1")


def test_the_cli_names_a_missing_directory(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["validate", str(tmp_path / "nowhere")]) == 2
    assert "is not a dataset directory" in capsys.readouterr().err


def test_the_cli_fails_on_a_failed_audit_gate(
    dataset: GeneratedDataset, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Sound invariants are not enough: a marker planted before every reference sentence fails validation."""

    def plant_marker(d: GeneratedDataset) -> None:
        for session in d.sessions:
            for index in session.reference_turn_indices:
                turn = session.turns[index]
                session.turns[index] = turn.model_copy(
                    update={"content": "Quick life update for you. " + turn.content}
                )
            session.reference_spans = []

    directory = corrupt(dataset, plant_marker).save(tmp_path / "marked")
    assert main(["validate", str(directory), "--no-recompute"]) == 1
    out = capsys.readouterr().out
    assert "audit failed: exclusive_ngram: 'quick life update for you" in out
