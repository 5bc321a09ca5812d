"""The memory stage on user0's hand-built history: upsert, stable ids, provenance, batching."""

from __future__ import annotations

import dataclasses
import datetime as dt
from pathlib import Path

import pytest
from test_memory_history import make_session, user0_history, user0_persona

from memoryquest.audit.run import reasked_references
from memoryquest.contracts import Domain, Fact, FactState, FactStatus, RejectionReason
from memoryquest.ids import make_id
from memoryquest.llm.client import ModelClient
from memoryquest.llm.factory import build_client
from memoryquest.memory.extraction import (
    added_words,
    build_memory,
    check_answer,
    extraction_request,
    facts_to_show,
    numbered_sentences,
    quote_support,
    shown_names,
    unsupported_clause,
    with_fids,
)
from memoryquest.memory.extraction_contracts import ExtractedFact, ExtractionAnswer
from memoryquest.settings import GenerationSettings, load_settings


@pytest.fixture
def client(tmp_path: Path, clean_settings_env: pytest.MonkeyPatch) -> ModelClient:
    """Offline client; the factory shares one local embedder per process."""
    settings = load_settings(
        overrides={"output_dir": str(tmp_path), "endpoint": {"backend": "simulated"}}
    )
    return build_client(settings)


def _only(facts: list[Fact], word: str) -> Fact:
    matching = [f for f in facts if word in f.info]
    assert len(matching) == 1, [f.info for f in facts]
    return matching[0]


async def test_a_fact_seen_twice_is_one_fact_with_two_revisions(client: ModelClient) -> None:
    persona = user0_persona()
    history = user0_history(persona)
    result = await build_memory(
        persona, history, client, GenerationSettings(memory_every_sessions=3)
    )
    aisle = _only(result.facts, "aisle")
    assert aisle.frequency == 2 and aisle.state is FactState.UPDATE
    assert aisle.session_ids == [history[1].session_id, history[4].session_id]
    assert [r.valid_from for r in aisle.revisions] == [dt.date(2024, 3, 3), dt.date(2024, 3, 12)]
    assert [r.frequency for r in aisle.revisions] == [1, 2]
    assert [r.state for r in aisle.revisions] == [FactState.ADD, FactState.UPDATE]
    assert aisle.revisions[0].session_ids == [history[1].session_id]
    assert (aisle.created_on, aisle.updated_on) == (dt.date(2024, 3, 3), dt.date(2024, 3, 12))
    # Everything else was said once.
    assert all(f.frequency == 1 for f in result.facts if f.fid != aisle.fid)
    assert all(f.status is FactStatus.ACTIVE for f in result.facts)
    assert [f.fid for f in result.facts] == sorted(f.fid for f in result.facts)
    for fact in result.facts:
        Fact.model_validate(fact.model_dump())


async def test_new_fact_ids_are_stable_and_derived_from_batch_and_rank(client: ModelClient) -> None:
    persona = user0_persona()
    history = user0_history(persona)
    settings = GenerationSettings(memory_every_sessions=3)
    first = await build_memory(persona, history, client, settings)
    second = await build_memory(persona, list(reversed(history)), client, settings)
    assert [f.model_dump() for f in first.facts] == [f.model_dump() for f in second.facts]
    sagan = _only(first.facts, "Carl Sagan")
    assert sagan.fid in {
        make_id("fact", persona.persona_id, history[0].session_id, n) for n in range(10)
    }


async def test_source_references_come_only_from_reference_turns(client: ModelClient) -> None:
    persona = user0_persona()
    history = user0_history(persona)
    result = await build_memory(
        persona, history, client, GenerationSettings(memory_every_sessions=3)
    )
    reference_session = history[3]
    with_reference = [f for f in result.facts if f.source_reference_ids]
    # The reference sentence says one thing; its fact descends from it.
    assert [f.info for f in with_reference] == [
        "Has a nut allergy, so they always check menus carefully"
    ]
    for fact in with_reference:
        assert fact.source_reference_ids == [reference_session.reference_id]
        assert fact.revisions[0].source_reference_ids == [reference_session.reference_id]
    # Another fact from the same session, but not from the reference turn, carries no reference.
    japanese = _only(result.facts, "Japanese")
    assert (
        japanese.session_ids == [reference_session.session_id]
        and japanese.source_reference_ids == []
    )
    assert result.rejected == []


