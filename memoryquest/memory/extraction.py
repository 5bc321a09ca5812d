"""Memory stage: replay a user's history, extract atomic facts with upsert, consolidate.

Every ``memory_every_sessions`` sessions (and once more at the end) one LLM
call sees the new sessions and the active facts nearest to them (at most
``memory_facts_shown``) and answers with the facts to
add (``NEW_<n>``) or update (an existing fid), each citing the user's
sentences that state it by id: the prompt shows every user turn split into
sentences, numbered across the call (:func:`numbered_sentences`), so an id
names a session, a turn and an exact sentence span at a few output tokens.
Those cited sentences (the fact's quotes) tie the ground-truth chain together
at sentence level: a fact is credited to a reference exactly when a sentence
it cites is the one that states the reference (the dialogue stage recorded its
span), not merely when it comes from the same turn. An answer that cites
unknown facts or sentence ids the call did not show, or that leaves a
reference sentence of the batch unquoted, is rejected and asked again
(bounded); if every attempt fails, the answer's well-formed facts are kept and
every failure stays in ``rejected``.

The store, not the model, keeps the books, so the answer carries none: a
fact's state follows from its fid (``NEW_<n>`` adds, an existing fid
updates), new facts start at frequency 1 and each update adds 1.
"""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, replace
from typing import Final

import numpy as np
from pydantic import BaseModel, Field

from memoryquest.contracts import (
    Fact,
    Persona,
    RejectedCandidate,
    RejectionReason,
    Role,
    Session,
    Stage,
)
from memoryquest.generation.common import TRIM_LEVELS, failure_reason
from memoryquest.generation.regeneration import Regeneration, Round, regenerate
from memoryquest.ids import make_id
from memoryquest.llm.client import LLMContextLengthError, LLMOutputError, ModelClient
from memoryquest.llm.request import DEFAULT_MAX_OUTPUT_TOKENS, LLMRequest
from memoryquest.memory.consolidation import consolidate
from memoryquest.memory.extraction_contracts import (
    ExtractionAnswer,
    ExtractionInputs,
    SessionTurn,
    SessionView,
)
from memoryquest.memory.store import FactChange, FactStore
from memoryquest.settings import GenerationSettings
from memoryquest.text import clauses, content_stems, sentence_spans

STAGE: Final = Stage.MEMORY
NEW_PREFIX = "NEW_"


class MemoryStageResult(BaseModel):
    """The final fact store of one persona (facts sorted by fid) and what it cost."""

    facts: list[Fact] = Field(default_factory=list)
    rejected: list[RejectedCandidate] = Field(default_factory=list)
    extraction_calls: int = 0
    consolidation_calls: int = 0
    consolidations: int = 0
    merges: int = 0
    embedding_calls: int = 0
    batches: int = 0
    withdrawn_query_ids: list[str] = Field(
        default_factory=list,
        description="Queries withdrawn because a reference has no credited fact (uncovered).",
    )


# --------------------------------------------------------------------------- prompt variables


def shown_names(active: Sequence[Fact]) -> dict[str, str]:
    """Short names for the facts a call shows ("F1", "F2", ...), each to its fid.

    A fid is about a dozen tokens and a call shows dozens of facts; the name is two.
    """
    return {f"F{number}": fact.fid for number, fact in enumerate(active, 1)}


def existing_fact_view(fact: Fact, name: str) -> dict[str, object]:
    return {
        "fid": name,
        "info": fact.info,
        "type": fact.type.value,
        "related_entities": list(fact.related_entities),
    }


def with_fids(answer: ExtractionAnswer, names: dict[str, str]) -> ExtractionAnswer:
    """The answer with each shown fact's short name replaced by its fid (other names kept)."""
    return answer.model_copy(
        update={
            "facts": [
                fact.model_copy(update={"fid": names.get(fact.fid, fact.fid)})
                for fact in answer.facts
            ]
        }
    )


@dataclass(frozen=True)
class SentenceRef:
    """Where a numbered user sentence is: its session, turn and character span in the turn."""

    session_id: str
    turn: int
    start: int
    end: int


def numbered_sentences(batch: Sequence[Session]) -> dict[int, SentenceRef]:
    """Every user sentence of the batch under its id (1, 2, ... in session and turn order)."""
    spans = (
        SentenceRef(session.session_id, index, start, end)
        for session in batch
        for index, turn in enumerate(session.turns)
        if turn.role is Role.USER
        for start, end in sentence_spans(turn.content)
    )
    return dict(enumerate(spans, 1))


