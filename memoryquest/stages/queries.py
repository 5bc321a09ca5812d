"""Stage 2 + 3: candidate in-situ queries with required references, then the γ filter.

One LLM call proposes ``candidates_per_user`` candidates for a persona. Each is
checked against the rules of SPEC §2 (reference count, dates before the query,
domains other than the query's); survivors are embedded in one batched call,
γ = mean cosine(query, reference) is computed, candidates with γ above
``gamma_max`` are rejected, and at most ``queries_per_user`` are kept, lowest γ
first. When too few survive, the model is asked again (bounded by
``max_regenerations``) with a different seed and the list of texts it already
proposed. Nothing is dropped silently: every rejected candidate becomes a
:class:`RejectedCandidate` with its reason and the candidate as generated.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass

import numpy as np
from pydantic import BaseModel, Field

from memoryquest.contracts import (
    Domain,
    Persona,
    Query,
    Reference,
    RejectedCandidate,
    RejectionReason,
)
from memoryquest.ids import make_id
from memoryquest.llm.client import LLMOutputError, ModelClient
from memoryquest.llm.request import LLMRequest
from memoryquest.settings import GenerationSettings
from memoryquest.stages.common import (
    normalise_text,
    parse_date,
    parse_domain,
    persona_variables,
    rejected,
)

STAGE = "queries"
TEMPLATE = "query_generation"


# --------------------------------------------------------------------------- what the model answers


class ReferenceDraft(BaseModel):
    text: str = Field(description="Short, atomic statement about the user.")
    date: str = Field(description="ISO date (YYYY-MM-DD) when this became true or was said.")
    domain: str = Field(description="One of the 20 PersonaLens domains, not the query's.")


class QueryCandidateDraft(BaseModel):
    query: str = Field(description="The in-situ request the user makes, in the first person.")
    query_date: str = Field(description="ISO date (YYYY-MM-DD) the user makes the request.")
    reasoning: str = Field(description="Why the references matter for a good answer.")
    domain: str = Field(description="The request's task domain.")
    references: list[ReferenceDraft]


class QueryCandidatesDraft(BaseModel):
    candidates: list[QueryCandidateDraft]


# --------------------------------------------------------------------------- what the stage returns


class QueryStageResult(BaseModel):
    queries: list[Query]
    rejected: list[RejectedCandidate]


@dataclass(frozen=True)
class _Parsed:
    draft: QueryCandidateDraft
    query_id: str
    query_date: dt.date
    domain: Domain
    references: list[tuple[str, dt.date, Domain]]
    key: tuple[object, ...]


@dataclass(frozen=True)
class CandidateProblem:
    reason: RejectionReason
    detail: str


@dataclass(frozen=True)
class CheckedCandidate:
    query_date: dt.date
    domain: Domain
    references: list[tuple[str, dt.date, Domain]]


def check_candidate(draft: QueryCandidateDraft, settings: GenerationSettings) -> CheckedCandidate | CandidateProblem:
    """The parsed candidate, or why it breaks a rule of SPEC §2 (SCHEMA: unparsable; INVARIANT: parsed but wrong)."""
    if not draft.query.strip():
        return CandidateProblem(RejectionReason.SCHEMA, "empty query text")
    if not draft.reasoning.strip():
        return CandidateProblem(RejectionReason.SCHEMA, "empty reasoning")
    query_date = parse_date(draft.query_date)
    if query_date is None:
        return CandidateProblem(RejectionReason.SCHEMA, f"query_date {draft.query_date!r} is not an ISO date")
    domain = parse_domain(draft.domain)
    if domain is None:
        return CandidateProblem(RejectionReason.SCHEMA, f"domain {draft.domain!r} is not a PersonaLens domain")
    count = len(draft.references)
    if not settings.references_min <= count <= settings.references_max:
        return CandidateProblem(
            RejectionReason.INVARIANT,
            f"{count} references; need {settings.references_min}-{settings.references_max}",
        )
    parsed: list[tuple[str, dt.date, Domain]] = []
    for index, ref in enumerate(draft.references):
        if not ref.text.strip():
            return CandidateProblem(RejectionReason.SCHEMA, f"reference {index} has empty text")
        ref_date = parse_date(ref.date)
        if ref_date is None:
            return CandidateProblem(RejectionReason.SCHEMA, f"reference {index} date {ref.date!r} is not an ISO date")
        ref_domain = parse_domain(ref.domain)
        if ref_domain is None:
            return CandidateProblem(RejectionReason.SCHEMA, f"reference {index} domain {ref.domain!r} is not a PersonaLens domain")
        if ref_date >= query_date:
            return CandidateProblem(RejectionReason.INVARIANT, f"reference {index} is dated {ref_date}, not before the query date {query_date}")
        if ref_domain == domain:
            return CandidateProblem(RejectionReason.INVARIANT, f"reference {index} is in the query's own domain {domain.value}")
        parsed.append((ref.text.strip(), ref_date, ref_domain))
    texts = [normalise_text(text) for text, _, _ in parsed]
    if len(set(texts)) != len(texts):
        return CandidateProblem(RejectionReason.INVARIANT, "two references have the same text")
    return CheckedCandidate(query_date, domain, parsed)


def _request(persona: Persona, settings: GenerationSettings, seed: int, proposed: list[str]) -> LLMRequest[QueryCandidatesDraft]:
    variables = persona_variables(persona)
    variables.update(
        count=settings.candidates_per_user,
        references_min=settings.references_min,
        references_max=settings.references_max,
        query_date_start=settings.query_date_start.isoformat(),
        query_date_end=settings.query_date_end.isoformat(),
        reference_window_days=settings.reference_window_days,
        domains=[d.value for d in Domain],
        already_proposed=proposed,
    )
    return LLMRequest(
        template_id=TEMPLATE,
        variables=variables,
        response_model=QueryCandidatesDraft,
        stage=STAGE,
        temperature=0.9,
        max_output_tokens=12_000,
        seed=seed,
    )


def _to_query(persona_id: str, parsed: _Parsed, cosines: np.ndarray, gamma: float, embedder: str, rank: int) -> Query:
    references = [
        Reference(
            reference_id=make_id("reference", parsed.query_id, index, text),
            date=ref_date,
            text=text,
            domain=ref_domain,
            cosine=float(cosines[index]),
        )
        for index, (text, ref_date, ref_domain) in enumerate(parsed.references)
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
    """Propose, check, γ-filter and cap one persona's queries (see the module docstring)."""
    if settings.query_date_start > settings.query_date_end:
        raise ValueError(
            f"generation.query_date_start ({settings.query_date_start}) is after query_date_end ({settings.query_date_end})"
        )
    persona_id = persona.persona_id
    rejections: list[RejectedCandidate] = []
    passing: list[tuple[_Parsed, np.ndarray, float]] = []
    proposed: list[str] = []
    seen: set[str] = set()

    for attempt in range(settings.max_regenerations + 1):
        request = _request(persona, settings, seed + attempt, list(proposed))
        try:
            answer = await client.complete(request)
        except LLMOutputError as exc:
            rejections.append(
                rejected(persona_id, STAGE, RejectionReason.SCHEMA, str(exc), {"error": str(exc)}, attempt, "call")
            )
            continue
        candidates: list[_Parsed] = []
        for index, draft in enumerate(answer.candidates):
            key = (attempt, index, draft.query)
            proposed.append(draft.query)
            outcome = check_candidate(draft, settings)
            if isinstance(outcome, CandidateProblem):
                rejections.append(rejected(persona_id, STAGE, outcome.reason, outcome.detail, draft, *key))
                continue
            query_date, domain, references = outcome.query_date, outcome.domain, outcome.references
            query_id = make_id("query", persona_id, draft.query.strip(), query_date.isoformat())
            if query_id in seen:
                rejections.append(
                    rejected(persona_id, STAGE, RejectionReason.INVARIANT, "duplicate of an earlier candidate", draft, *key)
                )
                continue
            seen.add(query_id)
            candidates.append(_Parsed(draft, query_id, query_date, domain, references, key))
        if candidates:
            texts: list[str] = []
            for parsed in candidates:
                texts.append(parsed.draft.query.strip())
                texts.extend(text for text, _, _ in parsed.references)
            vectors = await client.embed(texts, stage=STAGE)
            row = 0
            for parsed in candidates:
                query_vector = vectors[row]
                ref_vectors = vectors[row + 1 : row + 1 + len(parsed.references)]
                row += 1 + len(parsed.references)
                cosines = np.asarray(ref_vectors @ query_vector, dtype=np.float64)
                gamma = float(cosines.mean())
                if gamma > settings.gamma_max:
                    detail = (
                        f"gamma {gamma:.3f} > {settings.gamma_max} "
                        f"(cosines {', '.join(f'{c:.3f}' for c in cosines)})"
                    )
                    rejections.append(
                        rejected(
                            persona_id, STAGE, RejectionReason.SIMILARITY, detail, parsed.draft, *parsed.key,
                            gamma=gamma, embedder=client.embedder_name,
                        )
                    )
                else:
                    passing.append((parsed, cosines, gamma))
        if len(passing) >= settings.queries_per_user:
            break

    passing.sort(key=lambda item: (item[2], item[0].query_id))
    queries: list[Query] = []
    for parsed, cosines, gamma in passing:
        if len(queries) < settings.queries_per_user:
            queries.append(_to_query(persona_id, parsed, cosines, gamma, client.embedder_name, len(queries)))
        else:
            detail = f"gamma {gamma:.3f} is within the threshold but {settings.queries_per_user} lower-gamma queries were kept"
            rejections.append(
                rejected(
                    persona_id, STAGE, RejectionReason.CAPACITY, detail, parsed.draft, *parsed.key,
                    gamma=gamma, embedder=client.embedder_name,
                )
            )
    return QueryStageResult(queries=queries, rejected=rejections)
