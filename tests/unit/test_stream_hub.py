"""The SSE relay's bookkeeping (gateway/stream.py), without a network: a
subscriber's bounded buffer, the gaps where events were dropped and counted,
connection notices, and the hub's per-tenant figures (with a fake source in
place of the NATS subscription)."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

import pytest

from gateway.stream import Notice, StreamHub, Subscriber, event_json, sse
from services.core.domain.model import EventKind, MemoryEvent, Relation

T0 = datetime(2026, 3, 18, 15, 30, tzinfo=UTC)


def event(n: int, tenant: str = "acme", kind: EventKind = EventKind.CREATED) -> MemoryEvent:
    return MemoryEvent(f"e{n}", tenant, kind, f"m{n}", n, T0 + timedelta(seconds=n))


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
    assert sub.dropped == 3 and sub.queued == 2
    first = await sub.next(0.01)
    assert first.event_id == "e0" and sub.queued == 1
    assert sub.offer(event(5))  # room again: after the gap
    assert not sub.offer(event(6))  # full again: a second gap
    items = await drain(sub)
    assert [type(i).__name__ for i in items] == ["MemoryEvent", "Gap", "MemoryEvent", "Gap"]
    gap = items[1]
    assert (gap.count, gap.first, gap.last) == (3, T0 + timedelta(seconds=2), T0 + timedelta(seconds=4))
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
    sub.notice(Notice("resumed", T0 + timedelta(seconds=4), T0 + timedelta(seconds=5)))
    assert [(n.kind, n.since, n.until) for n in sub.items] == [
        ("interrupted", T0, None),
        ("resumed", T0, T0 + timedelta(seconds=5)),
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
    assert event_json(event(1, kind=EventKind.SUPERSEDED))["type"] == "memory.superseded"
    frame = sse("created", {"a": "é"})
    assert frame == 'event: created\ndata: {"a": "é"}\n\n'


class FakeSource:
    """NatsEventSubscriber's surface: subscriptions by tenant, no network."""

    def __init__(self):
        self.connected = True
        self.handlers = {}

    def subject(self, tenant: str) -> str:
        return f"events.{tenant}.*"

    async def connect(self) -> None:
        return None

    async def subscribe(self, tenant, handler):
        self.handlers[tenant] = handler
        return tenant

    async def unsubscribe(self, subscription) -> None:
        self.handlers.pop(subscription, None)

    async def close(self) -> None:
        self.connected = False


def frames(texts: list[str]) -> list[tuple[str, dict]]:
    out = []
    for text in texts:
        name, data = text.strip().split("\n")
        out.append((name.removeprefix("event: "), json.loads(data.removeprefix("data: "))))
    return out


@pytest.fixture
async def hub():
    source = FakeSource()
    hub = StreamHub(source, buffer_size=2, keepalive_seconds=0.01)
    await hub.start()
    yield hub, source
    await hub.close()


async def test_the_hub_relays_counts_and_reports_per_tenant(hub):
    hub, source = hub
    stream = hub.events("acme")
    ready = frames([await anext(stream)])[0]
    assert ready[0] == "ready" and ready[1]["tenant"] == "acme" and ready[1]["nats"] == "connected"
    assert set(source.handlers) == {"acme"}  # only the tenant with a subscriber
    for n in range(4):
        source.handlers["acme"](event(n))
    sent = frames([await anext(stream) for _ in range(3)])
    assert [name for name, _ in sent] == ["created", "created", "dropped"]
    assert sent[2][1]["count"] == 2 and sent[2][1]["total_dropped"] == 2
    assert await anext(stream) == ": keepalive\n\n"
    status = hub.status("acme")
    assert (status["subscribers"], status["delivered"], status["dropped"]) == (1, 2, 2)
    assert status["per_subscriber"][0]["dropped"] == 2 and hub.status("other")["subscribers"] == 0
    await stream.aclose()
    assert hub.status("acme")["subscribers"] == 0 and hub.status("acme")["dropped"] == 2  # totals stay


async def test_connection_changes_reach_every_subscriber(hub):
    hub, _ = hub
    stream = hub.events("acme")
    await anext(stream)
    hub.connection_changed(False)
    hub.connection_changed(False)
    hub.connection_changed(True)
    sent = frames([await anext(stream), await anext(stream)])
    assert [name for name, _ in sent] == ["interrupted", "resumed"]
    assert sent[1][1]["since"] == sent[0][1]["since"] and sent[1][1]["until"]
    await stream.aclose()
