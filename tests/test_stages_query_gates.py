"""Per-reference gates of the query stage, each made to fire by mutating a real candidate.

The candidate comes from the offline simulator for a bundled PersonaLens user;
every test changes one thing about it and checks the named rejection reason.
"""

from __future__ import annotations

import datetime as dt

import numpy as np
import pytest

from memoryquest.contracts import RejectionReason
from memoryquest.generation.common import persona_variables
from memoryquest.llm.factory import shared_local_embedder
from memoryquest.settings import GenerationSettings
from memoryquest.simulator import simulate
from memoryquest.stages.queries import (
    CandidateProblem,
    CheckedCandidate,
    changes_a_value,
    check_candidate,
    check_cosines,
    check_relevance,
    conflicting_reference,
)
from memoryquest.stages.queries_contracts import (
    QueryCandidateDraft,
    QueryCandidatesDraft,
    RelevanceAnswer,
    RelevanceVerdict,
)
from memoryquest.text import content_words, shared_content_words

try:
    from tests.generation_fixture import load_users
except ModuleNotFoundError:  # tests/ is not a package: pytest puts it on sys.path
    from generation_fixture import load_users

SETTINGS = GenerationSettings()


@pytest.fixture(scope="module")
def candidates() -> list[QueryCandidateDraft]:
    persona = load_users("user0")[0]
    variables = persona_variables(persona)
    variables.update(
        count=SETTINGS.candidates_per_user,
        references_min=SETTINGS.references_min,
        references_max=SETTINGS.references_max,
        query_date_start=SETTINGS.query_date_start.isoformat(),
        query_date_end=SETTINGS.query_date_end.isoformat(),
        reference_window_days=SETTINGS.reference_window_days,
        news_words_min=SETTINGS.news_words_min,
        news_words_max=SETTINGS.news_words_max,
        domains=[],
        already_proposed=[],
    )
    answer = QueryCandidatesDraft.model_validate_json(simulate("query_generation", variables))
    assert answer.candidates
    return answer.candidates


@pytest.fixture()
def candidate(candidates: list[QueryCandidateDraft]) -> QueryCandidateDraft:
    passing = [c for c in candidates if isinstance(check_candidate(c, SETTINGS), CheckedCandidate)]
    assert passing, "the simulator should propose candidates that pass the rule checks"
    return passing[0].model_copy(deep=True)


def problem(outcome: CheckedCandidate | CandidateProblem) -> CandidateProblem:
    assert isinstance(outcome, CandidateProblem), outcome
    return outcome


def test_an_unmodified_candidate_passes_and_keeps_rationale_and_validity(
    candidate: QueryCandidateDraft,
) -> None:
    checked = check_candidate(candidate, SETTINGS)
    assert isinstance(checked, CheckedCandidate)
    for ref, draft in zip(checked.references, candidate.references, strict=True):
        assert ref.rationale == draft.rationale.strip()
        assert ref.valid_until is None or ref.valid_until >= checked.query_date


@pytest.mark.parametrize(
    ("change", "reason", "words"),
    [
        (lambda c: setattr(c, "query", "  "), RejectionReason.SCHEMA, "empty query text"),
        (lambda c: setattr(c, "reasoning", "\n"), RejectionReason.SCHEMA, "empty reasoning"),
        (
            lambda c: setattr(c.references[1], "text", " "),
            RejectionReason.SCHEMA,
            "reference 1 has empty text",
        ),
        (
            lambda c: setattr(c.references[1], "date", "last spring"),
            RejectionReason.SCHEMA,
            "reference 1 date 'last spring' is not an ISO date",
        ),
        (
            lambda c: setattr(c.references[1], "domain", "gardening"),
            RejectionReason.SCHEMA,
            "reference 1 domain 'gardening' is not a PersonaLens domain",
        ),
        (
            lambda c: setattr(c.references[1], "date", c.query_date),
            RejectionReason.INVARIANT,
            "reference 1 is dated",  # on the query's own date: not before it
        ),
        (
            lambda c: setattr(c.references[1], "domain", c.domain),
            RejectionReason.INVARIANT,
            "reference 1 is in the query's own domain",
        ),
        (
            lambda c: setattr(c.references[1], "valid_until", "until further notice"),
            RejectionReason.SCHEMA,
            "reference 1 valid_until 'until further notice' is not an ISO date",
        ),
        (
            lambda c: setattr(c, "query_date", "soon"),
            RejectionReason.SCHEMA,
            "query_date 'soon' is not an ISO date",
        ),
        (
            lambda c: setattr(c, "references", c.references[: SETTINGS.references_min - 1]),
            RejectionReason.INVARIANT,
            f"{SETTINGS.references_min - 1} references",
        ),
        (
            lambda c: setattr(
                c, "references", [*c.references, *c.references][: SETTINGS.references_max + 1]
            ),
            RejectionReason.INVARIANT,
            f"{SETTINGS.references_max + 1} references",
        ),
        (
            lambda c: setattr(c.references[2], "text", c.references[0].text.upper()),
            RejectionReason.INVARIANT,
            "two references have the same text",
        ),
    ],
)
def test_a_candidate_out_of_the_rules_is_refused_with_its_reason(
    candidate: QueryCandidateDraft, change, reason: RejectionReason, words: str
) -> None:
    change(candidate)
    found = problem(check_candidate(candidate, SETTINGS))
    assert found.reason == reason and found.detail.startswith(words), found


