"""Recall's cache of query embeddings (services/recall/vector_arm.py): what
it returns, how many queries it keeps, and how much memory they take."""

from __future__ import annotations

import gc
import struct
import tracemalloc

from services.core.adapters.embedders import PlaceholderEmbedder
from services.recall.vector_arm import QueryEmbeddings

DIMENSION = 384


class CountingEmbedder(PlaceholderEmbedder):
    """The placeholder embedding, counting the texts it is asked to embed."""

    def __init__(self, dimension: int):
        super().__init__(dimension)
        self.embedded: list[str] = []

    async def embed(self, texts: list[str]) -> list[list[float]]:
        self.embedded += texts
        return await super().embed(texts)


def as_float32(vector: list[float]) -> list[float]:
    return list(struct.unpack(f"{len(vector)}f", struct.pack(f"{len(vector)}f", *vector)))


async def test_a_cached_query_is_not_embedded_again_and_gets_the_same_vector():
    embedder = CountingEmbedder(DIMENSION)
    cache = QueryEmbeddings(embedder, size=8)
    first = await cache.vectors(("postgres deploy", "redis cache"))
    again = await cache.vectors(("redis cache", "postgres deploy"))
    assert embedder.embedded == ["postgres deploy", "redis cache"]
    assert again == [first[1], first[0]]
    # The index holds float32, so the cache does too; the first answer is already the cached value.
    expected = await PlaceholderEmbedder(DIMENSION).embed(["postgres deploy"])
    assert first[0] == as_float32(expected[0])
    assert all(isinstance(value, float) for value in first[0])


async def test_the_cache_keeps_the_most_recent_queries_up_to_its_size():
    embedder = CountingEmbedder(16)
    cache = QueryEmbeddings(embedder, size=3)
    for text in ("a", "b", "c", "a", "d"):  # "a" used again, so "b" is the oldest when "d" comes
        await cache.vectors((text,))
    embedder.embedded.clear()
    await cache.vectors(("a", "c", "d"))
    assert embedder.embedded == []
    await cache.vectors(("b",))
    assert embedder.embedded == ["b"]


async def test_a_recall_of_more_queries_than_the_cache_holds_gets_every_vector():
    embedder = CountingEmbedder(16)
    cache = QueryEmbeddings(embedder, size=1)
    vectors = await cache.vectors(("one", "two", "one", "three"))
    assert len(vectors) == 4 and vectors[0] == vectors[2]
    assert embedder.embedded == ["one", "two", "three"]


async def test_a_full_cache_holds_its_vectors_packed():
    """A 384-dimensional vector as a list of Python floats is about 12 KiB;
    the cache keeps it as float32 (1.5 KiB), so RECALL_QUERY_CACHE_SIZE
    queries stay a couple of MiB, not the soak's slow climb of 13."""
    size = 512
    cache = QueryEmbeddings(PlaceholderEmbedder(DIMENSION), size=size)
    texts = [f"query number {i} about deploys" for i in range(size)]
    gc.collect()
    tracemalloc.start()
    try:
        before, _ = tracemalloc.get_traced_memory()
        for start in range(0, size, 32):
            await cache.vectors(tuple(texts[start : start + 32]))
        gc.collect()
        after, _ = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    per_query = (after - before) / size
    assert per_query < 2.5 * 1024, f"{per_query:.0f} bytes a cached query"
