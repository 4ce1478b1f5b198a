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
from services.core.ports.events import EventPublisher
from services.core.ports.outbox import Outbox

log = structlog.get_logger()

#: How long acknowledged events wait to be cleared together.
FLUSH_DELAY_SECONDS = 0.05


class OutboxRelay:
    def __init__(
        self,
        *,
        outbox: Outbox,
        events: EventPublisher,
        sweep_seconds: float,
        grace_seconds: float,
        batch_size: int,
        concurrency: int,
        sweeps: bool = True,
        clock: Callable[[], datetime] = lambda: datetime.now(UTC),
    ):
        self._outbox = outbox
        self._sweeps = sweeps
        self._events = events
        self._sweep_seconds = sweep_seconds
        self._grace_us = int(grace_seconds * 1_000_000)
        self._batch = batch_size
        self._limit = asyncio.Semaphore(concurrency)  # publish batches in flight at once
        self._clock = clock
        #: (event id, tenant) of the events the bus acknowledged, not yet cleared from the outbox.
        self._acked: list[tuple[str, str]] = []
        self._acked_ready = asyncio.Event()
        self._tasks: list[asyncio.Task] = []
        self._inflight: set[asyncio.Task] = set()

    async def submit(self, events: list[MemoryEvent]) -> bool:
        """Publish in the background (the events are already durable in the
        outbox, so the write need not wait for the bus); returns whether the
        bus is connected, i.e. whether the events are on their way now.

        Waits only when too many batches are already in flight (backpressure).
        """
        await self._limit.acquire()
        task = asyncio.create_task(self._publish_batch(events))
        self._inflight.add(task)
        task.add_done_callback(self._inflight.discard)
        return self._events.connected

    async def publish(self, events: list[MemoryEvent]) -> bool:
        """Publish now and wait; True when the bus acknowledged every event."""
        await self._limit.acquire()
        return await self._publish_batch(events)

    async def _publish_batch(self, events: list[MemoryEvent]) -> bool:
        try:
            outcomes = await self._events.publish_many(events)
        finally:
            self._limit.release()
        for event, ok in zip(events, outcomes, strict=True):
            EVENTS_PUBLISHED.labels(event.kind.value, "published" if ok else "deferred").inc()
        if not all(outcomes):  # the events are safe in the outbox
            log.warning("events deferred", count=outcomes.count(False))
        acked = [(e.event_id, e.tenant) for e, ok in zip(events, outcomes, strict=True) if ok]
        if acked:
            self._acked.extend(acked)
            self._acked_ready.set()
        return all(outcomes)

    async def sweep(self) -> int:
        """Re-publish events older than the grace period; returns how many went out."""
        before = to_micros(self._clock()) - self._grace_us
        published = 0
        while True:
            entries = await self._outbox.pending_outbox(before, self._batch)
            if not entries:
                return published
            complete = await self.publish([e.event for e in entries])
            cleared = await self.flush()
            if not (complete and cleared):
                return published  # the bus or the graph is still down: try again next sweep
            published += len(entries)

    async def flush(self) -> bool:
        """Clear acknowledged events from the outbox (batched, off the request
        path); False when the graph refused (the entries are re-published later,
        harmlessly: the stream de-duplicates them)."""
        while self._acked:
            batch, self._acked = self._acked[: self._batch], self._acked[self._batch :]
            try:
                await self._outbox.delete_outbox([i for i, _ in batch], [t for _, t in batch])
            except Exception as exc:
                log.warning("outbox clear failed", count=len(batch), error=str(exc))
                return False
        return True

    async def _flush_loop(self) -> None:
        while True:
            await self._acked_ready.wait()
            # Gather the acks of a short while into one delete, off the request path.
            await asyncio.sleep(FLUSH_DELAY_SECONDS)
            self._acked_ready.clear()
            await self.flush()

    async def _sweep_loop(self) -> None:
        while True:
            await asyncio.sleep(self._sweep_seconds)
            try:
                count = await self.sweep()
                if count:
                    log.info("outbox re-driven", published=count)
                # Expired idempotency keys go with the same housekeeping beat.
                await self._outbox.purge_idempotency(to_micros(self._clock()))
            except Exception as exc:
                log.warning("outbox sweep failed", error=str(exc))

    def start(self) -> None:
        self._tasks = [asyncio.create_task(self._flush_loop())]
        if self._sweeps:
            self._tasks.append(asyncio.create_task(self._sweep_loop()))

    async def stop(self) -> None:
        """Let in-flight publications finish, then clear what they acknowledged."""
        if self._inflight:
            await asyncio.wait(set(self._inflight), timeout=self._sweep_seconds + 5)
        for task in self._tasks:
            task.cancel()
        for task in self._tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task
        self._tasks = []
        await self.flush()
