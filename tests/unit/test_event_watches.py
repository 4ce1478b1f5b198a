"""Recall's event watches (services/recall/event_watch.py): at most
RECALL_MAX_WATCHES open at once in a process (RESOURCE_EXHAUSTED past it),
and RECALL_MAX_WATCHES_PER_TENANT of them for one tenant, a slot freed when
a watch ends, unknown event kinds refused by name, and heartbeats while a
tenant is quiet."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime

import pytest

from services.core.domain.errors import InvalidArgument, ResourceExhausted
from services.core.domain.model import EventKind, MemoryEvent
from services.core.domain.watch import SequencedEvent, WatchHeartbeat, WatchOpened
from services.recall.event_watch import EventWatches


class Source:
    def __init__(self):
        self.calls = []

    async def watch(self, tenant, after_sequence, kinds):
        self.calls.append((tenant, after_sequence, kinds))
        yield WatchOpened(after_sequence or 0, 1, 5)


async def test_watches_past_the_cap_are_refused_until_one_ends():
    source = Source()
    watches = EventWatches(source, max_watches=1)
    first = watches.watch("acme", None, [])
    assert (await anext(first)).after_sequence == 0 and watches.open == 1
    second = watches.watch("acme", 3, [])
    with pytest.raises(ResourceExhausted) as refused:
        await anext(second)
    assert refused.value.reason == "WATCH_LIMIT_REACHED" and "RECALL_MAX_WATCHES" in refused.value.message
    await first.aclose()
    assert watches.open == 0
    third = watches.watch("globex", 3, ["Created", " updated "])
    assert (await anext(third)).after_sequence == 3
    assert source.calls[-1] == ("globex", 3, ["created", "updated"])
    await third.aclose()


async def test_a_tenants_watches_past_its_share_are_refused_while_others_open():
    watches = EventWatches(Source(), max_watches=10, max_per_tenant=2)
    held = [watches.watch("acme", None, []) for _ in range(2)]
    for watch in held:
        await anext(watch)
    with pytest.raises(ResourceExhausted) as refused:
        await anext(watches.watch("acme", None, []))
    assert refused.value.reason == "TENANT_WATCH_LIMIT_REACHED"
    assert "RECALL_MAX_WATCHES_PER_TENANT" in refused.value.message and watches.open == 2
    other = watches.watch("globex", None, [])
    await anext(other)  # another tenant is not held up by acme's share
    await held[0].aclose()
    again = watches.watch("acme", None, [])
    await anext(again)  # a closed watch gives its tenant the slot back
    for watch in (held[1], other, again):
        await watch.aclose()
    assert watches.open == 0


async def test_an_unknown_kind_is_refused_naming_the_field():
    watches = EventWatches(Source(), max_watches=4)
    with pytest.raises(InvalidArgument) as refused:
        await anext(watches.watch("acme", None, ["created", "exploded"]))
    assert refused.value.field == "kinds" and "exploded" in refused.value.message and watches.open == 0


async def test_a_quiet_watch_sends_heartbeats_and_loses_no_event_meanwhile():
    events: asyncio.Queue = asyncio.Queue()

    class Quiet:
        async def watch(self, tenant, after_sequence, kinds):
            yield WatchOpened(0, 0, 0)
            while True:
                yield await events.get()

    watches = EventWatches(Quiet(), max_watches=1, heartbeat_seconds=0.02)
    items = watches.watch("acme", None, [])
    assert isinstance(await anext(items), WatchOpened)
    assert [type(await anext(items)) for _ in range(2)] == [WatchHeartbeat, WatchHeartbeat]
    event = SequencedEvent(1, MemoryEvent("e1", "acme", EventKind.CREATED, "m1", 1, datetime.now(UTC)))
    events.put_nowait(event)
    while isinstance(item := await anext(items), WatchHeartbeat):
        pass
    assert item is event  # the pull waiting across heartbeats delivered it
    await items.aclose()
    assert watches.open == 0