@pytest.mark.parametrize(("every", "calls"), [(1, 7), (2, 4), (3, 3), (7, 1), (10, 1)])
async def test_one_extraction_call_every_n_sessions_and_at_the_end(
    client: ModelClient, every: int, calls: int
) -> None:
    persona = user0_persona()
    result = await build_memory(
        persona, user0_history(persona), client, GenerationSettings(memory_every_sessions=every)
    )
    assert result.extraction_calls == result.batches == calls
    assert result.consolidation_calls == 0 and result.consolidations == 0
    # Batching changes when facts are written, not what is learnt.
    history = user0_history(persona)
    assert len(result.facts) == 12
    aisle = _only(result.facts, "aisle")
    assert aisle.session_ids == [history[1].session_id, history[4].session_id]
    # Seen in two extractions: an update; seen twice within one extraction: one new fact.
    assert aisle.frequency == 2  # learnt in session 1, revised in session 4, whatever the batching


@pytest.mark.parametrize("shown", [1, 2, 5])
async def test_an_extraction_sees_the_facts_nearest_to_its_sessions(
    client: ModelClient, shown: int
) -> None:
    """However few facts a call is shown, the one a later session restates is among them."""
    persona = user0_persona()
    history = user0_history(persona)
    settings = GenerationSettings(memory_every_sessions=1, memory_facts_shown=shown)
    result = await build_memory(persona, history, client, settings)
    aisle = _only(result.facts, "aisle")
    assert aisle.frequency == 2 and aisle.session_ids == [
        history[1].session_id,
        history[4].session_id,
    ]


async def test_the_facts_shown_keep_fid_order_and_all_are_shown_while_few(
    client: ModelClient,
) -> None:
    persona = user0_persona()
    history = user0_history(persona)
    learnt = await build_memory(persona, history[:4], client, GenerationSettings())
    active = learnt.facts
    assert len(active) > 3
    assert facts_to_show(active, history[4:5], len(active)) == active
    nearest = facts_to_show(active, history[4:5], 3)
    assert len(nearest) == 3
    assert [f.fid for f in nearest] == sorted(f.fid for f in nearest)
    assert any("aisle" in f.info for f in nearest)


async def test_empty_history_costs_nothing(client: ModelClient) -> None:
    result = await build_memory(user0_persona(), [], client, GenerationSettings())
    assert result.facts == [] and result.extraction_calls == 0


async def test_sessions_of_another_persona_are_refused(client: ModelClient) -> None:
    persona = user0_persona()
    history = user0_history(persona)
    stranger = history[2].model_copy(
        update={"persona_id": make_id("persona", "personalens", "user1")}
    )
    with pytest.raises(ValueError, match=stranger.session_id):
        await build_memory(persona, [*history[:2], stranger], client, GenerationSettings())


async def test_an_uncited_reference_is_rejected_retried_and_the_rest_kept(
    client: ModelClient,
) -> None:
    persona = user0_persona()
    # The "reference" turn is a question, so no fact can honestly cite it.
    session = make_session(
        persona,
        0,
        dt.date(2024, 5, 1),
        Domain.RESTAURANTS,
        ["Could you find a quiet place for dinner on Friday?", "I'm a big fan of Thai food."],
        reference_turn=0,
        reference_key="question",
    )
    settings = GenerationSettings(max_regenerations=2)
    result = await build_memory(persona, [session], client, settings)
    assert result.extraction_calls == 3
    assert [r.reason for r in result.rejected] == [RejectionReason.INVARIANT] * 3
    assert all(r.stage == "memory" and "quoted by no fact" in r.detail for r in result.rejected)
    assert "retries exhausted, kept 1 well-formed facts" in result.rejected[-1].detail
    assert len({r.rejected_id for r in result.rejected}) == 3
    assert [f.info for f in result.facts] == ["Is a big fan of Thai food"]
    # Each rejection names the reference it left unquoted: the audit counts re-asks from them.
    assert reasked_references(result.rejected) == {session.reference_id}


