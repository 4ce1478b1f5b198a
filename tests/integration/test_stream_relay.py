"""The gateway's SSE relay (gateway/stream.py) on a NATS server of its own,
which the test stops and restarts: the stream says `interrupted` when the
connection is lost and `resumed` (with the window) once it is back, and
events flow again; a tenant's subscription never carries another's events."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime

import nats
import pytest

from devstack.servers import free_port, start_nats
from gateway.stream import StreamHub
from services.core.adapters.nats_bus import event_subject
from services.core.codec import event_to_pb
from services.core.domain.model import EventKind, MemoryEvent
from tests.conftest import make_settings

pytestmark = pytest.mark.integration


def payload(tenant: str, memory_id: str) -> bytes:
    event = MemoryEvent(f"{memory_id}:created:1", tenant, EventKind.CREATED, memory_id, 1, datetime.now(UTC))
    return event_to_pb(event).SerializeToString()


async def next_named(stream, wanted: str, hub: StreamHub | None = None, within: float = 15.0) -> str:
    """The next frame of the `wanted` event (keepalives and others skipped);
    on a timeout, the frames seen and the hub's status say what happened."""
    seen: list[str] = []
    try:
        async with asyncio.timeout(within):
            async for frame in stream:
                if frame.startswith(f"event: {wanted}\n"):
                    return frame
                seen.append(frame.split("\n", 1)[0])
    except TimeoutError:
        status = hub.status("acme") if hub is not None else None
        detail = f"seen {seen[-5:]} of {len(seen)}; hub {status}"
        raise AssertionError(f"no {wanted!r} frame in {within} s; {detail}") from None
    raise AssertionError("the stream ended")


async def test_the_stream_reports_a_lost_connection_and_resumes(falkordb_server, tmp_path):
    port = free_port()
    server = start_nats(port, tmp_path / "nats")
    settings = make_settings(falkordb_server.port, port, tmp_path / "data", stream_keepalive_seconds=0.2)
    hub = StreamHub.from_settings(settings)
    await hub.start()
    publisher = await nats.connect(settings.nats_url, max_reconnect_attempts=-1, reconnect_time_wait=0.2)
    stream = hub.events("acme")
    try:
        assert '"nats": "connected"' in await next_named(stream, "ready")
        subject = event_subject(settings.nats_subject_prefix, "acme", "created")
        elsewhere = event_subject(settings.nats_subject_prefix, "globex", "created")
        await publisher.publish(elsewhere, payload("globex", "g1"))
        await publisher.publish(subject, payload("acme", "a1"))
        await asyncio.wait_for(publisher.flush(), 15)  # the server has both before the stream is read
        assert '"memory_id": "a1"' in await next_named(stream, "created", hub)

        server.stop()
        assert '"since"' in await next_named(stream, "interrupted")
        assert hub.status("acme")["nats"] == "unavailable"

        server = start_nats(port, tmp_path / "nats")
        resumed = await next_named(stream, "resumed")
        assert '"until": "' in resumed
        await asyncio.wait_for(publisher.flush(), 15)
        await publisher.publish(subject, payload("acme", "a2"))
        frame = await next_named(stream, "created", hub)
        assert '"memory_id": "a2"' in frame and "g1" not in frame
        status = hub.status("acme")
        assert status["nats"] == "connected" and status["dropped"] == 0
    finally:
        await stream.aclose()
        await publisher.close()
        await hub.close()
        server.stop()
