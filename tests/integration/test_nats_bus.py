"""NatsEventBus against a real NATS JetStream server."""

from __future__ import annotations

from datetime import UTC, datetime

import nats
import pytest
from nats.js.api import StorageType

from memgrid.v1 import events_pb2
from services.core.codec import event_from_pb
from services.core.domain.errors import Unavailable
from services.core.domain.model import EventKind, Memory, MemoryEvent
from services.core.replica import stream_durables
from services.core.wiring import event_bus

pytestmark = pytest.mark.integration

NOW = datetime(2026, 1, 1, tzinfo=UTC)


def sample_event(memory_id: str = "m1", tenant: str = "acme") -> MemoryEvent:
    m = Memory(
        id=memory_id,
        tenant=tenant,
        content="hello",
        type="Context",
        confidence=0.5,
        importance=0.5,
        timestamp=NOW,
        t_valid=NOW,
        updated_at=NOW,
        last_accessed=NOW,
        recorded_at=NOW,
    )
    return MemoryEvent.for_memory(EventKind.CREATED, m, NOW)


async def read_all(settings, subject: str) -> list[events_pb2.MemoryEvent]:
    nc = await nats.connect(settings.bus.nats_url)
    try:
        js = nc.jetstream()
        sub = await js.pull_subscribe(subject, durable=None, stream=settings.bus.nats_stream)
        try:
            msgs = await sub.fetch(100, timeout=1)
        except (nats.errors.TimeoutError, TimeoutError):  # nats-py raises either when nothing is there
            msgs = []
        out = []
        for msg in msgs:
            event = events_pb2.MemoryEvent()
            event.ParseFromString(msg.data)
            out.append(event)
            await msg.ack()
        return out
    finally:
        await nc.close()


async def test_publish_lands_on_the_tenant_kind_subject_once(settings):
    bus = event_bus(settings.bus, settings.process, durables=stream_durables(settings))
    await bus.connect()
    try:
        event = sample_event()
        await bus.publish(event)
        await bus.publish(event)  # same event id: de-duplicated by the stream
        got = await read_all(settings, f"{settings.bus.nats_subject_prefix}.acme.created")
        assert len(got) == 1
        assert event_from_pb(got[0]) == event
        status = await bus.status()
        assert status.ok and status.figures["messages"] == 1.0
    finally:
        await bus.close()


async def test_connect_is_idempotent_and_stream_is_file_backed(settings):
    bus = event_bus(settings.bus, settings.process, durables=stream_durables(settings))
    await bus.connect()
    await bus.connect()
    try:
        info = await bus.jetstream.stream_info(settings.bus.nats_stream)
        assert info.config.storage in ("file", StorageType.FILE)
        assert info.config.subjects == [f"{settings.bus.nats_subject_prefix}.>"]
    finally:
        await bus.close()


async def test_publish_without_a_connection_is_unavailable(settings):
    bus = event_bus(settings.bus, settings.process, durables=stream_durables(settings))
    with pytest.raises(Unavailable):
        await bus.publish(sample_event())
    assert (await bus.status()).status == "unavailable"
