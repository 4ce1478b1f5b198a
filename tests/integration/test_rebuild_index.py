"""RebuildIndex's handler on the real graph and the in-process vector index:
a tenant's rebuild drops and projects that tenant's points only, counts only
its memories, and leaves the optimisation to the index's periodic one (it
holds up every tenant's searches); a rebuild of every tenant optimises."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime

import pytest

from services.core.domain.model import EventKind, MemoryEvent
from services.core.domain.projection import VectorQuery, vector_payload
from tests.factories import memory_at
from tests.fakes import nearest
from tests.integration import recall_parts

pytestmark = pytest.mark.integration

T0 = datetime(2025, 3, 1, tzinfo=UTC)
AXES = {"a": [1.0, 0.0, 0.0, 0.0], "b": [0.0, 1.0, 0.0, 0.0]}


def uid(name: str) -> str:
    """Memory ids are UUIDs (vector points are keyed by them)."""
    return str(uuid.uuid5(uuid.NAMESPACE_URL, name))


async def test_a_tenants_rebuild_touches_only_its_points(graph, settings, index, monkeypatch):
    memories = [memory_at(uid(f"{t}{n}"), T0, tenant=t, embedding=AXES[t]) for t in ("a", "b") for n in range(3)]
    memories.append(memory_at(uid("a-unembedded"), T0, tenant="a"))
    await graph.writer.create_memories(
        memories, [MemoryEvent.for_memory(EventKind.CREATED, m, T0) for m in memories], now_us=1
    )
    await index.upsert([(m.id, m.embedding, vector_payload(m)) for m in memories if m.tenant == "b"])
    await index.upsert([(uid("a-stale"), AXES["a"], vector_payload(memories[0]))])  # a point the graph no longer has
    optimised = []

    async def optimise() -> None:
        optimised.append(True)

    monkeypatch.setattr(index, "optimize", optimise)
    handlers = recall_parts.index_admin(graph, index)

    progress = [p async for p in handlers.rebuild_index(2, "a")]
    last = progress[-1]
    assert last.done and (last.indexed, last.skipped, last.total) == (3, 1, 4)
    assert optimised == []

    async def found(tenant: str) -> set[str]:
        hits = await nearest(index, VectorQuery(vector=AXES[tenant], tenant=tenant, limit=10))
        return {h.id for h in hits}

    assert await found("a") == {uid("a0"), uid("a1"), uid("a2")}  # the stale point is gone
    assert await found("b") == {uid("b0"), uid("b1"), uid("b2")}  # untouched
    assert await index.count() == 6

    everything = [p async for p in handlers.rebuild_index(500, None)][-1]
    assert (everything.indexed, everything.skipped, everything.total) == (6, 1, 7)
    assert optimised == [True]
