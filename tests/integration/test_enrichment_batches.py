"""The pipeline works through a large call a batch at a time against the real
graph: the next batch is embedded while the last is linked and written, and
memories of one call in different batches still find each other."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta

import pytest

from services.core.adapters.embedders import PlaceholderEmbedder
from services.core.adapters.spacy_entities import SpacyEntityExtractor
from services.core.domain.model import EventKind, MemoryEvent
from services.core.domain.times import to_micros
from services.enrich.pipeline import EnrichmentPipeline, EnrichmentPolicy
from tests.factories import memory_at

pytestmark = pytest.mark.integration

TENANT = "acme"


class RecordingEmbedder:
    """The placeholder embedding, noting when each call starts."""

    def __init__(self, log: list[str]):
        self._inner = PlaceholderEmbedder(384)
        self.dimension = self._inner.dimension
        self.name = self._inner.name
        self.sizes: list[int] = []
        self._log = log

    async def embed(self, texts):
        self.sizes.append(len(texts))
        self._log.append(f"embed {len(self.sizes)}")
        return await self._inner.embed(texts)


class NoNeighbours:
    """Recall's index is empty: only the memories of the same call can be neighbours."""

    async def neighbours(self, tenant, queries, *, limit, min_score):
        return [[] for _ in queries]

    async def close(self):
        pass


class AcceptingRelay:
    async def submit(self, events):
        return True


class NotedGraph:
    """The real graph store, noting each write of enrichment's fields and
    failing the links of one batch on request."""

    def __init__(self, graph, log: list[str], fail_linking_call: int | None = None):
        self._graph = graph
        self._log = log
        self._fail = fail_linking_call
        self._linked = 0
        self._applied = 0

    def __getattr__(self, name):
        return getattr(self._graph, name)

    async def link_preceding(self, *args, **kwargs):
        self._linked += 1
        if self._linked == self._fail:
            raise ConnectionError("FalkorDB went away")
        return await self._graph.link_preceding(*args, **kwargs)

    async def apply_enrichment(self, *args, **kwargs):
        self._applied += 1
        done = await self._graph.apply_enrichment(*args, **kwargs)
        self._log.append(f"applied {self._applied}")
        return done


def policy(batch_size: int) -> EnrichmentPolicy:
    return EnrichmentPolicy(
        temporal_window=timedelta(hours=24),
        temporal_limit=3,
        similarity_limit=5,
        similarity_threshold=0.6,
        supports_threshold=0.92,
        pattern_min_members=3,
        pattern_max_members=50,
        conflict_retries=3,
        batch_size=batch_size,
    )


async def store_memories(graph, count: int) -> list[str]:
    start = datetime.now(UTC) - timedelta(minutes=10)
    memories = []
    for i in range(count):
        at = start + timedelta(seconds=i)
        memories.append(
            memory_at(
                f"m{i:02d}",
                at,
                tenant=TENANT,
                content=f"The billing service moved its nightly jobs to Kafka, step {i}",
                confidence=0.8,
            )
        )
    events = [MemoryEvent.for_memory(EventKind.CREATED, m, m.recorded_at) for m in memories]
    await graph.writer.create_memories(memories, events, now_us=to_micros(datetime.now(UTC)))
    return [m.id for m in memories]


def pipeline_on(store, embedder, batch_size: int) -> EnrichmentPipeline:
    return EnrichmentPipeline(
        store=store,
        embedder=embedder,
        extractor=SpacyEntityExtractor.blank_english(),
        neighbours=NoNeighbours(),
        relay=AcceptingRelay(),
        policy=policy(batch_size),
    )


async def similar_edges(graph) -> set[tuple[str, str]]:
    result = await graph.connection.query("MATCH (a:Memory)-[:SIMILAR_TO]->(b:Memory) RETURN a.id, b.id")
    return {(a, b) for a, b in result.result_set}


async def test_a_large_call_goes_a_batch_at_a_time_embedding_the_next_while_the_last_is_written(graph):
    ids = await store_memories(graph, 10)
    log: list[str] = []
    embedder = RecordingEmbedder(log)
    pipeline = pipeline_on(NotedGraph(graph.enrichment, log), embedder, batch_size=4)

    written = await pipeline.enrich_ids(TENANT, list(reversed(ids)))

    assert written == ids
    assert embedder.sizes == [4, 4, 2]
    # The second batch was embedded before the first one's fields were written.
    assert log.index("embed 2") < log.index("applied 1")
    assert log.index("embed 3") < log.index("applied 2")
    memories = await graph.reader.get_memories(TENANT, ids)
    assert all(m.enriched_at is not None and m.embedding is not None for m in memories.values())
    # Nothing was in the index: links across batches come from comparing the memories of the call.
    edges = await similar_edges(graph)
    assert ("m09", "m00") in edges or any(a == "m09" and b < "m04" for a, b in edges)
    assert all(a > b for a, b in edges)  # each memory links to earlier ones only


async def test_in_batch_neighbours_do_not_depend_on_the_batch_size(graph):
    ids = await store_memories(graph, 9)
    edges = []
    for size in (100, 100, 2):  # the first run stores the vectors the other two compare
        await graph.connection.query("MATCH ()-[e:SIMILAR_TO]->() DELETE e")
        await pipeline_on(graph.enrichment, PlaceholderEmbedder(384), batch_size=size).enrich_ids(
            TENANT, ids, forced=True
        )
        edges.append(await similar_edges(graph))
    assert edges[1] and edges[2] == edges[1]


async def test_a_failing_batch_fails_the_call_after_the_batches_before_it_are_written(graph):
    ids = await store_memories(graph, 6)
    log: list[str] = []
    pipeline = pipeline_on(NotedGraph(graph.enrichment, log, fail_linking_call=2), RecordingEmbedder(log), batch_size=3)

    with pytest.raises(ConnectionError):
        await pipeline.enrich_ids(TENANT, ids)
    await asyncio.sleep(0)

    memories = await graph.reader.get_memories(TENANT, ids)
    assert sorted(m.id for m in memories.values() if m.enriched_at is not None) == ids[:3]
