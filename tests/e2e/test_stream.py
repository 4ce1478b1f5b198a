"""GET /stream and /stream/status through the real gateway, fed by recall's
WatchMemoryEvents over the real NATS server: a caller sees its own tenant's
memory events and no other's, keepalive comments arrive while nothing
happens, a reader too slow for its buffer gets a `dropped` event with the
count (never a silent loss), a client reconnecting with Last-Event-ID gets
what was written while it was away and nothing twice, and recall refuses
watches past its cap (429 in the envelope)."""

from __future__ import annotations

import asyncio
import contextlib
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
from services.core.grpc.server import start
from tests.conftest import plane_of
from tests.e2e.conftest import API_TOKEN, BUILDERS, connect, serving
from tests.waiting import wait_for

pytestmark = pytest.mark.e2e

BUFFER = 8
MAX_WATCHES = 3
PADDING = 4000
AUTH = {"Authorization": f"Bearer {API_TOKEN}"}


@pytest.fixture
def stack_settings(settings):
    return settings.override(
        {
            "enrichment_enabled": False,
            "stream_buffer_size": BUFFER,
            "stream_keepalive_seconds": 0.5,
            "recall_max_watches": MAX_WATCHES,
        }
    )


@pytest.fixture
async def other_tenant(stack_settings, stack_services):
    """A second gateway over the same services whose token belongs to tenant `other`."""
    app = create_app(
        stack_settings.override({"default_tenant": "other"}),
        API_TOKEN,
        connect(stack_services, stack_settings),
    )
    async with serving(app) as url, httpx.AsyncClient(base_url=url, headers=AUTH) as client:
        yield client


@pytest.fixture
async def publisher(stack_settings):
    nc = await nats.connect(stack_settings.bus.nats_url)
    yield nc
    await nc.close()


class Stream:
    """The events of one open /stream response, parsed."""

    def __init__(self, response: httpx.Response):
        self._lines = response.aiter_lines()
        #: The id of the last event that had one (what EventSource would send back as Last-Event-ID).
        self.last_id: str | None = None
        #: The id of the event `next` returned last, or None.
        self.id: str | None = None

    async def next(self, within: float = 10.0) -> tuple[str, dict | str]:
        """(event name, data), or ("comment", text) for a comment line."""
        name, data, event_id = "message", [], None
        async with asyncio.timeout(within):
            async for line in self._lines:
                if line.startswith(":"):
                    return "comment", line[1:].strip()
                if line.startswith("event:"):
                    name = line[6:].strip()
                elif line.startswith("id:"):
                    event_id = line[3:].strip()
                elif line.startswith("data:"):
                    data.append(line[5:].strip())
                elif line == "" and data:
                    self.id = event_id
                    self.last_id = event_id if event_id is not None else self.last_id
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


def ready(name, data) -> bool:
    return name == "ready"


async def test_a_reconnecting_client_gets_what_it_missed_and_nothing_twice(client, other_tenant):
    async with client.stream("GET", "/stream") as response:
        stream = Stream(response)
        await stream.until(ready)
        first = (await client.post("/memory", json={"content": "Seen before the break"})).json()["memory_id"]
        seen_before = await stream.until(created(first))
        last_id = stream.last_id
        assert last_id is not None and int(last_id) > 0 and seen_before[-1][1]["sequence"] == int(last_id)
    before = {d["event_id"] for _, d in seen_before if isinstance(d, dict) and "event_id" in d}

    # Away: two memories of ours, one of another tenant's.
    away = [
        (await client.post("/memory", json={"content": f"Written while away {n}"})).json()["memory_id"]
        for n in range(2)
    ]
    theirs = (await other_tenant.post("/memory", json={"content": "Another tenant's note"})).json()["memory_id"]

    async with client.stream("GET", "/stream", headers={"Last-Event-ID": last_id}) as response:
        stream = Stream(response)
        opened = await stream.until(ready)
        assert stream.id == last_id and opened[-1][1]["last_event_id"] == int(last_id)
        seen = await stream.until(created(away[1]))
        with pytest.raises(TimeoutError):  # nothing else is due: not `first` again, not theirs
            await stream.until(lambda name, data: isinstance(data, dict) and "memory_id" in data, within=1.5)
    events = [d for n, d in seen if isinstance(d, dict) and "memory_id" in d]
    assert [d["memory_id"] for d in events if d["kind"] == "created"] == away
    assert not before & {d["event_id"] for d in events}, "an event was delivered twice"
    assert all(d["tenant"] == "default" and d["memory_id"] != theirs for d in events)
    sequences = [d["sequence"] for d in events]
    assert sequences == sorted(set(sequences)) and sequences[0] > int(last_id)

    # ?last_event_id= does the same (clients that cannot set headers); a malformed one is a 400 naming it.
    async with client.stream("GET", f"/stream?last_event_id={last_id}") as response:
        stream = Stream(response)
        await stream.until(ready)
        assert [d["memory_id"] for _, d in await stream.until(created(away[0]))][-1] == away[0]
    bad = await client.get("/stream", headers={"Last-Event-ID": "yesterday"})
    assert bad.status_code == 400 and bad.json()["status"] == "error" and "Last-Event-ID" in bad.json()["message"]
    unknown = await client.get("/stream?kinds=created,exploded")
    assert unknown.status_code == 400 and "kinds" in unknown.json()["message"]


