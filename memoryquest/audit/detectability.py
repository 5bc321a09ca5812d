"""Can reference turns be told apart from filler by their surface? Two measurements.

A benchmark whose reference turns carry a tell (a fixed phrase, a different
style) can be solved by spotting the tell instead of remembering the user, so
the audit looks for tells two ways:

* **exclusive n-grams** — word n-grams (stop-words kept: tells are made of
  them) found in reference exchanges and in no filler exchange. An n-gram
  found in a single reference exchange is content (that reference's own
  words), not a tell, and is ignored; the rest are ranked by the share of
  reference exchanges they cover.
* **a cross-user classifier** — TF-IDF (word 1-2 grams) and a class-balanced
  logistic regression, trained on some users and scored (ROC AUC) on others,
  so what it learns is a generator habit, not one persona's topics. The same
  split scores structural features (where a reference sits, how long its
  session is; :mod:`memoryquest.audit.structure`), and every row's
  out-of-fold score is kept for the per-item filter (:mod:`memoryquest.audit.filtering`).
"""

from __future__ import annotations

import random
from collections import Counter
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np
from pydantic import BaseModel, Field

from memoryquest.audit.material import Exchange
from memoryquest.text import words

TOP_NGRAMS = 20
"""Exclusive n-grams listed in the report."""

NEGATIVES_PER_GROUP = 300
"""The classifier keeps every positive but at most this many negatives per user (seeded draw).

ROC AUC does not depend on the class ratio, so the cap only bounds the run
time: the offline 30-user dataset has ~22k user turns and ~11k facts, and
with the cap each material fits on ~11k texts (about a second for five folds).
"""

LEANS_ON_TERMS = 6
"""Terms listed as what the classifier leans on."""

MAX_FOLDS = 5
MIN_TRAIN_DF = 2
MIN_MARKER_EXCHANGES = 3
"""An n-gram must recur in this many reference exchanges to count: two chance matches in a tiny
dataset (2 of 12 is 17%) are not a marker; in any dataset of 30+ reference turns the share
threshold is the stricter rule."""

Material = Literal["user_turns", "assistant_turns", "facts"]


class NgramShare(BaseModel):
    ngram: str
    units: int = Field(description="Reference exchanges containing the n-gram.")
    share: float = Field(description="units / all reference exchanges.")


class ExclusiveNgrams(BaseModel):
    reference_units: int
    filler_units: int
    max_share: float
    top: list[NgramShare] = Field(
        description="Highest shares first; windows of a phrase already listed with the same count are left out."
    )


class ClassifierScore(BaseModel):
    material: str = Field(
        description="What was classified: user_turns, assistant_turns or facts (text), or a structural"
        " feature set (structure_turns, structure_sessions, structure_<feature>)."
    )
    auc: float | None = Field(
        description="Mean ROC AUC over the folds that hold both classes; null when none does."
    )
    scheme: str = Field(description="How train and test were split.")
    folds: int
    positives: int
    negatives: int = Field(description="After the per-user cap.")
    within_user: bool = Field(
        description="True when the dataset has one user, so train and test share it."
    )
    leans_on: list[str] = Field(
        default_factory=list,
        description=(
            "Word 1-2 grams the classifier, fit on every user, weighs most towards references,"
            " strongest first: what gives them away when the AUC is high. Empty when not measured."
        ),
    )


# --------------------------------------------------------------------------- exclusive n-grams


def _grams(text: str, n_min: int, n_max: int) -> Iterator[tuple[str, ...]]:
    """Every word n-gram of ``text`` for n in [n_min, n_max] (tuples built by ``zip``: this is the hot loop)."""
    tokens = words(text)
    for n in range(n_min, n_max + 1):
        yield from zip(*(tokens[k:] for k in range(n)), strict=False)


def _absorb(cover: tuple[str, ...], gram: tuple[str, ...]) -> tuple[str, ...] | None:
    """``cover`` extended by ``gram`` when ``gram`` lies inside it or overlaps an end by two words or more; else None."""
    n = len(gram)
    if any(cover[i : i + n] == gram for i in range(len(cover) - n + 1)):
        return cover
    for m in range(min(n, len(cover)) - 1, 1, -1):
        if cover[-m:] == gram[:m]:
            return cover + gram[m:]
        if gram[-m:] == cover[:m]:
            return gram[:-m] + cover
    return None


