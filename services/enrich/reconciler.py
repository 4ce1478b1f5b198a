"""The reconciler re-drives what was left behind: memories with no
enrichment (stored while NATS or the embedder was down, or dead-lettered
after a failure that has since passed)."""

from __future__ import annotations

import asyncio
import contextlib
from collections import defaultdict
from collections.abc import Callable
from datetime import UTC, datetime, timedelta

import structlog

from services.core.domain.times import to_micros
from services.core.ports import GraphStore
from services.enrich.pipeline import EnrichmentPipeline

log = structlog.get_logger()


class Reconciler:
    def __init__(
        self,
        *,
        graph: GraphStore,
        pipeline: EnrichmentPipeline,
        interval_seconds: float,
        grace_seconds: float,
        batch_size: int,
        clock: Callable[[], datetime] = lambda: datetime.now(UTC),
    ):
        self._graph = graph
        self._pipeline = pipeline
        self._interval = interval_seconds
        self._grace = timedelta(seconds=grace_seconds)
        self._batch = batch_size
        self._clock = clock
        self._task: asyncio.Task | None = None
        self.redriven = 0

    async def pending(self) -> int:
        """How many memories wait for enrichment right now (any age)."""
        return await self._graph.count_unenriched()

    async def run_once(self) -> int:
        """Enrich one batch of memories older than the grace period; returns how many."""
        stale = await self._graph.find_unenriched(to_micros(self._clock() - self._grace), self._batch)
        by_tenant: dict[str, list[str]] = defaultdict(list)
        for tenant, memory_id in stale:
            by_tenant[tenant].append(memory_id)
        count = 0
        for tenant, ids in by_tenant.items():
            count += len(await self._pipeline.enrich_ids(tenant, ids))
        self.redriven += count
        return count

    async def _loop(self) -> None:
        while True:
            await asyncio.sleep(self._interval)
            try:
                count = await self.run_once()
                if count:
                    log.info("reconciler re-drove memories", count=count)
            except Exception as exc:
                log.warning("reconciler pass failed", error=str(exc))

    def start(self) -> None:
        self._task = asyncio.create_task(self._loop())

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None
