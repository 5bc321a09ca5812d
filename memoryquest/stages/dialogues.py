"""The ``dialogues`` stage: every timeline event becomes one dated user–assistant conversation.

One LLM call per event, all of a timeline's calls sent together. The model sees
the event, its news (the personal updates the user tells in it), the user's
demographics, and the domain's interaction summary and affinities, so the user
sounds the same across the whole history. The model is not told whether one
item of news is a reference: it names where it said each item, and the stage
picks the reference's. Its sentence must come within
``reference_turn_similarity_min`` cosine of the reference (a paraphrase does;
an unrelated turn does not), and no turn may repeat a reference word for word.
No news sentence may point ahead or announce itself.

A conversation that breaks a rule is asked for again (``max_regenerations``).
If one still fails, the query's sessions cannot form a complete history, so
the stage returns no sessions and keeps every generated conversation among
the rejected candidates.
"""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from pydantic import BaseModel

from memoryquest.contracts import (
    EventKind,
    Persona,
    Query,
    ReferenceSpan,
    RejectedCandidate,
    RejectionReason,
    ReviewTally,
    Role,
    Session,
    Stage,
    TaskKind,
    Timeline,
    TimelineEvent,
    Turn,
)
from memoryquest.ids import make_id
from memoryquest.llm.client import ModelClient
from memoryquest.llm.errors import LLMOutputError
from memoryquest.llm.request import LLMRequest
from memoryquest.settings import GenerationSettings
from memoryquest.stages.common import (
    failure_reason,
    final_text_problem,
    marker_problem,
    rejected,
)
from memoryquest.stages.dialogues_contracts import (
    DialogueDraft,
    DialogueInputs,
    NewsSaid,
)
from memoryquest.stages.ledger import NO_LEDGER, Ledger, contradiction
from memoryquest.stages.regeneration import Regeneration, Round, regenerate
from memoryquest.stages.review import SessionReviewer
from memoryquest.text import normalise_text, sentence_spans, split_sentences

STAGE = Stage.DIALOGUES


class DialogueStageResult(BaseModel):
    sessions: list[Session]
    rejected: list[RejectedCandidate]
    review: ReviewTally | None = None  # what the blind reviewer read (generation.review)


@dataclass(frozen=True)
class _Checked:
    session: Session | None
    problems: list[str]
    reason: RejectionReason = RejectionReason.INVARIANT


# A chat turn formatted as a document: list items, headings, bold. People do not write to an
# assistant that way, and an assistant that answers in lists reads as a model, not a memory.
MARKDOWN = re.compile(r"(?m)^\s*(?:[-*•]|\d+[.)])\s+\S|^\s*#{1,6}\s|\*\*[^*]+\*\*")


def dialogue_inputs(
    persona: Persona,
    query: Query,
    event: TimelineEvent,
    settings: GenerationSettings,
    ledger: Ledger = NO_LEDGER,
) -> DialogueInputs:
    summary = next((i.summary for i in persona.interactions if i.domain == event.domain), None)
    situations = [
        {s.name: s.value for s in task.situations}
        for task in persona.tasks
        if task.kind == TaskKind.SINGLE_DOMAIN and event.domain in task.domains and task.situations
    ]
    return DialogueInputs(
        event={
            "date": event.date.isoformat(),
            "weekday": event.date.strftime("%A"),
            "domain": event.domain.value,
            "description": event.description,
        },
        news=event.news,
        demographics=persona.demographics.model_dump(mode="json"),
        interaction_summary=summary,
        affinities=[
            a.model_dump(mode="json") for a in persona.affinities if a.domain == event.domain
        ],
        situations=situations,
        turns_min=settings.turns_min,
        turns_max=settings.turns_max,
        ledger=ledger.shown(),
    )


def _request(
    persona: Persona,
    query: Query,
    event: TimelineEvent,
    settings: GenerationSettings,
    seed: int,
    ledger: Ledger = NO_LEDGER,
) -> LLMRequest[DialogueDraft]:
    return dialogue_inputs(persona, query, event, settings, ledger).request(
        seed=seed,
        # The prompts that share a cacheable prefix: the persona's material of one domain.
        cache_scope=f"persona:{persona.persona_id}:{event.domain.value}",
    )


