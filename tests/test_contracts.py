"""The data contracts: rows survive a JSON round trip, and bad rows are refused."""

from __future__ import annotations

import datetime as dt
from pathlib import Path
from typing import get_args

import pytest
from pydantic import BaseModel, ValidationError

from memoryquest.contracts import (
    READABLE_TABLES,
    SCHEMA_VERSION,
    TABLES,
    Domain,
    EventKind,
    Fact,
    FactLabels,
    FactRevision,
    FactState,
    FactStatus,
    FactType,
    HistorySession,
    JudgeKind,
    MemoryFact,
    MemoryFactRevision,
    Persona,
    ProspectionIteration,
    ProspectionStep,
    Query,
    QueryLabels,
    QueryRequest,
    Reference,
    ReferenceJudgement,
    RejectedCandidate,
    RejectingStage,
    RejectionReason,
    RetrievalMethod,
    RevisionCredit,
    Role,
    RunManifest,
    Session,
    SessionLabels,
    Stage,
    StageUsage,
    Timeline,
    TimelineEvent,
    Turn,
    ValidationResult,
)
from memoryquest.dataset import GeneratedDataset, split_tables
from memoryquest.ids import make_id
from memoryquest.intake import PersonaSelection, load_personas

PERSONA = make_id("persona", "personalens", "user0")
QUERY = make_id("query", PERSONA, 0)
REFERENCE = make_id("reference", QUERY, 0)
EVENT = make_id("event", QUERY, 0)
SESSION = make_id("session", EVENT)
FACT = make_id("fact", PERSONA, 0)
DAY = dt.date(2024, 3, 14)


@pytest.fixture(scope="module")
def persona(personalens_sample_dir: Path) -> Persona:
    return load_personas(personalens_sample_dir, PersonaSelection(user_ids=["user0"])).personas[0]


def query() -> Query:
    return Query(
        query_id=QUERY,
        persona_id=PERSONA,
        query_date=DAY,
        text="Can you plan a weekend in Montreal around my schedule?",
        reasoning="Needs the user's seat preference, budget and a prior booking.",
        domain=Domain.TRAVEL,
        references=[
            Reference(
                reference_id=REFERENCE,
                date=dt.date(2024, 2, 1),
                text="Prefers aisle seats.",
                domain=Domain.FLIGHTS,
                cosine=0.12,
            )
        ],
        gamma=0.12,
        embedder="all-MiniLM-L6-v2-onnx-int8",
        rank=0,
    )


def rows(persona: Persona) -> list[BaseModel]:
    revision = FactRevision(
        valid_from=DAY,
        info="Prefers aisle seats on flights.",
        type=FactType.PREFERENCE,
        frequency=1,
        related_entities=["flights"],
        session_ids=[SESSION],
        source_reference_ids=[REFERENCE],
        state=FactState.ADD,
    )
    return [
        persona,
        query(),
        Timeline(
            timeline_id=make_id("timeline", QUERY),
            query_id=QUERY,
            persona_id=PERSONA,
            events=[
                TimelineEvent(
                    event_id=EVENT,
                    date=DAY,
                    domain=Domain.FLIGHTS,
                    kind=EventKind.REFERENCE,
                    description="Books a flight and asks for an aisle seat.",
                    reference_id=REFERENCE,
                )
            ],
        ),
        Session(
            session_id=SESSION,
            persona_id=PERSONA,
            query_id=QUERY,
            event_id=EVENT,
            date=DAY,
            domain=Domain.FLIGHTS,
            position=0,
            turns=[
                Turn(role=Role.USER, content="Aisle seat please."),
                Turn(role=Role.ASSISTANT, content="Done."),
            ],
            reference_id=REFERENCE,
            reference_turn_indices=[0],
        ),
        Fact(
            fid=FACT,
            persona_id=PERSONA,
            info=revision.info,
            type=revision.type,
            frequency=1,
            related_entities=["flights"],
            session_ids=[SESSION],
            source_reference_ids=[REFERENCE],
            state=FactState.ADD,
            created_on=DAY,
            updated_on=DAY,
            revisions=[revision],
        ),
        ValidationResult(
            result_id=make_id("result", QUERY, "pgr_tot", "provenance"),
            query_id=QUERY,
            persona_id=PERSONA,
            method=RetrievalMethod.PGR_TOT,
            judge=JudgeKind.PROVENANCE,
            memory_as_of=DAY,
            memory_size=1,
            retrieved_fids=[FACT],
            judgements=[
                ReferenceJudgement(reference_id=REFERENCE, found=True, supporting_fids=[FACT])
            ],
            recall=1.0,
            recall_exact=True,
            ndcg=1.0,
            llm_calls=3,
            embedding_calls=4,
            iterations=[
                ProspectionIteration(
                    iteration=0,
                    steps=[
                        ProspectionStep(
                            step_id="1",
                            action="Check seats",
                            constraints="aisle",
                            retrieved_fids=[FACT],
                        )
                    ],
                    new_fids=[FACT],
                )
            ],
        ),
        RejectedCandidate(
            rejected_id=make_id("rejected", QUERY),
            persona_id=PERSONA,
            stage="queries",
            reason=RejectionReason.SIMILARITY,
            detail="gamma 0.41 above 0.3",
            payload_json='{"text": "..."}',
            gamma=0.41,
            embedder="all-MiniLM-L6-v2-onnx-int8",
        ),
        RunManifest(
            run_id="run-1",
            created_at=dt.datetime(2024, 3, 14, 12, 0, tzinfo=dt.UTC),
            package_version="0.1.0",
            simulated=True,
            backend="simulated",
            chat_model="simulator",
            embedder="all-MiniLM-L6-v2-onnx-int8",
            seed=0,
            settings={"generation": {"gamma_max": 0.3}},
            prompts=[],
            usage=[StageUsage(stage="queries", requests=2)],
            total_cost_usd=0.0,
            persona_ids=[PERSONA],
            wall_seconds=1.5,
        ),
    ]


