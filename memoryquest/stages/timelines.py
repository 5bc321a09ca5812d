"""The ``timelines`` stage: a dated timeline of events leading up to one query.

The model lays out ``events_min..events_max`` events in ascending date order:
the first shortly before the earliest reference (at most ``lead_days_max``
days), the last before the query date. Each required reference is carried by
exactly one event, on the reference's own date and in its domain (the model
names the reference by index); every other event is filler drawn from the
persona's life.

Filler must neither contain nor contradict a reference. Contradiction cannot
be checked in general, so the stage enforces two checkable guards: filler
never shares a domain with any of the query's references (a change in one
domain cannot be contradicted from another), and no filler text repeats a
reference, and no sentence of it comes closer to one than
``filler_similarity_max`` in cosine (sentence by sentence, so a paraphrase is
not diluted by the rest of a long description). Measured with
all-MiniLM-L6-v2 on the bundled personas: first-person paraphrases of a
reference score 0.52-0.95 against it (mean 0.77), while the persona's other
tasks used as filler score at most 0.49 against the references of the same
query (mean 0.19), and the offline simulator's filler sentences at most 0.48
(median of each event's closest 0.31, 40 timelines); 0.6 sits between "says
the same thing" and "same person, different matter".

A broken timeline is asked for again with another seed, at most
``max_regenerations`` times; each failed attempt is kept as a rejected
candidate, and if none succeeds the stage returns no timeline.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass

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
from memoryquest.ids import make_id
from memoryquest.llm.client import LLMOutputError, ModelClient
from memoryquest.llm.request import LLMRequest
from memoryquest.settings import GenerationSettings
from memoryquest.stages.common import (
    TRIM_LEVELS,
    contains_verbatim,
    failure_reason,
    parse_date,
    parse_domain,
    rejected,
    spread,
    task_variables,
)
from memoryquest.stages.ledger import restates
from memoryquest.stages.regeneration import Regeneration, Round, regenerate
from memoryquest.stages.timelines_contracts import EventDraft, TimelineDraft, TimelineInputs
from memoryquest.text import normalise_text, split_sentences, without_lead_in

STAGE = Stage.TIMELINES


class TimelineStageResult(BaseModel):
    timeline: Timeline | None
    rejected: list[RejectedCandidate]


@dataclass(frozen=True)
class _Built:
    events: list[TimelineEvent]
    problems: list[str]


def query_variables(query: Query) -> dict[str, object]:
    return {
        "query_id": query.query_id,
        "text": query.text,
        "query_date": query.query_date.isoformat(),
        "domain": query.domain.value,
        "reasoning": query.reasoning,
    }


def reference_variables(query: Query) -> list[dict[str, object]]:
    return [
        {"index": index, "text": ref.text, "date": ref.date.isoformat(), "domain": ref.domain.value}
        for index, ref in enumerate(query.references)
    ]


def timeline_request(
    persona: Persona,
    query: Query,
    settings: GenerationSettings,
    seed: int,
    user_queries: Sequence[Query] = (),
    keep: int | None = None,
) -> LLMRequest[TimelineDraft]:
    """The ``timeline_synthesis`` call for ``query``.

    ``keep``: at most this many of the persona's tasks, three times as many
    affinities, and of the user's other requests (this one always stays), for a
    model whose window the whole prompt does not fit.
    """
    others = [q for q in user_queries if q.query_id != query.query_id]
    shown = [*spread(others, keep), query] if keep is not None else user_queries
    tasks = [t for t in persona.tasks if t.kind == TaskKind.SINGLE_DOMAIN]
    affinities = spread(persona.affinities, None if keep is None else 3 * keep)
    inputs = TimelineInputs(
        query=query_variables(query),
        references=reference_variables(query),
        user_references=[ref.text for other in shown for ref in other.references],
        user_requests=[{"domain": q.domain.value, "text": q.text} for q in shown],
        demographics=persona.demographics.model_dump(mode="json"),
        affinities=[a.model_dump(mode="json") for a in affinities],
        tasks=[task_variables(t) for t in spread(tasks, keep)],
        events_min=settings.events_min,
        events_max=settings.events_max,
        lead_days_max=settings.lead_days_max,
    )
    return inputs.request(
        seed=seed,
        cache_scope=f"persona:{persona.persona_id}",  # its timelines share the persona block
    )


def build_events(draft: TimelineDraft, query: Query, settings: GenerationSettings) -> _Built:
    """Events with ids, and every structural rule the draft breaks."""
    problems: list[str] = []
    events: list[TimelineEvent] = []
    count = len(draft.events)
    if not settings.events_min <= count <= settings.events_max:
        problems.append(f"{count} events; need {settings.events_min}-{settings.events_max}")
    carried: dict[int, int] = {}
    reference_domains = {ref.domain for ref in query.references}
    for index, item in enumerate(draft.events):
        date = parse_date(item.date)
        domain = parse_domain(item.domain)
        if date is None:
            problems.append(f"event {index}: date {item.date!r} is not an ISO date")
        if domain is None:
            problems.append(f"event {index}: domain {item.domain!r} is not a PersonaLens domain")
        if not item.description.strip():
            problems.append(f"event {index}: empty description")
        ref_index = item.reference_index
        reference_id = None
        if ref_index is not None:
            if not 0 <= ref_index < len(query.references):
                problems.append(f"event {index}: reference_index {ref_index} does not exist")
                ref_index = None
            else:
                carried[ref_index] = carried.get(ref_index, 0) + 1
                ref = query.references[ref_index]
                reference_id = ref.reference_id
                if date is not None and date != ref.date:
                    problems.append(
                        f"event {index}: carries reference {ref_index} dated {ref.date} but is dated {date}"
                    )
                if domain is not None and domain != ref.domain:
                    problems.append(
                        f"event {index}: carries a {ref.domain.value} reference but is in {domain.value}"
                    )
        else:
            if domain is not None and domain in reference_domains:
                problems.append(
                    f"event {index}: filler in {domain.value}, a domain one of the references is about"
                )
            for ref_position, ref in enumerate(query.references):
                if any(
                    contains_verbatim(text, ref.text) for text in [item.description, *item.news]
                ):
                    problems.append(f"event {index}: filler repeats reference {ref_position}")
        if date is None or domain is None or not item.description.strip():
            continue
        event_id = make_id("event", query.query_id, index)
        carried_text = query.references[ref_index].text if ref_index is not None else None
        events.append(
            TimelineEvent(
                event_id=event_id,
                date=date,
                domain=domain,
                kind=EventKind.REFERENCE if reference_id else EventKind.FILLER,
                description=item.description.strip(),
                reference_id=reference_id,
                news=event_news(item.news, carried_text, event_id),
            )
        )
    for ref_index in range(len(query.references)):
        times = carried.get(ref_index, 0)
        if times != 1:
            problems.append(
                f"reference {ref_index} is carried by {times} events; must be exactly one"
            )
    dates = [e.date for e in events]
    if any(later < earlier for earlier, later in zip(dates, dates[1:], strict=False)):
        problems.append("event dates are not in ascending order")
    if events:
        earliest_reference = min(ref.date for ref in query.references)
        first = events[0].date
        if first > earliest_reference:
            problems.append(
                f"first event {first} is after the earliest reference {earliest_reference}"
            )
        if (earliest_reference - first).days > settings.lead_days_max:
            problems.append(
                f"first event {first} is more than {settings.lead_days_max} days before the earliest reference {earliest_reference}"
            )
        if events[-1].date >= query.query_date:
            problems.append(
                f"last event {events[-1].date} is not before the query date {query.query_date}"
            )
    fillers = [e for e in events if e.kind == EventKind.FILLER]
    if len(fillers) >= 2 and len({e.domain for e in fillers}) < 2:
        problems.append("filler events all come from one domain")
    return _Built(events=events, problems=problems)


def event_news(drafted: Sequence[str], reference: str | None, event_id: str) -> list[str]:
    """The event's news as its conversation is asked to tell it: the reference, when the event
    carries one, word for word among the rest.

    The model was asked to list the reference with the other updates; what it wrote for it
    (the text, or a restatement of it) is replaced by the reference itself, since the gates
    checked that text. If it left the reference out, the reference goes in at a place drawn
    from the event id, so its position says nothing about it.
    """
    news = [" ".join(text.split()) for text in drafted if text.strip()]
    if reference is None:
        return news
    saying = [contains_verbatim(t, reference) or restates(t, reference) for t in news]
    kept = [text for text, says in zip(news, saying, strict=True) if not says]
    if any(saying):
        place = saying.index(True)
    else:
        place = int(hashlib.sha256(event_id.encode()).hexdigest(), 16) % (len(news) + 1)
    return [*kept[:place], reference, *kept[place:]]


def _filler_sentences(event: TimelineEvent) -> list[str]:
    """The description's sentences and the news items, each once (a news item the description
    says as well is read once)."""
    unique: dict[str, str] = {}
    for sentence in [*split_sentences(event.description), *event.news]:
        unique.setdefault(normalise_text(without_lead_in(sentence)), sentence)
    return list(unique.values()) or [event.description]


async def filler_similarity_problems(
    events: list[TimelineEvent], query: Query, client: ModelClient, settings: GenerationSettings
) -> list[str]:
    """Filler events with a sentence that comes as close to a reference as a paraphrase would.

    Sentence by sentence: a paraphrase hidden in a long description would be
    diluted in the description's one vector, and short texts cost the model
    less per token. A framing lead-in ("In passing, the user shares an update:")
    is left out for the same two reasons.
    """
    fillers = [e for e in events if e.kind == EventKind.FILLER]
    if not fillers:
        return []
    said = [_filler_sentences(e) for e in fillers]
    count = len(query.references)
    texts = [ref.text for ref in query.references] + [
        without_lead_in(s) for sentences in said for s in sentences
    ]
    vectors = await client.embed(texts, stage=STAGE)
    cosines = vectors[count:] @ vectors[:count].T  # sentence x reference
    problems = []
    start = 0
    for event, sentences in zip(fillers, said, strict=True):
        block = cosines[start : start + len(sentences)]
        start += len(sentences)
        row, worst = np.unravel_index(int(block.argmax()), block.shape)
        score = float(block[row, worst])
        if score > settings.filler_similarity_max:
            problems.append(
                f"filler event {event.event_id} is {score:.3f} similar to reference {int(worst)} "
                f"(max {settings.filler_similarity_max}) in its sentence {sentences[int(row)]!r}"
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
            built = build_events(draft, query, self.settings)
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
    "filler_similarity_problems",
    "synthesise_timeline",
]
