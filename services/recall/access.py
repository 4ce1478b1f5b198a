"""Records which memories recall returned (last_accessed), off the request.

AutoMem's model keeps a memory's last retrieval time, and consolidation's
decay reads it. Writing it in the request would add a graph write to every
recall, so a recall only hands its ids to the recorder (no I/O, no await);
the recorder collects them per tenant and writes each tenant's in one graph
query every `flush_seconds`, or as soon as `batch_size` ids are waiting. It
sets last_accessed alone: no version, no updated_at, no event, so an access
never re-projects or re-enriches a memory. What is waiting is written on
stop (service shutdown)."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable, Iterable

import structlog

from services.core.background import BackgroundLoop

log = structlog.get_logger()

#: touch(tenant, ids, accessed_us): one query for a tenant's ids.
Touch = Callable[[str, list[str], int], Awaitable[None]]


class AccessRecorder(BackgroundLoop):
    """Its loop flushes every flush_seconds, or at once when a batch is waiting."""

    def __init__(self, touch: Touch, *, flush_seconds: float, batch_size: int, clock_us: Callable[[], int]):
        self._touch = touch
        self._flush_seconds = flush_seconds
        self._batch_size = batch_size
        self._clock_us = clock_us
        #: tenant -> {id: None} (insertion-ordered set), and the latest access time per tenant.
        self._pending: dict[str, dict[str, None]] = {}
        self._latest: dict[str, int] = {}
        self._waiting = 0
        self._full = asyncio.Event()
        self.flushes = 0

    def record(self, tenant: str, ids: Iterable[str]) -> None:
        """Note an access of these memories now; returns at once (the write comes later)."""
        pending = self._pending.setdefault(tenant, {})
        before = len(pending)
        pending.update(dict.fromkeys(ids))
        self._latest[tenant] = self._clock_us()
        self._waiting += len(pending) - before
        if self._waiting >= self._batch_size:
            self._full.set()

    async def flush(self) -> int:
        """Write what is waiting, one query per tenant; returns the ids written.
        A tenant whose write fails is logged and dropped (an access time is a
        hint for decay, not a record worth retrying forever)."""
        pending, latest = self._pending, self._latest
        self._pending, self._latest, self._waiting = {}, {}, 0
        self._full.clear()
        written = 0
        for tenant, ids in pending.items():
            try:
                await self._touch(tenant, list(ids), latest[tenant])
                written += len(ids)
            except Exception as exc:
                log.warning("recording recall accesses failed", tenant=tenant, ids=len(ids), error=str(exc))
        if pending:
            self.flushes += 1
        return written

    async def _loop(self) -> None:
        while True:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._full.wait(), self._flush_seconds)
            await self.flush()

    async def stop(self) -> None:
        """Stop the loop and write what is still waiting."""
        await super().stop()
        await self.flush()
