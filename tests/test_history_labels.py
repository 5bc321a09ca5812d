"""The history a system under test reads says nothing of which session carries a reference.

A generated dataset (simulator + local embedder, four bundled users) is written as
``generate`` writes it; features are taken from the ``history`` rows' non-text columns
only (date, session id, place in the user's history) and the dates of the user's
``queries`` (also readable), and out-of-fold classifiers,
grouped by user, try to tell the sessions that carry a reference from the others. The
same scorer, given a history with a tell planted in one of those columns, finds it.
"""

from __future__ import annotations

import bisect
import datetime as dt
import json
from collections import Counter
from pathlib import Path

import numpy as np
import pytest

from memoryquest.contracts import HistorySession, QueryRequest
from memoryquest.dataset import ReadableDataset
from memoryquest.ids import make_id

try:
    from tests.generation_fixture import USERS, generated
except ModuleNotFoundError:  # tests/ is not a package: pytest puts it on sys.path
    from generation_fixture import USERS, generated

AUC_MAX = 0.55
USERS_FOR_AUC = (*USERS, "user5", "user8")


def features(history: list[HistorySession], queries: list[QueryRequest]) -> np.ndarray:
    """One row per session, in the order given: everything but the turns' text, and where the
    session falls among its user's query dates."""
    by_user: dict[str, list[int]] = {}
    for index, row in enumerate(history):
        by_user.setdefault(row.persona_id, []).append(index)
    query_days: dict[str, list[int]] = {}
    for query in queries:
        query_days.setdefault(query.persona_id, []).append(query.query_date.toordinal())
    table = np.zeros((len(history), 15 + 16))
    for persona_id, indices in by_user.items():
        asked = sorted(query_days.get(persona_id, []))
        days = [history[i].date.toordinal() for i in indices]
        first, last = min(days), max(days)
        same_day = Counter(days)
        for place, (index, day) in enumerate(zip(indices, days, strict=True)):
            row = history[index]
            after = bisect.bisect_right(asked, day)  # queries asked on or before the day
            table[index] = [
                after,
                asked[after] - day if after < len(asked) else 999,
                asked[after + 1] - day if after + 1 < len(asked) else 999,
                day - asked[after - 1] if after else 999,
                day,
                (day - first) / max(1, last - first),
                row.date.weekday(),
                row.date.month,
                row.date.day,
                place,
                place / len(indices),
                same_day[day],
                day - days[place - 1] if place else 0,
                days[place + 1] - day if place + 1 < len(days) else 0,
                int(row.session_id[2:], 16) / 16**16,
                *(int(digit, 16) for digit in row.session_id[2:]),
            ]
    return table


def out_of_fold_aucs(
    history: list[HistorySession], queries: list[QueryRequest], carries: dict[str, bool]
) -> dict[str, float]:
    """ROC AUC of a logistic regression and a random forest, out of fold, grouped by user."""
    from sklearn.ensemble import RandomForestClassifier
    from sklearn.linear_model import LogisticRegression
    from sklearn.metrics import roc_auc_score
    from sklearn.model_selection import GroupKFold, cross_val_predict
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    x = features(history, queries)
    y = np.array([carries[row.session_id] for row in history])
    groups = np.array([row.persona_id for row in history])
    folds = GroupKFold(n_splits=len(set(groups)))
    classifiers = {
        "logistic": make_pipeline(
            StandardScaler(), LogisticRegression(max_iter=2000, class_weight="balanced")
        ),
        "forest": RandomForestClassifier(n_estimators=300, min_samples_leaf=5, random_state=0),
    }
    return {
        name: float(
            roc_auc_score(
                y,
                cross_val_predict(model, x, y, groups=groups, cv=folds, method="predict_proba")[
                    :, 1
                ],
            )
        )
        for name, model in classifiers.items()
    }


@pytest.fixture(scope="module")
def written(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The dataset as ``generate`` writes it."""
    return generated(USERS_FOR_AUC).dataset.save(tmp_path_factory.mktemp("history") / "dataset")


@pytest.fixture(scope="module")
def readable(written: Path) -> ReadableDataset:
    return ReadableDataset.load(written)


@pytest.fixture(scope="module")
def history(readable: ReadableDataset) -> list[HistorySession]:
    return readable.history


@pytest.fixture(scope="module")
def carries(written: Path) -> dict[str, bool]:
    lines = (written / "session_labels.jsonl").read_text(encoding="utf-8").splitlines()
    return {row["session_id"]: row["reference_id"] is not None for row in map(json.loads, lines)}


@pytest.mark.slow
def test_no_non_text_column_of_the_history_predicts_a_reference(
    readable: ReadableDataset, history: list[HistorySession], carries: dict[str, bool]
) -> None:
    labels = [carries[row.session_id] for row in history]
    assert len({row.persona_id for row in history}) == len(USERS_FOR_AUC)
    assert 0.2 < sum(labels) / len(labels) < 0.8, "too few of one kind to measure anything"
    aucs = out_of_fold_aucs(history, readable.queries, carries)
    assert all(auc <= AUC_MAX for auc in aucs.values()), aucs


@pytest.mark.slow
@pytest.mark.parametrize("column", ["session_id", "date"])
def test_the_scorer_finds_a_tell_planted_in_a_column(
    readable: ReadableDataset, history: list[HistorySession], carries: dict[str, bool], column: str
) -> None:
    """The check above can fail: a label hidden in the ids or the dates is found."""
    planted: list[HistorySession] = []
    for row in history:
        if column == "session_id":
            salt = 0
            session_id = row.session_id
            while (int(session_id[2], 16) < 8) != carries[row.session_id]:
                salt += 1
                session_id = make_id("session", row.session_id, salt)
            planted.append(row.model_copy(update={"session_id": session_id}))
            carries = carries | {session_id: carries[row.session_id]}
        else:  # references told on a weekend, everything else on a weekday
            weekday = row.date.weekday()
            shift = 0
            if carries[row.session_id] and weekday < 5:
                shift = 5 - weekday  # to Saturday
            elif not carries[row.session_id] and weekday >= 5:
                shift = 7 - weekday  # to Monday
            planted.append(row.model_copy(update={"date": row.date + dt.timedelta(days=shift)}))
    planted.sort(key=lambda row: (row.persona_id, row.date, row.session_id))
    aucs = out_of_fold_aucs(planted, readable.queries, carries)
    assert max(aucs.values()) > 0.7, aucs


@pytest.mark.slow
def test_session_ids_are_not_the_event_recipe_of_a_public_query_id(
    readable: ReadableDataset, history: list[HistorySession]
) -> None:
    """Event ids derive from query ids and a position; a session id that derived from the event
    id alone would let a system under test map the history to the public queries."""
    queries = readable.queries
    recomputed = {
        make_id("session", make_id("event", query.query_id, index))
        for query in queries
        for index in range(12)
    }
    assert queries and history
    assert not recomputed & {row.session_id for row in history}
