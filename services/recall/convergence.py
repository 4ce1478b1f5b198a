"""The vector index converges on the graph.

The projector keeps the index in line event by event; whatever it missed (a
point deleted behind recall's back, a shard lost or replaced because it was
unreadable, events acknowledged before a crash wrote them) is found by
comparing counts: per tenant, the graph's memories with an embedding
against the index's points (an exact facet over the indexed `tenant`
field). Both are one query whatever the tenant count (about 45 ms and 20 ms
at 100k memories), so the check runs at start-up and every
RECALL_INDEX_CHECK_SECONDS. A tenant's embeddings of another dimension than
the index's are refused by it: a repair counts them as it scans, and later
checks expect that many fewer points (until the next repair counts again).

A tenant whose counts differ is repaired: every one of its memories is
projected again, page by page, over the points it has (an upsert, so its
vector arm keeps answering meanwhile); when the index then still holds more
points than the graph (a point whose memory is gone), the tenant's points
are dropped and projected anew (IndexAdmin.rebuild_index). A tenant the
graph no longer has loses its points. Equal counts with a stale payload are
not detected here: the projector re-reads the graph on every event, and
`make reindex` rebuilds everything. After the projector lost events to the
stream's retention (a payload change, a deletion), counts prove nothing:
`repair_all` projects every tenant anew from the graph, as a repair does.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Callable
from contextlib import aclosing
from dataclasses import dataclass

import structlog

from services.core.background import BackgroundLoop
from services.core.domain.projection import vector_points
from services.core.domain.retention import ConsumerGap
from services.core.ports.vector import IndexSource, VectorIndex
from services.recall.graph_pages import pages_ahead

log = structlog.get_logger()


@dataclass(frozen=True, slots=True)
class ConvergenceReport:
    """What the last check found and did."""

    checked_at: float  # unix seconds
    lag: int  # points missing or in excess, over every tenant, after the check's repairs
    repaired_tenants: int
    moved: int  # points the repairs added or removed
    seconds: float


class IndexConvergence(BackgroundLoop):
    """Compares the vector index with the graph and repairs what differs."""

    _failed = "vector index convergence check failed"

    def __init__(
        self,
        *,
        source: IndexSource,
        vectors: VectorIndex,
        rebuild_tenant: Callable[[str], AsyncIterator[object]],
        lock: asyncio.Lock,
        interval_seconds: float,
        settle_seconds: float,
        batch_size: int,
        max_tenants: int,
        rebuild_waiting: Callable[[str], bool] = lambda _tenant: False,
        clock: Callable[[], float] = time.time,
    ):
        self._source = source
        self._vectors = vectors
        #: IndexAdmin.project_anew for one tenant (its progress reports, read to the end).
        self._rebuild_tenant = rebuild_tenant
        #: Shared with RebuildIndex: a check never runs beside a rebuild.
        self._lock = lock
        #: IndexAdmin.rebuild_waiting: a rebuild of the tenant waits for the lock (the repair stops for it).
        self._rebuild_waiting = rebuild_waiting
        self._interval = interval_seconds
        self._first = 0.0  # at start-up: a shard recreated by open() is refilled at once
        self._settle = settle_seconds
        self._batch_size = batch_size
        self._max_tenants = max_tenants
        self._clock = clock
        self.last: ConvergenceReport | None = None
        #: Per tenant, the embeddings of another dimension its last repair found (never points).
        self._unindexable: dict[str, int] = {}
        #: A check is running now (the /health figure `checking`).
        self.checking = False
        #: Set once the start-up check ended (repaired, skipped or failed), or at once when checks are off.
        self._first_done = asyncio.Event()
        if interval_seconds <= 0:
            self._first_done.set()

    async def _pass(self) -> None:
        try:
            status = await self._vectors.status()
            if not status.ok:
                # Closed (a dimension mismatch) or unreachable: nothing to compare; /health says why.
                log.info("vector index convergence check skipped", status=status.status)
                return
            await self.check()
        finally:
            self._first_done.set()

    async def first_check(self, timeout_seconds: float) -> bool:
        """Wait for the start-up check (a recall whose shard was lost serves
        once it is refilled); False when `timeout_seconds` passed first."""
        try:
            await asyncio.wait_for(self._first_done.wait(), timeout_seconds)
        except TimeoutError:
            log.warning("serving before the vector index's start-up check ended", timeout_seconds=timeout_seconds)
            return False
        return True

    async def check(self) -> ConvergenceReport:
        """One comparison of every tenant's counts, repairing what differs."""
        async with self._lock:
            self.checking = True
            try:
                report = await self._check()
            finally:
                self.checking = False
        self.last = report
        return report

    async def repair_all(self, gap: ConsumerGap) -> ConvergenceReport:
        """Repair every tenant, whatever the counts: the projector's on_gap,
        after its events from `gap.next_sequence` on were lost to retention."""
        async with self._lock:
            self.checking = True
            try:
                started = time.perf_counter()
                graph = await self._source.embedded_counts()
                index = await self._vectors.count_by_tenant(self._max_tenants)
                tenants = {t: (graph.get(t, 0), index.get(t, 0)) for t in sorted(set(graph) | set(index))}
                moved = await self._repair_tenants(tenants)
                remaining = sum(abs(e - h) for e, h in (await self._counts()).values())
            finally:
                self.checking = False
        self.last = ConvergenceReport(self._clock(), remaining, len(tenants), moved, time.perf_counter() - started)
        log.info(
            "vector index projected anew after lost events", consumer=gap.consumer, lost=gap.lost,
            tenants=self.last.repaired_tenants, moved=moved, remaining=remaining,
        )  # fmt: skip
        return self.last

    async def _counts(self) -> dict[str, tuple[int, int]]:
        """Per tenant whose counts differ: (the graph's, the index's)."""
        graph = {t: n - self._unindexable.get(t, 0) for t, n in (await self._source.embedded_counts()).items()}
        index = await self._vectors.count_by_tenant(self._max_tenants)
        return {
            t: (graph.get(t, 0), index.get(t, 0))
            for t in sorted(set(graph) | set(index))
            if graph.get(t, 0) != index.get(t, 0)
        }

    async def _check(self) -> ConvergenceReport:
        started = time.perf_counter()
        differ = await self._counts()
        if differ and self._settle > 0:
            # A write the projector has not applied yet differs too, for a
            # moment: only a difference that stays the same is repaired.
            await asyncio.sleep(self._settle)
            again = await self._counts()
            differ = {t: c for t, c in again.items() if differ.get(t) == c}
        lag = sum(abs(expected - held) for expected, held in differ.values())
        for tenant, (expected, held) in differ.items():
            log.warning("vector index differs from the graph: repairing", tenant=tenant, graph=expected, index=held)
        moved = await self._repair_tenants(differ)
        remaining = sum(abs(e - h) for e, h in (await self._counts()).values()) if differ else 0
        report = ConvergenceReport(self._clock(), remaining, len(differ), moved, time.perf_counter() - started)
        if differ:
            log.info(
                "vector index converged", tenants=len(differ), lag=lag, moved=moved, remaining=remaining,
                seconds=round(report.seconds, 2),
            )  # fmt: skip
        return report

    async def _repair_tenants(self, counts: dict[str, tuple[int, int]]) -> int:
        """Repair each tenant of `counts` (tenant: (the graph's, the index's));
        returns the points added or removed."""
        moved = 0
        for tenant, (expected, held) in counts.items():
            if expected <= 0:
                await self._vectors.clear(tenant)  # the graph has none of the tenant's memories
                self._unindexable.pop(tenant, None)
                moved += held
                continue
            moved += abs(await self._repair(tenant) - held)
        return moved

    async def _repair(self, tenant: str) -> int:
        """Project every one of the tenant's memories over its points, in a
        bulk load (one HNSW build at the end, as a rebuild's: optimising every
        VECTOR_OPTIMIZE_EVERY points merges ever larger segments, 370 points a
        second at 1M); rebuild the tenant when points without a memory remain.
        Stops at the next page when a rebuild covering the tenant waits (the
        rebuild projects it anew anyway). Returns the tenant's points after."""
        expected = unindexable = 0
        pages = pages_ahead(self._source, self._batch_size, tenant)
        async with self._vectors.bulk_load(), aclosing(pages):
            async for page in pages:
                if self._rebuild_waiting(tenant):
                    log.info("vector index repair left to a waiting rebuild", tenant=tenant, projected=expected)
                    return (await self._vectors.count_by_tenant(self._max_tenants)).get(tenant, 0)
                points, other_dimension = vector_points(page, self._vectors.dimension)
                await self._vectors.upsert(points)
                expected += len(points)
                unindexable += other_dimension
        self._unindexable[tenant] = unindexable
        after = (await self._vectors.count_by_tenant(self._max_tenants)).get(tenant, 0)
        if after > expected:
            # Points whose memory is gone: only a rebuild of the tenant finds them without listing ids.
            async for _ in self._rebuild_tenant(tenant):
                pass
            after = (await self._vectors.count_by_tenant(self._max_tenants)).get(tenant, 0)
        return after

    def figures(self) -> dict[str, float]:
        """The /health figures of the vector index: the points it differs
        from the graph by after the last check, when that ran (unix seconds;
        0 before the first), what it repaired, and whether one runs now."""
        last = self.last
        return {
            "lag": float(last.lag) if last else 0.0,
            "last_check": last.checked_at if last else 0.0,
            "repaired_tenants": float(last.repaired_tenants) if last else 0.0,
            "repaired_points": float(last.moved) if last else 0.0,
            "checking": 1.0 if self.checking else 0.0,
        }
