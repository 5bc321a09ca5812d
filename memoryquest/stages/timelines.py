"""The ``timelines`` stage: a dated timeline of events leading up to one query.

Code plans the timeline before any prompt, from ids alone
(:func:`~memoryquest.stages.timeline_slots.plan_slots`): one slot per reference
on its own date and in its domain, as many filler slots as references, each
slot's number of news items and each reference's position among them drawn from
hashes of ids, so none of them says which slot is a reference. The model is
given the dated slots (date, domain, number of news items), never which carry a
reference, and writes a description and news for each; code then puts each
reference into its slot's news at its position, in place of what the model
wrote there.

Every news item is held to the references' own form
(:mod:`memoryquest.stages.news_form`): the same person, tense and length band,
so a reader cannot tell the inserted reference from the model's own updates by
its wording.

No news may contain or contradict a reference. Contradiction cannot be checked
in general; the stage checks that no text the model wrote repeats a reference,
and that no sentence of it comes closer to one than ``filler_similarity_max``
in cosine (sentence by sentence, so a paraphrase is not diluted by the rest of
a long description). Measured with all-MiniLM-L6-v2 on the bundled personas:
first-person paraphrases of a reference score 0.52-0.95 against it (mean
0.77), while the persona's other tasks used as filler score at most 0.49
against the references of the same query (mean 0.19), and the offline
simulator's filler sentences at most 0.48 (median of each event's closest
0.31, 40 timelines); 0.6 sits between "says the same thing" and "same person,
different matter".

A broken timeline is asked for again with another seed, at most
``max_regenerations`` times; each failed attempt is kept as a rejected
candidate, and if none succeeds the stage returns no timeline.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final

import numpy as np
from pydantic import BaseModel

from memoryquest.contracts import (
    EventKind,
    Persona,
    Query,
    RejectedCandidate,
    RejectionReason,
    Stage,
    TaskKind,
    Timeline,
    TimelineEvent,
)
from memoryquest.generation.bounds import count_problem
from memoryquest.generation.common import (
    TRIM_LEVELS,
    contains_verbatim,
    failure_reason,
    rejected,
    spread,
    task_variables,
)
from memoryquest.generation.regeneration import Regeneration, Round, regenerate
from memoryquest.ids import make_id
from memoryquest.llm.client import LLMOutputError, ModelClient
from memoryquest.llm.request import LLMRequest
from memoryquest.settings import GenerationSettings
from memoryquest.stages.news_form import news_form_problem, normalise_news
from memoryquest.stages.timeline_slots import Slot, plan_slots
from memoryquest.stages.timelines_contracts import (
    EventDraft,
    TimelineDraft,
    TimelineInputs,
    TimelineSlot,
)
from memoryquest.text import normalise_text, split_sentences, without_lead_in

STAGE: Final = Stage.TIMELINES


class TimelineStageResult(BaseModel):
    timeline: Timeline | None
    rejected: list[RejectedCandidate]


@dataclass(frozen=True)
class _Built:
    events: list[TimelineEvent]
    problems: list[str]


def slot_variables(slots: Sequence[Slot]) -> list[TimelineSlot]:
    """What the prompt shows of the slots: no reference, no position."""
    return [
        {"slot": index, "date": s.date.isoformat(), "domain": s.domain.value, "news": s.news_count}
        for index, s in enumerate(slots)
    ]


def timeline_inputs(
    persona: Persona,
    query: Query,
    slots: Sequence[Slot],
    settings: GenerationSettings,
    user_queries: Sequence[Query] = (),
    keep: int | None = None,
) -> TimelineInputs:
    """What the ``timeline_synthesis`` call is given for ``query``'s ``slots``: nothing of which
    slot carries a reference.

    ``keep``: at most this many of the persona's tasks, three times as many
    affinities, and of the user's other requests (this one always stays), for a
    model whose window the whole prompt does not fit.
    """
    others = [q for q in user_queries if q.query_id != query.query_id]
    shown = [*spread(others, keep), query] if keep is not None else user_queries
    tasks = [t for t in persona.tasks if t.kind == TaskKind.SINGLE_DOMAIN]
    affinities = spread(persona.affinities, None if keep is None else 3 * keep)
    return TimelineInputs(
        query={
            "query_id": query.query_id,
            "text": query.text,
            "query_date": query.query_date.isoformat(),
            "domain": query.domain.value,
        },
        slots=slot_variables(slots),
        user_references=[ref.text for other in shown for ref in other.references],
        own_references=sorted(ref.text for ref in query.references),
        user_requests=[{"domain": q.domain.value, "text": q.text} for q in shown],
        demographics=persona.demographics.model_dump(mode="json"),
        affinities=[a.model_dump(mode="json") for a in affinities],
        tasks=[task_variables(t) for t in spread(tasks, keep)],
        news_words_min=settings.news_words_min,
        news_words_max=settings.news_words_max,
    )


def timeline_request(
    persona: Persona,
    query: Query,
    settings: GenerationSettings,
    seed: int,
    user_queries: Sequence[Query] = (),
    keep: int | None = None,
) -> LLMRequest[TimelineDraft]:
    """The ``timeline_synthesis`` call for ``query``, over the slots code planned for it."""
    slots = plan_slots(persona, query, settings)
    inputs = timeline_inputs(persona, query, slots, settings, user_queries, keep)
    return inputs.request(
        seed=seed,
        cache_scope=f"persona:{persona.persona_id}",  # its timelines share the persona block
    )


def build_events(
    draft: TimelineDraft, slots: Sequence[Slot], query: Query, settings: GenerationSettings
) -> _Built:
    """Events with ids, each reference in its slot's news, and every rule the draft breaks."""
    problems: list[str] = []
    # Only when the query has more references than events_max allows events.
    event_count = count_problem(len(slots), (settings.events_min, settings.events_max), "events")
    if event_count is not None:
        problems.append(event_count)
    answered: dict[int, list[EventDraft]] = {}
    for item in draft.events:
        answered.setdefault(item.slot, []).append(item)
    unknown = sorted(set(answered) - set(range(len(slots))))
    if unknown:
        problems.append(f"events for slots {unknown}, which were not asked for")
    events: list[TimelineEvent] = []
    for index, slot in enumerate(slots):
        items = answered.get(index, [])
        if len(items) != 1:
            problems.append(f"slot {index} is written {len(items)} times; must be exactly once")
            continue
        (item,) = items
        description = " ".join(item.description.split())
        if not description:
            problems.append(f"slot {index}: empty description")
        news = [normalise_news(text) for text in item.news if text.strip()]
        if len(news) != slot.news_count:
            problems.append(f"slot {index}: {len(news)} news items; asked for {slot.news_count}")
            continue
        written = [
            (position, text)
            for position, text in enumerate(news)
            if position != slot.reference_position
        ]
        for position, text in written:
            if (reason := news_form_problem(text, settings)) is not None:
                problems.append(
                    f"slot {index}: news item {position} out of form ({reason}): {text!r}"
                )
        for ref_index, ref in enumerate(query.references):
            if any(contains_verbatim(t, ref.text) for t in [description, *(t for _, t in written)]):
                problems.append(f"slot {index}: repeats reference {ref_index}")
        events.append(
            TimelineEvent(
                event_id=slot.event_id,
                date=slot.date,
                domain=slot.domain,
                kind=EventKind.FILLER if slot.reference is None else EventKind.REFERENCE,
                description=description or "-",
                reference_id=None if slot.reference is None else slot.reference.reference_id,
                news=event_news(news, slot),
            )
        )
    return _Built(events=events, problems=problems)