def session_views(batch: Sequence[Session]) -> list[SessionView]:
    """The batch's sessions as shown: user turns as their numbered sentences."""
    sessions = {session.session_id: session for session in batch}
    by_turn: dict[tuple[str, int], dict[str, str]] = {}
    for number, ref in numbered_sentences(batch).items():
        sentences = by_turn.setdefault((ref.session_id, ref.turn), {})
        sentences[str(number)] = (
            sessions[ref.session_id].turns[ref.turn].content[ref.start : ref.end]
        )
    return [
        SessionView(
            session_id=session.session_id,
            date=session.date.isoformat(),
            domain=session.domain.value,
            turns=[
                SessionTurn(role=t.role.value, sentences=by_turn.get((session.session_id, i), {}))
                if t.role is Role.USER
                else SessionTurn(role=t.role.value, content=t.content)
                for i, t in enumerate(session.turns)
            ],
        )
        for session in batch
    ]


def extraction_request(
    active: Sequence[Fact],
    batch: Sequence[Session],
    seed: int,
    max_output_tokens: int | None = None,
) -> LLMRequest[ExtractionAnswer]:
    return ExtractionInputs(
        existing_facts=[
            existing_fact_view(fact, name)
            for name, fact in zip(shown_names(active), active, strict=True)
        ],
        sessions=session_views(batch),
    ).request(seed=seed, max_output_tokens=max_output_tokens)


@dataclass(frozen=True)
class _Plan:
    """How much one extraction call takes on: sessions, and the facts it is shown."""

    size: int
    shown: list[Fact]
    max_output_tokens: int | None


