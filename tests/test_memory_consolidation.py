"""Consolidation: when it runs, which facts it folds together, and what the merged fact keeps."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import numpy as np
import pytest
from test_memory_history import long_history, make_session, user0_persona

from memoryquest.contracts import Domain, Fact, FactState, FactStatus, Persona, Session
from memoryquest.ids import make_id
from memoryquest.llm.client import ModelClient
from memoryquest.llm.factory import build_client
from memoryquest.memory.consolidation import cluster_by_similarity, split_by_window
from memoryquest.memory.extraction import build_memory
from memoryquest.settings import GenerationSettings, load_settings

SCI_FI = "I love science-fiction books."
SCI_FI_AGAIN = "I enjoy reading sci-fi novels."
OTHER = "I usually fly Air Canada when I can."
SIMILARITY = 0.7


@pytest.fixture
def client(tmp_path: Path, clean_settings_env: pytest.MonkeyPatch) -> ModelClient:
    """Offline client; the factory shares one local embedder per process."""
    settings = load_settings(
        overrides={"output_dir": str(tmp_path), "endpoint": {"backend": "simulated"}}
    )
    return build_client(settings)


def settings(new_facts: int = 3) -> GenerationSettings:
    return GenerationSettings(
        memory_every_sessions=1,
        consolidation_new_facts=new_facts,
        consolidation_window_days=7,
        consolidation_similarity=SIMILARITY,
    )


def history(persona: Persona, second: dt.date, third: dt.date) -> list[Session]:
    """Two near-duplicate statements (the first conveys a reference), then an unrelated one."""
    return [
        make_session(
            persona,
            0,
            dt.date(2024, 4, 1),
            Domain.BOOKS,
            [SCI_FI],
            reference_turn=0,
            reference_key="sci-fi",
        ),
        make_session(persona, 1, second, Domain.BOOKS, [SCI_FI_AGAIN]),
        make_session(persona, 2, third, Domain.FLIGHTS, [OTHER]),
    ]


async def test_the_two_statements_are_similar_but_not_the_same_fact(client: ModelClient) -> None:
    vectors = await client.embed(
        [
            "Loves science-fiction books",
            "Enjoys reading sci-fi novels",
            "Usually flies Air Canada when they can",
        ],
        stage="memory",
    )
    cosine = vectors @ vectors.T
    assert cosine[0, 1] >= SIMILARITY
    assert cosine[0, 2] < SIMILARITY and cosine[1, 2] < SIMILARITY


async def test_facts_two_days_apart_are_merged_with_aggregated_provenance(
    client: ModelClient,
) -> None:
    persona = user0_persona()
    sessions = history(persona, dt.date(2024, 4, 3), dt.date(2024, 4, 5))
    result = await build_memory(persona, sessions, client, settings())
    assert (
        result.consolidations,
        result.merges,
        result.consolidation_calls,
        result.embedding_calls,
    ) == (1, 1, 1, 1)
    merged = next(f for f in result.facts if f.merged_fids)
    originals = [f for f in result.facts if f.status is FactStatus.MERGED]
    assert len(result.facts) == 4 and len(originals) == 2
    assert merged.fid == make_id("fact", "merge", *sorted(f.fid for f in originals))
    assert merged.merged_fids == sorted(f.fid for f in originals)
    assert merged.info == "Enjoys reading sci-fi novels"  # one member, never a concatenation
    assert (
        merged.frequency == 2
        and merged.state is FactState.ADD
        and merged.status is FactStatus.ACTIVE
    )
    assert merged.session_ids == [sessions[0].session_id, sessions[1].session_id]
    assert merged.source_reference_ids == [sessions[0].reference_id]
    consolidation_day = dt.date(2024, 4, 5)
    assert (
        merged.created_on
        == merged.updated_on
        == merged.revisions[0].valid_from
        == consolidation_day
    )
    assert merged.revisions[0].source_reference_ids == [sessions[0].reference_id]
    for original in originals:
        assert original.merged_into == merged.fid and original.retired_on == consolidation_day
        assert len(original.revisions) == 1  # retired as it was, history intact
    the_other = next(f for f in result.facts if "Air Canada" in f.info)
    assert the_other.status is FactStatus.ACTIVE and the_other.merged_into is None
    for fact in result.facts:
        Fact.model_validate(fact.model_dump())


async def test_facts_thirty_days_apart_are_not_merged(client: ModelClient) -> None:
    persona = user0_persona()
    sessions = history(persona, dt.date(2024, 5, 1), dt.date(2024, 5, 3))
    result = await build_memory(persona, sessions, client, settings())
    assert (result.consolidations, result.merges, result.consolidation_calls) == (1, 0, 0)
    assert len(result.facts) == 3
    assert all(f.status is FactStatus.ACTIVE and not f.merged_fids for f in result.facts)


async def test_consolidation_waits_for_the_new_fact_threshold(client: ModelClient) -> None:
    persona = user0_persona()
    sessions = history(persona, dt.date(2024, 4, 3), dt.date(2024, 4, 5))
    below = await build_memory(persona, sessions, client, settings(new_facts=4))
    assert (below.consolidations, below.merges, below.embedding_calls) == (0, 0, 0)
    assert len(below.facts) == 3
    early = await build_memory(persona, sessions, client, settings(new_facts=2))
    # Reached after the second session: the merge is dated on that session's day.
    assert (early.consolidations, early.merges) == (1, 1)
    merged = next(f for f in early.facts if f.merged_fids)
    assert merged.created_on == dt.date(2024, 4, 3)


def _fact(fid: str, day: int) -> Fact:
    from memoryquest.contracts import FactRevision, FactType

    date = dt.date(2024, 4, day)
    revision = FactRevision(
        valid_from=date,
        info=fid,
        type=FactType.PREFERENCE,
        frequency=1,
        related_entities=[],
        session_ids=[],
        state=FactState.ADD,
    )
    return Fact(
        fid=make_id("fact", fid),
        persona_id=make_id("persona", "x"),
        info=fid,
        type=FactType.PREFERENCE,
        frequency=1,
        related_entities=[],
        session_ids=[],
        state=FactState.ADD,
        created_on=date,
        updated_on=date,
        revisions=[revision],
    )


def test_clusters_use_complete_linkage_so_chains_do_not_merge() -> None:
    a, b, c = _fact("a", 1), _fact("b", 1), _fact("c", 1)
    angle = np.deg2rad(40)  # a~b and b~c at cos 0.77, a~c at cos 0.17
    vectors = np.array(
        [[1.0, 0.0], [np.cos(angle), np.sin(angle)], [np.cos(2 * angle), np.sin(2 * angle)]]
    )
    clusters = cluster_by_similarity([a, b, c], vectors, 0.75)
    assert [[f.info for f in cluster] for cluster in clusters] == [["a", "b"], ["c"]]


def test_windows_span_at_most_the_configured_days() -> None:
    facts = [_fact("d1", 1), _fact("d20", 20), _fact("d8", 8), _fact("d3", 3), _fact("d22", 22)]
    windows = split_by_window(facts, 7)
    assert [[f.info for f in window] for window in windows] == [["d1", "d3", "d8"], ["d20", "d22"]]
    assert [[f.info for f in w] for w in split_by_window(facts, 0)] == [
        ["d1"],
        ["d3"],
        ["d8"],
        ["d20"],
        ["d22"],
    ]


async def test_every_merge_on_a_long_history_keeps_the_store_consistent(
    client: ModelClient,
) -> None:
    persona = user0_persona()
    sessions = long_history(persona, 40)
    config = GenerationSettings(
        memory_every_sessions=2, consolidation_new_facts=12, consolidation_similarity=0.75
    )
    result = await build_memory(persona, sessions, client, config)
    again = await build_memory(persona, sessions, client, config)
    assert [f.model_dump() for f in result.facts] == [f.model_dump() for f in again.facts]
    assert result.consolidations >= 3 and result.merges >= 2 and result.rejected == []
    assert result.consolidation_calls == result.merges  # one call per merged group
    by_fid = {f.fid: f for f in result.facts}
    position = {s.session_id: s.position for s in sessions}
    merged = [f for f in result.facts if f.merged_fids]
    for fact in merged:
        members = [f for f in result.facts if f.merged_into == fact.fid]
        assert len(members) >= 2 and all(m.status is FactStatus.MERGED for m in members)
        assert fact.merged_fids == sorted(
            {m.fid for m in members} | {g for m in members for g in m.merged_fids}
        )
        assert all(m.retired_on == fact.created_on for m in members)
        assert max(m.updated_on for m in members) - min(
            m.updated_on for m in members
        ) <= dt.timedelta(days=7)
        # Merged facts may be updated later; their first revision is the merge itself.
        assert fact.revisions[0].frequency == sum(m.frequency for m in members)
        assert fact.revisions[0].valid_from == fact.created_on
        union = {sid for m in members for sid in m.session_ids}
        assert fact.revisions[0].session_ids == sorted(union, key=position.__getitem__)
        assert set(fact.revisions[0].source_reference_ids) == {
            r for m in members for r in m.source_reference_ids
        }
    assert any(len(f.revisions) > 1 for f in merged)  # a merged fact can still be upserted
    retired = [f for f in result.facts if f.status is FactStatus.MERGED]
    assert retired and all(f.merged_into in by_fid and f.retired_on is not None for f in retired)
    # Every reference conveyed in the history reaches at least one fact.
    conveyed = {s.reference_id for s in sessions if s.reference_id}
    assert conveyed == {r for f in result.facts for r in f.source_reference_ids}