def _distinct_phrases(
    ranked: Sequence[tuple[tuple[str, ...], int]], top: int
) -> list[tuple[tuple[str, ...], int]]:
    """The first ``top`` n-grams, skipping windows of a phrase already listed with the same count.

    A fixed phrase longer than the longest n-gram shows up as many
    overlapping windows of equal count; each listed n-gram keeps a growing
    cover of the phrase it stands for, and windows falling in it are skipped.
    """
    kept: list[tuple[tuple[str, ...], int]] = []
    covers: list[tuple[str, ...]] = []
    for gram, count in ranked:
        if len(kept) >= top:
            break
        for number, (_, listed_count) in enumerate(kept):
            grown = _absorb(covers[number], gram) if listed_count == count else None
            if grown is not None:
                covers[number] = grown
                break
        else:
            kept.append((gram, count))
            covers.append(gram)
    return kept


def exclusive_ngrams(
    units: Sequence[Exchange], n_min: int, n_max: int, top: int = TOP_NGRAMS
) -> ExclusiveNgrams:
    """N-grams of reference exchanges absent from every filler exchange, by share of reference exchanges."""
    reference = [u for u in units if u.reference]
    filler = [u for u in units if not u.reference]
    counts: Counter[tuple[str, ...]] = Counter()
    for unit in reference:
        counts.update({*_grams(unit.user, n_min, n_max), *_grams(unit.assistant, n_min, n_max)})
    alive = {gram for gram, count in counts.items() if count >= MIN_MARKER_EXCHANGES}
    for unit in filler:
        if not alive:
            break
        alive.difference_update(_grams(unit.user, n_min, n_max))
        alive.difference_update(_grams(unit.assistant, n_min, n_max))
    candidates = {gram: counts[gram] for gram in alive}
    ranked = sorted(candidates.items(), key=lambda item: (-item[1], -len(item[0]), item[0]))
    kept = _distinct_phrases(ranked, top)
    total = len(reference)
    listed = [NgramShare(ngram=" ".join(g), units=c, share=c / total) for g, c in kept]
    return ExclusiveNgrams(
        reference_units=total,
        filler_units=len(filler),
        max_share=listed[0].share if listed else 0.0,
        top=listed,
    )


# --------------------------------------------------------------------------- classifier


def load_classifier() -> None:
    """Import scikit-learn's pieces now (about 1.5 s) rather than at the first classifier."""
    import sklearn.feature_extraction.text  # noqa: F401
    import sklearn.linear_model  # noqa: F401
    import sklearn.metrics  # noqa: F401
    import sklearn.model_selection  # noqa: F401


def _capped(labels: Sequence[bool], groups: Sequence[str], cap: int, seed: int) -> list[int]:
    """Indices kept: every positive, and at most ``cap`` negatives per group (seeded)."""
    rng = random.Random(seed)
    negatives: dict[str, list[int]] = {}
    kept = [i for i, label in enumerate(labels) if label]
    for i, label in enumerate(labels):
        if not label:
            negatives.setdefault(groups[i], []).append(i)
    for group in sorted(negatives):
        members = negatives[group]
        kept.extend(members if len(members) <= cap else rng.sample(members, cap))
    return sorted(kept)


@dataclass(frozen=True)
class OutOfFold:
    """Every kept row's decision score from a model that never saw its user (same index order)."""

    rows: np.ndarray = field(repr=False)  # indices into the caller's sequences (after the cap)
    labels: np.ndarray = field(repr=False)
    folds: np.ndarray = field(repr=False)  # the fold each row was scored in; -1 when not scored
    scores: np.ndarray = field(repr=False)


@dataclass(frozen=True)
class GroupedSplit:
    """The rows a classifier is fitted on and how they fall into folds (:func:`grouped_split`).

    Every classifier of a material with the same labels and groups uses the
    same split, so their scores are comparable and their out-of-fold scores
    line up row for row.
    """

    keep: list[int]  # indices into the caller's sequences (after the cap)
    y: np.ndarray = field(repr=False)
    g: np.ndarray = field(repr=False)
    folds: int
    scheme: str
    within_user: bool
    seed: int  # the cap's sample and the models' random state

    @property
    def measurable(self) -> bool:
        return self.folds >= 2 and bool(self.y.any()) and bool((~self.y).any())

    def score(self, material: str, aucs: Sequence[float], leans_on: list[str]) -> ClassifierScore:
        """The score of ``material`` from the AUCs of its folds (None without any)."""
        return ClassifierScore(
            material=material,
            auc=float(np.mean(aucs)) if aucs else None,
            scheme=self.scheme,
            folds=len(aucs),
            positives=int(self.y.sum()),
            negatives=int((~self.y).sum()),
            within_user=self.within_user,
            leans_on=leans_on,
        )


