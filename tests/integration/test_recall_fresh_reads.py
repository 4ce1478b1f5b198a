"""A recall waits for the vector of a memory stored just before it
(services/recall/fresh_reads.py), over the real graph, the in-process
vector index and recall's projector: the memory shares no word with the
query, so only its vector finds it. Without the wait, the recall answers
before the vector is in and misses it."""

from __future__ import annotations

import asyncio
import uuid
from dataclasses import replace
from datetime import UTC, datetime

import pytest

from services.core.domain.delivery import Delivery
from services.core.domain.fresh_vectors import FreshPolicy
from services.core.domain.model import EventKind, MemoryEvent
from services.core.domain.times import to_micros
from services.recall.fresh_reads import FreshReads
from services.recall.projector import Projector
from services.recall.vector_arm import VectorArm
from tests.factories import memory_at
from tests.integration import recall_parts

pytestmark = pytest.mark.integration

NOW = datetime(2026, 6, 1, tzinfo=UTC)
QUERY = "which instrument did she take up"
AXIS = [1.0, 0.0, 0.0, 0.0]
#: How long "enrichment" takes to embed the memory after the recall begins.
EMBED_SECONDS = 0.3


class AxisEmbedder:
    dimension = 4
    name = "test:axis"

    async def embed(self, texts: list[str]) -> list[list[float]]:
        return [AXIS for _ in texts]


def delivery(kind: EventKind, memory, has_embedding: bool) -> Delivery:
    event = MemoryEvent.for_memory(kind, memory, NOW)
    return Delivery(replace(event, has_embedding=has_embedding), 1)


async def store_then_recall(graph, index, settings, fresh: FreshReads | None):
    """Store a memory without a vector, ask at once, and embed it while the recall runs."""
    memory = memory_at(str(uuid.uuid4()), NOW, tenant="acme", content="Started violin lessons last week")
    await graph.writer.create_memories([memory], [MemoryEvent.for_memory(EventKind.CREATED, memory, NOW)], now_us=1)
    projector = Projector(lookup=graph.reader, vectors=index, fresh=fresh)
    await projector.handle([delivery(EventKind.CREATED, memory, has_embedding=False)])
    vector = VectorArm(vectors=index, embedder=AxisEmbedder())
    recall = recall_parts.ranked(graph, index, settings.recall.policy(settings.limits), vector=vector, fresh=fresh)

    async def enrichment() -> None:
        await asyncio.sleep(EMBED_SECONDS)
        read = (await graph.reader.get_memories("acme", [memory.id]))[memory.id]
        event = MemoryEvent.for_memory(EventKind.EMBEDDED, read, NOW)
        await graph.enrichment.record_embeddings(
            "acme", [(read, AXIS, AxisEmbedder.name)], [event], now_us=to_micros(NOW)
        )
        await projector.handle([delivery(EventKind.EMBEDDED, read, has_embedding=True)])

    embedding = asyncio.ensure_future(enrichment())
    outcome = await recall.search(recall.request("acme", query=QUERY, limit=5, state_debug=True))
    await embedding
    return memory, outcome


def policy(wait_seconds: float) -> FreshPolicy:
    return FreshPolicy(wait_seconds=wait_seconds, stall_seconds=10, max_awaited=100, capacity=1000, expire_seconds=60)


async def test_a_recall_finds_by_vector_what_was_stored_just_before_it(graph, index, settings):
    memory, outcome = await store_then_recall(graph, index, settings, FreshReads(policy(3.0)))
    assert [c.id for c in outcome.results] == [memory.id]
    assert outcome.results[0].components["vector"] == pytest.approx(1.0, abs=1e-4)
    fresh = outcome.debug["fresh"]
    assert fresh["awaited"] == 1 and fresh["left"] == 0
    assert EMBED_SECONDS * 1000 * 0.8 <= fresh["waited_ms"] < 3000  # woken by the arrival, not the bound


async def test_without_the_wait_the_recall_answers_before_the_vector_is_in(graph, index, settings):
    _, outcome = await store_then_recall(graph, index, settings, None)
    assert outcome.results == [] and "fresh" not in outcome.debug


async def test_a_vector_that_never_comes_costs_the_bound_and_is_reported(graph, index, settings):
    fresh = FreshReads(policy(0.2))
    memory = memory_at(str(uuid.uuid4()), NOW, tenant="acme", content="Started violin lessons last week")
    await graph.writer.create_memories([memory], [MemoryEvent.for_memory(EventKind.CREATED, memory, NOW)], now_us=1)
    await Projector(lookup=graph.reader, vectors=index, fresh=fresh).handle(
        [delivery(EventKind.CREATED, memory, has_embedding=False)]
    )
    vector = VectorArm(vectors=index, embedder=AxisEmbedder())
    recall = recall_parts.ranked(graph, index, settings.recall.policy(settings.limits), vector=vector, fresh=fresh)
    outcome = await recall.search(recall.request("acme", query=QUERY, limit=5))
    assert outcome.results == []
    assert outcome.debug["fresh"]["left"] == 1 and outcome.debug["fresh"]["waited_ms"] >= 200
    # A deleted memory is awaited no longer.
    await graph.connection.query("MATCH (m:Memory {id: $id}) DETACH DELETE m", {"id": memory.id})
    gone = MemoryEvent.for_memory(EventKind.DELETED, memory, NOW)
    await Projector(lookup=graph.reader, vectors=index, fresh=fresh).handle([Delivery(gone, 1)])
    again = await recall.search(recall.request("acme", query=QUERY, limit=5))
    assert "fresh" not in again.debug
