"""NatsEventBus on a 3-node JetStream cluster: NATS_URL lists the nodes, the
stream is kept on all three (NATS_STREAM_REPLICAS=3), and when the node the
bus talks to dies, the bus reconnects to a survivor and publishes go on.
The whole stack under load is tests/reliability/test_nats_cluster.py."""

from __future__ import annotations

import asyncio
import time

import pytest

from services.core.domain.errors import Unavailable
from services.core.replica import stream_durables
from services.core.wiring import event_bus
from tests.integration.test_nats_bus import sample_event

pytestmark = pytest.mark.integration

#: A new leader and the client's reconnect, with a wide margin.
FAILOVER_WITHIN = 30.0


@pytest.fixture
def cluster_settings(settings, nats_cluster):
    return settings.override({"nats_url": nats_cluster.url, "nats_stream_replicas": 3})


async def test_the_stream_is_kept_on_every_node(cluster_settings, nats_cluster):
    bus = event_bus(cluster_settings.bus, cluster_settings.process, durables=stream_durables(cluster_settings))
    await bus.connect()
    try:
        info = await bus.jetstream.stream_info(cluster_settings.bus.nats_stream)
        assert info.config.num_replicas == 3
        names = {info.cluster.leader, *(p.name for p in info.cluster.replicas or [])}
        assert names == {nats_cluster.server_name(i) for i in range(3)}
    finally:
        await bus.close()


async def eventually(attempt, what: str):
    """Await `attempt()` until it returns something truthy (returned), for at most FAILOVER_WITHIN."""
    deadline = time.monotonic() + FAILOVER_WITHIN
    last = None
    while time.monotonic() < deadline:
        try:
            if result := await attempt():
                return result
        except Unavailable as exc:
            last = exc
        await asyncio.sleep(0.2)
    raise AssertionError(f"{what}: not within {FAILOVER_WITHIN}s (last: {last})")


async def test_publishes_go_on_when_the_connected_node_dies(cluster_settings, nats_cluster):
    bus = event_bus(cluster_settings.bus, cluster_settings.process, durables=stream_durables(cluster_settings))
    await bus.connect()
    killed = nats_cluster.ports.index(bus.nats.connected_url.port)
    try:
        await bus.publish(sample_event("before"))
        nats_cluster.nodes[killed].kill()

        async def publish():
            await bus.publish(sample_event("after"))
            return True

        await eventually(publish, f"a publish after killing node {killed}")
        assert bus.nats.connected_url.port != nats_cluster.ports[killed]

        async def connected():
            status = await bus.status()
            return status if status.status == "connected" else None

        # The stream's status may lag the publish a moment (the metadata leader's election, if it died).
        status = await eventually(connected, "the bus's status connected again")
        assert f":{bus.nats.connected_url.port} " in status.detail, status.detail
        assert status.figures["messages"] == 2
    finally:
        await bus.close()
        nats_cluster.start_node(killed)
        nats_cluster.wait_healthy(60)
