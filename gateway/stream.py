"""Server-sent events (GET /stream): memory events of the caller's tenant,
watched through recall's WatchMemoryEvents RPC (the gateway touches no bus).

Each open stream is one watch: recall reads the tenant's events from the
JetStream event stream and sends each with its stream sequence, which the
stream writes as the SSE `id`. A client that reconnects with Last-Event-ID
gets what was written while it was away (within the stream's retention; a
`gap` event says when the stream no longer holds it). Each stream has a
bounded buffer: when a slow reader lets it fill, newer events are dropped and
counted, never silently (a `dropped` event with the count and the sequences
takes their place; /stream/status reports delivered and dropped events per
stream and in total). Keepalive comments keep proxies from closing an idle
stream. When the gateway loses its watch (recall restarts, the connection
drops), the stream says `interrupted`, and the gateway calls again from the
last sequence it received: `resumed` then means nothing was lost.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
from collections.abc import AsyncGenerator, AsyncIterator, Callable
from dataclasses import dataclass
from datetime import UTC, datetime

import grpc
import structlog
from prometheus_client import Counter, Gauge

from gateway.stream_frames import KEEPALIVE, event_json, gap_json, notice_json, sse
from gateway.stream_subscriber import Gap, Notice, Subscriber, TenantTotals
from memgrid.v1 import recall_service_pb2 as pb
from memgrid.v1 import recall_service_pb2_grpc as pb_grpc
from services.core.codec import event_from_pb
from services.core.domain.times import format_iso
from services.core.domain.watch import SequencedEvent, WatchGap, WatchHeartbeat, WatchOpened
from services.core.grpc.claims import ClaimSigner
from services.core.settings import Settings

log = structlog.get_logger()

STREAM_EVENTS = Counter("memgrid_stream_events_total", "Memory events relayed over SSE", ["outcome"])
STREAM_SUBSCRIBERS = Gauge("memgrid_stream_subscribers", "Open SSE streams")

WatchItem = WatchOpened | WatchGap | SequencedEvent | WatchHeartbeat
#: Opens a watch: (tenant, after_sequence or None for new events only, kinds) -> its items, opened first.
WatchOpener = Callable[[str, int | None, list[str]], AsyncGenerator[WatchItem, None]]


def recall_watch(stub: pb_grpc.RecallServiceStub, claims: ClaimSigner) -> WatchOpener:
    """WatchMemoryEvents on recall, its messages as watch items; each call
    (a reconnection too) with a fresh claim for the tenant."""

    async def watch(tenant: str, after_sequence: int | None, kinds: list[str]) -> AsyncGenerator[WatchItem, None]:
        request = pb.WatchMemoryEventsRequest(kinds=kinds)
        if after_sequence is not None:
            request.after_sequence = after_sequence
        call = stub.WatchMemoryEvents(request, metadata=claims.metadata(tenant, "read"))
        try:
            async for message in call:
                which = message.WhichOneof("item")
                if which == "event":
                    yield SequencedEvent(message.event.sequence, event_from_pb(message.event.event))
                elif which == "gap":
                    gap = message.gap
                    yield WatchGap(gap.requested_after, gap.resumed_after, gap.reason)
                elif which == "heartbeat":
                    yield WatchHeartbeat()
                elif which == "opened":
                    opened = message.opened
                    yield WatchOpened(opened.after_sequence, opened.first_sequence, opened.last_sequence)
        finally:
            call.cancel()  # the client left or the hub gave up: recall closes the consumer

    return watch


@dataclass(slots=True)
class OpenWatch:
    """A watch recall has opened for a stream the client has not started reading."""

    tenant: str
    kinds: list[str]
    opened: WatchOpened
    items: AsyncGenerator[WatchItem, None]


class StreamHub:
    """Every open stream, each fed by a watch of its own on recall."""

    def __init__(
        self,
        watch: WatchOpener,
        *,
        buffer_size: int,
        keepalive_seconds: float,
        open_timeout_seconds: float = 10.0,
        retry_initial_seconds: float = 0.1,
        retry_max_seconds: float = 2.0,
        silence_seconds: float | None = None,
    ):
        """`silence_seconds`: a watch that sends nothing (not even a
        heartbeat) this long is taken for lost; None: never."""
        self._watch = watch
        self._silence = silence_seconds
        self._buffer = buffer_size
        self._keepalive = keepalive_seconds
        self._open_timeout = open_timeout_seconds
        self._retry_initial = retry_initial_seconds
        self._retry_max = retry_max_seconds
        self._subscribers: dict[str, set[Subscriber]] = {}
        self._pumps: dict[Subscriber, asyncio.Task] = {}
        self._totals: dict[str, TenantTotals] = {}
        self._ids = itertools.count(1)

    @classmethod
    def from_settings(cls, settings: Settings, recall: pb_grpc.RecallServiceStub, claims: ClaimSigner) -> StreamHub:
        return cls(
            recall_watch(recall, claims),
            buffer_size=settings.gateway.stream_buffer_size,
            keepalive_seconds=settings.gateway.stream_keepalive_seconds,
            open_timeout_seconds=settings.plane.grpc_timeout_seconds,
            retry_initial_seconds=settings.process.retry_initial_seconds,
            retry_max_seconds=settings.process.retry_max_seconds,
            # Recall sends a heartbeat after each quiet period: three missed ones mean a dead connection.
            silence_seconds=3 * settings.recall.recall_watch_heartbeat_seconds,
        )

    async def close(self) -> None:
        for pump in list(self._pumps.values()):
            pump.cancel()
        for subscribers in self._subscribers.values():
            for subscriber in subscribers:
                subscriber.close()

    # The watch on recall --------------------------------------------------------------------------------

    async def _opened(
        self, tenant: str, after: int | None, kinds: list[str]
    ) -> tuple[WatchOpened, AsyncGenerator[WatchItem, None]]:
        """Call the watch and wait for its first item; raises what the call
        raises (grpc.aio.AioRpcError: the route answers it in the envelope)."""
        items = self._watch(tenant, after, kinds)
        try:
            # asyncio.timeout, not wait_for: Python 3.11's wait_for returns an item that came in as
            # the caller was cancelled and drops the cancellation, which left watches open on recall.
            async with asyncio.timeout(self._open_timeout):
                opened = await anext(items)
        except BaseException:
            with contextlib.suppress(Exception):
                await items.aclose()
            raise
        if not isinstance(opened, WatchOpened):
            await items.aclose()
            raise RuntimeError(f"a watch began with {type(opened).__name__}, not WatchOpened")
        return opened, items

    async def open(self, tenant: str, after_sequence: int | None, kinds: list[str] | None = None) -> OpenWatch:
        """Open a watch for a new stream, from after `after_sequence` (None: new events only)."""
        kinds = list(kinds or [])
        opened, items = await self._opened(tenant, after_sequence, kinds)
        return OpenWatch(tenant, kinds, opened, items)

    def _take(self, subscriber: Subscriber, item: WatchItem, totals: TenantTotals) -> None:
        if isinstance(item, WatchGap):
            subscriber.lost(item)
            return
        if not isinstance(item, SequencedEvent) or item.sequence <= subscriber.received:
            return  # already received (a new watch never repeats one; this keeps it so)
        if not subscriber.offer(item):
            totals.dropped += 1
            STREAM_EVENTS.labels("dropped").inc()
            if subscriber.dropped == 1 or subscriber.dropped % 1000 == 0:
                log.warning(
                    "sse subscriber too slow: events dropped and counted",
                    subscriber=subscriber.id,
                    dropped=subscriber.dropped,
                    buffer_size=subscriber.size,
                )

    async def _pump(self, subscriber: Subscriber, items: AsyncGenerator[WatchItem, None]) -> None:
        """Feed the subscriber from its watch; when the watch is lost, say so
        and call again from the last sequence received, until it is open."""
        totals = self._totals.setdefault(subscriber.tenant, TenantTotals())
        while True:
            try:
                while True:
                    try:
                        async with asyncio.timeout(self._silence):  # not wait_for: see _opened
                            item = await anext(items)
                    except StopAsyncIteration:
                        break
                    self._take(subscriber, item, totals)
                reason = "the watch ended"  # recall is shutting down
            except TimeoutError:
                reason = f"the watch sent nothing for {self._silence} s (not even a heartbeat)"
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                reason = _describe(exc)
            finally:
                with contextlib.suppress(Exception):
                    await items.aclose()
            since = datetime.now(UTC)
            subscriber.watching = False
            subscriber.notice(Notice("interrupted", since))
            log.warning("sse watch interrupted; calling again", subscriber=subscriber.id, reason=reason)
            pause = self._retry_initial
            while True:
                await asyncio.sleep(pause)
                try:
                    opened, items = await self._opened(subscriber.tenant, subscriber.received, subscriber.kinds)
                    break
                except asyncio.CancelledError:
                    raise
                except Exception as exc:
                    log.info("sse watch not reopened yet", subscriber=subscriber.id, reason=_describe(exc))
                    pause = min(pause * 2, self._retry_max)
            subscriber.watching = True
            subscriber.notice(Notice("resumed", since, datetime.now(UTC), opened.after_sequence))
            log.info("sse watch resumed", subscriber=subscriber.id, after=opened.after_sequence)

    # Subscribers ----------------------------------------------------------------------------------------

    def _join(self, watch: OpenWatch) -> Subscriber:
        subscriber = Subscriber(next(self._ids), watch.tenant, self._buffer, datetime.now(UTC), kinds=watch.kinds)
        subscriber.received = watch.opened.after_sequence
        self._subscribers.setdefault(watch.tenant, set()).add(subscriber)
        self._pumps[subscriber] = asyncio.get_running_loop().create_task(self._pump(subscriber, watch.items))
        STREAM_SUBSCRIBERS.inc()
        return subscriber

    def _leave(self, subscriber: Subscriber) -> None:
        """Synchronous, so it runs even while the stream's task is being cancelled."""
        STREAM_SUBSCRIBERS.dec()
        pump = self._pumps.pop(subscriber, None)
        if pump is not None:
            pump.cancel()  # its watch's call is cancelled with it
        subscribers = self._subscribers.get(subscriber.tenant, set())
        subscribers.discard(subscriber)
        if not subscribers:
            self._subscribers.pop(subscriber.tenant, None)

    async def events(self, watch: OpenWatch) -> AsyncIterator[str]:
        """The stream of one subscriber: `ready`, then events, `dropped`
        counts, gaps, notices and keepalive comments, until the client leaves."""
        subscriber = self._join(watch)
        totals = self._totals.setdefault(watch.tenant, TenantTotals())
        opened = watch.opened
        try:
            yield sse(
                "ready",
                {
                    "subscriber_id": subscriber.id,
                    "tenant": watch.tenant,
                    "buffer_size": self._buffer,
                    "keepalive_seconds": self._keepalive,
                    "nats": "connected",  # recall's watch on the event stream is open
                    "source": "recall",
                    "last_event_id": opened.after_sequence,
                    "kinds": watch.kinds,
                },
                opened.after_sequence,
            )
            while not subscriber.closed:
                item = await subscriber.next(self._keepalive)
                if item is None:
                    if not subscriber.closed:
                        yield KEEPALIVE
                elif isinstance(item, SequencedEvent):
                    yield sse(
                        item.event.kind.value, {**event_json(item.event), "sequence": item.sequence}, item.sequence
                    )
                    subscriber.delivered += 1
                    totals.delivered += 1
                    STREAM_EVENTS.labels("delivered").inc()
                elif isinstance(item, Gap):
                    # No id: a client that reconnects right after it gets the dropped events again.
                    yield sse(
                        "dropped",
                        {
                            "count": item.count,
                            "first_occurred_at": format_iso(item.first),
                            "last_occurred_at": format_iso(item.last),
                            "first_sequence": item.first_sequence,
                            "last_sequence": item.last_sequence,
                            "total_dropped": subscriber.dropped,
                            "reason": f"this stream's buffer of {subscriber.size} events was full",
                        },
                    )
                elif isinstance(item, WatchGap):
                    yield sse("gap", gap_json(item), item.resumed_after)
                else:
                    yield sse(item.kind, notice_json(item))
        finally:
            self._leave(subscriber)

    def status(self, tenant: str) -> dict:
        """Figures of the tenant's streams: open subscribers, and events
        delivered and dropped (per subscriber, and in total since start)."""
        subscribers = sorted(self._subscribers.get(tenant, ()), key=lambda s: s.id)
        totals = self._totals.get(tenant, TenantTotals())
        return {
            "tenant": tenant,
            "source": "recall",
            "buffer_size": self._buffer,
            "keepalive_seconds": self._keepalive,
            "subscribers": len(subscribers),
            "interrupted": sum(not s.watching for s in subscribers),
            "delivered": totals.delivered,
            "dropped": totals.dropped,
            "per_subscriber": [
                {
                    "id": s.id,
                    "connected_at": format_iso(s.connected_at),
                    "delivered": s.delivered,
                    "dropped": s.dropped,
                    "buffered": s.queued,
                    "watching": s.watching,
                    "last_received": s.received,
                }
                for s in subscribers
            ],
        }


def _describe(exc: Exception) -> str:
    if isinstance(exc, grpc.aio.AioRpcError):
        return f"{exc.code().name}: {exc.details()}"
    return str(exc) or type(exc).__name__
