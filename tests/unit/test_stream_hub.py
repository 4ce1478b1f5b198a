"""The SSE relay's bookkeeping (gateway/stream.py), without a network: a
subscriber's bounded buffer, the gaps where events were dropped and counted,
watch notices, the hub's per-tenant figures, and re-calling a lost watch from
the last sequence received (with a fake watch in place of recall's RPC)."""

from __future__ import annotations

import asyncio
import json
from datetime import UTC, datetime, timedelta

import pytest

from gateway.routes.stream import resume_point
from gateway.stream import StreamHub
from gateway.stream_frames import event_json, sse
from gateway.stream_subscriber import Notice, Subscriber
from services.core.domain.model import EventKind, MemoryEvent, Relation
from services.core.domain.watch import SequencedEvent, WatchGap, WatchHeartbeat, WatchOpened

T0 = datetime(2026, 3, 18, 15, 30, tzinfo=UTC)


def event(n: int, tenant: str = "acme", kind: EventKind = EventKind.CREATED) -> SequencedEvent:
    return SequencedEvent(n + 1, MemoryEvent(f"e{n}", tenant, kind, f"m{n}", n, T0 + timedelta(seconds=n)))


def subscriber(size: int = 2) -> Subscriber:
    return Subscriber(1, "acme", size, T0)


async def drain(sub: Subscriber) -> list:
    items = []
    while (item := await sub.next(0.01)) is not None:
        items.append(item)
    return items


async def test_a_full_buffer_drops_and_counts_in_place():
    sub = subscriber(size=2)
    assert [sub.offer(event(n)) for n in range(5)] == [True, True, False, False, False]
    assert sub.dropped == 3 and sub.queued == 2 and sub.received == 5
    first = await sub.next(0.01)
    assert first.event.event_id == "e0" and sub.queued == 1
    assert sub.offer(event(5))  # room again: after the gap
    assert not sub.offer(event(6))  # full again: a second gap
    items = await drain(sub)
    assert [type(i).__name__ for i in items] == ["SequencedEvent", "Gap", "SequencedEvent", "Gap"]
    gap = items[1]
    assert (gap.count, gap.first, gap.last) == (3, T0 + timedelta(seconds=2), T0 + timedelta(seconds=4))
    assert (gap.first_sequence, gap.last_sequence) == (3, 5)
    assert items[3].count == 1 and sub.dropped == 4 and sub.queued == 0


async def test_an_empty_buffer_waits_then_answers_none():
    sub = subscriber()
    assert await sub.next(0.01) is None
    sub.close()
    assert sub.closed and await sub.next(0.01) is None


async def test_unread_connection_notices_collapse():
    sub = subscriber()
    sub.notice(Notice("interrupted", T0))
    sub.notice(Notice("interrupted", T0 + timedelta(seconds=1)))
    sub.notice(Notice("resumed", T0 + timedelta(seconds=2), T0 + timedelta(seconds=3)))
    sub.notice(Notice("interrupted", T0 + timedelta(seconds=4)))  # still interrupted since T0
    assert [(n.kind, n.since) for n in sub.items] == [("interrupted", T0)]
    sub.notice(Notice("resumed", T0 + timedelta(seconds=4), T0 + timedelta(seconds=5), 7))
    assert [(n.kind, n.since, n.until, n.after_sequence) for n in sub.items] == [
        ("interrupted", T0, None, None),
        ("resumed", T0, T0 + timedelta(seconds=5), 7),
    ]
    sub.offer(event(1))
    sub.notice(Notice("interrupted", T0 + timedelta(seconds=6)))
    assert len(sub.items) == 4  # an event in between: kept apart


def test_event_json_is_thin_and_names_the_automem_type():
    relation = Relation("m1", "m2", "RELATES_TO", 0.5, T0)
    data = event_json(MemoryEvent("e1", "acme", EventKind.ASSOCIATED, "m1", 0, T0, relation=relation))
    assert data["type"] == "memory.associate" and data["kind"] == "associated"
    assert data["relation"] == {"source_id": "m1", "target_id": "m2", "type": "RELATES_TO", "strength": 0.5}
    assert data["occurred_at"] == "2026-03-18T15:30:00+00:00" and data["tenant"] == "acme"
    assert event_json(event(1, kind=EventKind.SUPERSEDED).event)["type"] == "memory.superseded"
    frame = sse("created", {"a": "é"})
    assert frame == 'event: created\ndata: {"a": "é"}\n\n'
    assert sse("created", {}, 42) == "id: 42\nevent: created\ndata: {}\n\n"