async def test_another_tenants_events_never_arrive_even_on_resume(client, other_tenant):
    async with other_tenant.stream("GET", "/stream") as response:
        stream = Stream(response)
        await stream.until(ready)
        start = stream.last_id
    for n in range(3):
        await client.post("/memory", json={"content": f"Default tenant note {n}"})
    theirs = (await other_tenant.post("/memory", json={"content": "Their own note"})).json()["memory_id"]
    async with other_tenant.stream("GET", "/stream", headers={"Last-Event-ID": start}) as response:
        stream = Stream(response)
        await stream.until(ready)
        seen = await stream.until(created(theirs))
        with pytest.raises(TimeoutError):
            await stream.until(lambda name, data: isinstance(data, dict) and "memory_id" in data, within=1.0)
    assert [d["tenant"] for _, d in seen if isinstance(d, dict) and "memory_id" in d] == ["other"]


async def test_watches_past_recalls_cap_are_refused_in_the_envelope(client):
    async with contextlib.AsyncExitStack() as streams:
        held = []  # a Stream let go closes its response: keep each open
        for _ in range(MAX_WATCHES):
            held.append(Stream(await streams.enter_async_context(client.stream("GET", "/stream"))))
            await held[-1].until(ready)
        refused = await client.get("/stream")
        assert refused.status_code == 429
        body = refused.json()
        assert body["status"] == "error" and body["code"] == 429 and "RECALL_MAX_WATCHES" in body["message"]

    async def reopened():  # recall frees a watch's slot once its stream closes
        async with client.stream("GET", "/stream") as response:
            if response.status_code != 200:
                return None
            return (await Stream(response).until(ready))[-1][1]

    assert (await wait_for_soon(reopened))["tenant"] == "default"


async def test_a_lost_recall_is_reported_and_the_stream_resumes_without_loss(client, stack_services, stack_settings):
    async with client.stream("GET", "/stream") as response:
        stream = Stream(response)
        await stream.until(ready)
        before = (await client.post("/memory", json={"content": "Before recall restarts"})).json()["memory_id"]
        await stream.until(created(before))
        recall = stack_services["recall"]
        await recall.stop()
        interrupted = await stream.until(lambda name, data: name == "interrupted", within=15)
        assert interrupted[-1][1]["since"]
        # Written while no recall serves the watch: still delivered, once recall is back.
        during = [
            (await client.post("/memory", json={"content": f"While recall is down {n}"})).json()["memory_id"]
            for n in range(2)
        ]
        stack_services["recall"] = await start(
            "recall",
            BUILDERS["recall"](stack_settings),
            host="127.0.0.1",
            port=recall.port,
            grace_seconds=1.0,
            plane=plane_of(stack_settings),
        )
        seen = await stream.until(created(during[1]), within=30)
    names = [name for name, _ in seen]
    assert "resumed" in names and names.index("resumed") < names.index("created")
    resumed = seen[names.index("resumed")][1]
    assert resumed["since"] == interrupted[-1][1]["since"] and "nothing was lost" in resumed["reason"]
    events = [d for _, d in seen if isinstance(d, dict) and d.get("kind") == "created"]
    assert [d["memory_id"] for d in events] == during  # not `before` again, none missing


def synthetic(n: int) -> bytes:
    event = MemoryEvent(
        # Padded, so the socket's buffers fill after a few hundred events, not tens of thousands.
        event_id=f"synthetic-{n}-" + "x" * PADDING,
        tenant="default",
        kind=EventKind.UPDATED,
        memory_id=str(uuid.uuid4()),
        version=n,
        occurred_at=datetime.now(UTC),
    )
    return event_to_pb(event).SerializeToString()


async def test_a_slow_reader_is_told_how_many_events_it_lost(client, gateway_url, publisher, stack_settings):
    subject = event_subject(stack_settings.bus.nats_subject_prefix, "default", "updated")
    # A small receive window, so the gateway's writes back up soon after the reader stops.
    transport = httpx.AsyncHTTPTransport(socket_options=[(socket.SOL_SOCKET, socket.SO_RCVBUF, 65536)])
    async with (
        httpx.AsyncClient(base_url=gateway_url, headers=AUTH, transport=transport) as slow,
        slow.stream("GET", "/stream") as response,
    ):
        stream = Stream(response)
        ready = (await stream.until(lambda name, data: name == "ready"))[-1][1]
        published = 0
        mine = {}
        while published < 40_000:  # until the buffer overflows: the reader reads nothing meanwhile
            for _ in range(250):
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