def _days_from_query(candidate: QueryCandidateDraft, days: int) -> str:
    return (dt.date.fromisoformat(candidate.query_date) + dt.timedelta(days=days)).isoformat()


def test_a_reference_valid_until_before_its_own_date_is_refused(
    candidate: QueryCandidateDraft,
) -> None:
    ref = candidate.references[0]
    ref.date = _days_from_query(candidate, -30)
    ref.valid_until = _days_from_query(candidate, -31)
    found = problem(check_candidate(candidate, SETTINGS))
    assert found.reason == RejectionReason.INVARIANT and "before its own date" in found.detail
    ref.valid_until = ref.date  # valid on its own date only: stale by the query, not malformed
    assert problem(check_candidate(candidate, SETTINGS)).reason == RejectionReason.STALE


def test_a_reference_that_expired_before_the_query_is_stale(candidate: QueryCandidateDraft) -> None:
    ref = candidate.references[0]
    query_date = dt.date.fromisoformat(candidate.query_date)
    ref.valid_until = (query_date - dt.timedelta(days=1)).isoformat()
    if dt.date.fromisoformat(ref.date) > query_date - dt.timedelta(days=1):
        ref.date = (query_date - dt.timedelta(days=2)).isoformat()
    found = problem(check_candidate(candidate, SETTINGS))
    assert found.reason == RejectionReason.STALE
    assert "reference 0" in found.detail


def test_a_reference_still_valid_on_the_query_date_passes(candidate: QueryCandidateDraft) -> None:
    candidate.references[0].valid_until = candidate.query_date
    assert isinstance(check_candidate(candidate, SETTINGS), CheckedCandidate)


def _echo(query: str) -> str:
    """A reference in the news form that repeats the query's content words."""
    return f"Asked friends for tips on {' '.join(content_words(query))}"


def test_an_echo_of_the_query_is_a_word_overlap(candidate: QueryCandidateDraft) -> None:
    candidate.references[1].text = _echo(candidate.query)
    assert (
        len(shared_content_words(candidate.query, candidate.references[1].text))
        > SETTINGS.shared_words_max
    )
    found = problem(check_candidate(candidate, SETTINGS))
    assert found.reason == RejectionReason.WORD_OVERLAP
    assert "reference 1" in found.detail


def test_the_word_overlap_limit_is_a_setting_inclusive_at_its_end(
    candidate: QueryCandidateDraft,
) -> None:
    candidate.references[1].text = _echo(candidate.query)
    loose = SETTINGS.model_copy(update={"shared_words_max": 100})
    assert isinstance(check_candidate(candidate, loose), CheckedCandidate)
    shared = len(shared_content_words(candidate.query, candidate.references[1].text))
    at_the_limit = SETTINGS.model_copy(update={"shared_words_max": shared})
    assert isinstance(check_candidate(candidate, at_the_limit), CheckedCandidate)
    below = SETTINGS.model_copy(update={"shared_words_max": shared - 1})
    assert problem(check_candidate(candidate, below)).reason == RejectionReason.WORD_OVERLAP


@pytest.mark.parametrize(
    ("mutate", "words"),
    [
        (lambda text: f"I {text[0].lower()}{text[1:]}", "first or second person"),
        (lambda text: f"The user {text[0].lower()}{text[1:]}", "names its subject"),
        (lambda text: f"{text} and will keep it up", "stated as a plan"),
        (lambda text: " ".join([text, *["again"] * SETTINGS.news_words_max]), "words; the band"),
        (lambda text: " ".join(text.split()[: SETTINGS.news_words_min - 1]), "words; the band"),
        (lambda text: f"{text}. Feels good about it", "more than one statement"),
    ],
)
def test_a_reference_out_of_the_news_form_is_refused(
    candidate: QueryCandidateDraft, mutate, words: str
) -> None:
    """Timelines put references among news written in one form; a reference out of it would
    stand out there, so the query stage refuses it."""
    candidate.references[2].text = mutate(candidate.references[2].text)
    found = problem(check_candidate(candidate, SETTINGS))
    assert found.reason == RejectionReason.INVARIANT
    assert "reference 2 is out of the news form" in found.detail and words in found.detail


def test_a_reference_keeps_its_words_without_a_closing_full_stop(
    candidate: QueryCandidateDraft,
) -> None:
    text = candidate.references[0].text
    candidate.references[0].text = f"  {text}. "
    checked = check_candidate(candidate, SETTINGS)
    assert isinstance(checked, CheckedCandidate) and checked.references[0].text == text


def test_one_close_reference_leaks_even_when_the_mean_is_low() -> None:
    cosines = np.array([0.62, 0.05, 0.04, 0.08])
    assert cosines.mean() <= SETTINGS.gamma_max
    found = check_cosines(cosines, SETTINGS)
    assert found is not None and found.reason == RejectionReason.REFERENCE_LEAK
    assert "reference 0" in found.detail
    assert check_cosines(np.array([0.45, 0.05, 0.04]), SETTINGS) is None


