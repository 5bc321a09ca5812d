"""The ``queries`` stage: candidate in-situ queries with required references, then the γ filter and per-reference gates.

One LLM call proposes ``candidates_per_user`` candidates for a persona. Each is
checked against the rules of SPEC §2 (reference count, dates before the query,
domains other than the query's) and against gates that keep single references
from leaking: a time-bounded reference must still hold on the query date
(``stale``), and no reference may share more than ``shared_words_max`` content
words with its request (``word_overlap``). Each reference must be in the one
form every news item of a timeline shares (subject-less, what is or was,
within the length band; :mod:`memoryquest.stages.news_form`), or it would
stand out among them (``invariant``). Survivors are embedded in one
batched call; γ = mean cosine(query, reference) must stay within ``gamma_max``
(``similarity``, the paper's rule) and no single reference may come closer
than ``reference_cosine_max`` (``reference_leak``), because a mean hides one
echo among far references. A reference that nearly repeats or contradicts one
already accepted for the same user is refused (``near_duplicate`` /
``contradiction``). Finally a relevance judge (one call per candidate, through
the same client) says whether each reference would change how the request is
handled; its one-sentence rationale is stored on the reference, and a
candidate with a reference judged irrelevant is refused (``irrelevant``). At
most ``queries_per_user`` are kept, lowest γ first. When too few survive, the model is asked again (bounded by
``max_regenerations``) with a different seed and the list of texts it already
proposed. Nothing is dropped silently: every rejected candidate becomes a
:class:`RejectedCandidate` with its reason and the candidate as generated.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any, Final

import numpy as np
from pydantic import BaseModel

from memoryquest.contracts import (
    Domain,
    Persona,
    Query,
    Reference,
    RejectedCandidate,
    RejectionReason,
    Stage,
)
from memoryquest.generation.bounds import count_problem
from memoryquest.generation.common import (
    TRIM_LEVELS,
    failure_reason,
    parse_date,
    parse_domain,
    persona_variables,
    rejected,
)
from memoryquest.generation.regeneration import (
    GIVE_UP,
    GiveUp,
    Regeneration,
    Round,
    regenerate,
    window_learned,
)
from memoryquest.ids import make_id
from memoryquest.llm.client import LLMContextLengthError, LLMOutputError, ModelClient
from memoryquest.llm.request import DEFAULT_MAX_OUTPUT_TOKENS, LLMRequest
from memoryquest.settings import GenerationSettings, Settings
from memoryquest.stages.news_form import news_form_problem, normalise_news
from memoryquest.stages.queries_contracts import (
    QueryCandidateDraft,
    QueryCandidatesDraft,
    QueryGenerationInputs,
    ReferenceRelevanceInputs,
    RelevanceAnswer,
)
from memoryquest.stages.state import PersonaState
from memoryquest.text import content_words, normalise_text, shared_content_words

STAGE: Final = Stage.QUERIES
# The template's max_output_tokens is sized for this many candidates (the default candidates_per_user).
SIZED_FOR_CANDIDATES = GenerationSettings.model_fields["candidates_per_user"].default


# --------------------------------------------------------------------------- what the stage returns


class QueryStageResult(BaseModel):
    queries: list[Query]
    rejected: list[RejectedCandidate]


@dataclass(frozen=True)
class CheckedReference:
    text: str
    date: dt.date
    domain: Domain
    rationale: str
    valid_until: dt.date | None


@dataclass(frozen=True)
class _Parsed:
    draft: QueryCandidateDraft
    query_id: str
    query_date: dt.date
    domain: Domain
    references: list[CheckedReference]
    key: tuple[object, ...]


@dataclass(frozen=True)
class CandidateProblem:
    reason: RejectionReason
    detail: str


@dataclass(frozen=True)
class CheckedCandidate:
    query_date: dt.date
    domain: Domain
    references: list[CheckedReference]


def _date_and_domain(
    date: str, domain: str, date_field: str, domain_field: str
) -> tuple[dt.date, Domain] | CandidateProblem:
    """A date and a domain as the model wrote them (the query's or a reference's), parsed; or the
    SCHEMA problem naming the field (``date_field``, ``domain_field``) that does not parse."""
    parsed_date = parse_date(date)
    if parsed_date is None:
        return CandidateProblem(RejectionReason.SCHEMA, f"{date_field} {date!r} is not an ISO date")
    parsed_domain = parse_domain(domain)
    if parsed_domain is None:
        return CandidateProblem(
            RejectionReason.SCHEMA, f"{domain_field} {domain!r} is not a PersonaLens domain"
        )
    return parsed_date, parsed_domain


def check_candidate(
    draft: QueryCandidateDraft, settings: GenerationSettings
) -> CheckedCandidate | CandidateProblem:
    """The parsed candidate, or why it breaks a rule of SPEC §2 (SCHEMA: unparsable; INVARIANT: parsed but wrong)."""
    if not draft.query.strip():
        return CandidateProblem(RejectionReason.SCHEMA, "empty query text")
    if not draft.reasoning.strip():
        return CandidateProblem(RejectionReason.SCHEMA, "empty reasoning")
    when_and_where = _date_and_domain(draft.query_date, draft.domain, "query_date", "domain")
    if isinstance(when_and_where, CandidateProblem):
        return when_and_where
    query_date, domain = when_and_where
    reference_count = count_problem(
        len(draft.references), (settings.references_min, settings.references_max), "references"
    )
    if reference_count is not None:
        return CandidateProblem(RejectionReason.INVARIANT, reference_count)
    parsed: list[CheckedReference] = []
    for index, ref in enumerate(draft.references):
        if not ref.text.strip():
            return CandidateProblem(RejectionReason.SCHEMA, f"reference {index} has empty text")
        ref_when_and_where = _date_and_domain(
            ref.date, ref.domain, f"reference {index} date", f"reference {index} domain"
        )
        if isinstance(ref_when_and_where, CandidateProblem):
            return ref_when_and_where
        ref_date, ref_domain = ref_when_and_where
        if ref_date >= query_date:
            return CandidateProblem(
                RejectionReason.INVARIANT,
                f"reference {index} is dated {ref_date}, not before the query date {query_date}",
            )
        if ref_domain == domain:
            return CandidateProblem(
                RejectionReason.INVARIANT,
                f"reference {index} is in the query's own domain {domain.value}",
            )
        valid_until: dt.date | None = None
        if (
            ref.valid_until is not None
            and ref.valid_until.strip()
            and ref.valid_until.strip().lower() != "null"
        ):
            valid_until = parse_date(ref.valid_until)
            if valid_until is None:
                return CandidateProblem(
                    RejectionReason.SCHEMA,
                    f"reference {index} valid_until {ref.valid_until!r} is not an ISO date",
                )
            if valid_until < ref_date:
                return CandidateProblem(
                    RejectionReason.INVARIANT,
                    f"reference {index} is valid until {valid_until}, before its own date {ref_date}",
                )
            if valid_until < query_date:
                return CandidateProblem(
                    RejectionReason.STALE,
                    f"reference {index} held until {valid_until}, before the query date {query_date}",
                )
        shared = shared_content_words(draft.query, ref.text)
        if len(shared) > settings.shared_words_max:
            return CandidateProblem(
                RejectionReason.WORD_OVERLAP,
                f"reference {index} shares {len(shared)} content words with the query ({', '.join(sorted(shared))}; at most {settings.shared_words_max})",
            )
        if (form := news_form_problem(ref.text, settings)) is not None:
            return CandidateProblem(
                RejectionReason.INVARIANT, f"reference {index} is out of the news form: {form}"
            )
        parsed.append(
            CheckedReference(
                normalise_news(ref.text), ref_date, ref_domain, ref.rationale.strip(), valid_until
            )
        )
    texts = [normalise_text(r.text) for r in parsed]
    if len(set(texts)) != len(texts):
        return CandidateProblem(RejectionReason.INVARIANT, "two references have the same text")
    return CheckedCandidate(query_date, domain, parsed)


def check_cosines(cosines: np.ndarray, settings: GenerationSettings) -> CandidateProblem | None:
    """The paper's mean rule (γ), then the single-reference ceiling a mean can hide."""
    gamma = float(cosines.mean())
    listed = ", ".join(f"{c:.3f}" for c in cosines)
    if gamma > settings.gamma_max:
        return CandidateProblem(
            RejectionReason.SIMILARITY,
            f"gamma {gamma:.3f} > {settings.gamma_max} (cosines {listed})",
        )
    worst = int(np.argmax(cosines))
    if float(cosines[worst]) > settings.reference_cosine_max:
        return CandidateProblem(
            RejectionReason.REFERENCE_LEAK,
            f"reference {worst} has cosine {float(cosines[worst]):.3f} to the query (> {settings.reference_cosine_max}; cosines {listed})",
        )
    return None