def grouped_split(
    labels: Sequence[bool],
    groups: Sequence[str],
    *,
    within_user: bool,
    seed: int,
    negatives_per_group: int = NEGATIVES_PER_GROUP,
) -> GroupedSplit:
    """Every positive row and at most ``negatives_per_group`` negatives per group (seeded), in
    grouped folds.

    ``groups`` are users (or, for a one-user dataset, halves of that user's
    history): no group is ever on both sides of a split. Five folds at most;
    with five users or fewer each fold leaves one user out.
    """
    keep = _capped(labels, groups, negatives_per_group, seed)
    y = np.array([bool(labels[i]) for i in keep], dtype=bool)
    g = np.array([groups[i] for i in keep])
    n_groups = len(set(g.tolist()))
    folds = min(MAX_FOLDS, n_groups)
    if within_user:
        scheme = "within-user: one user, history split into early and late halves"
    elif folds == n_groups:
        scheme = f"leave-one-user-out ({n_groups} users)"
    else:
        scheme = f"group k-fold by user ({folds} folds, {n_groups} users)"
    return GroupedSplit(keep, y, g, folds, scheme, within_user, seed)


FitScore = Callable[[Any, np.ndarray, np.ndarray, np.ndarray], np.ndarray]
"""(features, labels, train rows, test rows) -> decision scores of the test rows."""


def _cross_validate(
    split: GroupedSplit, features: Any, fit_score: FitScore
) -> tuple[list[float], OutOfFold]:
    """Grouped k-fold: the AUC of each fold that holds both classes, and every row's out-of-fold score."""
    from sklearn.metrics import roc_auc_score
    from sklearn.model_selection import GroupKFold

    y = split.y
    scores = np.zeros(len(y))
    fold_of = np.full(len(y), -1)
    aucs: list[float] = []
    for number, (train, test) in enumerate(
        GroupKFold(n_splits=split.folds).split(np.zeros(len(y)), y, split.g)
    ):
        if len(set(y[train].tolist())) < 2:
            continue
        scores[test] = fit_score(features, y, train, test)
        fold_of[test] = number
        if len(set(y[test].tolist())) == 2:
            aucs.append(float(roc_auc_score(y[test], scores[test])))
    return aucs, OutOfFold(np.array(split.keep, dtype=int), y, fold_of, scores)


def _unmeasured(material: str, split: GroupedSplit) -> tuple[ClassifierScore, None]:
    return split.score(material, [], []), None


def _fit_text(
    counts: Any, y: np.ndarray, rows: np.ndarray, seed: int
) -> tuple[Any, Any, np.ndarray]:
    """TF-IDF and a class-balanced logistic regression fit on ``rows``; (tfidf, model, columns kept).

    Terms found in fewer than two of those texts are dropped and idf comes
    from those rows only.
    """
    from sklearn.feature_extraction.text import TfidfTransformer
    from sklearn.linear_model import LogisticRegression

    fit_counts = counts[rows]
    columns = np.flatnonzero(np.asarray((fit_counts > 0).sum(axis=0)).ravel() >= MIN_TRAIN_DF)
    tfidf = TfidfTransformer(sublinear_tf=True)
    # The dual problem is ~10x faster here (far more n-gram features than texts), same AUC.
    model = LogisticRegression(
        class_weight="balanced", solver="liblinear", dual=True, random_state=seed
    )
    model.fit(tfidf.fit_transform(fit_counts[:, columns]), y[rows])
    return tfidf, model, columns


def _text_leans_on(counts: Any, vocabulary: np.ndarray, y: np.ndarray, seed: int) -> list[str]:
    """The terms with the largest positive weights in a fit on every row (only those that occur in a reference)."""
    _, model, columns = _fit_text(counts, y, np.arange(len(y)), seed)
    weights = np.asarray(model.coef_).ravel()
    in_positive = np.asarray((counts[y][:, columns] > 0).sum(axis=0)).ravel() > 0
    order = [i for i in np.argsort(-weights, kind="stable") if weights[i] > 0 and in_positive[i]]
    return [str(vocabulary[columns[i]]) for i in order[:LEANS_ON_TERMS]]