def check_dialogue(
    draft: DialogueDraft,
    persona: Persona,
    query: Query,
    event: TimelineEvent,
    settings: GenerationSettings,
) -> _Checked:
    """The session built from ``draft``, or every structural rule it breaks."""
    problems: list[str] = []
    formatted: list[int] = []
    turns: list[Turn] = []
    count = len(draft.turns)
    if not settings.turns_min <= count <= settings.turns_max:
        problems.append(f"{count} turns; need {settings.turns_min}-{settings.turns_max}")
    for index, text in enumerate(draft.turns):
        if not text.strip():
            problems.append(f"turn {index} is empty")
            continue
        if MARKDOWN.search(text):
            formatted.append(index)
        role = Role.USER if index % 2 == 0 else Role.ASSISTANT
        turns.append(Turn(role=role, content=text.strip()))
    # contains_verbatim(turn, reference) for every pair, each text normalised once.
    normalised_turns = [normalise_text(text) for text in draft.turns]
    for ref in query.references:
        needle = normalise_text(ref.text)
        for index, turn_text in enumerate(normalised_turns):
            if needle and needle in turn_text:
                problems.append(f"turn {index} repeats reference {ref.reference_id} word for word")
    said = reference_said(draft, query, event)
    indices = sorted({item.turn_index for item in said})
    if event.kind == EventKind.REFERENCE:
        if not indices:
            problems.append("no turn is named as telling the reference")
        for index in indices:
            if not 0 <= index < count:
                problems.append(f"reference turn index {index} does not exist")
            elif index % 2 != 0:
                problems.append(f"reference turn index {index} is not a user turn")
    if formatted:
        markdown = f"turns {formatted} are formatted as markdown (lists, headings or bold)"
        reason = RejectionReason.INVARIANT if problems else RejectionReason.MARKDOWN
        return _Checked(None, [*problems, markdown], reason)
    if problems:
        return _Checked(None, problems)
    marked = marked_news(draft, turns)
    if marked is not None:
        return _Checked(None, [marked[1]], marked[0])
    session = Session(
        # The event's own text goes into the id: a system under test that reads the history and
        # the queries cannot recompute the id from a query id (event ids derive from it).
        session_id=make_id("session", event.event_id, event.description),
        persona_id=persona.persona_id,
        query_id=query.query_id,
        event_id=event.event_id,
        date=event.date,
        domain=event.domain,
        position=0,
        turns=turns,
        reference_id=event.reference_id,
        reference_turn_indices=indices,
    )
    return _Checked(session, [])


def reference_said(draft: DialogueDraft, query: Query, event: TimelineEvent) -> list[NewsSaid]:
    """Where the draft says it told the event's reference (none for filler).

    The model was given the reference as one item of the event's news, not knowing which;
    the stage knows its index.
    """
    reference = next((r for r in query.references if r.reference_id == event.reference_id), None)
    if reference is None:
        return []
    if reference.text not in event.news:
        raise ValueError(
            f"event {event.event_id} does not list its reference among its news: "
            "its timeline predates the news list, regenerate it"
        )
    position = event.news.index(reference.text)
    return [item for item in draft.news_said if item.news_index == position]


def marked_news(draft: DialogueDraft, turns: Sequence[Turn]) -> tuple[RejectionReason, str] | None:
    """A user turn named as telling news that points ahead or announces itself, with the
    reason, or None.

    Every item of news is held to this, not only the reference: a model cannot tell
    them apart, and if only references were said plainly, "by the way" would mark the rest.
    """
    telling: dict[int, int] = {}  # each named user turn, once, with the first item it tells
    for item in draft.news_said:
        if 0 <= item.turn_index < len(turns) and turns[item.turn_index].role is Role.USER:
            telling.setdefault(item.turn_index, item.news_index)
    for index, news_index in telling.items():
        for sentence in split_sentences(turns[index].content):
            problem = marker_problem(sentence, f"the turn telling news item {news_index}")
            if problem is not None:
                return problem
    return None


