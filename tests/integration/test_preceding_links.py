"""PRECEDED_BY from one read per batch gives the same edges as a look-up per
memory: in order, out of order, across the window's edge, and for memories
whose predecessors lie deeper than the batch read reaches."""

from __future__ import annotations

import random
from datetime import UTC, datetime, timedelta

import pytest

from services.core.domain.model import EventKind, Memory, MemoryEvent
from services.core.domain.times import to_micros
from services.core.wiring import graph_store
from tests.factories import memory_at

pytestmark = pytest.mark.integration

TENANT = "acme"
WINDOW = timedelta(hours=24)


def memory(i: int, at: datetime, tenant: str = TENANT) -> Memory:
    return memory_at(f"{tenant}-m{i:03d}", at, tenant=tenant, content=f"note {i}")


async def edges(store) -> set[tuple[str, str]]:
    result = await store.connection.query("MATCH (a:Memory)-[:PRECEDED_BY]->(b:Memory) RETURN a.id, b.id")
    return {(a, b) for a, b in result.result_set}


@pytest.mark.parametrize("seed", [1, 2, 3])
async def test_one_read_per_batch_links_like_a_look_up_per_memory(settings, seed):
    rng = random.Random(seed)
    start = datetime(2026, 1, 10, tzinfo=UTC)
    # Distinct times over three days (so some lie beyond the window), and a second tenant interleaved.
    offsets = rng.sample(range(3 * 24 * 3600), 120)
    memories = [memory(i, start + timedelta(seconds=s)) for i, s in enumerate(offsets)]
    memories += [memory(i, start + timedelta(seconds=s + 1), "other") for i, s in enumerate(offsets[:40])]
    batches = [rng.sample(memories[:120], 20), memories[100:120], memories[:5]]
    now = to_micros(datetime.now(UTC))
    stores = [
        graph_store(
            settings.graph.model_copy(update={"falkordb_graph": f"{settings.graph.falkordb_graph}_{name}"}),
            settings.process,
        )
        for name in ("batch", "each")
    ]
    try:
        for store in stores:
            await store.lifecycle.ensure_schema()
            events = [MemoryEvent.for_memory(EventKind.CREATED, m, m.recorded_at) for m in memories]
            await store.writer.create_memories(memories, events, now_us=now)
        window_us = int(WINDOW / timedelta(microseconds=1))
        for batch in batches:
            items = [(m.id, to_micros(m.timestamp)) for m in batch]
            counts = [
                await stores[0].enrichment.link_preceding(TENANT, items, window_us=window_us, limit=3, now_us=now),
                await stores[1].enrichment._link_preceding_each(
                    TENANT, items, window_us=window_us, limit=3, now_us=now
                ),
            ]
            assert counts[0] == counts[1]
        found = [await edges(store) for store in stores]
        assert found[0] == found[1] and found[0]
        assert all(a.startswith(TENANT) and b.startswith(TENANT) for a, b in found[0])
    finally:
        for store in stores:
            await store.connection.query("MATCH (n) DETACH DELETE n")
            await store.lifecycle.close()
