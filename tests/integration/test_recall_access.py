"""Recall records the access of what it returns (last_accessed) after the
answer, batched: never updated_at, version or an event."""

from __future__ import annotations

import asyncio
import uuid
from datetime import UTC, datetime

import pytest

from services.core.domain.model import EventKind, MemoryEvent
from services.core.domain.times import to_micros
from services.recall.access import AccessRecorder
from tests.factories import memory_at
from tests.fakes import outbox_size
from tests.integration import recall_parts

pytestmark = pytest.mark.integration

T0 = datetime(2026, 5, 1, tzinfo=UTC)
LATER = datetime(2026, 6, 1, tzinfo=UTC)


def uid(i: int) -> str:
    return str(uuid.uuid5(uuid.NAMESPACE_URL, f"recall-access/{i}"))


async def test_recall_bumps_last_accessed_after_the_answer_and_nothing_else(graph, index, settings):
    contents = ["lighthouse keeper rota", "lighthouse lamp oil", "unrelated grocery list"]
    memories = [
        memory_at(uid(i), T0, content=c, tags=["startup"], tag_prefixes=["startup"]) for i, c in enumerate(contents)
    ]
    await graph.writer.create_memories(
        memories, [MemoryEvent.for_memory(EventKind.CREATED, m, T0) for m in memories], now_us=1
    )
    outbox = await outbox_size(graph.outbox)
    recorder = AccessRecorder(
        graph.reader.touch_memories, flush_seconds=0.2, batch_size=100, clock_us=lambda: to_micros(LATER)
    )
    handlers = recall_parts.ranked(
        graph, index, settings.recall.policy(settings.limits), clock=lambda: LATER, access=recorder
    )
    listings = recall_parts.listings(
        graph, settings.recall.policy(settings.limits), clock=lambda: LATER, access=recorder
    )
    recorder.start()
    try:
        outcome = await handlers.search(handlers.request("default", queries=["lighthouse"], limit=5))
        returned = {c.id for c in outcome.results}
        assert returned == {uid(0), uid(1)}
        # The answer did not wait for the write.
        assert {m.last_accessed for m in (await graph.reader.get_memories("default", list(returned))).values()} == {T0}
        for _ in range(100):
            if recorder.flushes:
                break
            await asyncio.sleep(0.02)
        after = await graph.reader.get_memories("default", [uid(0), uid(1), uid(2)])
        assert [after[uid(i)].last_accessed for i in range(3)] == [LATER, LATER, T0]
        assert {(m.updated_at, m.version) for m in after.values()} == {(T0, 1)}
        assert await outbox_size(graph.outbox) == outbox  # no event: nothing re-projected or re-enriched

        # Startup recall's answer counts as an access too; stop writes what waits.
        found = await listings.startup("default", ["startup"], limit=10)
        assert uid(2) in {c.id for c in found.results}
    finally:
        await recorder.stop()
    assert (await graph.reader.get_memory("default", uid(2))).last_accessed == LATER
