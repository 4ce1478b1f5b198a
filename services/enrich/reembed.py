"""Re-embedding (POST /admin/reembed): every memory of a tenant, or the ids
given, embedded again through a forced enrichment run, in the background, a
batch at a time. The ids are read from the graph a page at a time when the
request is taken, so the count answered is the count queued. Recall's
projector picks the new vectors up from the ENRICHED events."""

from __future__ import annotations

import asyncio
import contextlib
from dataclasses import dataclass

import structlog

from services.core.domain.errors import Aborted
from services.core.ports.archive import GraphExport
from services.enrich.pipeline import EnrichmentPipeline

log = structlog.get_logger()


@dataclass(slots=True)
class ReembedProgress:
    queued: int = 0
    done: int = 0
    failed: int = 0
    running: bool = False

    def to_dict(self) -> dict:
        return {"queued": self.queued, "done": self.done, "failed": self.failed, "running": self.running}


class Reembedder:
    def __init__(self, *, export: GraphExport, pipeline: EnrichmentPipeline, batch_size: int, page_size: int = 5000):
        self._export = export
        self._pipeline = pipeline
        self._batch_size = batch_size
        self._page_size = page_size
        self._tasks: dict[str, asyncio.Task] = {}
        self.progress: dict[str, ReembedProgress] = {}

    async def _all_ids(self, tenant: str) -> list[str]:
        ids: list[str] = []
        while page := await self._export.memory_ids(tenant, ids[-1] if ids else "", self._page_size):
            ids += page
        return ids

    async def queue(self, tenant: str, ids: list[str], batch_size: int = 0) -> int:
        """Queue a re-embed of these memories (none named: every memory of the
        tenant); returns how many. One run per tenant at a time."""
        running = self.progress.get(tenant)
        if running is not None and running.running:
            raise Aborted(
                "REEMBED_RUNNING",
                f"a re-embed of this tenant is already running ({running.done} of {running.queued} done)",
                queued=running.queued,
                done=running.done,
            )
        ids = list(dict.fromkeys(ids)) or await self._all_ids(tenant)
        progress = ReembedProgress(queued=len(ids), running=bool(ids))
        self.progress[tenant] = progress
        if ids:
            self._tasks[tenant] = asyncio.create_task(self._run(tenant, ids, batch_size or self._batch_size, progress))
        log.info("re-embed queued", tenant=tenant, count=len(ids))
        return len(ids)

    async def _run(self, tenant: str, ids: list[str], batch_size: int, progress: ReembedProgress) -> None:
        try:
            for start in range(0, len(ids), batch_size):
                batch = ids[start : start + batch_size]
                try:
                    await self._pipeline.enrich_ids(tenant, batch, forced=True, reembed=True)
                    progress.done += len(batch)
                except Exception as exc:  # one failing batch must not stop the rest
                    progress.failed += len(batch)
                    log.warning("re-embed batch failed", tenant=tenant, count=len(batch), error=str(exc))
                log.info("re-embed progress", tenant=tenant, done=progress.done, failed=progress.failed, of=len(ids))
        finally:
            progress.running = False
            self._tasks.pop(tenant, None)

    def status(self, tenant: str) -> dict | None:
        """Progress of the tenant's latest run, if any (for the enrichment status)."""
        progress = self.progress.get(tenant)
        return progress.to_dict() if progress is not None else None

    async def stop(self) -> None:
        for task in list(self._tasks.values()):
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
