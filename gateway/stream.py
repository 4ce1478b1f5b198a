"""Server-sent events (GET /stream): memory events of the caller's tenant,
relayed from NATS as they happen.

The gateway holds one core NATS subscription per tenant with a listener
(<prefix>.<tenant>.*), opened by its first subscriber and closed after its
last, so it never receives another tenant's events. Each subscriber has a
bounded buffer. When a slow subscriber's buffer is full, newer events are
dropped and counted, never silently: a `dropped` event with the count takes
their place in the stream, and /stream/status reports delivered and dropped
events per subscriber and in total. Keepalive comments keep proxies from
closing an idle stream. Core NATS does not replay: while the gateway's
connection is down, events are missed, and the stream says so with an
`interrupted` event (and `resumed` once the connection is back).
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
from collections import deque
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from datetime import UTC, datetime

import structlog
from prometheus_client import Counter, Gauge

from services.core.adapters.nats_bus import NatsEventSubscriber
from services.core.domain.model import EventKind, MemoryEvent
from services.core.domain.times import format_iso
from services.core.settings import Settings

log = structlog.get_logger()

STREAM_EVENTS = Counter("memgrid_stream_events_total", "Memory events relayed over SSE", ["outcome"])
STREAM_SUBSCRIBERS = Gauge("memgrid_stream_subscribers", "Open SSE streams")

#: AutoMem's names for the kinds it streams (its clients switch on `type`).
_AUTOMEM_TYPES = {
    EventKind.CREATED: "memory.store",
    EventKind.UPDATED: "memory.update",
    EventKind.DELETED: "memory.delete",
    EventKind.ASSOCIATED: "memory.associate",
    EventKind.ENRICHED: "enrichment.complete",
}


def event_json(event: MemoryEvent) -> dict:
    """A memory event as the stream's data (thin, like the event itself)."""
    relation = event.relation
    return {
        "event_id": event.event_id,
        "kind": event.kind.value,
        "type": _AUTOMEM_TYPES.get(event.kind, f"memory.{event.kind.value}"),
        "memory_id": event.memory_id,
        "version": event.version,
        "occurred_at": format_iso(event.occurred_at),
        "timestamp": format_iso(event.occurred_at),
        "tenant": event.tenant,
        "content_changed": event.content_changed,
        "has_embedding": event.has_embedding,
        "relation": None
        if relation is None
        else {
            "source_id": relation.source_id,
            "target_id": relation.target_id,
            "type": relation.type,
            "strength": relation.strength,
        },
    }


def sse(kind: str, data: dict) -> str:
    return f"event: {kind}\ndata: {json.dumps(data, ensure_ascii=False)}\n\n"


KEEPALIVE = ": keepalive\n\n"
#: How long start-up waits for NATS before connecting in the background.
CONNECT_WAIT_SECONDS = 2.0


@dataclass(slots=True)
class Gap:
    """Events dropped at this point of a subscriber's stream."""

    count: int = 0
    first: datetime | None = None
    last: datetime | None = None

    def add(self, event: MemoryEvent) -> None:
        self.count += 1
        self.first = self.first or event.occurred_at
        self.last = event.occurred_at


@dataclass(slots=True)
class Notice:
    """A change of the gateway's NATS connection: `interrupted` or `resumed`."""

    kind: str
    since: datetime
    until: datetime | None = None


@dataclass(eq=False)
class Subscriber:
    """One open stream: a buffer of at most `size` events, with the gaps
    where newer events were dropped and the connection notices in order."""

    id: int
    tenant: str
    size: int
    connected_at: datetime
    delivered: int = 0
    dropped: int = 0
    items: deque = field(default_factory=deque)
    queued: int = 0
    closed: bool = False
    _wake: asyncio.Event = field(default_factory=asyncio.Event)

    def offer(self, event: MemoryEvent) -> bool:
        """Buffer the event, or count it dropped when the buffer is full."""
        if self.queued < self.size:
            self.items.append(event)
            self.queued += 1
            self._wake.set()
            return True
        if not self.items or not isinstance(self.items[-1], Gap):
            self.items.append(Gap())
        self.items[-1].add(event)
        self.dropped += 1
        self._wake.set()
        return False

    def notice(self, notice: Notice) -> None:
        """Queue a connection notice. Notices the client has not read yet
        collapse (interrupted, resumed, interrupted is still interrupted since
        the first), so a flapping connection cannot grow the buffer."""
        last = self.items[-1] if self.items else None
        before = self.items[-2] if len(self.items) > 1 else None
        unread = isinstance(last, Notice) and (
            last.kind == "interrupted" or (isinstance(before, Notice) and before.kind == "interrupted")
        )
        if notice.kind == "interrupted" and unread:
            if last.kind == "resumed":
                self.items.pop()  # lost again before the client read that it had resumed
        elif notice.kind == "resumed" and isinstance(last, Notice) and last.kind == "interrupted":
            self.items.append(Notice("resumed", last.since, notice.until))
        else:
            self.items.append(notice)
        self._wake.set()

    def close(self) -> None:
        self.closed = True
        self._wake.set()

    async def next(self, wait_seconds: float):
        """The next item, or None when `wait_seconds` pass with nothing to send."""
        if not self.items:
            self._wake.clear()
            try:
                await asyncio.wait_for(self._wake.wait(), wait_seconds)
            except TimeoutError:
                return None
            if not self.items:
                return None
        item = self.items.popleft()
        if isinstance(item, MemoryEvent):
            self.queued -= 1
        return item