async def conveyance_problems(
    sessions: list[Session], query: Query, client: ModelClient, settings: GenerationSettings
) -> tuple[dict[str, tuple[RejectionReason, str]], dict[str, Session]]:
    """Check that each reference session states its reference in one sentence (one embedding call).

    The sentence of the turn(s) named for the reference that comes closest to
    it must reach ``reference_turn_similarity_min``. That sentence, which is what
    retrieval will search, then passes the gates the drafted reference passed
    (:func:`final_text_problem`). Returns the problems (reason and detail) by
    session id, and the sessions with their sentence span settled.
    """
    texts: list[str] = [query.text]  # row 0: the request, for the final sentence's cosine
    plans: list[tuple[Session, int, list[tuple[int, int, int]]]] = []
    for session in sessions:
        if session.reference_id is None:
            continue
        reference = next(r for r in query.references if r.reference_id == session.reference_id)
        if session.reference_spans:
            candidates = [(s.turn_index, s.start, s.end) for s in session.reference_spans]
        else:
            candidates = [
                (index, start, end)
                for index in session.reference_turn_indices
                for start, end in sentence_spans(session.turns[index].content)
            ]
        ref_row = len(texts)
        texts.append(reference.text)
        texts.extend(session.turns[i].content[a:b] for i, a, b in candidates)
        plans.append((session, ref_row, candidates))
    if not plans:
        return {}, {}
    vectors = await client.embed(texts, stage=STAGE)
    problems: dict[str, tuple[RejectionReason, str]] = {}
    settled: dict[str, Session] = {}
    for session, ref_row, candidates in plans:
        if not candidates:
            problems[session.session_id] = (
                RejectionReason.INVARIANT,
                "the turns named as conveying the reference have no sentence",
            )
            continue
        scores = vectors[ref_row + 1 : ref_row + 1 + len(candidates)] @ vectors[ref_row]
        best = int(scores.argmax())
        if float(scores[best]) < settings.reference_turn_similarity_min:
            problems[session.session_id] = (
                RejectionReason.INVARIANT,
                f"the sentence stating the reference reaches cosine {float(scores[best]):.3f} "
                f"(< {settings.reference_turn_similarity_min})",
            )
            continue
        turn_index, start, end = candidates[best]
        sentence = session.turns[turn_index].content[start:end]
        cosine = float(vectors[ref_row + 1 + best] @ vectors[0])
        problem = final_text_problem(sentence, cosine, query, settings)
        if problem is not None:
            problems[session.session_id] = problem
            continue
        span = ReferenceSpan(turn_index=turn_index, start=start, end=end)
        settled[session.session_id] = session.model_copy(update={"reference_spans": [span]})
    return problems, settled


async def expand_dialogues(
    persona: Persona,
    query: Query,
    timeline: Timeline,
    client: ModelClient,
    settings: GenerationSettings,
    *,
    seed: int = 0,
    ledger_on: Callable[[dt.date], Ledger] | None = None,
) -> DialogueStageResult:
    """One session per timeline event, or none (plus rejected candidates) when one cannot be made valid.

    ``ledger_on`` gives what the user has already said by a date (:mod:`memoryquest.stages.ledger`):
    each conversation is written knowing it, and one that contradicts a fact still in force is
    rejected (``contradiction``). Without it a conversation is written as the user's first.
    """
    if timeline.query_id != query.query_id:
        raise ValueError(
            f"timeline {timeline.timeline_id} belongs to query {timeline.query_id}, not {query.query_id}"
        )
    events = timeline.events
    ledgers = {e.event_id: ledger_on(e.date) if ledger_on else NO_LEDGER for e in events}
    job = _DialogueJob(persona, query, client, settings, seed, ledgers)
    outcome = await regenerate(job, events, settings.max_regenerations + 1)
    rejections = outcome.rejected
    if outcome.unresolved:
        failed = ", ".join(events[i].event_id for i in outcome.unresolved)
        for _, session in sorted(outcome.kept.items()):
            rejections.append(
                rejected(
                    persona.persona_id,
                    STAGE,
                    RejectionReason.INVARIANT,
                    f"valid, but dropped with its query {query.query_id}: no valid conversation for {failed}",
                    session,
                    session.session_id,
                    "dropped",
                )
            )
        return DialogueStageResult(sessions=[], rejected=rejections, review=job.review_tally())
    return DialogueStageResult(
        sessions=[outcome.kept[i] for i in range(len(events))],
        rejected=rejections,
        review=job.review_tally(),
    )


