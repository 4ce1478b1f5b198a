"""The gap watch of a running consumer on NATS (docs/operations.md,
Retention): it asks the stream for its state once a look is old, not before
every fetch, and still finds the events retention removed while the
consumer was busy."""

from __future__ import annotations

import asyncio
import time

import pytest
from prometheus_client import REGISTRY

from services.core.adapters.nats_consumer import JetStreamConsumer
from services.core.domain.delivery import Outcome
from services.core.domain.retention import LOOK_SECONDS
from services.core.replica import stream_durables
from services.core.wiring import event_bus
from tests.conftest import make_settings
from tests.integration.test_dead_letters import spec, wait_for
from tests.integration.test_nats_bus import sample_event

pytestmark = pytest.mark.integration


class Holding:
    """Handles every event, holding the first until released."""

    def __init__(self):
        self.seen: list[str] = []
        self.release = asyncio.Event()

    async def __call__(self, deliveries):
        self.seen += [d.event.memory_id for d in deliveries]
        if len(self.seen) == 1:
            await self.release.wait()
        return [Outcome.DONE] * len(deliveries)


def found_gaps() -> float:
    return REGISTRY.get_sample_value("memgrid_consumer_gaps_total", {"consumer": "worker"}) or 0.0


async def started(settings, handler) -> tuple[object, JetStreamConsumer]:
    bus = event_bus(settings.bus, settings.process, durables=stream_durables(settings))
    await bus.connect()
    consumer = JetStreamConsumer(bus, settings.bus.nats_stream, spec(settings), handler)
    await consumer.start()
    return bus, consumer


async def test_a_consumer_that_keeps_up_asks_the_stream_once_a_look_is_old(settings):
    seen: list[str] = []

    async def done(deliveries):
        seen.extend(d.event.memory_id for d in deliveries)
        return [Outcome.DONE] * len(deliveries)

    bus, consumer = await started(settings, done)
    try:
        count = 20
        before, began = consumer.retention_looks, time.monotonic()
        for n in range(count):
            await bus.publish(sample_event(f"m{n}"))
            await wait_for(lambda n=n: len(seen) == n + 1, within=15)
        elapsed = time.monotonic() - began
        # One look at most each LOOK_SECONDS, and one for the fetch under way at the start.
        assert consumer.retention_looks - before <= elapsed / LOOK_SECONDS + 2
        assert consumer.retention_looks - before < count
    finally:
        await consumer.stop()
        await bus.close()


async def test_events_retention_removed_while_the_consumer_was_busy_are_found(falkordb_server, nats_server, tmp_path):
    # The shortest age a look may last with (twice LOOK_SECONDS): the watch skips looks here.
    settings = make_settings(
        falkordb_server.port, nats_server.port, tmp_path / "data", nats_stream_max_age_seconds=2 * LOOK_SECONDS
    )
    handler = Holding()
    bus, consumer = await started(settings, handler)
    gaps = found_gaps()
    try:
        await bus.publish(sample_event("first"))
        await wait_for(lambda: handler.seen == ["first"], within=15)
        for n in range(3):
            await bus.publish(sample_event(f"lost {n}"))
        stream = settings.bus.nats_stream

        async def aged_out() -> bool:
            return int((await bus.jetstream.stream_info(stream)).state.first_seq) > 4

        for _ in range(200):
            if await aged_out():
                break
            await asyncio.sleep(0.05)
        assert await aged_out()
        handler.release.set()
        await wait_for(lambda: found_gaps() == gaps + 1, within=15)
        assert handler.seen == ["first"]
        await bus.publish(sample_event("after"))
        await wait_for(lambda: handler.seen == ["first", "after"], within=15)
    finally:
        handler.release.set()
        await consumer.stop()
        await bus.close()
