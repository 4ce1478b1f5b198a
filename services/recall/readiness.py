"""When a starting recall is ready: its projection consumer caught up.

Recall's replicas share one projection consumer (PROJECTOR_DURABLE) and so
one index. A replica that starts while events wait in that consumer would
answer from an index behind the graph, so it reports NOT_SERVING for its
service name (what the readiness probe asks) until the consumer's backlog,
undelivered plus delivered-and-unacknowledged, is small, or a bounded wait
ran out.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable

import structlog

log = structlog.get_logger()


class CaughtUp:
    """Waits until `pending()` is at most `max_pending`, or `timeout_seconds` passed."""

    def __init__(
        self,
        pending: Callable[[], Awaitable[int]],
        *,
        max_pending: int,
        timeout_seconds: float,
        poll_seconds: float,
        clock: Callable[[], float] = time.monotonic,
    ):
        self._pending = pending
        self._max_pending = max_pending
        self._timeout = timeout_seconds
        self._poll = poll_seconds
        self._clock = clock

    async def wait(self) -> bool:
        """Return True once caught up, False when the wait ran out first (logged)."""
        deadline = self._clock() + self._timeout
        backlog: int | None = None
        while True:
            try:
                backlog = await self._pending()
            except Exception as exc:  # the bus is away for a moment: not caught up yet, read again
                log.warning("could not read the projection backlog", error=str(exc))
            else:
                if backlog <= self._max_pending:
                    log.info("projection caught up", pending=backlog, max_pending=self._max_pending)
                    return True
            if self._clock() >= deadline:
                # Availability over freshness: a replica that never turns ready takes no traffic at all
                # (and under a steady write load the backlog may never get that small), while one a little
                # behind only misses the newest memories in its vector arm; the current-state pass and the
                # text arms read the graph, which is always current.
                log.warning(
                    "serving before the projection caught up",
                    pending=backlog,
                    max_pending=self._max_pending,
                    waited_seconds=self._timeout,
                )
                return False
            await asyncio.sleep(min(self._poll, max(0.0, deadline - self._clock())))