def conflicting_reference(
    texts: list[str],
    vectors: np.ndarray,
    accepted_texts: list[str],
    accepted_vectors: np.ndarray,
    settings: GenerationSettings,
) -> CandidateProblem | None:
    """Why one of ``texts`` cannot join the user's ``accepted`` references, if it cannot.

    Near-duplicate: cosine at or above ``duplicate_cosine``. Contradiction: the
    same statement with a value changed — both say at least three content
    words alike and differ in one or two (a date, a place, a number).
    """
    if not accepted_texts:
        return None
    similarity = vectors @ accepted_vectors.T
    for index, text in enumerate(texts):
        for other, accepted in enumerate(accepted_texts):
            if float(similarity[index, other]) >= settings.duplicate_cosine:
                return CandidateProblem(
                    RejectionReason.NEAR_DUPLICATE,
                    f"reference {index} nearly repeats an accepted reference of this user "
                    f"(cosine {float(similarity[index, other]):.3f} >= {settings.duplicate_cosine}): {accepted!r}",
                )
            if changes_a_value(text, accepted):
                return CandidateProblem(
                    RejectionReason.CONTRADICTION,
                    f"reference {index} restates an accepted reference of this user with a different value: {accepted!r}",
                )
    return None


def changes_a_value(left: str, right: str) -> bool:
    """The same statement with one or two words swapped ("valid until December" / "... until April")."""
    a, b = set(content_words(left)), set(content_words(right))
    if a == b:
        return False
    shared = a & b
    return (
        len(shared) >= 3
        and 0 < len(a - shared) <= 2
        and 0 < len(b - shared) <= 2
        and len(shared) >= len(a | b) - 3
    )


