"""Watching a tenant's memory events (WatchMemoryEvents, behind GET /stream).

Recall hosts the watches because it already reads the event stream (its
projection) and is the read side that scales out: each replica serves its own
watchers straight from JetStream, and the gateway holds no bus connection.
The number of watches open at once in one process is capped, and so is
each tenant's share of them (one tenant's crowd of streams leaves room for
the others).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections import Counter
from collections.abc import AsyncGenerator

from prometheus_client import Gauge

from services.core.domain.errors import InvalidArgument, ResourceExhausted
from services.core.domain.model import EventKind
from services.core.domain.watch import SequencedEvent, WatchGap, WatchHeartbeat, WatchOpened
from services.core.ports.events import EventWatchSource

OPEN_WATCHES = Gauge("memgrid_event_watches", "WatchMemoryEvents calls open in this process")

_KINDS = {kind.value for kind in EventKind}


class EventWatches:
    """Opens watches for callers, at most `max_watches` at once and
    `max_per_tenant` of them for one tenant (None: no tenant cap)."""

    def __init__(
        self,
        source: EventWatchSource,
        *,
        max_watches: int,
        max_per_tenant: int | None = None,
        heartbeat_seconds: float = 15.0,
    ):
        self._source = source
        self._max = max_watches
        self._max_per_tenant = max_per_tenant
        self._heartbeat = heartbeat_seconds
        self._open = 0
        self._by_tenant: Counter[str] = Counter()

    @property
    def open(self) -> int:
        """Watches open right now."""
        return self._open

    def _kinds(self, kinds: list[str]) -> list[str]:
        wanted = [k.strip().lower() for k in kinds if k.strip()]
        unknown = sorted(set(wanted) - _KINDS)
        if unknown:
            raise InvalidArgument(
                "UNKNOWN_EVENT_KIND",
                f"kinds: unknown event kind {', '.join(unknown)} (one of {', '.join(sorted(_KINDS))})",
                field="kinds",
            )
        return wanted

    async def watch(
        self, tenant: str, after_sequence: int | None, kinds: list[str]
    ) -> AsyncGenerator[WatchOpened | WatchGap | SequencedEvent | WatchHeartbeat, None]:
        """The tenant's events after `after_sequence` (None: from now on), a
        heartbeat after each quiet `heartbeat_seconds`; refused with
        RESOURCE_EXHAUSTED while `max_watches` are open, or the tenant's
        `max_per_tenant`."""
        wanted = self._kinds(kinds)
        if self._open >= self._max:
            raise ResourceExhausted(
                "WATCH_LIMIT_REACHED",
                f"this recall process serves {self._max} event watches at most (RECALL_MAX_WATCHES); retry later",
                limit=self._max,
            )
        if self._max_per_tenant is not None and self._by_tenant[tenant] >= self._max_per_tenant:
            raise ResourceExhausted(
                "TENANT_WATCH_LIMIT_REACHED",
                f"this tenant has {self._max_per_tenant} event streams open at most on this recall process "
                "(RECALL_MAX_WATCHES_PER_TENANT); close one or retry later",
                limit=self._max_per_tenant,
            )
        self._open += 1  # counted before the first await, so concurrent callers see it
        self._by_tenant[tenant] += 1
        OPEN_WATCHES.inc()
        items = self._source.watch(tenant, after_sequence, wanted)
        pending: asyncio.Task | None = None
        try:
            while True:
                # One pull of the source outlives a heartbeat: it is waited on again, never cancelled midway.
                pending = pending or asyncio.ensure_future(anext(items))
                done, _ = await asyncio.wait({pending}, timeout=self._heartbeat)
                if not done:
                    yield WatchHeartbeat()
                    continue
                task, pending = pending, None
                try:
                    item = task.result()
                except StopAsyncIteration:
                    return
                yield item
        finally:
            if pending is not None:
                pending.cancel()
                with contextlib.suppress(BaseException):
                    await pending
            await items.aclose()
            self._open -= 1
            self._by_tenant[tenant] -= 1
            if not self._by_tenant[tenant]:
                del self._by_tenant[tenant]
            OPEN_WATCHES.dec()
