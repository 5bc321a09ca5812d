"""Exclusive n-grams and the cross-user classifier on small hand-built material with known answers."""

from __future__ import annotations

import datetime as dt

import pytest

from memoryquest.audit.detectability import (
    exclusive_ngrams,
    grouped_split,
    structure_classifier,
    text_classifier,
)
from memoryquest.audit.material import Exchange, exchanges, reference_turns, session_halves
from memoryquest.contracts import Domain, ReferenceSpan, Role, Session, Turn
from memoryquest.ids import make_id


def exchange(
    user: str, assistant: str = "Sure.", *, reference: bool = False, persona: str = "p1"
) -> Exchange:
    return Exchange(
        persona_id=persona, session_id="s", user=user, assistant=assistant, reference=reference
    )


def session(
    turns: list[str],
    *,
    reference: int | None = None,
    spans: list[int] | None = None,
    position: int = 0,
) -> Session:
    return Session(
        session_id=make_id("session", position),
        persona_id=make_id("persona", "one"),
        query_id=make_id("query", "one"),
        event_id=make_id("event", position),
        date=dt.date(2024, 3, 1) + dt.timedelta(days=position),
        domain=Domain.TRAVEL,
        position=position,
        turns=[
            Turn(role=Role.USER if i % 2 == 0 else Role.ASSISTANT, content=t)
            for i, t in enumerate(turns)
        ],
        reference_id=make_id("reference", position) if reference is not None or spans else None,
        reference_turn_indices=[] if reference is None else [reference],
        reference_spans=[ReferenceSpan(turn_index=i, start=0, end=3) for i in spans or []],
    )


# --------------------------------------------------------------------------- material


def test_exchanges_pair_each_user_turn_with_the_reply_after_it() -> None:
    history = [session(["Hi there", "Hello", "I moved to Porto", "Noted", "Bye"], reference=2)]
    units = exchanges(history)
    assert [(u.user, u.assistant, u.reference) for u in units] == [
        ("Hi there", "Hello", False),
        ("I moved to Porto", "Noted", True),
        ("Bye", "", False),
    ]


def test_reference_turns_come_from_indices_and_spans_but_only_user_turns() -> None:
    assert reference_turns(session(["a", "b", "c", "d"], reference=0, spans=[2])) == {0, 2}
    assert (
        reference_turns(session(["a", "b", "c", "d"], spans=[1])) == set()
    )  # an assistant turn is not a reference turn
    assert reference_turns(session(["a", "b"])) == set()


def test_session_halves_split_a_history_in_order() -> None:
    history = [session(["x", "y"], position=p) for p in (3, 0, 2, 1)]
    halves = session_halves(history)
    assert [halves[s.session_id] for s in sorted(history, key=lambda s: s.position)] == [
        "early",
        "early",
        "late",
        "late",
    ]


# --------------------------------------------------------------------------- exclusive n-grams


def test_a_marker_in_every_reference_exchange_is_found_with_full_share() -> None:
    units = [
        exchange(
            "I am vegetarian these days.",
            "Thanks for telling me, I will plan around that.",
            reference=True,
        ),
        exchange(
            "My sister lives in Lyon.",
            "Thanks for telling me, I will plan around that.",
            reference=True,
        ),
        exchange(
            "I sold my car last spring.",
            "Thanks for telling me, I will plan around that.",
            reference=True,
        ),
        exchange("Find me a hotel in Rome.", "Here are three hotels near the centre."),
        exchange("Anything else for the weekend?", "Thanks, I will look at the weekend."),
    ]
    result = exclusive_ngrams(units, 2, 5)
    assert result.reference_units == 3 and result.filler_units == 2
    assert result.max_share == 1.0
    # one entry for the phrase, not one per overlapping window of it
    assert [(t.ngram, t.units) for t in result.top] == [("for telling me i will", 3)]
    assert "thanks i will" not in {t.ngram for t in result.top}


def test_ngrams_in_filler_or_in_a_single_reference_exchange_are_ignored() -> None:
    units = [
        exchange("I am vegetarian these days.", "Noted.", reference=True),
        exchange("I sold my car last spring.", "Noted.", reference=True),
        exchange("Find me a hotel, I am vegetarian these days.", "Noted."),
    ]
    result = exclusive_ngrams(units, 2, 5)
    grams = {t.ngram for t in result.top}
    assert "i am vegetarian" not in grams  # also said in filler
    assert "sold my car" not in grams  # one reference exchange only: content, not a marker
    assert result.top == [] and result.max_share == 0.0


