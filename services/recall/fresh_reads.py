"""A recall waits, a bounded time, for the vectors of what was stored before it.

The projector notes each memory that arrives without a vector and each
vector it puts in the index (services/core/domain/fresh_vectors.py). A
recall that searches by vector takes the set awaited when it begins and
waits, beside its query's embedding and the keyword arms, until those
memories are searchable, at most RECALL_FRESH_WAIT_SECONDS; memories stored
after it began are not waited for. It does not wait at all when more than
RECALL_FRESH_MAX_AWAITED are awaited (a bulk import: the wait could not
cover it), nor when no vector has arrived for the tenant for
RECALL_FRESH_STALL_SECONDS when it begins (enrichment off, down or failing). state_debug's
`fresh` says what was awaited, what was still missing and how long the
recall waited.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Iterable

from prometheus_client import Gauge, Histogram

from services.core.domain.fresh_vectors import FreshPolicy, FreshVectors

WAITED = Histogram(
    "memgrid_recall_fresh_wait_seconds",
    "Time a recall waited for the vectors of memories stored before it",
    buckets=(0.01, 0.05, 0.1, 0.25, 0.5, 1.0, 2.0, 3.0, 5.0, 10.0),
)
AWAITED = Gauge("memgrid_recall_vectors_awaited", "Memories stored without a vector this process's index awaits")


class FreshReads:
    def __init__(self, policy: FreshPolicy, clock: Callable[[], float] = time.monotonic) -> None:
        self._notes = FreshVectors(policy.capacity, policy.expire_seconds)
        self._policy = policy
        self._clock = clock
        self._changed = asyncio.Event()

    def expect(self, tenant: str, ids: Iterable[str]) -> None:
        """The projector saw these memories stored without a vector."""
        self._notes.expect(tenant, ids, self._clock())
        AWAITED.set(len(self._notes))

    def projected(self, tenant: str, indexed: Iterable[str], gone: Iterable[str]) -> None:
        """The projector put `indexed` memories' vectors in the index, and found
        `gone` ones deleted (no vector is to come): waiting recalls look again."""
        now = self._clock()
        self._notes.arrived(tenant, indexed, now)
        self._notes.forget(tenant, gone)
        AWAITED.set(len(self._notes))
        changed, self._changed = self._changed, asyncio.Event()
        changed.set()

    async def wait(self, tenant: str, debug: dict) -> None:
        """Wait for the tenant's memories awaited now, within the policy's bounds."""
        policy = self._policy
        if policy.wait_seconds <= 0:
            return
        started = self._clock()
        count = self._notes.count(tenant, started)
        if not count:
            return
        waits = count <= policy.max_awaited and self._notes.idle_for(tenant, started) <= policy.stall_seconds
        # A bulk load's set is not copied for a recall that will not wait for it.
        awaited = self._notes.awaited(tenant, started) if waits else frozenset()
        left = count
        deadline = started + policy.wait_seconds
        while waits and left:
            remaining = deadline - self._clock()
            if remaining <= 0:
                break
            try:  # woken by the projector's next batch, or the deadline
                await asyncio.wait_for(self._changed.wait(), timeout=remaining)
            except TimeoutError:
                pass
            left = self._notes.left(tenant, awaited)
        waited = self._clock() - started
        WAITED.observe(waited)
        debug["fresh"] = {"awaited": count, "left": left, "waited_ms": round(waited * 1000, 2), "waits": waits}