@dataclass(slots=True)
class TenantTotals:
    delivered: int = 0
    dropped: int = 0


class StreamHub:
    """Subscribers of every tenant, fed by one NATS subscription per tenant."""

    def __init__(self, source: NatsEventSubscriber, *, buffer_size: int, keepalive_seconds: float):
        self._source = source
        self._buffer = buffer_size
        self._keepalive = keepalive_seconds
        self._subscribers: dict[str, set[Subscriber]] = {}
        self._subscriptions: dict[str, object] = {}
        self._totals: dict[str, TenantTotals] = {}
        self._lock = asyncio.Lock()
        self._ids = itertools.count(1)
        self._connector: asyncio.Task | None = None
        self._down_since: datetime | None = datetime.now(UTC)  # not connected yet
        self._background: set[asyncio.Task] = set()

    @classmethod
    def from_settings(cls, settings: Settings) -> StreamHub:
        hub: StreamHub

        def on_connection(connected: bool) -> None:
            hub.connection_changed(connected)

        def on_slow(subject: str) -> None:
            hub.slow(subject)

        source = NatsEventSubscriber(
            url=settings.nats_url,
            subject_prefix=settings.nats_subject_prefix,
            on_connection=on_connection,
            on_slow=on_slow,
            retry_initial_seconds=settings.retry_initial_seconds,
            retry_max_seconds=settings.retry_max_seconds,
        )
        hub = cls(source, buffer_size=settings.stream_buffer_size, keepalive_seconds=settings.stream_keepalive_seconds)
        return hub

    # Lifecycle ------------------------------------------------------------------------------------------

    async def start(self) -> None:
        """Connect, waiting a moment for NATS; if it is not up yet, keep
        trying in the background (the gateway serves meanwhile)."""
        self._connector = asyncio.create_task(self._connect())
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(asyncio.shield(self._connector), CONNECT_WAIT_SECONDS)

    async def _connect(self) -> None:
        await self._source.connect()
        async with self._lock:
            for tenant in list(self._subscribers):
                await self._open(tenant)
        self.connection_changed(True)  # once every waiting tenant is subscribed

    async def close(self) -> None:
        if self._connector is not None:
            self._connector.cancel()
        for subscribers in self._subscribers.values():
            for subscriber in subscribers:
                subscriber.close()
        await self._source.close()

    # NATS side ------------------------------------------------------------------------------------------

    async def _open(self, tenant: str) -> None:
        if tenant in self._subscriptions or not self._source.connected:
            return
        self._subscriptions[tenant] = await self._source.subscribe(tenant, lambda e: self._dispatch(tenant, e))

    def _dispatch(self, tenant: str, event: MemoryEvent) -> None:
        totals = self._totals.setdefault(tenant, TenantTotals())
        for subscriber in self._subscribers.get(tenant, ()):
            if not subscriber.offer(event):
                totals.dropped += 1
                STREAM_EVENTS.labels("dropped").inc()
                if subscriber.dropped == 1 or subscriber.dropped % 1000 == 0:
                    log.warning(
                        "sse subscriber too slow: events dropped and counted",
                        subscriber=subscriber.id,
                        dropped=subscriber.dropped,
                        buffer_size=subscriber.size,
                    )

    def connection_changed(self, connected: bool) -> None:
        """Tell every subscriber when events may have been missed."""
        now = datetime.now(UTC)
        if connected == (self._down_since is None):
            return
        if connected:
            notice, self._down_since = Notice("resumed", self._down_since, now), None
            log.info("sse relay connected to NATS", down_since=format_iso(notice.since))
        else:
            notice = Notice("interrupted", now)
            self._down_since = now
            log.warning("sse relay interrupted: NATS connection lost")
        for subscribers in self._subscribers.values():
            for subscriber in subscribers:
                subscriber.notice(notice)

    def slow(self, subject: str) -> None:
        """NATS dropped messages of a subscription the gateway read too slowly."""
        log.warning("nats dropped events of a slow subscription", subject=subject)
        now = datetime.now(UTC)
        for tenant, subscribers in self._subscribers.items():
            if self._source.subject(tenant) == subject:
                for subscriber in subscribers:
                    subscriber.notice(Notice("interrupted", now))
                    subscriber.notice(Notice("resumed", now, now))

    # Subscribers ----------------------------------------------------------------------------------------

    async def _join(self, tenant: str) -> Subscriber:
        subscriber = Subscriber(next(self._ids), tenant, self._buffer, datetime.now(UTC))
        async with self._lock:
            self._subscribers.setdefault(tenant, set()).add(subscriber)
            await self._open(tenant)
        STREAM_SUBSCRIBERS.inc()
        return subscriber

    def _leave(self, subscriber: Subscriber) -> None:
        """Synchronous, so it runs even while the stream's task is being cancelled."""
        STREAM_SUBSCRIBERS.dec()
        subscribers = self._subscribers.get(subscriber.tenant, set())
        subscribers.discard(subscriber)
        if not subscribers:
            self._subscribers.pop(subscriber.tenant, None)
            subscription = self._subscriptions.pop(subscriber.tenant, None)
            if subscription is not None:
                task = asyncio.get_running_loop().create_task(self._source.unsubscribe(subscription))
                self._background.add(task)
                task.add_done_callback(self._background.discard)

    async def events(self, tenant: str) -> AsyncIterator[str]:
        """The stream of one subscriber: `ready`, then events, `dropped` counts,
        connection notices and keepalive comments, until the client leaves."""
        subscriber = await self._join(tenant)
        totals = self._totals.setdefault(tenant, TenantTotals())
        try:
            yield sse(
                "ready",
                {
                    "subscriber_id": subscriber.id,
                    "tenant": tenant,
                    "buffer_size": self._buffer,
                    "keepalive_seconds": self._keepalive,
                    "nats": "connected" if tenant in self._subscriptions else "unavailable",
                },
            )
            while not subscriber.closed:
                item = await subscriber.next(self._keepalive)
                if item is None:
                    if not subscriber.closed:
                        yield KEEPALIVE
                elif isinstance(item, MemoryEvent):
                    yield sse(item.kind.value, event_json(item))
                    subscriber.delivered += 1
                    totals.delivered += 1
                    STREAM_EVENTS.labels("delivered").inc()
                elif isinstance(item, Gap):
                    yield sse(
                        "dropped",
                        {
                            "count": item.count,
                            "first_occurred_at": format_iso(item.first),
                            "last_occurred_at": format_iso(item.last),
                            "total_dropped": subscriber.dropped,
                            "reason": f"this stream's buffer of {subscriber.size} events was full",
                        },
                    )
                else:
                    yield sse(
                        item.kind,
                        {
                            "reason": "the gateway's NATS connection was lost; events in this window may be missing",
                            "since": format_iso(item.since),
                            "until": format_iso(item.until),
                        },
                    )
        finally:
            self._leave(subscriber)

    def status(self, tenant: str) -> dict:
        """Figures of the tenant's streams: open subscribers, and events
        delivered and dropped (per subscriber, and in total since start)."""
        subscribers = sorted(self._subscribers.get(tenant, ()), key=lambda s: s.id)
        totals = self._totals.get(tenant, TenantTotals())
        return {
            "tenant": tenant,
            "nats": "connected" if self._source.connected else "unavailable",
            "buffer_size": self._buffer,
            "keepalive_seconds": self._keepalive,
            "subscribers": len(subscribers),
            "delivered": totals.delivered,
            "dropped": totals.dropped,
            "per_subscriber": [
                {
                    "id": s.id,
                    "connected_at": format_iso(s.connected_at),
                    "delivered": s.delivered,
                    "dropped": s.dropped,
                    "buffered": s.queued,
                }
                for s in subscribers
            ],
        }