async def _fitting_plan(
    store: FactStore,
    ordered: Sequence[Session],
    start: int,
    client: ModelClient,
    settings: GenerationSettings,
    seed: int,
) -> _Plan:
    """``memory_every_sessions`` sessions and ``memory_facts_shown`` facts where the model's
    window allows; else fewer facts shown, then fewer sessions per call (with an output
    allowance in proportion), until one call fits."""
    step = settings.memory_every_sessions

    def fullest_first() -> Iterator[tuple[LLMRequest[ExtractionAnswer], _Plan]]:
        size = step
        while True:
            batch = ordered[start : start + size]
            budget = None
            if size < step:
                full = ExtractionInputs.template().max_output_tokens or DEFAULT_MAX_OUTPUT_TOKENS
                budget = -(-full * size // step)
            for limit in TRIM_LEVELS:
                shown_limit = (
                    settings.memory_facts_shown
                    if limit is None
                    else min(limit, settings.memory_facts_shown)
                )
                shown = facts_to_show(store.active(), batch, shown_limit)
                plan = _Plan(size, shown, budget)
                yield extraction_request(shown, batch, seed, budget), plan
            if size == 1:
                break
            size = max(1, size // 2)

    _, plan = await client.first_fitting(fullest_first())
    return plan


# --------------------------------------------------------------------------- checking an answer


def check_answer(
    answer: ExtractionAnswer, batch: Sequence[Session], active_fids: set[str]
) -> tuple[list[FactChange], list[str]]:
    """The answer's well-formed writes, and what is wrong with the rest of it."""
    numbered = numbered_sentences(batch)
    problems: list[str] = []
    changes: list[FactChange] = []
    updated: set[str] = set()
    for k, fact in enumerate(answer.facts):
        label = f"fact {k} ({fact.fid!r})"
        own: list[str] = []
        is_new = fact.fid.startswith(NEW_PREFIX)
        if not is_new and fact.fid not in active_fids:
            own.append(f"{label}: fid is neither NEW_<n> nor an active fact")
        if not is_new and fact.fid in updated:
            own.append(f"{label}: the same fact is updated twice")
        if not fact.sentences:
            own.append(f"{label}: cites no sentence")
        unknown = [number for number in fact.sentences if number not in numbered]
        if unknown:
            own.append(
                f"{label}: sentence ids {unknown} are not user sentences of this call (1-{len(numbered)})"
            )
        if own:
            problems.extend(own)
            continue
        if not is_new:
            updated.add(fact.fid)
        quotes: dict[str, set[tuple[int, int, int]]] = {}
        for number in fact.sentences:
            ref = numbered[number]
            quotes.setdefault(ref.session_id, set()).add((ref.turn, ref.start, ref.end))
        changes.append(
            FactChange(
                fid=None if is_new else fact.fid,
                info=" ".join(fact.info.split()),
                type=fact.type,
                related_entities=_dedupe(fact.related_entities),
                evidence={
                    sid: sorted({turn for turn, _, _ in spans}) for sid, spans in quotes.items()
                },
                quotes={sid: sorted(spans) for sid, spans in quotes.items()},
            )
        )
    for session in batch:
        if session.reference_id and not any(change.credits(session) for change in changes):
            problems.append(
                f"session {session.session_id}: the sentence stating reference {session.reference_id} is quoted by no fact"
            )
    return changes, problems


def _dedupe(values: Sequence[str]) -> list[str]:
    seen: set[str] = set()
    kept: list[str] = []
    for value in values:
        text = " ".join(value.split())
        if text and text.lower() not in seen:
            seen.add(text.lower())
            kept.append(text)
    return kept


# --------------------------------------------------------------------------- the stage


def facts_to_show(active: Sequence[Fact], batch: Sequence[Session], limit: int) -> list[Fact]:
    """The existing facts an extraction call sees, in fid order.

    Showing every fact made each call grow with the history (17k tokens late in
    a persona's replay). A new statement can only repeat or revise a fact about
    the same thing, and a restatement shares its words, so the ``limit`` facts
    sharing the largest part of their content words with one of the batch's
    user turns are the ones the call needs. Words, not embeddings: embedding
    every batch's turns doubled the stage's time.
    """
    if len(active) <= limit:
        return list(active)
    turns = [content_stems(t.content) for s in batch for t in s.turns if t.role is Role.USER]
    nearness = [_best_share(content_stems(f.info), turns) for f in active]
    chosen = sorted(range(len(active)), key=lambda i: -nearness[i])[:limit]
    return [active[i] for i in sorted(chosen)]


def _best_share(fact: frozenset[str], turns: Sequence[frozenset[str]]) -> float:
    """The largest share of the fact's content words that one turn says."""
    if not fact:
        return 0.0
    return max((len(fact & turn) / len(fact) for turn in turns), default=0.0)


async def _extract_batch(
    store: FactStore,
    batch: Sequence[Session],
    client: ModelClient,
    settings: GenerationSettings,
    seed: int,
    rejected: list[RejectedCandidate],
    active: Sequence[Fact],
    max_output_tokens: int | None = None,
) -> tuple[list[FactChange], int]:
    """The batch's writes and the number of calls they took; ``active`` is what the call sees."""
    job = _ExtractionJob(store.persona_id, client, settings, active, seed, max_output_tokens)
    outcome = await regenerate(job, [batch], settings.max_regenerations + 1)
    rejected.extend(outcome.rejected)
    return outcome.kept.get(0, []), outcome.calls


class _ExtractionJob(Regeneration[Sequence[Session], ExtractionAnswer, list[FactChange]]):
    """One batch of sessions: its facts written, checked against the batch, asked again when a rule
    breaks; after the last attempt the well-formed facts are kept."""

    def __init__(
        self,
        persona_id: str,
        client: ModelClient,
        settings: GenerationSettings,
        active: Sequence[Fact],
        seed: int,
        max_output_tokens: int | None,
    ) -> None:
        self.persona_id, self.client, self.settings = persona_id, client, settings
        self.active = active
        self.seed, self.max_output_tokens = seed, max_output_tokens
        self.active_fids = {f.fid for f in active}
        self.names = shown_names(active)

    async def ask(
        self, items: Sequence[Sequence[Session]], round: Round
    ) -> Sequence[ExtractionAnswer | BaseException]:
        (batch,) = items
        request = extraction_request(
            self.active, batch, self.seed + round.attempt, self.max_output_tokens
        )
        return await self.client.complete_all([request], return_exceptions=True)

    async def check(
        self, answers: Sequence[tuple[int, Sequence[Session], ExtractionAnswer]], round: Round
    ) -> list[tuple[int, list[FactChange] | RejectedCandidate]]:
        verdicts: list[tuple[int, list[FactChange] | RejectedCandidate]] = []
        for position, batch, answer in answers:
            answer = with_fids(answer, self.names)
            changes, problems = check_answer(answer, batch, self.active_fids)
            changes, unsupported = await self._supported(changes, batch)
            reason = RejectionReason.INVARIANT if problems else RejectionReason.UNSUPPORTED
            problems += unsupported
            unquoted = [
                s.reference_id
                for s in batch
                if s.reference_id and not any(change.credits(s) for change in changes)
            ]
            if problems:
                verdicts.append(
                    (
                        position,
                        _rejection(
                            self.persona_id,
                            batch[0].session_id,
                            round.attempt,
                            reason,
                            "; ".join(problems),
                            [s.session_id for s in batch],
                            answer.model_dump(mode="json"),
                            round.last,
                            salvaged=len(changes),
                            unquoted=unquoted,
                        ),
                    )
                )
            if not problems or round.last:
                verdicts.append((position, changes))
        return verdicts

    async def _supported(
        self, changes: list[FactChange], batch: Sequence[Session]
    ) -> tuple[list[FactChange], list[str]]:
        """The changes whose text their evidence says, and why each other one is not: a fact
        far from the sentence it quotes, or one that adds words the user never said."""
        settings = self.settings
        support = await quote_support(changes, batch, self.client)
        kept: list[FactChange] = []
        problems: list[str] = []
        for k, change in enumerate(changes):
            label = f"fact {change.info[:60]!r}"
            added = added_words(change, batch)
            if k in support and support[k] < settings.fact_quote_similarity_min:
                problems.append(
                    f"{label}: the sentence it quotes does not say it (cosine {support[k]:.3f} "
                    f"< {settings.fact_quote_similarity_min})"
                )
            elif len(added) > settings.fact_added_words_max:
                problems.append(
                    f"{label}: adds what the user did not say ({', '.join(sorted(added))}; "
                    f"max {settings.fact_added_words_max} words not in its turns)"
                )
            elif (clause := unsupported_clause(change, batch)) is not None:
                problems.append(
                    f"{label}: adds a clause the user did not say ({clause!r}: most of its "
                    "content words are in none of its turns)"
                )
            else:
                kept.append(change)
        return kept, problems

    def failed(
        self, item: Sequence[Session], error: LLMOutputError, round: Round
    ) -> RejectedCandidate:
        return _rejection(
            self.persona_id,
            item[0].session_id,
            round.attempt,
            failure_reason(error),
            str(error),
            [s.session_id for s in item],
            {"error": str(error)},
            round.last or isinstance(error, LLMContextLengthError),
        )


def _said_stems(change: FactChange, batch: Sequence[Session]) -> set[str]:
    """The content words (stemmed) of the turns a fact cites."""
    sessions = {s.session_id: s for s in batch}
    said: set[str] = set()
    for session_id, turns in change.evidence.items():
        for turn in turns:
            said.update(content_stems(sessions[session_id].turns[turn].content))
    return said


def added_words(change: FactChange, batch: Sequence[Session]) -> set[str]:
    """The fact's content words (stemmed) that none of its cited turns says: an inference added."""
    return set(content_stems(change.info)) - _said_stems(change, batch)


def unsupported_clause(change: FactChange, batch: Sequence[Session]) -> str | None:
    """The first clause of the fact most of whose content words none of its cited turns says,
    or None.

    A few words of a paraphrase's own are spread over a fact; an inference comes as a clause
    of its own ("..., so they are probably X"), whose words the user never used. Counted over
    the whole fact those are few; counted in their clause they are most of it.
    """
    said = _said_stems(change, batch)
    for clause in clauses(change.info):
        stems = content_stems(clause)
        added = stems - said
        if added and 2 * len(added) >= len(stems):
            return clause
    return None


async def quote_support(
    changes: Sequence[FactChange], batch: Sequence[Session], client: ModelClient
) -> dict[int, float]:
    """For each change that quotes a sentence, its cosine to the closest sentence it quotes: a
    fact must say what its quote says, or retrieval credits the reference to the wrong text."""
    sessions = {s.session_id: s for s in batch}
    quoted: list[tuple[int, str]] = [
        (k, sessions[sid].turns[turn].content[start:end])
        for k, change in enumerate(changes)
        for sid, spans in change.quotes.items()
        for turn, start, end in spans
    ]
    if not quoted:
        return {}
    texts = [change.info for change in changes] + [sentence for _, sentence in quoted]
    vectors = await client.embed(texts, stage=STAGE)
    support: dict[int, float] = {}
    for row, (k, _) in enumerate(quoted):
        cosine = float(vectors[len(changes) + row] @ vectors[k])
        support[k] = max(support.get(k, -1.0), cosine)
    return support


def _rejection(
    persona_id: str,
    anchor: str,
    attempt: int,
    reason: RejectionReason,
    detail: str,
    session_ids: list[str],
    answer: object,
    exhausted: bool,
    salvaged: int | None = None,
    unquoted: Sequence[str] = (),
) -> RejectedCandidate:
    note = ""
    if exhausted:
        note = (
            f"; retries exhausted, kept {salvaged} well-formed facts"
            if salvaged is not None
            else "; retries exhausted, the batch adds no facts"
        )
    return RejectedCandidate(
        rejected_id=make_id("rejected", persona_id, ExtractionInputs.template_id, anchor, attempt),
        persona_id=persona_id,
        stage=STAGE,
        reason=reason,
        detail=f"extraction over sessions {session_ids} (attempt {attempt + 1}): {detail}{note}",
        payload_json=json.dumps(
            {
                "session_ids": session_ids,
                "answer": answer,
                # What the audit counts as recovered only by asking again (audit.ground_truth).
                **({"unquoted_reference_ids": list(unquoted)} if unquoted else {}),
            },
            ensure_ascii=False,
        ),
    )


def by_session_date(change: FactChange, dates: dict[str, dt.date]) -> list[FactChange]:
    """``change`` split by the dates of its evidence sessions, earliest first.

    A fact stated in one session and repeated in a later one of the same batch
    is learnt on the first date and revised on the second: dating it all on
    the later date would hide it (and any reference credited from the first
    session) from a query asked in between.
    """
    groups = sorted({dates[sid] for sid in change.evidence})
    if len(groups) < 2:
        return [change]
    return [
        replace(
            change,
            evidence={sid: turns for sid, turns in change.evidence.items() if dates[sid] == day},
            quotes={sid: spans for sid, spans in change.quotes.items() if dates[sid] == day},
        )
        for day in groups
    ]


def chronological(persona: Persona, history: Sequence[Session]) -> list[Session]:
    """The history in replay order, checked to belong to ``persona``."""
    seen: set[str] = set()
    for session in history:
        if session.persona_id != persona.persona_id:
            raise ValueError(
                f"session {session.session_id} belongs to persona {session.persona_id}, not {persona.persona_id}"
            )
        if session.session_id in seen:
            raise ValueError(f"session {session.session_id} appears twice in the history")
        seen.add(session.session_id)
    return sorted(history, key=lambda s: (s.date, s.position, s.session_id))


async def build_memory(
    persona: Persona,
    history: list[Session],
    client: ModelClient,
    settings: GenerationSettings,
    *,
    seed: int = 0,
) -> MemoryStageResult:
    """The persona's fact store after replaying ``history``, with every revision and merge."""
    ordered = chronological(persona, history)
    store = FactStore(persona.persona_id, ordered)
    result = MemoryStageResult()
    new_since_merge = 0
    embeddings: dict[str, np.ndarray] = {}
    start = 0
    while start < len(ordered):
        plan = await _fitting_plan(store, ordered, start, client, settings, seed)
        batch = ordered[start : start + plan.size]
        start += plan.size
        result.batches += 1
        changes, calls = await _extract_batch(
            store,
            batch,
            client,
            settings,
            seed,
            result.rejected,
            plan.shown,
            plan.max_output_tokens,
        )
        result.extraction_calls += calls
        ordinal = 0
        dates = {s.session_id: s.date for s in batch}
        for change in changes:
            first, *later = by_session_date(change, dates)
            if first.fid is None:
                fid = store.add(first, batch[0].session_id, ordinal).fid
                ordinal += 1
                new_since_merge += 1
            else:
                fid = store.update(first).fid
            for revision in later:
                store.update(replace(revision, fid=fid))
        if new_since_merge >= settings.consolidation_new_facts:
            outcome = await consolidate(
                store, client, settings, batch[-1].date, seed=seed, embeddings=embeddings
            )
            result.consolidations += 1
            result.consolidation_calls += outcome.llm_calls
            result.embedding_calls += outcome.embedding_calls
            result.merges += outcome.merges
            result.rejected.extend(outcome.rejected)
            new_since_merge = 0
    result.facts = store.all()
    return result