def text_classifier(
    material: str,
    texts: Sequence[str],
    split: GroupedSplit,
) -> tuple[ClassifierScore, OutOfFold | None]:
    """Cross-validated ROC AUC, over ``split``'s folds, of TF-IDF + logistic regression separating
    positives from negatives, and the out-of-fold score of every row kept (None when not
    measurable)."""
    from sklearn.feature_extraction.text import CountVectorizer

    if not split.measurable:
        return _unmeasured(material, split)
    # Word 1-2 gram counts, tokenised once for all folds (vocabulary only; no label is looked at).
    vectorizer = CountVectorizer(
        tokenizer=words, lowercase=False, token_pattern=None, ngram_range=(1, 2)
    )
    counts = vectorizer.fit_transform([texts[i] for i in split.keep])

    def fit_score(x: Any, y: np.ndarray, train: np.ndarray, test: np.ndarray) -> np.ndarray:
        tfidf, model, columns = _fit_text(x, y, train, split.seed)
        return np.asarray(model.decision_function(tfidf.transform(x[test][:, columns])))

    aucs, out_of_fold = _cross_validate(split, counts, fit_score)
    leans_on = (
        _text_leans_on(counts, vectorizer.get_feature_names_out(), split.y, split.seed)
        if aucs
        else []
    )
    return split.score(material, aucs, leans_on), out_of_fold


# --------------------------------------------------------------------------- structure classifier


def structure_classifier(
    material: str,
    features: Sequence[Mapping[str, object]],
    split: GroupedSplit,
) -> tuple[ClassifierScore, OutOfFold | None]:
    """Like :func:`text_classifier`, on categorical features (every value its own indicator).

    Each value of each feature gets its own weight, so a tell need not be
    monotone (the reference always in the middle turn is found as surely as
    always in the last); what it leans on reads ``feature=value``.
    """
    from sklearn.linear_model import LogisticRegression
    from sklearn.preprocessing import OneHotEncoder

    if not split.measurable:
        return _unmeasured(material, split)
    names = sorted({name for row in features for name in row})
    table = [[str(features[i].get(name, "")) for name in names] for i in split.keep]
    # Every value seen is a column (no label is looked at); one unseen in training weighs nothing.
    encoder = OneHotEncoder(handle_unknown="ignore", feature_name_combiner=_value_name)
    matrix = encoder.fit_transform(np.array(table, dtype=object).reshape(len(table), len(names)))

    def fit(x: Any, y: np.ndarray, rows: np.ndarray) -> Any:
        model = LogisticRegression(
            class_weight="balanced", solver="liblinear", random_state=split.seed
        )
        return model.fit(x[rows], y[rows])

    def fit_score(x: Any, y: np.ndarray, train: np.ndarray, test: np.ndarray) -> np.ndarray:
        return np.asarray(fit(x, y, train).decision_function(x[test]))

    aucs, out_of_fold = _cross_validate(split, matrix, fit_score)
    leans_on: list[str] = []
    if aucs:
        weights = np.asarray(fit(matrix, split.y, np.arange(len(split.y))).coef_).ravel()
        columns = encoder.get_feature_names_out(names)
        order = [i for i in np.argsort(-weights, kind="stable") if weights[i] > 0]
        leans_on = [str(columns[i]) for i in order[:LEANS_ON_TERMS]]
    return split.score(material, aucs, leans_on), out_of_fold


def _value_name(feature: str, value: object) -> str:
    return f"{feature}={value}"


# --------------------------------------------------------------------------- embedding classifier

EXAMPLES_LISTED = 3
"""Reference texts listed as what an embedding classifier leans on."""


def embedding_classifier(
    material: str,
    texts: Sequence[str],
    vectors: np.ndarray,
    split: GroupedSplit,
) -> tuple[ClassifierScore, OutOfFold | None]:
    """Like :func:`text_classifier`, on sentence embeddings (``vectors``, one row per text).

    An embedding has no terms to name, so what it leans on lists the
    reference texts it scores highest out of fold: what the classifier found
    the references to have in common, in their own words.
    """
    from sklearn.linear_model import LogisticRegression

    if not split.measurable:
        return _unmeasured(material, split)
    matrix = np.asarray(vectors)[split.keep]

    def fit_score(x: Any, y: np.ndarray, train: np.ndarray, test: np.ndarray) -> np.ndarray:
        model = LogisticRegression(class_weight="balanced", max_iter=2000, random_state=split.seed)
        return np.asarray(model.fit(x[train], y[train]).decision_function(x[test]))

    aucs, out_of_fold = _cross_validate(split, matrix, fit_score)
    scored = np.flatnonzero(split.y & (out_of_fold.folds >= 0))
    top = scored[np.argsort(-out_of_fold.scores[scored], kind="stable")]
    leans_on = list(dict.fromkeys(texts[split.keep[i]] for i in top))[:EXAMPLES_LISTED]
    return split.score(material, aucs, leans_on if aucs else []), out_of_fold