def written_rows(persona: Persona) -> list[BaseModel]:
    """The rows of every table, the joined view's rows and the split rows written from them."""
    joined = rows(persona)
    dataset = GeneratedDataset(
        queries=[row for row in joined if isinstance(row, Query)],
        sessions=[row for row in joined if isinstance(row, Session)],
        facts=[row for row in joined if isinstance(row, Fact)],
    )
    return joined + [row for table in split_tables(dataset).values() for row in table]


def test_every_table_row_round_trips_through_json(persona: Persona) -> None:
    built = written_rows(persona)
    assert {type(row) for row in built} >= set(TABLES.values())
    for row in built:
        text = row.model_dump_json()
        assert type(row).model_validate_json(text) == row
        assert type(row).model_validate(row.model_dump(mode="json")) == row


def test_every_row_carries_the_schema_version(persona: Persona) -> None:
    for row in written_rows(persona):
        assert row.model_dump()["schema_version"] == SCHEMA_VERSION == "1.0"


@pytest.mark.parametrize(
    ("joined", "readable", "labels"),
    [
        (Session, HistorySession, SessionLabels),
        (Query, QueryRequest, QueryLabels),
        (Fact, MemoryFact, FactLabels),
        (FactRevision, MemoryFactRevision, RevisionCredit),
    ],
)
def test_the_joined_view_is_exactly_its_readable_row_and_its_labels(
    joined: type[BaseModel], readable: type[BaseModel], labels: type[BaseModel]
) -> None:
    assert set(joined.model_fields) == set(readable.model_fields) | set(labels.model_fields)
    keys = set(readable.model_fields) & set(labels.model_fields)
    assert keys <= {
        "schema_version",
        "persona_id",
        "session_id",
        "query_id",
        "fid",
        "valid_from",
        "revisions",
    }


def test_no_readable_table_has_a_label_column() -> None:
    labels = {
        "query_id",
        "event_id",
        "domain",
        "position",
        "reference_id",
        "reference_turn_indices",
        "reference_spans",
        "source_reference_ids",
        "references",
        "reasoning",
        "rank",
        "gamma",
    }
    assert set(TABLES["history"].model_fields) == {
        "schema_version",
        "persona_id",
        "session_id",
        "date",
        "turns",
    }
    for name in READABLE_TABLES:
        model = TABLES[name]
        assert not labels & (
            set(model.model_fields) - {"query_id"} if name == "queries" else set(model.model_fields)
        ), name
    assert "source_reference_ids" not in MemoryFactRevision.model_fields


