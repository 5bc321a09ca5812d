"""The local embedder: repeated texts are computed once and come back bit-identical; waiting requests share model runs."""

from __future__ import annotations

import threading
import time

import numpy as np
import pytest

from memoryquest.llm.factory import shared_local_embedder
from memoryquest.llm.local_embedder import RUN_COST_IN_TOKENS, LocalEmbedder, length_batches

TEXTS = [
    "Strained left knee while running; sees a physiotherapist weekly",
    "Signed up for a Saturday pottery class on Queen Street",
    "Prefers an aisle seat on flights",
    "Has a stack of Air Canada miles that expire in May",
]


@pytest.fixture(scope="module")
def cold() -> LocalEmbedder:
    """A second model without memo: what the memoised one must reproduce exactly."""
    return LocalEmbedder(memo_size=0)


def test_memoised_vectors_equal_fresh_ones_whatever_the_batch(cold: LocalEmbedder) -> None:
    embedder = shared_local_embedder()
    embedder.clear_memo()
    first, first_tokens = embedder._embed(TEXTS[:2])
    computed = embedder.texts_computed
    again, again_tokens = embedder._embed([TEXTS[1], *TEXTS, TEXTS[0]])
    assert embedder.texts_computed - computed == 2  # only the two texts not seen before
    fresh, fresh_tokens = cold._embed([TEXTS[1], *TEXTS, TEXTS[0]])
    assert np.array_equal(again, fresh)
    assert np.array_equal(again[1:3], first)
    assert again_tokens == fresh_tokens  # memo hits still count their word pieces
    assert first_tokens == cold._embed(TEXTS[:2])[1]


def test_duplicates_within_one_call_are_computed_once(cold: LocalEmbedder) -> None:
    embedder = shared_local_embedder()
    embedder.clear_memo()
    computed = embedder.texts_computed
    vectors, tokens = embedder._embed([TEXTS[2], TEXTS[2], TEXTS[2]])
    assert embedder.texts_computed - computed == 1
    single, single_tokens = cold._embed([TEXTS[2]])
    assert tokens == 3 * single_tokens
    assert all(np.array_equal(row, single[0]) for row in vectors)


def test_the_memo_is_bounded_and_forgets_the_least_recently_used() -> None:
    embedder = LocalEmbedder(memo_size=2)
    embedder.embed_sync(TEXTS[:2])
    embedder.embed_sync([TEXTS[0]])  # TEXTS[0] is now the most recent
    embedder.embed_sync([TEXTS[2]])  # evicts TEXTS[1]
    computed = embedder.texts_computed
    embedder.embed_sync([TEXTS[0], TEXTS[2]])
    assert embedder.texts_computed == computed
    embedder.embed_sync([TEXTS[1]])
    assert embedder.texts_computed == computed + 1


def test_memo_off_recomputes_every_time(cold: LocalEmbedder) -> None:
    computed = cold.texts_computed
    cold.embed_sync(TEXTS[:1])
    cold.embed_sync(TEXTS[:1])
    assert cold.texts_computed - computed == 2 and cold.memo_hits == 0


def test_a_negative_memo_size_is_rejected() -> None:
    with pytest.raises(ValueError, match="memo_size"):
        LocalEmbedder(memo_size=-1)


def test_empty_input_gives_an_empty_matrix() -> None:
    vectors, tokens = shared_local_embedder()._embed([])
    assert vectors.shape == (0, 384) and tokens == 0


def test_requests_that_wait_for_the_model_share_its_next_run(cold: LocalEmbedder) -> None:
    """While one long request runs, five small ones queue up and go to the model together."""
    embedder = LocalEmbedder()
    long_request = [f"{TEXTS[i % len(TEXTS)]}, note {i}" for i in range(400)]
    small_requests = [[f"{text}, small request {n}" for text in TEXTS[:3]] for n in range(5)]
    results: dict[int, np.ndarray] = {}

    def embed(key: int, texts: list[str]) -> None:
        results[key] = embedder.embed_sync(texts)

    first = threading.Thread(target=embed, args=(-1, long_request))
    first.start()
    deadline = time.monotonic() + 30
    while embedder.model_runs == 0 and time.monotonic() < deadline:
        time.sleep(0.001)
    waiting = [
        threading.Thread(target=embed, args=(n, texts)) for n, texts in enumerate(small_requests)
    ]
    for thread in waiting:
        thread.start()
    for thread in [first, *waiting]:
        thread.join(timeout=120)
    assert embedder.model_runs == 2
    assert embedder.texts_computed == 400 + 15
    for n, texts in enumerate(small_requests):
        assert np.array_equal(results[n], cold.embed_sync(texts))


def test_a_failed_run_fails_its_requests_and_leaves_nothing_queued() -> None:
    embedder = LocalEmbedder()
    with pytest.raises(TypeError):
        embedder.embed_sync([TEXTS[0], None])  # type: ignore[list-item]
    assert embedder.texts_computed == 0
    vectors = embedder.embed_sync([TEXTS[0]])  # the text that shared the failed run is asked again
    assert vectors.shape == (1, 384) and embedder.texts_computed == 1


def test_a_text_gets_the_same_vector_in_a_run_of_other_lengths_as_alone(
    cold: LocalEmbedder,
) -> None:
    """Runs are cut by length, so a text is padded differently depending on its company."""
    texts = [*TEXTS, "Ok.", " ".join(TEXTS), TEXTS[0] + " (again, at greater length)"]
    together, together_tokens = cold._embed(texts)
    alone = [cold._embed([text]) for text in texts]
    assert np.array_equal(together, np.concatenate([vectors for vectors, _ in alone]))
    assert together_tokens == sum(tokens for _, tokens in alone)


def test_length_batches_cover_every_text_once_within_the_limits() -> None:
    lengths = [12, 7, 40, 7, 9, 300, 12, 11, 8, 33, 7, 7, 60, 10] * 5
    runs = length_batches(lengths, most_texts=8, most_tokens=128)
    assert sorted(i for run in runs for i in run) == list(range(len(lengths)))
    for run in runs:
        longest = max(lengths[i] for i in run)
        assert len(run) <= 8
        assert len(run) == 1 or len(run) * longest <= 128


def test_length_batches_cut_where_padding_costs_more_than_a_run() -> None:
    long = 5 * RUN_COST_IN_TOKENS
    # Four short texts padded to the long one would cost 4 × (long - 5) more word pieces
    # than a run of their own.
    assert sorted(map(sorted, length_batches([5, long, 5, 5, 5], 32, 512))) == [[0, 2, 3, 4], [1]]
    # Two lengths a piece apart: one run, the padding (one piece) is cheaper than a run.
    assert length_batches([10, 11, 10], 32, 512) == [[0, 2, 1]]
    assert length_batches([], 32, 512) == []