def test_the_resume_point_is_the_header_else_the_query_and_must_be_a_number():
    assert resume_point(None, None) is None and resume_point(" ", "") is None
    assert resume_point("17", "3") == 17 and resume_point(None, "3") == 3 and resume_point("0", None) == 0
    for bad in ("-1", "abc", "1.5", "١٢"):
        with pytest.raises(Exception) as refused:
            resume_point(bad, None)
        assert refused.value.code == 400 and "Last-Event-ID" in refused.value.message


class FakeWatch:
    """recall's WatchMemoryEvents as the hub sees it: each call is recorded and
    fed from a queue the test writes to; a queued exception ends the call."""

    def __init__(self, last_sequence: int = 0):
        self.last_sequence = last_sequence
        self.calls: list[tuple[str, int | None]] = []
        self.queues: list[asyncio.Queue] = []
        self.refuse = 0

    async def __call__(self, tenant, after, kinds):
        self.calls.append((tenant, after))
        if self.refuse:
            self.refuse -= 1
            raise ConnectionError("recall is down")
        queue: asyncio.Queue = asyncio.Queue()
        self.queues.append(queue)
        yield WatchOpened(self.last_sequence if after is None else after, 1, self.last_sequence)
        while True:
            item = await queue.get()
            if isinstance(item, Exception):
                raise item
            yield item

    def send(self, *items) -> None:
        for item in items:
            self.queues[-1].put_nowait(item)


def frames(texts: list[str]) -> list[tuple[str, dict]]:
    """(event name, data) of each frame; the id, when there is one, as data["_id"]."""
    out = []
    for text in texts:
        fields = dict(line.split(": ", 1) for line in text.strip().split("\n"))
        data = json.loads(fields["data"])
        if "id" in fields:
            data["_id"] = int(fields["id"])
        out.append((fields["event"], data))
    return out


async def named(stream, n: int) -> list[tuple[str, dict]]:
    """The next n frames that are events (keepalive comments skipped)."""
    texts = []
    while len(texts) < n:
        text = await anext(stream)
        if not text.startswith(":"):
            texts.append(text)
    return frames(texts)


@pytest.fixture
async def hub():
    watch = FakeWatch(last_sequence=10)
    hub = StreamHub(watch, buffer_size=2, keepalive_seconds=0.01, retry_initial_seconds=0.01, retry_max_seconds=0.02)
    yield hub, watch
    await hub.close()


async def test_the_hub_relays_counts_and_reports_per_tenant(hub):
    hub, watch = hub
    stream = hub.events(await hub.open("acme", None))
    ready = frames([await anext(stream)])[0]
    assert ready[0] == "ready" and ready[1]["tenant"] == "acme" and ready[1]["nats"] == "connected"
    assert ready[1]["_id"] == 10  # reconnecting with it gets everything after the stream was opened
    assert watch.calls == [("acme", None)]  # only the tenant with a subscriber
    watch.send(*(event(n) for n in range(10, 14)))
    sent = frames([await anext(stream) for _ in range(3)])
    assert [name for name, _ in sent] == ["created", "created", "dropped"]
    assert [data.get("_id") for _, data in sent] == [11, 12, None]  # a gap has no id: a reconnect re-reads it
    assert sent[2][1]["count"] == 2 and sent[2][1]["total_dropped"] == 2
    assert (sent[2][1]["first_sequence"], sent[2][1]["last_sequence"]) == (13, 14)
    assert await anext(stream) == ": keepalive\n\n"
    status = hub.status("acme")
    assert (status["subscribers"], status["delivered"], status["dropped"]) == (1, 2, 2)
    assert status["per_subscriber"][0]["dropped"] == 2 and hub.status("other")["subscribers"] == 0
    await stream.aclose()
    assert hub.status("acme")["subscribers"] == 0 and hub.status("acme")["dropped"] == 2  # totals stay


