"""The projector on the real graph and the in-process vector index, for the
lifecycle's event kinds: archived and restored re-project (the payload's
lifecycle follows the record), deleted drops the point, decayed and
clustered change nothing a point holds and are skipped."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime

import pytest

from services.core.domain.delivery import Delivery, Outcome
from services.core.domain.model import EventKind, MemoryEvent
from services.core.domain.projection import VectorQuery
from services.recall.projector import Projector
from tests.factories import memory_at
from tests.fakes import nearest

pytestmark = pytest.mark.integration

T0 = datetime(2025, 3, 1, tzinfo=UTC)
AXIS = [1.0, 0.0, 0.0, 0.0]


def delivery(kind: EventKind, memory_id: str, version: int = 1) -> Delivery:
    event = MemoryEvent(f"{memory_id}:{kind}:{version}", "default", kind, memory_id, version, T0, has_embedding=True)
    return Delivery(event, 1)


async def test_the_lifecycle_kinds_move_the_point_and_the_consolidation_ones_leave_it(graph, index):
    memory = memory_at(str(uuid.uuid4()), T0, embedding=AXIS)
    await graph.writer.create_memories([memory], [MemoryEvent.for_memory(EventKind.CREATED, memory, T0)], now_us=1)
    projector = Projector(lookup=graph.reader, vectors=index)

    async def payload() -> dict | None:
        hits = await nearest(index, VectorQuery(vector=AXIS, tenant="default", limit=5), with_payload=True)
        return next((h.payload for h in hits if h.id == memory.id), None)

    assert await projector.handle([delivery(EventKind.CREATED, memory.id)]) == [Outcome.DONE]
    assert (await payload())["lifecycle"] == "active"

    await graph.connection.query("MATCH (m:Memory {id: $id}) SET m.archived = true, m.version = 2", {"id": memory.id})
    # decayed and clustered are skipped: the point stays as it was (still active) ...
    skipped = await projector.handle([delivery(EventKind.DECAYED, memory.id), delivery(EventKind.CLUSTERED, memory.id)])
    assert skipped == [Outcome.SKIP, Outcome.SKIP] and (await payload())["lifecycle"] == "active"
    # ... archived re-reads the record: its point's lifecycle is archived, which no search returns.
    assert await projector.handle([delivery(EventKind.ARCHIVED, memory.id, 2)]) == [Outcome.DONE]
    assert await payload() is None and await index.count() == 1

    await graph.connection.query("MATCH (m:Memory {id: $id}) SET m.archived = false, m.version = 3", {"id": memory.id})
    assert await projector.handle([delivery(EventKind.RESTORED, memory.id, 3)]) == [Outcome.DONE]
    assert (await payload())["lifecycle"] == "active" and (await payload())["version"] == 3

    await graph.connection.query("MATCH (m:Memory {id: $id}) DETACH DELETE m", {"id": memory.id})
    assert await projector.handle([delivery(EventKind.DELETED, memory.id, 4)]) == [Outcome.DONE]
    assert await payload() is None and await index.count() == 0
