"""The vector index's use cases besides ranked recall: nearest neighbours
for enrichment (find_similar), the rebuild from the graph, and the status
of the stores recall depends on."""

from __future__ import annotations

import asyncio
import time
from collections import Counter
from collections.abc import AsyncIterator, Callable
from contextlib import aclosing
from dataclasses import dataclass, replace
from datetime import UTC, datetime

import structlog

from services.core.domain.model import ComponentStatus
from services.core.domain.projection import VectorHit, VectorQuery, vector_points
from services.core.domain.recall_request import check_dimension
from services.core.ports.events import EventPublisher
from services.core.ports.graph import GraphLifecycle
from services.core.ports.vector import IndexSource, VectorIndex
from services.recall.graph_pages import pages_ahead

log = structlog.get_logger()


@dataclass(frozen=True, slots=True)
class RebuildProgress:
    indexed: int
    skipped: int
    total: int
    done: bool
    elapsed_seconds: float


class IndexAdmin:
    """FindSimilar, RebuildIndex and GetSystemStatus."""

    def __init__(
        self,
        *,
        source: IndexSource,
        vectors: VectorIndex,
        lifecycle: GraphLifecycle,
        events: EventPublisher,
        clock: Callable[[], datetime] = lambda: datetime.now(UTC),
    ):
        self._source = source
        self._vectors = vectors
        self._lifecycle = lifecycle
        self._events = events
        self._clock = clock
        #: Held by a rebuild and by the convergence check: never both at once.
        self.rebuild_lock = asyncio.Lock()
        #: Rebuilds waiting for the lock, by tenant (None: every tenant): a
        #: convergence repair of a tenant one of them covers stops, and leaves
        #: the tenant to it (rebuild_waiting), rather than project it twice.
        self._waiting: Counter[str | None] = Counter()
        #: The /health figures of the index's convergence check (None: no check).
        self.convergence_figures: Callable[[], dict[str, float]] | None = None

    async def find_similar(
        self, tenant: str, queries: list[tuple[str, list[float]]], *, limit: int, min_score: float
    ) -> list[list[VectorHit]]:
        """Nearest current memories to each vector, from the index alone."""
        for _, vector in queries:
            check_dimension(vector, self._vectors.dimension)
        now = self._clock()
        return await self._vectors.search_many(
            [
                VectorQuery(
                    vector, tenant, limit, current_at=now, exclude_ids=(i,) if i else (), min_score=min_score,
                    keep_superseded=False,
                )
                for i, vector in queries
            ],
            with_payload=True,
        )  # fmt: skip

    async def rebuild_index(self, batch_size: int, tenant: str | None) -> AsyncIterator[RebuildProgress]:
        """Drop the tenant's points (None: every point) and project its part
        of the graph again, page by page: the index is a projection, so the
        graph alone reproduces it. Other tenants' points stay searchable.
        Waits for a convergence check that is running; a repair of a tenant
        this rebuild covers stops at its next page (a restore's rebuild used
        to wait for the check to project a 1M tenant point by point first,
        then project it again)."""
        self._waiting[tenant] += 1
        try:
            await self.rebuild_lock.acquire()
        finally:
            self._waiting -= Counter([tenant])  # in place, and a count at zero is dropped
        try:
            async for progress in self.project_anew(batch_size, tenant):
                yield progress
        finally:
            self.rebuild_lock.release()

    def rebuild_waiting(self, tenant: str) -> bool:
        """Whether a rebuild of the tenant (or of every tenant) waits for the lock."""
        return self._waiting[None] > 0 or self._waiting[tenant] > 0

    async def project_anew(self, batch_size: int, tenant: str | None) -> AsyncIterator[RebuildProgress]:
        """rebuild_index without the lock: for a caller that holds it (the convergence check)."""
        started = time.perf_counter()
        total = await self._source.count_memories(tenant)
        await self._vectors.clear(tenant)
        indexed = skipped = 0
        # One HNSW build at the end over the points (bulk_load), not one per
        # VECTOR_OPTIMIZE_EVERY points over ever larger merged segments. A
        # rebuild stopped part way (its caller gone) closes the pages: no read goes on.
        pages = pages_ahead(self._source, batch_size, tenant)
        async with self._vectors.bulk_load(), aclosing(pages):
            async for page in pages:
                points, _ = vector_points(page, self._vectors.dimension)
                await self._vectors.upsert(points)
                indexed += len(points)
                skipped += len(page) - len(points)
                yield RebuildProgress(indexed, skipped, total, False, time.perf_counter() - started)
        if tenant is None:
            await self._vectors.optimize()  # every point is new: index them all before answering
        # A small tenant's points are left to the periodic optimisation, as any
        # write's are: an optimisation holds up every tenant's searches.
        log.info("vector index rebuilt", tenant=tenant or "every tenant", indexed=indexed, skipped=skipped)
        yield RebuildProgress(indexed, skipped, total, True, time.perf_counter() - started)

    async def system_status(self, tenant: str | None) -> tuple[int, list[ComponentStatus]]:
        """The memory count (the tenant's; None: all tenants') and the stores recall depends on."""
        graph = await self._lifecycle.status()
        vectors = await self._vectors.status()
        if self.convergence_figures is not None:
            vectors = replace(vectors, figures={**vectors.figures, **self.convergence_figures()})
        components = [graph, await self._events.status(), vectors]
        if tenant is not None and graph.status == "connected":
            return await self._source.count_memories(tenant), components
        return int(graph.figures.get("memories", 0)), components
