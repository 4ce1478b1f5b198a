"""Recall's event watch (services/core/adapters/nats_watch.py, behind
WatchMemoryEvents and GET /stream) on a real NATS server: a tenant's events
in stream order with their sequences, from a given sequence on, never another
tenant's; a gap when the stream no longer holds what was asked for; and a
watch that outlives its consumer (deleted, or the server restarted) without
missing or repeating an event; with NATS down, a new watch is refused at once."""

from __future__ import annotations

import asyncio
import uuid
from datetime import UTC, datetime

import pytest

from devstack.servers import free_port, start_nats
from services.core.adapters.nats_bus import NatsEventBus
from services.core.adapters.nats_watch import JetStreamEventWatch, WatchTuning
from services.core.domain.errors import Unavailable
from services.core.domain.model import EventKind, MemoryEvent
from services.core.domain.watch import SequencedEvent, WatchGap, WatchOpened

pytestmark = pytest.mark.integration

FAST = WatchTuning(batch_size=16, fetch_seconds=0.3, inactive_seconds=1.0, retry_initial_seconds=0.05)


def memory_event(tenant: str, memory_id: str, kind: EventKind = EventKind.CREATED) -> MemoryEvent:
    return MemoryEvent(f"{memory_id}:{kind.value}", tenant, kind, memory_id, 1, datetime.now(UTC))


async def connected_bus(port: int) -> NatsEventBus:
    unique = uuid.uuid4().hex[:10]
    bus = NatsEventBus(
        url=f"nats://127.0.0.1:{port}", stream=f"WATCH_{unique}", subject_prefix=f"w{unique}.events", wait_seconds=20
    )
    await bus.connect()
    return bus


def watch_of(bus: NatsEventBus, tuning: WatchTuning = FAST) -> JetStreamEventWatch:
    return JetStreamEventWatch(bus, stream=bus.stream, subject_prefix=bus.subjects.removesuffix(".>"), tuning=tuning)


async def take(items, n: int, within: float = 10.0) -> list:
    got = []
    async with asyncio.timeout(within):
        while len(got) < n:
            got.append(await anext(items))
    return got


async def nothing_more(items, within: float = 1.0) -> None:
    with pytest.raises(TimeoutError):
        async with asyncio.timeout(within):
            item = await anext(items)
            raise AssertionError(f"unexpected {item}")


@pytest.fixture
async def bus(nats_server):
    bus = await connected_bus(nats_server.port)
    yield bus
    await bus.close()


async def test_a_watch_delivers_its_tenants_events_in_order_from_where_it_was_asked(bus):
    await bus.publish(memory_event("acme", "before"))
    items = watch_of(bus).watch("acme", None, [])
    opened = await anext(items)
    assert isinstance(opened, WatchOpened) and opened.after_sequence == 1  # acme's last event
    assert opened.first_sequence == opened.last_sequence == 0  # the stream's bounds are not shown
    for tenant, memory_id in (("globex", "g1"), ("acme", "a1"), ("acme", "a2")):
        await bus.publish(memory_event(tenant, memory_id))
    got = await take(items, 2)
    assert [(type(i), i.event.memory_id, i.sequence) for i in got] == [
        (SequencedEvent, "a1", 3),
        (SequencedEvent, "a2", 4),
    ]
    await nothing_more(items)  # neither "before" (older) nor globex's
    await items.aclose()

    # A second watch resumes after a1: a2 only; with kinds, only those kinds.
    again = watch_of(bus).watch("acme", 3, [])
    assert (await anext(again)).after_sequence == 3
    assert [i.event.memory_id for i in await take(again, 1)] == ["a2"]
    await again.aclose()
    await bus.publish(memory_event("acme", "a2", EventKind.UPDATED))
    kinds = watch_of(bus).watch("acme", 0, ["updated"])
    await anext(kinds)
    assert [(i.event.memory_id, i.event.kind) for i in await take(kinds, 1)] == [("a2", EventKind.UPDATED)]
    await kinds.aclose()


async def test_a_watch_says_when_the_stream_no_longer_holds_what_was_asked(bus):
    for n in range(3):
        await bus.publish(memory_event("acme", f"old{n}"))
    await bus.jetstream.purge_stream(bus.stream)  # as retention would: sequences 1..3 are gone
    await bus.publish(memory_event("acme", "kept"))
    items = watch_of(bus).watch("acme", 1, [])
    opened, gap, event = await take(items, 3)
    assert opened.after_sequence == 3 and opened.first_sequence == 0  # before acme's first event held
    assert gap == WatchGap(requested_after=1, resumed_after=3, reason="expired")
    assert event.event.memory_id == "kept" and event.sequence == 4
    await items.aclose()

    ahead = watch_of(bus).watch("acme", 99, [])
    opened, gap = await take(ahead, 2)
    assert opened.after_sequence == 4 and gap == WatchGap(99, 4, "reset")
    await bus.publish(memory_event("acme", "new"))
    assert (await take(ahead, 1))[0].event.memory_id == "new"
    await ahead.aclose()


async def test_a_deleted_consumer_is_replaced_after_the_last_event_delivered(bus):
    items = watch_of(bus).watch("acme", None, [])
    await anext(items)
    await bus.publish(memory_event("acme", "a1"))
    assert (await take(items, 1))[0].event.memory_id == "a1"
    consumers = [c.name async for c in _consumers(bus)]
    assert len(consumers) == 1
    await bus.jetstream.delete_consumer(bus.stream, consumers[0])
    await bus.publish(memory_event("acme", "a2"))
    got = await take(items, 1)
    assert got[0].event.memory_id == "a2"
    await nothing_more(items, 1.5)  # a1 is not delivered again
    await items.aclose()
    assert [c async for c in _consumers(bus)] == []  # the watch deletes its consumer when it ends


async def test_a_watch_outlives_a_server_restart_without_loss_or_repeats(tmp_path):
    port = free_port()
    server = start_nats(port, tmp_path / "nats")
    bus = await connected_bus(port)
    items = watch_of(bus).watch("acme", None, [])
    try:
        await anext(items)
        await bus.publish(memory_event("acme", "a1"))
        assert (await take(items, 1))[0].event.memory_id == "a1"
        server.stop()
        await asyncio.sleep(0.5)
        with pytest.raises(Unavailable):  # a new watch cannot open meanwhile: the caller hears so at once
            await anext(watch_of(bus).watch("acme", None, []))
        server = start_nats(port, tmp_path / "nats")

        async def published() -> None:
            while True:
                try:
                    await bus.publish(memory_event("acme", "a2"))
                    return
                except Exception:
                    await asyncio.sleep(0.2)

        await asyncio.wait_for(published(), 20)
        await bus.publish(memory_event("acme", "a3"))
        got = await take(items, 2, within=20)
        assert [i.event.memory_id for i in got] == ["a2", "a3"]
        await nothing_more(items, 1.0)
    finally:
        await items.aclose()
        await bus.close()
        server.stop()


async def _consumers(bus: NatsEventBus):
    for info in await bus.jetstream.consumers_info(bus.stream):
        yield info