def test_a_high_mean_is_the_papers_similarity_rule() -> None:
    found = check_cosines(np.array([0.4, 0.35, 0.31]), SETTINGS)
    assert found is not None and found.reason == RejectionReason.SIMILARITY


def test_the_cosine_limits_are_inclusive() -> None:
    """SPEC: gamma <= gamma_max passes; so does a reference exactly at the single ceiling."""
    limits = SETTINGS.model_copy(update={"gamma_max": 0.25, "reference_cosine_max": 0.5})
    assert check_cosines(np.array([0.25, 0.25, 0.25, 0.25]), limits) is None
    above = check_cosines(np.array([0.25, 0.25, 0.25, 0.2501]), limits)
    assert above is not None and above.reason == RejectionReason.SIMILARITY
    assert check_cosines(np.array([0.5, 0.0, 0.0, 0.0]), limits) is None
    leak = check_cosines(np.array([0.5001, 0.0, 0.0, 0.0]), limits)
    assert leak is not None and leak.reason == RejectionReason.REFERENCE_LEAK


def test_a_near_copy_of_an_accepted_reference_is_refused(
    candidates: list[QueryCandidateDraft],
) -> None:
    embedder = shared_local_embedder()
    accepted = [r.text for r in candidates[0].references]
    accepted_vectors = embedder.embed_sync(accepted)
    copy = accepted[0].rstrip(".") + " again"
    texts = [copy, candidates[1].references[0].text]
    found = conflicting_reference(
        texts, embedder.embed_sync(texts), accepted, accepted_vectors, SETTINGS
    )
    assert found is not None and found.reason in {
        RejectionReason.NEAR_DUPLICATE,
        RejectionReason.CONTRADICTION,
    }
    assert "reference 0" in found.detail
    distinct = [r.text for r in candidates[1].references]
    assert (
        conflicting_reference(
            distinct, embedder.embed_sync(distinct), accepted, accepted_vectors, SETTINGS
        )
        is None
    )


def test_a_changed_value_is_a_contradiction() -> None:
    december = "Bought a standard class rail pass valid until the end of December"
    april = "Bought a standard class rail pass valid until the end of April"
    assert changes_a_value(december, april)
    assert not changes_a_value(december, december)
    assert not changes_a_value(december, "Was told by an allergist to cut out tree nuts")
    settings = SETTINGS.model_copy(
        update={"duplicate_cosine": 1.01}
    )  # isolate the contradiction rule
    embedder = shared_local_embedder()
    found = conflicting_reference(
        [april], embedder.embed_sync([april]), [december], embedder.embed_sync([december]), settings
    )
    assert found is not None and found.reason == RejectionReason.CONTRADICTION


@pytest.mark.parametrize(
    ("left", "right", "changed"),
    [
        # three content words alike, one swapped: the least that still reads as one statement
        ("Booked swimming lessons on Tuesday", "Booked swimming lessons on Friday", True),
        ("Owns a red bike", "Owns a blue bike", False),  # two alike: too little to be the same
        # a word only added is more detail, not a changed value
        (
            "Booked weekly swimming lessons on Tuesday",
            "Booked weekly swimming lessons on Tuesday evenings",
            False,
        ),
        # at most three words differ in all (two and one); two and two is another statement
        (
            "Booked weekly swimming lessons on Tuesday mornings",
            "Booked weekly swimming lessons on Friday",
            True,
        ),
        (
            "Booked weekly swimming lessons on Tuesday mornings",
            "Booked weekly swimming lessons on Friday evenings",
            False,
        ),
    ],
)
def test_a_changed_value_is_one_or_two_words_swapped_in_a_shared_statement(
    left: str, right: str, changed: bool
) -> None:
    assert changes_a_value(left, right) is changed
    assert changes_a_value(right, left) is changed


def test_a_reference_judged_irrelevant_is_refused_with_the_judges_reason() -> None:
    answer = RelevanceAnswer(
        verdicts=[
            RelevanceVerdict(
                index=0, relevant=True, rationale="Limits where the dinner can be booked."
            ),
            RelevanceVerdict(
                index=1, relevant=False, rationale="Solo outings do not affect a flight booking."
            ),
        ]
    )
    found = check_relevance(answer, 2)
    assert isinstance(found, CandidateProblem) and found.reason == RejectionReason.IRRELEVANT
    assert "reference 1" in found.detail and "Solo outings" in found.detail
    kept = check_relevance(RelevanceAnswer(verdicts=answer.verdicts[:1]), 1)
    assert kept == ["Limits where the dinner can be booked."]


def test_a_missing_verdict_counts_as_not_relevant() -> None:
    answer = RelevanceAnswer(verdicts=[RelevanceVerdict(index=0, relevant=True, rationale="ok")])
    found = check_relevance(answer, 2)
    assert isinstance(found, CandidateProblem) and found.reason == RejectionReason.IRRELEVANT