async def test_a_lost_watch_is_reported_and_called_again_from_the_last_sequence(hub):
    hub, watch = hub
    stream = hub.events(await hub.open("acme", 10))
    await anext(stream)
    watch.send(event(10), event(11))
    assert [d["_id"] for _, d in frames([await anext(stream), await anext(stream)])] == [11, 12]
    watch.refuse = 2  # recall stays down for two more calls
    watch.send(ConnectionError("recall went away"))
    sent = await named(stream, 2)
    assert [name for name, _ in sent] == ["interrupted", "resumed"]
    assert sent[1][1]["since"] == sent[0][1]["since"] and sent[1][1]["until"] and sent[1][1]["last_event_id"] == 12
    assert watch.calls == [("acme", 10), ("acme", 12), ("acme", 12), ("acme", 12)]
    watch.send(event(11), event(12))  # a repeat of 12 is not delivered again
    assert (await named(stream, 1))[0][1]["_id"] == 13
    await stream.aclose()


async def test_a_gap_in_the_stream_is_an_event_with_the_new_position(hub):
    hub, watch = hub
    stream = hub.events(await hub.open("acme", 3))
    await anext(stream)
    watch.send(WatchGap(3, 7, "expired"), event(7))
    sent = frames([await anext(stream), await anext(stream)])
    assert sent[0][0] == "gap" and sent[0][1]["reason"] == "expired" and sent[0][1]["_id"] == 7
    assert sent[0][1]["requested_after"] == 3 and sent[1][1]["_id"] == 8
    assert sent[0][1]["reread"] is True and "re-read" in sent[0][1]["message"]  # lost, not silently skipped
    await stream.aclose()


async def test_a_refused_watch_is_raised_to_the_caller(hub):
    hub, watch = hub
    watch.refuse = 1
    with pytest.raises(ConnectionError):
        await hub.open("acme", None)
    assert hub.status("acme")["subscribers"] == 0


async def test_a_silent_watch_is_taken_for_lost_but_heartbeats_keep_it():
    watch = FakeWatch(last_sequence=4)
    hub = StreamHub(watch, buffer_size=2, keepalive_seconds=0.01, retry_initial_seconds=0.01, silence_seconds=0.2)
    try:
        stream = hub.events(await hub.open("acme", None))
        await anext(stream)
        for _ in range(5):  # heartbeats, more often than the silence allows: no frame, no re-call
            watch.send(WatchHeartbeat())
            await asyncio.sleep(0.05)
        assert len(watch.calls) == 1
        sent = await named(stream, 2)  # then silence: lost, and called again from where it was
        assert [name for name, _ in sent] == ["interrupted", "resumed"]
        assert watch.calls == [("acme", None), ("acme", 4)]
        await stream.aclose()
    finally:
        await hub.close()


@pytest.mark.timeout(30)
async def test_a_leaving_subscriber_closes_its_watch_while_events_pour_in():
    """A stream that leaves while its watch is busy closes the watch (and so
    recall's consumer): the pump's cancellation is never lost to an event
    that came in at the same moment (asyncio.wait_for in Python 3.11 returned
    the event and dropped the cancellation; the soak found the watches left
    open, about one SSE client in thirty under a consolidation's burst)."""
    closed = []

    async def busy_watch(tenant, after, kinds):
        try:
            yield WatchOpened(0, 1, 0)
            n = 0
            while True:
                await asyncio.sleep(0.0005)  # an event ready at almost every turn of the loop
                yield event(n)
                n += 1
        finally:
            closed.append(tenant)

    hub = StreamHub(busy_watch, buffer_size=4, keepalive_seconds=0.01, silence_seconds=30.0)
    for _ in range(40):
        stream = hub.events(await hub.open("acme", None))
        await anext(stream)
        await asyncio.sleep(0.002)
        await stream.aclose()
    await asyncio.sleep(0.05)
    left_open = 40 - len(closed)
    for task in asyncio.all_tasks():  # a pump that outlived its subscriber, stopped so the test ends
        if task is not asyncio.current_task() and "_pump" in repr(task.get_coro()):
            task.cancel()
    assert left_open == 0 and not hub._pumps  # every watch closed, no pump left
    await hub.close()