def test_an_other_schema_version_is_refused(persona: Persona) -> None:
    data = persona.model_dump(mode="json") | {"schema_version": "2.0"}
    with pytest.raises(ValidationError, match="schema_version"):
        Persona.model_validate(data)


@pytest.mark.parametrize(
    "bad_id",
    [
        "",
        "p_123",
        "P_0123456789abcdef",
        "p_0123456789abcdeg",
        "p-0123456789abcdef",
        "pp_0123456789abcdef",
        "p_0123456789ABCDEF",
        "p_0123456789abcdef0",
    ],
)
def test_id_pattern_refuses_malformed_ids(persona: Persona, bad_id: str) -> None:
    with pytest.raises(ValidationError, match="persona_id"):
        Persona.model_validate(persona.model_dump(mode="json") | {"persona_id": bad_id})


def test_make_id_is_stable_and_fits_the_pattern() -> None:
    assert make_id("persona", "personalens", "user0") == make_id("persona", "personalens", "user0")
    assert make_id("persona", "personalens", "user0") != make_id("persona", "custom", "user0")
    assert make_id("query", "a", 1).startswith("q_")
    Query.model_validate(query().model_dump() | {"query_id": make_id("query", "x")})


def test_extra_keys_are_forbidden_at_every_level(persona: Persona) -> None:
    data = persona.model_dump(mode="json")
    with pytest.raises(ValidationError, match="Extra inputs are not permitted"):
        Persona.model_validate(data | {"nickname": "zero"})
    data["demographics"]["shoe_size"] = "44"
    with pytest.raises(ValidationError, match=r"demographics\.shoe_size"):
        Persona.model_validate(data)


def test_enums_refuse_unknown_values(persona: Persona) -> None:
    data = persona.model_dump(mode="json")
    data["affinities"][0]["domain"] = "Cooking"
    with pytest.raises(ValidationError, match=r"affinities\.0\.domain"):
        Persona.model_validate(data)
    with pytest.raises(ValidationError):
        Turn.model_validate({"role": "system", "content": "hi"})
    with pytest.raises(ValidationError):
        FactRevision.model_validate(
            {
                "valid_from": "2024-01-01",
                "info": "x",
                "type": "Opinion",
                "frequency": 1,
                "related_entities": [],
                "session_ids": [],
                "state": "add",
            }
        )
    assert [d.value for d in Domain][:3] == ["Alarm", "Books", "Buses"] and len(Domain) == 20
    assert {t.value for t in FactType} == {
        "Identity",
        "Preference",
        "Goal",
        "Interest",
        "Activity",
        "Event",
    }
    assert FactStatus("merged") is FactStatus.MERGED


def test_a_rejected_row_names_only_a_stage_that_refuses_candidates(
    generated_dataset: GeneratedDataset,
) -> None:
    """The review's refusals are dialogue candidates', and the judges, the PGR sample and the
    invariants refuse nothing: the rejected table's contract lists no stage that never rejects."""
    row = generated_dataset.rejected[0].model_dump(mode="json")
    refusing = set(get_args(RejectingStage))
    assert {r.stage for r in generated_dataset.rejected} <= refusing
    for stage in Stage:
        mutated = row | {"stage": stage.value}
        if stage in refusing:
            assert RejectedCandidate.model_validate(mutated).stage is stage
        else:
            with pytest.raises(ValidationError, match=r"stage"):
                RejectedCandidate.model_validate(mutated)
    assert refusing < set(Stage) and Stage.REVIEW not in refusing


def test_constraints_on_values() -> None:
    good = query().model_dump()
    with pytest.raises(ValidationError, match="references"):
        Query.model_validate(good | {"references": []})
    with pytest.raises(ValidationError, match="rank"):
        Query.model_validate(good | {"rank": -1})
    with pytest.raises(ValidationError, match="query_date"):
        Query.model_validate(good | {"query_date": "14/03/2024"})
    with pytest.raises(ValidationError, match="content"):
        Turn(role=Role.USER, content="")


def test_dates_serialise_as_iso_8601() -> None:
    data = query().model_dump(mode="json")
    assert data["query_date"] == "2024-03-14"
    assert data["references"][0]["date"] == "2024-02-01"
    assert data["domain"] == "Travel"
