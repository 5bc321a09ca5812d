"""The ``dialogues`` stage: every timeline event becomes one dated user–assistant conversation.

One LLM call per event, all of a timeline's calls sent together. The model sees
the event, its news (the personal updates the user tells in it), the user's
demographics, and the domain's interaction summary and affinities, so the user
sounds the same across the whole history. The model is not told whether one
item of news is a reference: it names where it said each item, and the stage
picks the reference's. Its sentence must come within
``reference_turn_similarity_min`` cosine of the reference (a paraphrase does;
an unrelated turn does not), and no turn may repeat a reference word for word.
No sentence of any turn, the user's or the assistant's, may point ahead or
announce itself.

The sentence a reference is said with is what retrieval searches, so it is
held to the draft's gates again: its own cosine and content words shared with
the request, and γ over the query's said sentences (``gamma_max``). It may
not be said again in another session of the user, nor may a session say
again what another one told a reference with (``restated``).

A user's conversations are written in bands of dates
(:class:`~memoryquest.generation.ledger.SaidLedger`), each knowing what the
earlier ones said. A conversation that breaks a rule is asked for again
(``max_regenerations``). If one still fails, the query's sessions cannot form
a complete history, so the stage returns no sessions and keeps every
generated conversation among the rejected candidates.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Final

import numpy as np
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
from memoryquest.generation.bounds import count_problem
from memoryquest.generation.common import (
    failure_reason,
    final_text_problem,
    marker_problem,
    rejected,
)
from memoryquest.generation.framing import Framed, Marking, shared_framing_check, telling_frames
from memoryquest.generation.ledger import (
    NO_LEDGER,
    Ledger,
    SaidLedger,
    contradiction,
    restating,
    said_sentence,
    told_clauses,
)
from memoryquest.generation.regeneration import Regeneration, Round, regenerate
from memoryquest.ids import make_id
from memoryquest.llm.client import ModelClient
from memoryquest.llm.errors import LLMOutputError
from memoryquest.llm.request import LLMRequest
from memoryquest.settings import GenerationSettings
from memoryquest.stages.dialogues_contracts import (
    DialogueDraft,
    DialogueInputs,
    NewsSaid,
)
from memoryquest.stages.review import SessionReviewer, Verdict
from memoryquest.text import (
    document_formatting,
    later_occasion,
    normalise_text,
    sentence_spans,
    split_sentences,
)

STAGE: Final = Stage.DIALOGUES


class DialogueStageResult(BaseModel):
    sessions: list[Session]
    rejected: list[RejectedCandidate]
    review: ReviewTally | None = None  # what the blind reviewer read (generation.review)


@dataclass(frozen=True)
class _Checked:
    session: Session | None
    problems: list[str]
    reason: RejectionReason = RejectionReason.INVARIANT


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
    formatted: list[tuple[int, str]] = []
    turns: list[Turn] = []
    count = len(draft.turns)
    turn_count = count_problem(count, (settings.turns_min, settings.turns_max), "turns")
    if turn_count is not None:
        problems.append(turn_count)
    for index, text in enumerate(draft.turns):
        if not text.strip():
            problems.append(f"turn {index} is empty")
            continue
        # A turn written as a document (headings, lists, emphasis, tables ...): people do not
        # write to an assistant that way, and an assistant answering in lists reads as a model.
        construct = document_formatting(text)
        if construct is not None:
            formatted.append((index, construct))
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
        markdown = "formatted as markdown: " + ", ".join(
            f"turn {index} ({construct})" for index, construct in formatted
        )
        reason = RejectionReason.INVARIANT if problems else RejectionReason.MARKDOWN
        return _Checked(None, [*problems, markdown], reason)
    if problems:
        return _Checked(None, problems)
    marked = marked_turn(turns)
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


def marked_turn(turns: Sequence[Turn]) -> tuple[RejectionReason, str] | None:
    """The first sentence of any turn that points ahead or announces itself, or of a user turn
    that ties what it tells to the user's own later occasion
    (:func:`~memoryquest.text.later_occasion`), with the reason, or None.

    Every turn is held to this, the user's and the assistant's, whatever news it tells: a
    model cannot tell the items apart, and if only references were said plainly, "by the way"
    (or an assistant's "that will matter when you book") would mark the rest.
    """
    for index, turn in enumerate(turns):
        for sentence in split_sentences(turn.content):
            what = f"turn {index} ({turn.role.value})"
            problem = marker_problem(sentence, what)
            if problem is not None:
                return problem
            if turn.role is Role.USER and (later := later_occasion(sentence)) is not None:
                return (
                    RejectionReason.FORESHADOW,
                    f"{what} ties what it tells to a later occasion ({later!r}): {sentence!r}",
                )
    return None


_MARKING_REASONS: dict[Marking, tuple[RejectionReason, str]] = {
    Marking.ANNOUNCING: (RejectionReason.MARKED, "announces the news it tells"),
    Marking.POINTING: (RejectionReason.FORESHADOW, "points ahead from the news it tells"),
}


async def framing_problems(
    answers: Sequence[tuple[int, TimelineEvent, DialogueDraft]], settings: GenerationSettings
) -> dict[int, tuple[RejectionReason, str]]:
    """By position, the first sentence telling one of the event's news whose frame announces
    it or points ahead from it (:mod:`memoryquest.generation.framing`): one embedding call
    for the round.

    Every news item is held to it, filler and reference alike, as the model cannot tell
    them apart; the words of :func:`marked_turn` catch the idioms, this the rest.
    """
    limits = {
        kind: limit
        for kind, limit in (
            (Marking.ANNOUNCING, settings.announcing_probability_max),
            (Marking.POINTING, settings.pointing_probability_max),
        )
        if limit < 1
    }
    if not limits:
        return {}
    telling: dict[tuple[int, int], list[Framed]] = {}
    for position, event, draft in answers:
        for item in draft.news_said:
            turn, news = item.turn_index, item.news_index
            if 0 <= turn < len(draft.turns) and turn % 2 == 0 and 0 <= news < len(event.news):
                framed = telling_frames(draft.turns[turn], event.news[news])
                telling.setdefault((position, turn), []).extend(framed)
    found = await shared_framing_check().strongest_marked(telling, limits)
    problems: dict[int, tuple[RejectionReason, str]] = {}
    for (position, turn), said in sorted(found.items()):
        reason, what = _MARKING_REASONS[said.marking]
        problems.setdefault(
            position,
            (
                reason,
                f"turn {turn} (user) {what} ({said.frame!r} scores "
                f"{said.probability:.2f} > {limits[said.marking]}): {said.sentence!r}",
            ),
        )
    return problems


@dataclass
class Conveyance:
    """What :func:`conveyance_problems` found for a round's sessions."""

    problems: dict[str, tuple[RejectionReason, str]] = field(default_factory=dict)  # by session
    settled: dict[str, Session] = field(default_factory=dict)  # by session, its span settled
    said_cosine: dict[str, float] = field(default_factory=dict)  # by session: said sentence·request
    drafted_cosine: dict[str, float] = field(default_factory=dict)  # by reference: draft·request


async def conveyance_problems(
    sessions: list[Session], query: Query, client: ModelClient, settings: GenerationSettings
) -> Conveyance:
    """Check that each reference session states its reference in one sentence (one embedding call).

    The sentence of the turn(s) named for the reference that comes closest to
    it must reach ``reference_turn_similarity_min``. That sentence, which is what
    retrieval will search, then passes the gates the drafted reference passed
    (:func:`final_text_problem`). Returns the problems (reason and detail) by
    session id, the sessions with their sentence span settled, and the cosines
    to the request of the settled sentences and of every drafted reference.
    """
    texts: list[str] = [query.text]  # row 0: the request, for the final sentence's cosine
    drafted_rows = {r.reference_id: len(texts) + i for i, r in enumerate(query.references)}
    texts.extend(r.text for r in query.references)
    plans: list[tuple[Session, int, list[tuple[int, int, int]]]] = []
    for session in sessions:
        if session.reference_id is None:
            continue
        if session.reference_spans:
            candidates = [(s.turn_index, s.start, s.end) for s in session.reference_spans]
        else:
            candidates = [
                (index, start, end)
                for index in session.reference_turn_indices
                for start, end in sentence_spans(session.turns[index].content)
            ]
        ref_row = drafted_rows[session.reference_id]
        plans.append((session, ref_row, candidates))
    found = Conveyance()
    if not plans:
        return found
    first = len(texts)
    for session, _, candidates in plans:
        texts.extend(session.turns[i].content[a:b] for i, a, b in candidates)
    vectors = await client.embed(texts, stage=STAGE)
    found.drafted_cosine = {
        ref: float(vectors[row] @ vectors[0]) for ref, row in drafted_rows.items()
    }
    row = first
    for session, ref_row, candidates in plans:
        rows = list(range(row, row + len(candidates)))
        row += len(candidates)
        if not candidates:
            found.problems[session.session_id] = (
                RejectionReason.INVARIANT,
                "the turns named as conveying the reference have no sentence",
            )
            continue
        scores = vectors[rows] @ vectors[ref_row]
        best = int(scores.argmax())
        if float(scores[best]) < settings.reference_turn_similarity_min:
            found.problems[session.session_id] = (
                RejectionReason.INVARIANT,
                f"the sentence stating the reference reaches cosine {float(scores[best]):.3f} "
                f"(< {settings.reference_turn_similarity_min})",
            )
            continue
        turn_index, start, end = candidates[best]
        sentence = session.turns[turn_index].content[start:end]
        cosine = float(vectors[rows[best]] @ vectors[0])
        problem = final_text_problem(sentence, cosine, query, settings)
        if problem is not None:
            found.problems[session.session_id] = problem
            continue
        span = ReferenceSpan(turn_index=turn_index, start=start, end=end)
        found.settled[session.session_id] = session.model_copy(update={"reference_spans": [span]})
        found.said_cosine[session.session_id] = cosine
    return found


def _sentences(session: Session) -> list[str]:
    return [s for turn in session.turns for s in _turn_sentences(turn.content)]


@lru_cache(maxsize=65_536)
def _turn_sentences(content: str) -> tuple[str, ...]:
    # Every check holds a new conversation against all the user's earlier ones, split again.
    return tuple(split_sentences(content))


async def restatement(
    session: Session,
    others: Sequence[Session],
    client: ModelClient,
    settings: GenerationSettings,
    vectors: dict[str, np.ndarray],
) -> str | None:
    """How ``session`` and ``others`` (the user's other sessions) tell one reference twice, or None.

    Either a sentence of another session restates the sentence ``session`` tells its
    reference with, or a sentence of ``session`` restates one another session told its
    reference with: the fact would have a second carrier the ground truth does not know.
    ``vectors`` keeps the sentences already embedded, shared between calls.
    """
    pairs: list[tuple[str, str, str]] = []  # (said sentence, sentence elsewhere, that session)
    own = said_sentence(session)
    mine = _sentences(session)
    for other in others:
        if other.session_id == session.session_id:
            continue
        if own is not None:
            pairs.extend((own, sentence, other.session_id) for sentence in _sentences(other))
        theirs = said_sentence(other)
        if theirs is not None:
            pairs.extend((theirs, sentence, session.session_id) for sentence in mine)
    return await _first_restated(pairs, client, settings, vectors)


async def _first_restated(
    pairs: Sequence[tuple[str, str, str]],
    client: ModelClient,
    settings: GenerationSettings,
    vectors: dict[str, np.ndarray],
) -> str | None:
    """The first pair whose second sentence restates the first (a reference as said): cosine at
    ``restated_cosine`` or above to it or to one of its
    :func:`~memoryquest.generation.ledger.told_clauses`, or most of its content words
    (:func:`~memoryquest.generation.ledger.restates`)."""
    if not pairs:
        return None
    # Each said sentence, and each clause of it that states something of its own: a sentence
    # that retells the clause the fact is in retells the fact, whatever it adds around it.
    by_said: dict[str, list[int]] = {}  # each said sentence: the pairs it is in
    for index, (said, _, _) in enumerate(pairs):
        by_said.setdefault(said, []).append(index)
    told = {said: [said, *told_clauses(said)] for said in by_said}
    # Every text once, where it first comes: a said sentence's parts at its first pair.
    wanted: dict[str, None] = {}
    starts = {indices[0]: said for said, indices in by_said.items()}
    for index, (_, sentence, _) in enumerate(pairs):
        if index in starts:
            wanted.update(dict.fromkeys(told[starts[index]]))
        wanted[sentence] = None
    missing = [t for t in wanted if t not in vectors]
    if missing:
        vectors.update(zip(missing, await client.embed(missing, stage=STAGE), strict=True))
    # One product per said sentence: its parts against every sentence it is paired with, the
    # sentences' vectors stacked once; the content-word rule likewise, one said sentence at a time.
    unique = list(dict.fromkeys(sentence for _, sentence, _ in pairs))
    row_of = {sentence: row for row, sentence in enumerate(unique)}
    matrix = np.stack([vectors[sentence] for sentence in unique])
    pair_rows = np.fromiter((row_of[s] for _, s, _ in pairs), dtype=np.intp, count=len(pairs))
    cosines = np.empty(len(pairs))
    retold = np.zeros(len(pairs), dtype=bool)
    for said, indices in by_said.items():
        parts = np.stack([vectors[part] for part in told[said]])
        cosines[indices] = (matrix[pair_rows[indices]] @ parts.T).max(axis=1)
        retold[indices] = restating([pairs[i][1] for i in indices], said)
    hits = np.flatnonzero((cosines >= settings.restated_cosine) | retold)
    if hits.size == 0:
        return None
    said, sentence, where = pairs[int(hits[0])]
    return (
        f"{said!r}, a reference as said, is told again in session {where} "
        f"(cosine {float(cosines[hits[0]]):.3f}; restated at {settings.restated_cosine}, or by "
        f"most of its content words): {sentence!r}"
    )


def said_gamma(cosines: Sequence[float]) -> float:
    """γ over a query's said sentences: their mean cosine to the request."""
    return float(np.mean(cosines)) if cosines else 0.0


async def expand_dialogues(
    persona: Persona,
    query: Query,
    timeline: Timeline,
    client: ModelClient,
    settings: GenerationSettings,
    *,
    seed: int = 0,
    said: SaidLedger | None = None,
) -> DialogueStageResult:
    """One session per timeline event, or none (plus rejected candidates) when one cannot be made valid.

    ``said`` is what the user says across all their queries (:class:`SaidLedger`): the events
    are written band by band, each conversation knowing what the earlier bands said; one that
    contradicts a fact still in force is rejected (``contradiction``), and one that tells a
    reference again is asked again, then rejected (``restated``). Without it the query is
    written as the user's only one.
    """
    if timeline.query_id != query.query_id:
        raise ValueError(
            f"timeline {timeline.timeline_id} belongs to query {timeline.query_id}, not {query.query_id}"
        )
    events = timeline.events
    book = said if said is not None else SaidLedger.of(query, timeline, settings.ledger_waves)
    job = _DialogueJob(persona, query, client, settings, seed, book)
    kept: dict[int, Session] = {}
    rejections: list[RejectedCandidate] = []
    failed: list[int] = []
    bands = sorted({book.band_of(e) for e in events})
    try:
        for band in bands:
            positions = [i for i, e in enumerate(events) if book.band_of(e) == band]
            await book.ready(band)
            outcome = await regenerate(
                job, [events[i] for i in positions], settings.max_regenerations + 1
            )
            rejections.extend(outcome.rejected)
            kept.update({positions[i]: session for i, session in outcome.kept.items()})
            if outcome.unresolved:
                failed = [positions[i] for i in outcome.unresolved]
                book.withdraw(query.query_id, band)
                break
            book.settle([events[i] for i in positions], [kept[i] for i in positions])
    finally:
        book.settle(events)  # whatever is left, so no other query waits for it
    if not failed:
        await book.finished()
        retold = await job.restated([kept[i] for i in range(len(events))], book.sessions())
        if retold is not None:
            position, detail = retold
            failed = [position]
            rejections.append(
                job.rejected_query(
                    events[position], RejectionReason.RESTATED, detail, kept.pop(position)
                )
            )
    if failed:
        names = ", ".join(events[i].event_id for i in failed)
        for _, session in sorted(kept.items()):
            rejections.append(
                rejected(
                    persona.persona_id,
                    STAGE,
                    RejectionReason.INVARIANT,
                    f"valid, but dropped with its query {query.query_id}: no valid conversation for {names}",
                    session,
                    session.session_id,
                    "dropped",
                )
            )
        return DialogueStageResult(sessions=[], rejected=rejections, review=job.review_tally())
    return DialogueStageResult(
        sessions=[kept[i] for i in range(len(events))],
        rejected=rejections,
        review=job.review_tally(),
    )


class _DialogueJob(Regeneration[TimelineEvent, DialogueDraft, Session]):
    """A timeline's conversations of one band: all asked together, each checked alone, then the
    reference sentences of the lot embedded in one call and held to γ and to the user's other
    sessions."""

    def __init__(
        self,
        persona: Persona,
        query: Query,
        client: ModelClient,
        settings: GenerationSettings,
        seed: int,
        book: SaidLedger,
    ) -> None:
        self.persona, self.query, self.client = persona, query, client
        self.settings, self.seed, self.book = settings, seed, book
        self.said_cosine: dict[str, float] = {}  # by reference id: its kept sentence's cosine
        self.kept: list[Session] = []  # this query's sessions kept so far
        self.vectors = book.vectors
        # generation.review: a blind reader of what passes the gates below (stages/review.py).
        self.reviewer = SessionReviewer(persona.persona_id, client) if settings.review else None

    def review_tally(self) -> ReviewTally | None:
        return self.reviewer.tally if self.reviewer is not None else None

    def ledger(self, event: TimelineEvent) -> Ledger:
        return self.book.ledger_on(event)

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
                self.ledger(event),
            )
            for event in items
        ]
        return await self.client.complete_all(requests, return_exceptions=True)

    async def check(
        self, answers: Sequence[tuple[int, TimelineEvent, DialogueDraft]], round: Round
    ) -> list[Verdict]:
        verdicts: list[Verdict] = []
        candidates: dict[int, tuple[TimelineEvent, DialogueDraft, Session]] = {}
        checks = [
            (
                position,
                event,
                draft,
                check_dialogue(draft, self.persona, self.query, event, self.settings),
            )
            for position, event, draft in answers
        ]
        # Only drafts that pass the rules are worth scoring for frames that mark their news.
        framed = await framing_problems(
            [
                (position, event, draft)
                for position, event, draft, c in checks
                if c.session is not None
            ],
            self.settings,
        )
        for position, event, draft, checked in checks:
            if checked.session is None:
                detail = f"event {event.event_id}, attempt {round.attempt + 1}: {'; '.join(checked.problems)}"
                verdicts.append(
                    (
                        position,
                        self._rejected(event, checked.reason, detail, draft, round),
                    )
                )
                continue
            problem = framed.get(position)
            if problem is None and (clash := contradiction(checked.session, self.ledger(event))):
                problem = (RejectionReason.CONTRADICTION, clash)
            if problem is not None:
                detail = f"event {event.event_id}, attempt {round.attempt + 1}: {problem[1]}"
                verdicts.append((position, self._rejected(event, problem[0], detail, draft, round)))
            else:
                candidates[position] = (event, draft, checked.session)
        found = await conveyance_problems(
            [session for _, _, session in candidates.values()],
            self.query,
            self.client,
            self.settings,
        )
        for position, (event, draft, session) in candidates.items():
            problem = found.problems.get(session.session_id)
            session = found.settled.get(session.session_id, session)
            if problem is None:
                problem = self._too_close(session, found)
            if problem is None:
                before = self.book.said_before(event)
                known = {s.session_id for s in before}
                others = [*before, *(s for s in self.kept if s.session_id not in known)]
                retold = await restatement(
                    session, others, self.client, self.settings, self.vectors
                )
                if retold is not None:
                    problem = (RejectionReason.RESTATED, retold)
            if problem is not None:
                reason, detail = problem
                detail = f"event {event.event_id}, attempt {round.attempt + 1}: {detail}"
                verdicts.append((position, self._rejected(event, reason, detail, draft, round)))
                continue
            if session.reference_id is not None:
                self.said_cosine[session.reference_id] = found.said_cosine[session.session_id]
            self.kept.append(session)
            verdicts.append((position, session))
        if self.reviewer is not None:  # generation.review: flagged conversations become rejections
            passed = {v.session_id for _, v in verdicts if isinstance(v, Session)}
            verdicts = await self.reviewer.review(verdicts, round.attempt)
            self._forget(passed - {v.session_id for _, v in verdicts if isinstance(v, Session)})
        return verdicts

    def _forget(self, flagged: set[str]) -> None:
        """Conversations the reviewer flagged are not kept after all: their sentences no longer
        count towards γ as said, nor among the sessions later ones are held against."""
        for session in [s for s in self.kept if s.session_id in flagged]:
            self.kept.remove(session)
            if session.reference_id is not None:
                self.said_cosine.pop(session.reference_id, None)

    def _too_close(self, session: Session, found: Conveyance) -> tuple[RejectionReason, str] | None:
        """γ over the query's said sentences, were this one kept: the sentences kept so far,
        this one, and the drafted reference for those not said yet."""
        if session.reference_id is None:
            return None
        cosines = {**found.drafted_cosine, **self.said_cosine}
        cosines[session.reference_id] = found.said_cosine[session.session_id]
        gamma = said_gamma([cosines[r.reference_id] for r in self.query.references])
        if gamma <= self.settings.gamma_max:
            return None
        return (
            RejectionReason.SIMILARITY,
            f"γ over the sentences the references are said with would be {gamma:.3f} "
            f"(> {self.settings.gamma_max}) with {said_sentence(session)!r} "
            f"(cosine {found.said_cosine[session.session_id]:.3f} to the request)",
        )

    async def restated(
        self, sessions: Sequence[Session], everyone: Sequence[Session]
    ) -> tuple[int, str] | None:
        """The first of ``sessions`` (this query's, in event order) whose reference another
        session of the user tells again, now that all of them are written, with how; or None.

        Written in the same band, two sessions could not see each other; here each reference
        of the query is held to every other session of the user.
        """
        for position, session in enumerate(sessions):
            said = said_sentence(session)
            if said is None:
                continue
            pairs = [
                (said, sentence, other.session_id)
                for other in everyone
                if other.session_id != session.session_id
                for sentence in _sentences(other)
            ]
            retold = await _first_restated(pairs, self.client, self.settings, self.vectors)
            if retold is not None:
                return position, retold
        return None

    def rejected_query(
        self, event: TimelineEvent, reason: RejectionReason, detail: str, session: Session
    ) -> RejectedCandidate:
        return rejected(
            self.persona.persona_id,
            STAGE,
            reason,
            f"event {event.event_id}: {detail}",
            session,
            event.event_id,
            reason.value,
        )

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
    "Conveyance",
    "DialogueDraft",
    "DialogueStageResult",
    "check_dialogue",
    "framing_problems",
    "conveyance_problems",
    "dialogue_inputs",
    "expand_dialogues",
    "marked_turn",
    "restatement",
    "said_gamma",
]