def event_news(written: Sequence[str], slot: Slot) -> list[str]:
    """The slot's news as its conversation is asked to tell it: the reference, when the slot
    carries one, word for word in place of the item the model wrote at its position."""
    news = list(written)
    if slot.reference is not None and slot.reference_position is not None:
        news[slot.reference_position] = slot.reference.text
    return news


def _written_sentences(event: TimelineEvent) -> list[str]:
    """What the model wrote for the event: the description's sentences and the news items
    (the reference left out), each once (a news item the description says as well is read
    once)."""
    unique: dict[str, str] = {}
    for sentence in [*split_sentences(event.description), *event.news]:
        unique.setdefault(normalise_text(without_lead_in(sentence)), sentence)
    return list(unique.values()) or [event.description]


async def filler_similarity_problems(
    events: list[TimelineEvent], query: Query, client: ModelClient, settings: GenerationSettings
) -> list[str]:
    """Events with a sentence the model wrote that comes as close to a reference as a paraphrase
    would: in filler events, and beside the reference in a reference event (the model did not
    know which slot carries one).

    Sentence by sentence: a paraphrase hidden in a long description would be
    diluted in the description's one vector, and short texts cost the model
    less per token. A framing lead-in ("In passing, the user shares an update:")
    is left out for the same two reasons.
    """
    texts_by_id = {ref.reference_id: ref.text for ref in query.references}
    said = [
        [s for s in _written_sentences(e) if s != texts_by_id.get(e.reference_id or "")]
        for e in events
    ]
    checked = [(e, sentences) for e, sentences in zip(events, said, strict=True) if sentences]
    if not checked:
        return []
    count = len(query.references)
    texts = [ref.text for ref in query.references] + [
        without_lead_in(s) for _, sentences in checked for s in sentences
    ]
    vectors = await client.embed(texts, stage=STAGE)
    cosines = vectors[count:] @ vectors[:count].T  # sentence x reference
    problems = []
    start = 0
    for event, sentences in checked:
        block = cosines[start : start + len(sentences)]
        start += len(sentences)
        row, worst = np.unravel_index(int(block.argmax()), block.shape)
        score = float(block[row, worst])
        if score > settings.filler_similarity_max:
            problems.append(
                f"{event.kind.value} event {event.event_id} is {score:.3f} similar to reference "
                f"{int(worst)} (max {settings.filler_similarity_max}) in its sentence "
                f"{sentences[int(row)]!r}"
            )
    return problems


