"""The reconciler re-drives what was left behind: memories with no vector
(through the embedding stage, whose event then starts enrichment) and
memories with no enrichment (stored while NATS or the embedder was down, or
dead-lettered after a failure that has since passed). While the consumers
have a backlog, nothing is left behind yet: the pass waits for a later turn.
When a consumer lost events to the stream's retention, `repair` goes over
the graph at once, backlog or not, until nothing is left behind."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime, timedelta

import structlog

from services.core.background import BackgroundLoop
from services.core.domain.retention import ConsumerGap
from services.core.domain.times import to_micros
from services.core.ports.enrichment import EnrichmentBacklog
from services.enrich.embedding import EmbeddingStage
from services.enrich.pipeline import EnrichmentPipeline

log = structlog.get_logger()


class Reconciler(BackgroundLoop):
    _failed = "reconciler pass failed"

    def __init__(
        self,
        *,
        store: EnrichmentBacklog,
        pipeline: EnrichmentPipeline,
        interval_seconds: float,
        grace_seconds: float,
        batch_size: int,
        embedding: EmbeddingStage | None = None,
        outstanding: Callable[[], Awaitable[int]] | None = None,
        backlog: int = 0,
        clock: Callable[[], datetime] = lambda: datetime.now(UTC),
    ):
        """`outstanding` counts the events the consumers still hold; above
        `backlog` a pass does nothing (the events will get there)."""
        self._store = store
        self._pipeline = pipeline
        self._embedding = embedding
        self._outstanding = outstanding
        self._backlog = backlog
        self._interval = interval_seconds
        self._grace = timedelta(seconds=grace_seconds)
        self._batch = batch_size
        self._clock = clock
        self.redriven = 0
        self.redriven_embeddings = 0
        #: The same two counts per tenant: (enriched, embedded); a tenant's status shows its own.
        self.by_tenant: dict[str, list[int]] = defaultdict(lambda: [0, 0])

    async def pending(self, tenant: str) -> int:
        """How many of the tenant's memories wait for enrichment right now (any age)."""
        return await self._store.count_unenriched(tenant)

    async def pending_embeddings(self, tenant: str) -> int:
        """How many of the tenant's memories have no vector right now (any age)."""
        return await self._store.count_unembedded(tenant)

    async def _busy(self) -> bool:
        if self._outstanding is None:
            return False
        try:
            return await self._outstanding() > self._backlog
        except Exception:  # the bus is down: exactly when re-driving matters
            return False

    async def run_once(self) -> int:
        """Embed, then enrich, one batch of memories older than the grace
        period; returns how many were enriched here (the embedded ones are
        enriched by the event the embedding stage records)."""
        if await self._busy():
            return 0
        return (await self._drive(to_micros(self._clock() - self._grace)))[0]

    async def repair(self, gap: ConsumerGap) -> None:
        """After `gap`'s events were lost (the consumer's on_gap): embed and
        enrich what the graph says is left, of any age and whatever the
        backlog, pass after pass until a pass finds nothing to do (what fails
        on the way is the periodic passes' again)."""
        enriched = embedded = 0
        while True:
            done, vectors = await self._drive(to_micros(self._clock()) + 1)
            enriched, embedded = enriched + done, embedded + vectors
            if not done and not vectors:
                break
        log.info("reconciled after lost events", consumer=gap.consumer, lost=gap.lost, enriched=enriched,
                 embedded=embedded)  # fmt: skip

    async def _drive(self, before: int) -> tuple[int, int]:
        """One batch of memories last changed before `before` (epoch µs):
        (how many were enriched, how many embedded)."""
        embedded: set[tuple[str, str]] = set()
        if self._embedding is not None:
            for tenant, ids in _by_tenant(await self._store.find_unembedded(before, self._batch)).items():
                done = await self._embedding.embed_ids(tenant, ids)
                self.redriven_embeddings += len(done)
                self.by_tenant[tenant][1] += len(done)
                embedded |= {(tenant, i) for i in done}
        stale = [item for item in await self._store.find_unenriched(before, self._batch) if item not in embedded]
        count = 0
        for tenant, ids in _by_tenant(stale).items():
            enriched = len(await self._pipeline.enrich_ids(tenant, ids))
            self.by_tenant[tenant][0] += enriched
            count += enriched
        self.redriven += count
        return count, len(embedded)

    async def _pass(self) -> None:
        embedded = self.redriven_embeddings
        count = await self.run_once()
        if count or self.redriven_embeddings > embedded:
            log.info("reconciler re-drove memories", enriched=count, embedded=self.redriven_embeddings - embedded)


def _by_tenant(items: list[tuple[str, str]]) -> dict[str, list[str]]:
    grouped: dict[str, list[str]] = defaultdict(list)
    for tenant, memory_id in items:
        grouped[tenant].append(memory_id)
    return grouped