def generation_request(
    persona: Persona,
    settings: GenerationSettings,
    seed: int,
    proposed: list[str],
    *,
    count: int | None = None,
    keep: int | None = None,
) -> LLMRequest[QueryCandidatesDraft]:
    """The ``query_generation`` call for ``persona``; ``proposed`` are requests already tried.

    ``count`` candidates (default ``candidates_per_user``) with an output
    allowance in proportion to the template's, which is sized for
    ``SIZED_FOR_CANDIDATES``; ``keep``: see :func:`persona_variables`.
    """
    count = count or settings.candidates_per_user
    budget = None
    if count != SIZED_FOR_CANDIDATES:
        template_budget = (
            QueryGenerationInputs.template().max_output_tokens or DEFAULT_MAX_OUTPUT_TOKENS
        )
        budget = -(-template_budget * count // SIZED_FOR_CANDIDATES)
    inputs = QueryGenerationInputs(
        **persona_variables(persona, keep),
        count=count,
        references_min=settings.references_min,
        references_max=settings.references_max,
        query_date_start=settings.query_date_start.isoformat(),
        query_date_end=settings.query_date_end.isoformat(),
        reference_window_days=settings.reference_window_days,
        news_words_min=settings.news_words_min,
        news_words_max=settings.news_words_max,
        domains=[d.value for d in Domain],
        already_proposed=proposed,
    )
    return inputs.request(seed=seed, max_output_tokens=budget)


async def generation_requests(
    client: ModelClient,
    persona: Persona,
    settings: GenerationSettings,
    seed: int,
    proposed: list[str],
) -> list[LLMRequest[QueryCandidatesDraft]]:
    """The calls of one attempt: one for every candidate where the model's window allows,
    else several asking for fewer each, the persona's material trimmed only when even one
    candidate per call does not fit."""
    full = settings.candidates_per_user

    def fullest_first() -> Iterator[
        tuple[LLMRequest[QueryCandidatesDraft], tuple[int, int | None]]
    ]:
        for keep in TRIM_LEVELS:
            count = full
            while True:
                request = generation_request(
                    persona, settings, seed, list(proposed), count=count, keep=keep
                )
                yield request, (count, keep)
                if count == 1:
                    break
                count = max(1, count // 2)

    first, (count, keep) = await client.first_fitting(fullest_first())
    if count >= full or not await client.fits(first):
        return [first]  # all at once, or nothing fits: one call, which fails alone
    calls = -(-full // count)
    return [first] + [
        generation_request(
            persona, settings, seed * 1000 + call, list(proposed), count=count, keep=keep
        )
        for call in range(1, calls)
    ]


def relevance_request(parsed: _Parsed, seed: int) -> LLMRequest[RelevanceAnswer]:
    return ReferenceRelevanceInputs(
        query=parsed.draft.query.strip(),
        query_date=parsed.query_date.isoformat(),
        query_domain=parsed.domain.value,
        references=[
            {
                "index": index,
                "text": ref.text,
                "date": ref.date.isoformat(),
                "domain": ref.domain.value,
            }
            for index, ref in enumerate(parsed.references)
        ],
    ).request(seed=seed)


def check_relevance(answer: RelevanceAnswer, count: int) -> list[str] | CandidateProblem:
    """One rationale per reference, or why the candidate is refused (a missing verdict counts as not relevant)."""
    verdicts = {v.index: v for v in answer.verdicts}
    rationales: list[str] = []
    for index in range(count):
        verdict = verdicts.get(index)
        if verdict is None:
            return CandidateProblem(
                RejectionReason.IRRELEVANT,
                f"reference {index}: the relevance judge gave no verdict",
            )
        if not verdict.relevant:
            return CandidateProblem(
                RejectionReason.IRRELEVANT,
                f"reference {index} judged not relevant: {verdict.rationale.strip()}",
            )
        rationales.append(verdict.rationale.strip())
    return rationales


def _to_query(
    persona_id: str,
    parsed: _Parsed,
    cosines: np.ndarray,
    gamma: float,
    embedder: str,
    rank: int,
    relevance: list[str],
) -> Query:
    references = [
        Reference(
            reference_id=make_id("reference", parsed.query_id, index, ref.text),
            date=ref.date,
            text=ref.text,
            domain=ref.domain,
            cosine=float(cosines[index]),
            valid_until=ref.valid_until,
            rationale=ref.rationale,
            relevance=relevance[index] if index < len(relevance) else "",
        )
        for index, ref in enumerate(parsed.references)
    ]
    return Query(
        query_id=parsed.query_id,
        persona_id=persona_id,
        query_date=parsed.query_date,
        text=parsed.draft.query.strip(),
        reasoning=parsed.draft.reasoning.strip(),
        domain=parsed.domain,
        references=references,
        gamma=gamma,
        embedder=embedder,
        rank=rank,
    )


async def generate_queries(
    persona: Persona, client: ModelClient, settings: GenerationSettings, *, seed: int = 0
) -> QueryStageResult:
    """Propose, check, gate, judge and cap one persona's queries (see the module docstring)."""
    if settings.query_date_start > settings.query_date_end:
        raise ValueError(
            f"generation.query_date_start ({settings.query_date_start}) is after query_date_end ({settings.query_date_end})"
        )
    job = _QueryJob(persona.persona_id, client, settings, seed)
    outcome = await regenerate(job, [persona], settings.max_regenerations + 1)
    rejections = outcome.rejected
    passing = sorted(job.passing, key=lambda item: (item[2], item[0].query_id))
    queries: list[Query] = []
    for parsed, cosines, gamma, relevance in passing:
        if len(queries) < settings.queries_per_user:
            queries.append(
                _to_query(
                    persona.persona_id,
                    parsed,
                    cosines,
                    gamma,
                    client.embedder_name,
                    len(queries),
                    relevance,
                )
            )
        else:
            detail = f"gamma {gamma:.3f} is within the threshold but {settings.queries_per_user} lower-gamma queries were kept"
            rejections.append(
                job.refusal(parsed, CandidateProblem(RejectionReason.CAPACITY, detail), gamma)
            )
    return QueryStageResult(queries=queries, rejected=rejections)


_Passing = tuple[_Parsed, np.ndarray, float, list[str]]
_Verdict = tuple[int, "list[_Passing] | RejectedCandidate | GiveUp"]


class _QueryJob(Regeneration[Persona, list[Any], list[_Passing]]):
    """A persona's candidates, attempt after attempt, until enough pass: each attempt's calls
    propose new ones (told what was already proposed), and every candidate is parsed, gated on
    its references' similarity and judged for relevance."""

    def __init__(
        self, persona_id: str, client: ModelClient, settings: GenerationSettings, seed: int
    ) -> None:
        self.persona_id, self.client, self.settings, self.seed = persona_id, client, settings, seed
        self.passing: list[_Passing] = []
        self.proposed: list[str] = []
        self.seen: set[str] = set()
        self.accepted_texts: list[str] = []
        self.accepted_vectors = np.zeros((0, 0), dtype=np.float32)

    def refusal(
        self, parsed: _Parsed, problem: CandidateProblem, gamma: float | None = None
    ) -> RejectedCandidate:
        return rejected(
            self.persona_id,
            STAGE,
            problem.reason,
            problem.detail,
            parsed.draft,
            *parsed.key,
            gamma=gamma,
            embedder=self.client.embedder_name if gamma is not None else None,
        )

    async def ask(self, items: Sequence[Persona], round: Round) -> Sequence[list[Any]]:
        (persona,) = items
        requests = await generation_requests(
            self.client, persona, self.settings, self.seed + round.attempt, self.proposed
        )
        return [await self.client.complete_all(requests, return_exceptions=True)]

    def failed(self, item: Persona, error: LLMOutputError, round: Round) -> RejectedCandidate:
        return self._call_failed(error, round, 0)

    def planned_without_the_window(self, answer: list[Any] | BaseException) -> bool:
        """An attempt's calls were planned without the window when one of them taught it."""
        calls = answer if isinstance(answer, list) else [answer]
        return any(window_learned(call) for call in calls)

    def _call_failed(self, error: LLMOutputError, round: Round, call: int) -> RejectedCandidate:
        return rejected(
            self.persona_id,
            STAGE,
            failure_reason(error),
            str(error),
            {"error": str(error)},
            round.attempt,
            "call",
            *((call,) if call else ()),
        )

    async def check(
        self, answers: Sequence[tuple[int, Persona, list[Any]]], round: Round
    ) -> list[_Verdict]:
        verdicts: list[_Verdict] = []
        for position, _, calls in answers:
            candidates, too_long = self._parse(calls, round, position, verdicts)
            if too_long:
                verdicts.append((position, GIVE_UP))  # the smallest prompt does not fit
                continue
            await self._gate_and_judge(candidates, round, position, verdicts)
            if len(self.passing) >= self.settings.queries_per_user:
                verdicts.append((position, self.passing))
        return verdicts

    def _parse(
        self, calls: list[Any], round: Round, position: int, verdicts: list[_Verdict]
    ) -> tuple[list[_Parsed], bool]:
        """The attempt's well-formed, new candidates; whether a call's prompt could not fit."""
        candidates: list[_Parsed] = []
        index = 0  # runs on across the calls of one attempt, so every candidate's key is its own
        too_long = False
        for call, answer in enumerate(calls):
            if isinstance(answer, BaseException) and not isinstance(answer, LLMOutputError):
                raise answer  # the endpoint failed, not this item
            if isinstance(answer, LLMOutputError):
                too_long = too_long or isinstance(answer, LLMContextLengthError)
                verdicts.append((position, self._call_failed(answer, round, call)))
                continue
            for draft in answer.candidates:
                key = (round.attempt, index, draft.query)
                index += 1
                self.proposed.append(draft.query)
                outcome = check_candidate(draft, self.settings)
                if isinstance(outcome, CandidateProblem):
                    verdicts.append(
                        (
                            position,
                            rejected(
                                self.persona_id, STAGE, outcome.reason, outcome.detail, draft, *key
                            ),
                        )
                    )
                    continue
                query_date, domain, references = (
                    outcome.query_date,
                    outcome.domain,
                    outcome.references,
                )
                query_id = make_id(
                    "query", self.persona_id, draft.query.strip(), query_date.isoformat()
                )
                if query_id in self.seen:
                    verdicts.append(
                        (
                            position,
                            rejected(
                                self.persona_id,
                                STAGE,
                                RejectionReason.INVARIANT,
                                "duplicate of an earlier candidate",
                                draft,
                                *key,
                            ),
                        )
                    )
                    continue
                self.seen.add(query_id)
                candidates.append(_Parsed(draft, query_id, query_date, domain, references, key))
        return candidates, too_long

    async def _gate_and_judge(
        self, candidates: list[_Parsed], round: Round, position: int, verdicts: list[_Verdict]
    ) -> None:
        """Candidates whose references pass the similarity gates and the relevance judge join ``passing``."""
        if not candidates:
            return
        client, settings = self.client, self.settings
        texts: list[str] = []
        for parsed in candidates:
            texts.append(parsed.draft.query.strip())
            texts.extend(ref.text for ref in parsed.references)
        vectors = await client.embed(texts, stage=STAGE)
        gated: list[tuple[_Parsed, np.ndarray, float]] = []
        row = 0
        for parsed in candidates:
            query_vector = vectors[row]
            ref_vectors = np.asarray(vectors[row + 1 : row + 1 + len(parsed.references)])
            row += 1 + len(parsed.references)
            cosines = np.asarray(ref_vectors @ query_vector, dtype=np.float64)
            gamma = float(cosines.mean())
            problem = check_cosines(cosines, settings)
            if problem is None:
                ref_texts = [ref.text for ref in parsed.references]
                problem = conflicting_reference(
                    ref_texts, ref_vectors, self.accepted_texts, self.accepted_vectors, settings
                )
            if problem is not None:
                verdicts.append((position, self.refusal(parsed, problem, gamma)))
                continue
            self.accepted_texts.extend(ref.text for ref in parsed.references)
            self.accepted_vectors = (
                ref_vectors
                if not self.accepted_vectors.size
                else np.vstack([self.accepted_vectors, ref_vectors])
            )
            gated.append((parsed, cosines, gamma))
        if settings.judge_relevance and gated:
            answers = await client.complete_all(
                [relevance_request(parsed, self.seed + round.attempt) for parsed, _, _ in gated],
                return_exceptions=True,
            )
        else:
            answers = [RelevanceAnswer(verdicts=[]) for _ in gated]
        for (parsed, cosines, gamma), verdict in zip(gated, answers, strict=True):
            if isinstance(verdict, BaseException) and not isinstance(verdict, LLMOutputError):
                raise verdict  # the endpoint failed, not this candidate
            if isinstance(verdict, LLMOutputError):
                problem = CandidateProblem(failure_reason(verdict), f"relevance judge: {verdict}")
                verdicts.append((position, self.refusal(parsed, problem, gamma)))
                continue
            relevance: list[str] = []
            if settings.judge_relevance:
                judged = check_relevance(verdict, len(parsed.references))
                if isinstance(judged, CandidateProblem):
                    verdicts.append((position, self.refusal(parsed, judged, gamma)))
                    continue
                relevance = judged
            self.passing.append((parsed, cosines, gamma, relevance))


# --------------------------------------------------------------------------- the stage group


async def run(state: PersonaState, client: ModelClient, settings: Settings) -> QueryStageResult:
    """The ``queries`` stage group of :mod:`memoryquest.pipeline`: the persona's kept queries."""
    return await generate_queries(state.persona, client, settings.generation, seed=settings.seed)


def apply(state: PersonaState, result: QueryStageResult) -> PersonaState:
    """The kept queries stand; every rejected candidate is recorded."""
    return state.add(queries=result.queries, rejected=result.rejected)
