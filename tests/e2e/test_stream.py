"""GET /stream and /stream/status through the real gateway, fed by the real
NATS server: a caller sees its own tenant's memory events and no other's,
keepalive comments arrive while nothing happens, and a reader too slow for
its buffer gets a `dropped` event with the count (never a silent loss)."""

from __future__ import annotations

import asyncio
import json
import socket
import uuid
from datetime import UTC, datetime

import httpx
import nats
import pytest

from gateway.app import create_app
from services.core.adapters.nats_bus import event_subject
from services.core.codec import event_to_pb
from services.core.domain.model import EventKind, MemoryEvent
from tests.e2e.conftest import API_TOKEN, connect, serving
from tests.waiting import wait_for

pytestmark = pytest.mark.e2e

BUFFER = 8
AUTH = {"Authorization": f"Bearer {API_TOKEN}"}


@pytest.fixture
def stack_settings(settings):
    return settings.model_copy(
        update={"enrichment_enabled": False, "stream_buffer_size": BUFFER, "stream_keepalive_seconds": 0.5}
    )


@pytest.fixture
async def other_tenant(stack_settings, stack_services):
    """A second gateway over the same services whose token belongs to tenant `other`."""
    app = create_app(stack_settings.model_copy(update={"default_tenant": "other"}), API_TOKEN, connect(stack_services))
    async with serving(app) as url, httpx.AsyncClient(base_url=url, headers=AUTH) as client:
        yield client


@pytest.fixture
async def publisher(stack_settings):
    nc = await nats.connect(stack_settings.nats_url)
    yield nc
    await nc.close()


class Stream:
    """The events of one open /stream response, parsed."""

    def __init__(self, response: httpx.Response):
        self._lines = response.aiter_lines()

    async def next(self, within: float = 10.0) -> tuple[str, dict | str]:
        """(event name, data), or ("comment", text) for a comment line."""
        name, data = "message", []
        async with asyncio.timeout(within):
            async for line in self._lines:
                if line.startswith(":"):
                    return "comment", line[1:].strip()
                if line.startswith("event:"):
                    name = line[6:].strip()
                elif line.startswith("data:"):
                    data.append(line[5:].strip())
                elif line == "" and data:
                    return name, json.loads("\n".join(data))
        raise AssertionError("the stream ended")

    async def until(self, wanted, within: float = 10.0) -> list[tuple[str, dict | str]]:
        """Every item read up to and including the first for which wanted(name, data)."""
        seen = []
        async with asyncio.timeout(within):
            while True:
                item = await self.next(within)
                seen.append(item)
                if wanted(*item):
                    return seen


def created(memory_id: str):
    return lambda name, data: name == "created" and data["memory_id"] == memory_id


async def test_a_subscriber_gets_its_own_tenants_events_only(client, other_tenant):
    async with client.stream("GET", "/stream") as mine, other_tenant.stream("GET", "/stream") as theirs:
        assert mine.status_code == 200 and mine.headers["content-type"].startswith("text/event-stream")
        ours, others = Stream(mine), Stream(theirs)
        ready = await ours.until(lambda name, data: name == "ready")
        assert ready[-1][1]["tenant"] == "default" and ready[-1][1]["nats"] == "connected"
        assert ready[-1][1]["buffer_size"] == BUFFER
        assert (await others.until(lambda name, data: name == "ready"))[-1][1]["tenant"] == "other"

        their_id = (await other_tenant.post("/memory", json={"content": "Their secret roadmap"})).json()["memory_id"]
        my_id = (await client.post("/memory", json={"content": "Our public roadmap"})).json()["memory_id"]

        seen = await ours.until(created(my_id))
        name, event = seen[-1]
        assert event["tenant"] == "default" and event["kind"] == "created" and event["type"] == "memory.store"
        assert event["version"] == 1 and event["event_id"] and datetime.fromisoformat(event["occurred_at"])
        theirs_seen = await others.until(created(their_id))
        # A little longer on both, in case the other tenant's event is merely late.
        for stream, foreign in ((ours, their_id), (others, my_id)):
            with pytest.raises(TimeoutError):
                await stream.until(lambda name, data, foreign=foreign: data != "keepalive" and (
                    not isinstance(data, dict) or data.get("memory_id") == foreign), within=1.5)  # fmt: skip
        for items, tenant in ((seen, "default"), (theirs_seen, "other")):
            assert all(d["tenant"] == tenant for n, d in items if isinstance(d, dict) and "memory_id" in d)

    async def closed():  # once the gateway has seen the streams above close
        status = (await client.get("/stream/status")).json()
        return status if status["subscribers"] == 0 else None

    status = await wait_for_soon(closed)
    assert status["tenant"] == "default" and status["delivered"] >= 1 and status["dropped"] == 0


async def test_an_idle_stream_gets_keepalive_comments(client):
    async with client.stream("GET", "/stream") as response:
        stream = Stream(response)
        await stream.until(lambda name, data: name == "ready")
        name, text = await stream.next(within=3.0)
        assert (name, text) == ("comment", "keepalive")
        status = (await client.get("/stream/status")).json()
        assert status["subscribers"] == 1 and status["per_subscriber"][0]["buffered"] == 0
        assert status["keepalive_seconds"] == 0.5


def synthetic(n: int) -> bytes:
    event = MemoryEvent(
        event_id=f"synthetic-{n}",
        tenant="default",
        kind=EventKind.UPDATED,
        memory_id=str(uuid.uuid4()),
        version=n,
        occurred_at=datetime.now(UTC),
    )
    return event_to_pb(event).SerializeToString()


async def test_a_slow_reader_is_told_how_many_events_it_lost(client, gateway_url, publisher, stack_settings):
    subject = event_subject(stack_settings.nats_subject_prefix, "default", "updated")
    # A small receive window, so the gateway's writes back up soon after the reader stops.
    transport = httpx.AsyncHTTPTransport(socket_options=[(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)])
    async with (
        httpx.AsyncClient(base_url=gateway_url, headers=AUTH, transport=transport) as slow,
        slow.stream("GET", "/stream") as response,
    ):
        stream = Stream(response)
        ready = (await stream.until(lambda name, data: name == "ready"))[-1][1]
        published = 0
        mine = {}
        while published < 40_000:  # until the buffer overflows: the reader reads nothing meanwhile
            for _ in range(1000):
                await publisher.publish(subject, synthetic(published))
                published += 1
            await publisher.flush()
            await asyncio.sleep(0.2)
            status = (await client.get("/stream/status")).json()
            mine = next(s for s in status["per_subscriber"] if s["id"] == ready["subscriber_id"])
            if mine["dropped"]:
                break
        assert mine["dropped"] > 0, "the reader never fell behind"

        received: list[int] = []
        dropped = 0
        gaps = []
        async with asyncio.timeout(60):
            while len(received) + dropped < published:
                name, data = await stream.next()
                if name == "updated":
                    received.append(data["version"])
                elif name == "dropped":
                    dropped += data["count"]
                    gaps.append(data)
        # Every event published is either received, in order, or counted in a gap.
        assert len(received) + dropped == published and gaps
        assert received == sorted(set(received))
        assert gaps[0]["total_dropped"] >= gaps[0]["count"] > 0 and gaps[0]["first_occurred_at"]
        status = (await client.get("/stream/status")).json()
        mine = next(s for s in status["per_subscriber"] if s["id"] == ready["subscriber_id"])
        assert (mine["delivered"], mine["dropped"]) == (len(received), dropped)
        assert status["dropped"] >= dropped


async def wait_for_soon(predicate, within: float = 5.0):
    return await wait_for(predicate, within, every=0.05)
