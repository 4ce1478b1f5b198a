"""The outbox relay: publishes the events each write recorded in the graph,
clears them once the bus acknowledges, and re-drives whatever is left (a
write made while NATS was down, or a crash between write and publish)."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable
from datetime import UTC, datetime

import structlog

from services.core.domain.model import MemoryEvent
from services.core.domain.times import to_micros
from services.core.observability import EVENTS_PUBLISHED
from services.core.ports import EventPublisher, GraphStore

log = structlog.get_logger()


class OutboxRelay:
    def __init__(
        self,
        *,
        graph: GraphStore,
        events: EventPublisher,
        sweep_seconds: float,
        grace_seconds: float,
        batch_size: int,
        concurrency: int,
        clock: Callable[[], datetime] = lambda: datetime.now(UTC),
    ):
        self._graph = graph
        self._events = events
        self._sweep_seconds = sweep_seconds
        self._grace_us = int(grace_seconds * 1_000_000)
        self._batch = batch_size
        self._limit = asyncio.Semaphore(concurrency)
        self._clock = clock
        self._acked: list[str] = []
        self._acked_ready = asyncio.Event()
        self._tasks: list[asyncio.Task] = []

    async def publish(self, events: list[MemoryEvent]) -> bool:
        """Publish now; True when the bus acknowledged every event. Events it
        did not acknowledge stay in the outbox for the next sweep."""
        outcomes = await asyncio.gather(*(self._publish_one(e) for e in events))
        acked = [e.event_id for e, ok in zip(events, outcomes, strict=True) if ok]
        if acked:
            self._acked.extend(acked)
            self._acked_ready.set()
        return all(outcomes)

    async def _publish_one(self, event: MemoryEvent) -> bool:
        async with self._limit:
            try:
                await self._events.publish(event)
            except Exception as exc:  # the event is safe in the outbox
                EVENTS_PUBLISHED.labels(event.kind.value, "deferred").inc()
                log.warning("event deferred", event_id=event.event_id, error=str(exc))
                return False
        EVENTS_PUBLISHED.labels(event.kind.value, "published").inc()
        return True

    async def sweep(self) -> int:
        """Re-publish events older than the grace period; returns how many went out."""
        before = to_micros(self._clock()) - self._grace_us
        published = 0
        while True:
            entries = await self._graph.pending_outbox(before, self._batch)
            if not entries:
                return published
            outcomes = await asyncio.gather(*(self._publish_one(e.event) for e in entries))
            done = [e.event_id for e, ok in zip(entries, outcomes, strict=True) if ok]
            if done:
                await self._graph.delete_outbox(done)
                published += len(done)
            if len(done) < len(entries):
                return published  # the bus is still down: try again next sweep

    async def flush(self) -> None:
        """Clear acknowledged events from the outbox (batched, off the request path)."""
        while self._acked:
            batch, self._acked = self._acked[: self._batch], self._acked[self._batch :]
            try:
                await self._graph.delete_outbox(batch)
            except Exception as exc:  # a leftover entry only means a harmless re-publish
                log.warning("outbox clear failed", count=len(batch), error=str(exc))
                return

    async def _flush_loop(self) -> None:
        while True:
            await self._acked_ready.wait()
            self._acked_ready.clear()
            await self.flush()

    async def _sweep_loop(self) -> None:
        while True:
            await asyncio.sleep(self._sweep_seconds)
            try:
                count = await self.sweep()
                if count:
                    log.info("outbox re-driven", published=count)
            except Exception as exc:
                log.warning("outbox sweep failed", error=str(exc))

    def start(self) -> None:
        self._tasks = [asyncio.create_task(self._flush_loop()), asyncio.create_task(self._sweep_loop())]

    async def stop(self) -> None:
        for task in self._tasks:
            task.cancel()
        for task in self._tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task
        self._tasks = []
        await self.flush()
