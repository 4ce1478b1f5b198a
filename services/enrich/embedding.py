"""Enrichment's first stage: embed what changed and record an `embedded`
event, so recall's projector makes the memory searchable by vector without
waiting for entities and links (the second stage, which that same event
starts). AutoMem keeps the same two queues (embedding, then enrichment).

The stage writes only the vector and the model's name, where the memory's
version and content are still the ones it read: a content change that lands
meanwhile is never given the old text's vector; its own event re-embeds it.

A memory's text reads its neighbours (contextual embedding), so new content
also changes the texts of the memories around it: once the new vectors are
written, those neighbours are embedded again (`embedded` events with the
reason CONTEXT_REFRESH, which enrichment's second stage passes over). Only
vectors the stage wrote are replaced, never a client's; a refresh that
fails is logged and counted, and leaves the neighbour's vector as it was."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime

import structlog
from prometheus_client import Counter

from services.core.domain.delivery import Delivery, Outcome
from services.core.domain.embedding_text import CONTEXT_REFRESH, neighbours_to_refresh
from services.core.domain.model import EventKind, Memory, MemoryEvent
from services.core.domain.times import to_micros
from services.core.ports.enrichment import EmbeddingStore
from services.core.ports.models import Embedder
from services.core.relay import OutboxRelay
from services.enrich.counts import TenantCounts
from services.enrich.deliveries import by_tenant
from services.enrich.embedding_texts import EmbeddingContext

log = structlog.get_logger()

EMBEDDED = Counter("memgrid_embedding_memories_total", "Memories through the embedding stage", ["outcome"])


@dataclass
class EmbeddingStats(TenantCounts):
    embedded: int = 0  # vectors written
    passed: int = 0  # had a vector already (client-supplied, or a redelivery): event only
    skipped: int = 0  # deleted meanwhile
    conflicts: int = 0  # changed meanwhile (a newer event handles changed content)
    failed: int = 0
    refreshed: int = 0  # neighbours embedded again because these memories changed their texts
    refresh_failed: int = 0
    inflight: int = 0
    last_batch_seconds: float = 0.0
    by_reason: dict[str, int] = field(default_factory=dict)
    #: The same figures per tenant (TenantCounts.of).
    tenants: dict[str, EmbeddingStats] = field(default_factory=dict, repr=False)

    def to_dict(self) -> dict:
        return {
            "embedded": self.embedded,
            "passed": self.passed,
            "skipped": self.skipped,
            "conflicts": self.conflicts,
            "failed": self.failed,
            "refreshed": self.refreshed,
            "refresh_failed": self.refresh_failed,
            "inflight": self.inflight,
            "last_batch_seconds": round(self.last_batch_seconds, 4),
            "failures_by_reason": self.by_reason,
        }


def needs_embedding(event: MemoryEvent) -> bool:
    """New content: a created memory, or an update that changed the content."""
    return event.kind is EventKind.CREATED or (event.kind is EventKind.UPDATED and event.content_changed)


class EmbeddingStage:
    def __init__(
        self,
        *,
        store: EmbeddingStore,
        embedder: Embedder,
        relay: OutboxRelay,
        batch_size: int,
        conflict_retries: int,
        clock: Callable[[], datetime] = lambda: datetime.now(UTC),
        context: EmbeddingContext = EmbeddingContext(),
    ):
        self._store = store
        self._embedder = embedder
        self._context = context
        self._relay = relay
        self._batch = max(1, batch_size)
        self._retries = max(1, conflict_retries)
        self._clock = clock
        self.stats = EmbeddingStats()

    def _lacks_vector(self, memory: Memory) -> bool:
        return memory.embedding is None or len(memory.embedding) != self._embedder.dimension

    async def handle(self, deliveries: list[Delivery]) -> list[Outcome]:
        """The consumer's handler: embed new content, skip the rest."""
        return await by_tenant(
            deliveries,
            wanted=needs_embedding,
            work=self.embed_ids,
            stats=self.stats,
            outcomes_metric=EMBEDDED,
            what="embedding",
        )

    async def embed_ids(self, tenant: str, ids: list[str]) -> list[str]:
        """Embed these memories of one tenant where they lack a vector and
        record their `embedded` events; returns the ids recorded. Raises when
        the embedder or the graph fails."""
        started = time.perf_counter()
        self.stats.add(tenant, inflight=len(ids))
        try:
            found = await self._store.get_memories(tenant, ids)
            self.stats.add(tenant, skipped=len(ids) - len(found))
            missing = [m for m in found.values() if self._lacks_vector(m)]
            present = [m for m in found.values() if not self._lacks_vector(m)]
            recorded = await self._record(tenant, [(m, None) for m in present]) if present else []
            self.stats.add(tenant, passed=len(recorded))
            EMBEDDED.labels("passed").inc(len(recorded))
            recorded += await self._embed(tenant, missing)
        finally:
            self.stats.add(tenant, inflight=-len(ids))
            self.stats.set(tenant, last_batch_seconds=time.perf_counter() - started)
        return sorted(recorded)

    async def _embed(self, tenant: str, memories: list[Memory]) -> list[str]:
        """A chunk at a time, each written (and so searchable) while the next is embedded."""
        chunks = [memories[start : start + self._batch] for start in range(0, len(memories), self._batch)]
        if not chunks:
            return []
        written: list[str] = []
        neighbours = await self._context.neighbours(self._store, memories, after=True)
        texts = {m.id: self._context.text(m, neighbours.get(m.id)) for m in memories}
        embedding = asyncio.ensure_future(self._embedder.embed([texts[m.id] for m in chunks[0]]))
        try:
            for index, chunk in enumerate(chunks):
                vectors = await embedding
                if index + 1 < len(chunks):
                    embedding = asyncio.ensure_future(self._embedder.embed([texts[m.id] for m in chunks[index + 1]]))
                done = await self._record(tenant, list(zip(chunk, vectors, strict=True)))
                self.stats.add(tenant, embedded=len(done))
                EMBEDDED.labels("embedded").inc(len(done))
                written += done
        finally:
            embedding.cancel()
            await asyncio.gather(embedding, return_exceptions=True)
        stale = neighbours_to_refresh(
            {i: neighbours[i] for i in written if i in neighbours}, following=self._context.following, skip=texts
        )
        if stale:
            await self._refresh(tenant, stale)
        return written

    async def _refresh(self, tenant: str, ids: list[str]) -> None:
        """Embed these neighbours again with their texts as they read now,
        where the vector is one this stage wrote; a failure leaves them as they were."""
        try:
            found = await self._store.get_memories(tenant, ids)
            ours = await self._store.embedding_models(tenant, list(found))
            name = self._embedder.name
            memories = [m for m in found.values() if not self._lacks_vector(m) and ours.get(m.id) == name]
            if not memories:
                return
            vectors = await self._embedder.embed(await self._context.texts(self._store, memories))
            done = await self._record(tenant, list(zip(memories, vectors, strict=True)), refresh=True)
        except Exception as exc:
            self.stats.add(tenant, refresh_failed=len(ids))
            EMBEDDED.labels("refresh_failed").inc(len(ids))
            log.warning("refreshing neighbours' vectors failed", tenant=tenant, count=len(ids), error=str(exc))
            return
        self.stats.add(tenant, refreshed=len(done))
        EMBEDDED.labels("refreshed").inc(len(done))

    async def _record(
        self, tenant: str, items: list[tuple[Memory, list[float] | None]], *, refresh: bool = False
    ) -> list[str]:
        """Write (compare-and-set on version and content) and publish the
        events; on a race, re-read and try again while the content is the
        one embedded (a PATCH of, say, the importance does not stale a vector).
        A refresh replaces the vector there is; otherwise one that arrived
        meanwhile is kept."""
        pending = items
        written: list[str] = []
        reason = CONTEXT_REFRESH if refresh else ""
        for _ in range(self._retries):
            now = self._clock()
            events = [_embedded_event(m if v is None else _with_vector(m, v), now, reason) for m, v in pending]
            done = set(
                await self._store.record_embeddings(
                    tenant, [(m, v, self._embedder.name) for m, v in pending], events, now_us=to_micros(now)
                )
            )
            await self._relay.submit([e for e in events if e.memory_id in done])
            written += sorted(done)
            lost = [(m, v) for m, v in pending if m.id not in done]
            if not lost:
                break
            fresh = await self._store.get_memories(tenant, [m.id for m, _ in lost])
            pending = []
            for memory, vector in lost:
                now_memory = fresh.get(memory.id)
                if now_memory is None or now_memory.content != memory.content:
                    self.stats.add(tenant, conflicts=1)
                    continue
                # Same content: the vector still fits, unless one arrived meanwhile (then only the event).
                pending.append((now_memory, vector if refresh or self._lacks_vector(now_memory) else None))
            if not pending:
                break
        return written


def _embedded_event(memory: Memory, now: datetime, reason: str) -> MemoryEvent:
    event = MemoryEvent.for_memory(EventKind.EMBEDDED, memory, now)
    event.reason = reason
    return event


def _with_vector(memory: Memory, vector: list[float]) -> Memory:
    """The memory as the stage writes it (for the event's version and has_embedding)."""
    return replace(memory, embedding=vector, version=memory.version + 1)


async def yield_to_embedding(
    pending: Callable[[], Awaitable[int]], *, backlog: int, max_seconds: float, poll_seconds: float
) -> None:
    """Wait while the embedding stage has more than `backlog` events
    outstanding, at most `max_seconds` (so the second stage is never starved
    for good); a failing count is no reason to wait."""
    deadline = time.monotonic() + max_seconds
    while time.monotonic() < deadline:
        try:
            outstanding = await pending()
        except Exception:
            return
        if outstanding <= backlog:
            return
        await asyncio.sleep(poll_seconds)