def test_check_answer_names_unknown_facts_unshown_sentences_and_double_updates() -> None:
    persona = user0_persona()
    history = user0_history(persona)
    batch = history[:2]
    known = make_id("fact", "known")
    numbered = numbered_sentences(batch)
    first = {ref.session_id: number for number, ref in reversed(numbered.items())}

    def fact(fid: str, sentences: list[int]) -> ExtractedFact:
        return ExtractedFact(
            fid=fid,
            info="Prefers an aisle seat",
            type="Preference",
            related_entities=["flights"],
            sentences=sentences,
        )

    answer = ExtractionAnswer(
        facts=[
            fact("NEW_1", [first[batch[0].session_id]]),
            fact(known, [first[batch[1].session_id]]),
            fact("f_00000000000000ff", [first[batch[1].session_id]]),
            fact("NEW_2", [0]),
            fact("NEW_3", [len(numbered) + 1]),
            fact(known, [first[batch[0].session_id]]),
        ]
    )
    changes, problems = check_answer(answer, batch, {known})
    assert [c.fid for c in changes] == [None, known]
    assert changes[1].evidence == {batch[1].session_id: [numbered[first[batch[1].session_id]].turn]}
    assert len(problems) == 4
    assert (
        "'f_00000000000000ff'" in problems[0]
        and "neither NEW_<n> nor an active fact" in problems[0]
    )
    assert "sentence ids [0] are not user sentences" in problems[1]
    assert f"sentence ids [{len(numbered) + 1}] are not user sentences" in problems[2]
    assert "updated twice" in problems[3]


def test_shown_facts_go_by_short_names_that_answers_map_back_to_fids() -> None:
    persona = user0_persona()
    history = user0_history(persona)
    known = make_id("fact", "known")
    names = {"F1": known}
    (cited, *_) = numbered_sentences(history[:1])
    answer = ExtractionAnswer(
        facts=[
            ExtractedFact(
                fid=fid,
                info="Prefers an aisle seat",
                type="Preference",
                related_entities=[],
                sentences=[cited],
            )
            for fid in ("F1", "F2", "NEW_1")
        ]
    )
    mapped = with_fids(answer, names)
    assert [f.fid for f in mapped.facts] == [known, "F2", "NEW_1"]
    changes, problems = check_answer(mapped, history[:1], {known})
    assert [c.fid for c in changes] == [known, None]
    assert len(problems) == 1 and "'F2'" in problems[0]
    assert list(shown_names([])) == []


async def test_a_fact_its_quoted_sentence_does_not_say_is_caught(client: ModelClient) -> None:
    """A real extraction answer passes; the same answer with one fact's text swapped for an
    unrelated one falls below ``fact_quote_similarity_min`` for that fact alone."""
    persona = user0_persona()
    batch = user0_history(persona)[:2]
    answer = with_fids(await client.complete(extraction_request([], batch, 0)), {})
    changes, problems = check_answer(answer, batch, set())
    assert not problems and any(change.quotes for change in changes)
    floor = GenerationSettings().fact_quote_similarity_min
    support = await quote_support(changes, batch, client)
    assert support and min(support.values()) >= floor
    swapped = next(k for k in support)
    changes[swapped] = dataclasses.replace(
        changes[swapped], info="Collects vintage fountain pens from a shop in Osaka"
    )
    mutated = await quote_support(changes, batch, client)
    assert [k for k, cosine in mutated.items() if cosine < floor] == [swapped]


async def test_a_fact_with_a_clause_the_user_never_said_is_caught(client: ModelClient) -> None:
    """Every fact of a real answer is said by its turns clause by clause; the same fact with a
    clause of its own words added is caught, though the clause adds only two words to the fact
    (within ``fact_added_words_max``)."""
    persona = user0_persona()
    batch = user0_history(persona)[:2]
    answer = with_fids(await client.complete(extraction_request([], batch, 0)), {})
    changes, _ = check_answer(answer, batch, set())
    assert changes and all(unsupported_clause(change, batch) is None for change in changes)
    added = dataclasses.replace(
        changes[0], info=changes[0].info.rstrip(".") + ", so presumably tall"
    )
    assert unsupported_clause(added, batch) == "so presumably tall"
    limit = GenerationSettings().fact_added_words_max
    assert len(added_words(added, batch)) <= limit
    # A clause that repeats the turn's own words is no addition.
    retold = dataclasses.replace(changes[0], info=changes[0].info + ", " + changes[0].info)
    assert unsupported_clause(retold, batch) is None