async def synthesise_timeline(
    persona: Persona,
    query: Query,
    client: ModelClient,
    settings: GenerationSettings,
    *,
    seed: int = 0,
    user_queries: Sequence[Query] = (),
) -> TimelineStageResult:
    """The query's timeline, or None plus the rejected attempts when every attempt broke a rule.

    ``user_queries`` are all of the user's queries (this one among them, so every
    timeline of a user sends the same list, which a provider caches): filler updates
    must neither repeat nor contradict their references, and may matter to the others.
    """
    job = _TimelineJob(persona, client, settings, seed, user_queries)
    outcome = await regenerate(job, [query], settings.max_regenerations + 1)
    return TimelineStageResult(timeline=outcome.kept.get(0), rejected=outcome.rejected)


class _TimelineJob(Regeneration[Query, TimelineDraft, Timeline]):
    """One query's timeline: drafted, its events built and checked, asked again when a rule breaks."""

    def __init__(
        self,
        persona: Persona,
        client: ModelClient,
        settings: GenerationSettings,
        seed: int,
        user_queries: Sequence[Query],
    ) -> None:
        self.persona, self.client, self.settings = persona, client, settings
        self.seed, self.user_queries = seed, user_queries

    async def ask(
        self, items: Sequence[Query], round: Round
    ) -> Sequence[TimelineDraft | BaseException]:
        (query,) = items
        request, _ = await self.client.first_fitting(
            (
                timeline_request(
                    self.persona,
                    query,
                    self.settings,
                    self.seed + round.attempt,
                    self.user_queries,
                    keep,
                ),
                keep,
            )
            for keep in TRIM_LEVELS
        )
        return await self.client.complete_all([request], return_exceptions=True)

    async def check(
        self, answers: Sequence[tuple[int, Query, TimelineDraft]], round: Round
    ) -> list[tuple[int, Timeline | RejectedCandidate]]:
        verdicts: list[tuple[int, Timeline | RejectedCandidate]] = []
        for position, query, draft in answers:
            slots = plan_slots(self.persona, query, self.settings)
            built = build_events(draft, slots, query, self.settings)
            problems = built.problems or await filler_similarity_problems(
                built.events, query, self.client, self.settings
            )
            if not problems:
                timeline = Timeline(
                    timeline_id=make_id("timeline", query.query_id),
                    query_id=query.query_id,
                    persona_id=self.persona.persona_id,
                    events=built.events,
                )
                verdicts.append((position, timeline))
                continue
            detail = f"query {query.query_id}, attempt {round.attempt + 1}: " + "; ".join(problems)
            verdicts.append(
                (
                    position,
                    rejected(
                        self.persona.persona_id,
                        STAGE,
                        RejectionReason.INVARIANT,
                        detail,
                        draft,
                        query.query_id,
                        round.attempt,
                    ),
                )
            )
        return verdicts

    def failed(self, item: Query, error: LLMOutputError, round: Round) -> RejectedCandidate:
        return rejected(
            self.persona.persona_id,
            STAGE,
            failure_reason(error),
            str(error),
            {"query_id": item.query_id, "error": str(error)},
            item.query_id,
            round.attempt,
        )


__all__ = [
    "EventDraft",
    "TimelineDraft",
    "TimelineStageResult",
    "build_events",
    "event_news",
    "filler_similarity_problems",
    "synthesise_timeline",
    "timeline_inputs",
    "timeline_request",
]
