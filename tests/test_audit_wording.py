"""News items as said: the sentence that says each, the clause it explains least, and the
embedding classifier that reads those clauses (on the local embedder)."""

from __future__ import annotations

import asyncio
import functools

import numpy as np

from memoryquest.audit.detectability import embedding_classifier, grouped_split
from memoryquest.audit.wording import added_clause, news_units, said_sentence
from memoryquest.dataset import GeneratedDataset
from memoryquest.pipeline import generate_dataset
from memoryquest.settings import GenerationSettings, PGRSettings, Settings

try:
    from tests.generation_fixture import load_users, simulated_client
except ModuleNotFoundError:  # tests/ is not a package: pytest puts it on sys.path
    from generation_fixture import load_users, simulated_client

NEWS = "Is pet-sitting a friend's cat until February 21, so long days out need a sitter"


def test_the_sentence_that_says_a_news_item_is_the_one_using_most_of_its_words() -> None:
    sentences = [
        "Can you check Thursday instead?",
        "Well, my friend's cat is staying with me while I pet-sit till February 21.",
        "My cat needs feeding.",
    ]
    assert said_sentence(NEWS, sentences) == sentences[1]
    assert said_sentence(NEWS, ["Can you check Thursday instead?"]) is None


def test_the_added_clause_is_the_one_the_news_item_explains_least() -> None:
    said = (
        "Well, my friend's cat is staying with me while I pet-sit till February 21, so long days "
        "out need a sitter, and that will matter for what I arrange next spring."
    )
    assert added_clause(said, NEWS) == "and that will matter for what I arrange next spring."
    # a lead-in is not a clause; a sentence of one clause is its own added clause
    plain = "Oh, my friend's cat is staying with me till February 21"
    assert added_clause(plain, NEWS) == plain


@functools.cache
def _one_user() -> GeneratedDataset:
    settings = Settings(
        generation=GenerationSettings(
            queries_per_user=3, candidates_per_user=9, judge_relevance=False
        ),
        pgr=PGRSettings(methods=["query_only"], judges=["provenance"], budget_baselines=[]),
    )
    return asyncio.run(generate_dataset(load_users("user0"), simulated_client(), settings))


def test_every_standing_reference_is_found_as_a_news_item_once() -> None:
    dataset = _one_user()
    texts = {r.reference_id: r.text for q in dataset.queries for r in q.references}
    units = news_units(dataset.sessions, dataset.timelines, texts, set(texts))
    found = [u.reference_id for u in units if u.reference_id is not None]
    assert sorted(found) == sorted(texts)
    # filler news items are units too, each clause a part of its sentence
    assert len(units) > 3 * len(found)
    assert all(u.clause in u.sentence for u in units)
    # a withdrawn query's reference is an ordinary news item
    withdrawn = next(iter(texts))
    again = news_units(dataset.sessions, dataset.timelines, texts, set(texts) - {withdrawn})
    assert withdrawn not in {u.reference_id for u in again} and len(again) == len(units)


def test_an_embedding_direction_shared_by_references_across_users_is_learned() -> None:
    rng = np.random.default_rng(0)
    users = [f"u{i}" for i in range(6)]
    groups = [u for u in users for _ in range(60)]
    labels = [i % 6 == 0 for i in range(len(groups))]
    vectors = rng.normal(size=(len(groups), 16))
    texts = [f"text {i}" for i in range(len(groups))]
    score, _ = embedding_classifier(
        "news_wording", texts, vectors, grouped_split(labels, groups, within_user=False, seed=0)
    )
    assert score.auc is not None and 0.35 < score.auc < 0.65
    vectors[np.array(labels), 3] += 3.0  # every reference leans one way
    score, out_of_fold = embedding_classifier(
        "news_wording", texts, vectors, grouped_split(labels, groups, within_user=False, seed=0)
    )
    assert score.auc is not None and score.auc > 0.95 and score.folds == 5
    assert out_of_fold is not None and (out_of_fold.folds >= 0).all()
    assert len(score.leans_on) == 3 and all(texts.index(t) % 6 == 0 for t in score.leans_on)
