"""φ(x; M, Θ) over the memory as of the query date: visibility, top-K, τ, ties, batching."""

from __future__ import annotations

import datetime as dt

import numpy as np
import pytest

from memoryquest.contracts import FactType
from memoryquest.ids import make_id
from memoryquest.llm.client import ModelClient
from memoryquest.llm.factory import shared_local_embedder
from memoryquest.llm.local_embedder import LocalEmbedder
from memoryquest.llm.simulated import SimulatedChatBackend
from memoryquest.pgr.retrieval import IndexCache, MemoryIndex, Retriever
from memoryquest.pgr.sample import make_fact

PID = make_id("persona", "retrieval-test")
QUERY_DATE = dt.date(2024, 4, 10)
BEFORE, AFTER = dt.date(2024, 3, 1), dt.date(2024, 5, 1)


class CountingEmbedder:
    """The real local model, recording every request the client sends it."""

    remote = False
    base_url: str | None = None

    def __init__(self, inner: LocalEmbedder) -> None:
        self.inner = inner
        self.name = inner.name
        self.dimension = inner.dimension
        self.requests: list[list[str]] = []

    async def embed(self, texts: list[str]) -> np.ndarray:
        self.requests.append(list(texts))
        return await self.inner.embed(texts)


@pytest.fixture(scope="module")
def local() -> LocalEmbedder:
    return shared_local_embedder()


@pytest.fixture
def embedder(local: LocalEmbedder) -> CountingEmbedder:
    return CountingEmbedder(local)


@pytest.fixture
def client(embedder: CountingEmbedder) -> ModelClient:
    return ModelClient(SimulatedChatBackend(), embedder)


def facts():
    return [
        make_fact(
            PID,
            "knee",
            [
                (BEFORE, "Strained left knee while running; sees a physiotherapist weekly"),
                (AFTER, "Left knee has fully healed and he runs again"),
            ],
        ),
        make_fact(
            PID, "pottery", [(AFTER, "Signed up for a Saturday pottery class on Queen Street")]
        ),
        make_fact(
            PID, "bus", [(BEFORE, "Sold his car and takes the bus or streetcar around Toronto")]
        ),
        make_fact(
            PID,
            "budget",
            [(BEFORE, "Keeps discretionary spending under 200 dollars a month")],
            type=FactType.GOAL,
        ),
        make_fact(PID, "twin-a", [(BEFORE, "Enjoys reading science fiction in the evening")]),
        make_fact(PID, "twin-b", [(BEFORE, "Enjoys reading science fiction in the evening")]),
        make_fact(
            make_id("persona", "someone-else"),
            "other",
            [(BEFORE, "Signed up for a Saturday pottery class")],
        ),
    ]


async def test_fact_learnt_after_the_query_date_is_never_retrieved(client: ModelClient) -> None:
    index = await IndexCache().get(PID, QUERY_DATE, facts(), client)
    pottery = make_id("fact", PID, "pottery")
    assert pottery not in {item.fid for item in index.items}
    # Even its exact wording, with no similarity floor and room for everything, does not reach it.
    hits = await Retriever(index, client).retrieve(
        ["Signed up for a Saturday pottery class on Queen Street"], k=100, tau=-1.0
    )
    assert pottery not in {h.fid for h in hits[0]}
    assert (
        len(hits[0]) == len(index) == 5
    )  # the other persona's facts are not in this memory either


async def test_updated_fact_shows_the_revision_visible_on_the_query_date(
    client: ModelClient,
) -> None:
    index = await IndexCache().get(PID, QUERY_DATE, facts(), client)
    knee = index.item(make_id("fact", PID, "knee"))
    assert knee.info.startswith("Strained left knee")
    assert knee.date == BEFORE
    later = await IndexCache().get(PID, AFTER, facts(), client)
    assert later.item(knee.fid).info == "Left knee has fully healed and he runs again"
    # The vector is that of the visible text: the pre-date wording scores (almost) exactly 1.
    hits = await Retriever(index, client).retrieve([knee.info], k=1, tau=0.0)
    assert hits[0][0].fid == knee.fid and hits[0][0].score == pytest.approx(1.0, abs=1e-4)


async def test_top_k_threshold_and_ties_broken_by_fid(client: ModelClient) -> None:
    index = await IndexCache().get(PID, QUERY_DATE, facts(), client)
    retriever = Retriever(index, client)
    (hits,) = await retriever.retrieve(
        ["Enjoys reading science fiction in the evening"], k=2, tau=0.3
    )
    twins = sorted([make_id("fact", PID, "twin-a"), make_id("fact", PID, "twin-b")])
    assert [h.fid for h in hits] == twins  # identical texts tie; the smaller fid comes first
    assert hits[0].score == hits[1].score
    (everything,) = await retriever.retrieve(
        ["Enjoys reading science fiction in the evening"], k=10, tau=-1.0
    )
    scores = [h.score for h in everything]
    assert scores == sorted(scores, reverse=True) and len(everything) == 5
    (strict,) = await retriever.retrieve(["quarterly semiconductor export tariffs"], k=10, tau=0.6)
    assert strict == []
    floor = everything[2].score
    (cut,) = await retriever.retrieve(
        ["Enjoys reading science fiction in the evening"], k=10, tau=floor
    )
    assert [h.fid for h in cut] == [h.fid for h in everything[:3]]


async def test_all_probes_of_a_phase_go_in_one_embedding_request(
    client: ModelClient, embedder: CountingEmbedder
) -> None:
    index = await IndexCache().get(PID, QUERY_DATE, facts(), client)
    embedder.requests.clear()
    retriever = Retriever(index, client)
    probes = ["how to get to the games", "how much the league costs", "whether the knee holds up"]
    results = await retriever.retrieve(probes, k=2, tau=0.0)
    assert len(results) == 3
    assert embedder.requests == [probes]
    assert retriever.embedding_requests == 1


async def test_index_cache_embeds_each_text_once(
    client: ModelClient, embedder: CountingEmbedder
) -> None:
    cache = IndexCache()
    first = await cache.get(PID, QUERY_DATE, facts(), client)
    assert (
        len(embedder.requests) == 1 and len(embedder.requests[0]) == 4
    )  # the twins share one text
    again = await cache.get(PID, QUERY_DATE, facts(), client)
    assert again is first and len(embedder.requests) == 1
    await cache.get(PID, AFTER, facts(), client)
    # Only the texts that changed or appeared after the first snapshot are embedded.
    assert embedder.requests[1] == sorted(
        [
            "Left knee has fully healed and he runs again",
            "Signed up for a Saturday pottery class on Queen Street",
        ]
    )


async def test_empty_memory_retrieves_nothing(client: ModelClient) -> None:
    index = await IndexCache().get(PID, dt.date(2020, 1, 1), facts(), client)
    assert len(index) == 0
    assert await Retriever(index, client).retrieve(["anything"], k=5, tau=0.0) == [[]]


def test_index_rejects_mismatched_vectors() -> None:
    with pytest.raises(ValueError, match="0 facts but 2 vectors"):
        MemoryIndex(PID, QUERY_DATE, (), np.zeros((2, 3), dtype=np.float32), "x")