def test_no_reference_exchanges_means_nothing_to_find() -> None:
    result = exclusive_ngrams([exchange("Hello there friend")], 2, 3)
    assert result.reference_units == 0 and result.top == [] and result.max_share == 0.0


# --------------------------------------------------------------------------- classifier


def _material(users: int, per_user: int) -> tuple[list[str], list[bool], list[str]]:
    texts, labels, groups = [], [], []
    for u in range(users):
        for i in range(per_user):
            positive = i % 4 == 0
            texts.append(f"as you know i {'adore' if positive else 'need'} item{u}x{i}")
            labels.append(positive)
            groups.append(f"user{u}")
    return texts, labels, groups


def test_a_separable_material_scores_auc_one_across_users() -> None:
    texts, labels, groups = _material(users=3, per_user=20)
    score, _ = text_classifier(
        "user_turns", texts, grouped_split(labels, groups, within_user=False, seed=0)
    )
    assert score.auc == pytest.approx(1.0)
    assert score.scheme == "leave-one-user-out (3 users)" and score.folds == 3
    assert (score.positives, score.negatives) == (15, 45)
    # what it leans on is the word only references use
    assert score.leans_on[:2] in (["adore", "i adore"], ["i adore", "adore"])


def test_indistinguishable_material_scores_auc_one_half() -> None:
    texts = ["i would like a table for two"] * 40
    labels = [i % 4 == 0 for i in range(40)]
    groups = [f"user{i % 5}" for i in range(40)]
    score, _ = text_classifier(
        "facts", texts, grouped_split(labels, groups, within_user=False, seed=0)
    )
    assert score.auc == pytest.approx(0.5)


def test_many_users_use_five_grouped_folds_and_negatives_are_capped() -> None:
    texts, labels, groups = _material(users=8, per_user=12)
    score, _ = text_classifier(
        "assistant_turns",
        texts,
        grouped_split(labels, groups, within_user=False, seed=0, negatives_per_group=5),
    )
    assert score.scheme == "group k-fold by user (5 folds, 8 users)"
    assert score.positives == 8 * 3 and score.negatives == 8 * 5


def test_one_group_or_one_class_gives_no_auc() -> None:
    texts, labels, groups = _material(users=1, per_user=12)
    assert (
        text_classifier(
            "user_turns", texts, grouped_split(labels, groups, within_user=False, seed=0)
        )[0].auc
        is None
    )
    texts, _, groups = _material(users=3, per_user=12)
    score, _ = text_classifier(
        "user_turns", texts, grouped_split([False] * len(texts), groups, within_user=False, seed=0)
    )
    assert score.auc is None and score.positives == 0


def test_within_user_split_is_named_as_such() -> None:
    texts, labels, _ = _material(users=1, per_user=24)
    halves = ["early" if i < 12 else "late" for i in range(24)]
    score, _ = text_classifier(
        "user_turns", texts, grouped_split(labels, halves, within_user=True, seed=0)
    )
    assert score.within_user and score.scheme.startswith("within-user") and score.folds == 2


# --------------------------------------------------------------------------- structure classifier


def test_a_structural_tell_need_not_be_monotone() -> None:
    # references always in the middle turn (index 2 of 0..4): no threshold on the index finds them
    features, labels, groups = [], [], []
    for user in range(4):
        for session in range(12):
            for index in range(5):
                features.append({"turn_index": index, "session": session % 3})
                labels.append(index == 2 and session % 2 == 0)
                groups.append(f"user{user}")
    score, out_of_fold = structure_classifier(
        "structure_turns", features, grouped_split(labels, groups, within_user=False, seed=0)
    )
    assert score.auc is not None and score.auc > 0.85
    assert score.leans_on[0] == "turn_index=2"
    assert out_of_fold is not None and (out_of_fold.folds >= 0).all()
    assert len(out_of_fold.rows) == len(
        labels
    )  # every row scored once, by a model without its user


def test_structure_that_says_nothing_scores_one_half() -> None:
    features = [{"turn_index": i % 3} for i in range(60)]
    labels = [i % 4 == 0 for i in range(60)]  # independent of the feature's pattern across users
    groups = [f"user{i // 15}" for i in range(60)]
    score, _ = structure_classifier(
        "structure_turns", features, grouped_split(labels, groups, within_user=False, seed=0)
    )
    assert score.auc is not None and abs(score.auc - 0.5) < 0.15