class _DialogueJob(Regeneration[TimelineEvent, DialogueDraft, Session]):
    """A timeline's conversations: all asked together, each checked alone, then the reference
    sentences of the lot embedded in one call."""

    def __init__(
        self,
        persona: Persona,
        query: Query,
        client: ModelClient,
        settings: GenerationSettings,
        seed: int,
        ledgers: Mapping[str, Ledger],
    ) -> None:
        self.persona, self.query, self.client = persona, query, client
        self.settings, self.seed, self.ledgers = settings, seed, ledgers
        # generation.review: a blind reader of what passes the gates below (stages/review.py).
        self.reviewer = SessionReviewer(persona.persona_id, client) if settings.review else None

    def review_tally(self) -> ReviewTally | None:
        return self.reviewer.tally if self.reviewer is not None else None

    async def ask(
        self, items: Sequence[TimelineEvent], round: Round
    ) -> Sequence[DialogueDraft | BaseException]:
        requests = [
            _request(
                self.persona,
                self.query,
                event,
                self.settings,
                self.seed + round.attempt,
                self.ledgers[event.event_id],
            )
            for event in items
        ]
        return await self.client.complete_all(requests, return_exceptions=True)

    async def check(
        self, answers: Sequence[tuple[int, TimelineEvent, DialogueDraft]], round: Round
    ) -> list[tuple[int, Session | RejectedCandidate]]:
        verdicts: list[tuple[int, Session | RejectedCandidate]] = []
        candidates: dict[int, tuple[TimelineEvent, DialogueDraft, Session]] = {}
        for position, event, draft in answers:
            checked = check_dialogue(draft, self.persona, self.query, event, self.settings)
            if checked.session is None:
                detail = f"event {event.event_id}, attempt {round.attempt + 1}: {'; '.join(checked.problems)}"
                verdicts.append(
                    (
                        position,
                        self._rejected(event, checked.reason, detail, draft, round),
                    )
                )
                continue
            clash = contradiction(checked.session, self.ledgers[event.event_id])
            if clash is not None:
                detail = f"event {event.event_id}, attempt {round.attempt + 1}: {clash}"
                reason = RejectionReason.CONTRADICTION
                verdicts.append((position, self._rejected(event, reason, detail, draft, round)))
            else:
                candidates[position] = (event, draft, checked.session)
        weak, settled = await conveyance_problems(
            [session for _, _, session in candidates.values()],
            self.query,
            self.client,
            self.settings,
        )
        for position, (event, draft, session) in candidates.items():
            if session.session_id in weak:
                reason, detail = weak[session.session_id]
                detail = f"event {event.event_id}, attempt {round.attempt + 1}: {detail}"
                verdicts.append((position, self._rejected(event, reason, detail, draft, round)))
            else:
                verdicts.append((position, settled.get(session.session_id, session)))
        if self.reviewer is not None:  # generation.review: flagged conversations become rejections
            verdicts = await self.reviewer.review(verdicts, round.attempt)
        return verdicts

    def failed(self, item: TimelineEvent, error: LLMOutputError, round: Round) -> RejectedCandidate:
        return self._rejected(
            item,
            failure_reason(error),
            f"event {item.event_id}: {error}",
            {"event_id": item.event_id, "error": str(error)},
            round,
        )

    def _rejected(
        self,
        event: TimelineEvent,
        reason: RejectionReason,
        detail: str,
        payload: BaseModel | dict[str, str],
        round: Round,
    ) -> RejectedCandidate:
        return rejected(
            self.persona.persona_id, STAGE, reason, detail, payload, event.event_id, round.attempt
        )


__all__ = [
    "DialogueDraft",
    "DialogueStageResult",
    "check_dialogue",
    "conveyance_problems",
    "dialogue_inputs",
    "expand_dialogues",
]
