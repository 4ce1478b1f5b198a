"""The enrichment pipeline (the second stage, after embedding): extract
entities, assess factuality, link (PRECEDED_BY, SIMILAR_TO, EXEMPLIFIES),
then write enrichment's own fields with a version check, a batch at a time.
Events reach it once the embedding stage has recorded the vector; it still
embeds what has none (the reconciler, a reprocess, a re-embed).

The models (CPU) and the links and writes (mostly waiting on FalkorDB and
recall) overlap: while one batch is linked and written, the next is embedded."""

from __future__ import annotations

import asyncio
import time
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

import numpy as np
import structlog
from prometheus_client import Counter, Histogram

from services.core.domain.delivery import Delivery, Outcome
from services.core.domain.embedding_text import CONTEXT_REFRESH
from services.core.domain.enrichment import Enrichment, LinkCounts, enrich
from services.core.domain.entities import shared_entity_tags
from services.core.domain.factuality import Factuality, assess, corroborate, source_trust
from services.core.domain.model import EventKind, Memory, MemoryEvent
from services.core.domain.times import to_micros
from services.core.ports.enrichment import EnrichmentStore
from services.core.ports.models import Embedder, EntityExtractor, LanguageModel
from services.core.ports.vector import NeighbourFinder
from services.core.relay import OutboxRelay
from services.enrich.counts import TenantCounts
from services.enrich.deliveries import by_tenant
from services.enrich.embedding_texts import EmbeddingContext

log = structlog.get_logger()

ENRICHED = Counter("memgrid_enrichment_memories_total", "Memories through enrichment", ["outcome"])
BATCH_SECONDS = Histogram("memgrid_enrichment_batch_seconds", "Time to enrich one call (a fetch: one or more batches)")


@dataclass(frozen=True, slots=True)
class EnrichmentPolicy:
    """The knobs of enrichment, from settings."""

    temporal_window: timedelta
    temporal_limit: int
    similarity_limit: int
    similarity_threshold: float
    supports_threshold: float
    pattern_min_members: int
    pattern_max_members: int
    conflict_retries: int
    #: Memories the models and each graph query take at once.
    batch_size: int = 64
    #: The most tags a memory may hold (MEMORY_MAX_TAGS): entity tags stop there.
    max_tags: int | None = None
    #: What is embedded for a memory (embedding_texts.py): its content, and the memory before it.
    embedding_context: EmbeddingContext = EmbeddingContext()


@dataclass
class EnrichmentStats(TenantCounts):
    processed: int = 0
    failed: int = 0
    skipped: int = 0
    conflicts: int = 0
    inflight: int = 0
    last_batch_seconds: float = 0.0
    by_reason: dict[str, int] = field(default_factory=dict)
    #: The same figures per tenant (TenantCounts.of).
    tenants: dict[str, EnrichmentStats] = field(default_factory=dict, repr=False)


async def _nothing() -> list:
    return []


def _in_time(memory: Memory) -> tuple[datetime, str]:
    return (memory.timestamp, memory.id)


class _Computed:
    """The memories of one enrich_ids call computed so far, with their vectors.

    Memories enriched together cannot find each other in the index yet:
    each is compared with the ones before it (in time) directly."""

    def __init__(self) -> None:
        self._memories: list[Memory] = []
        self._matrix = np.empty((0, 0), dtype=np.float32)

    def add(self, memories: list[Memory], results: dict[str, Enrichment]) -> None:
        rows = np.asarray([results[m.id].embedding or m.embedding for m in memories], dtype=np.float32)
        self._matrix = rows if not self._memories else np.vstack([self._matrix, rows])
        self._memories += memories

    def neighbours(self, memories: list[Memory], threshold: float) -> dict[str, list[tuple[Memory, float]]]:
        """For each of these memories (the last ones added), the earlier ones
        scoring at least the threshold."""
        first = len(self._memories) - len(memories)
        scores = self._matrix @ self._matrix[first:].T
        found: dict[str, list[tuple[Memory, float]]] = defaultdict(list)
        for column, later in enumerate(memories):
            key = _in_time(later)
            for row in np.flatnonzero(scores[:, column] >= threshold):
                other = self._memories[row]
                if _in_time(other) < key:
                    found[later.id].append((other, float(scores[row, column])))
        return found


def needs_enrichment(event: MemoryEvent) -> bool:
    """New content, once the embedding stage is through with it (not a vector
    embedded again for its neighbours' sake: its content is as enriched)."""
    return event.kind is EventKind.EMBEDDED and event.reason != CONTEXT_REFRESH


class EnrichmentPipeline:
    def __init__(
        self,
        *,
        store: EnrichmentStore,
        embedder: Embedder,
        extractor: EntityExtractor,
        neighbours: NeighbourFinder,
        relay: OutboxRelay,
        llm: LanguageModel | None = None,
        policy: EnrichmentPolicy,
        clock: Callable[[], datetime] = lambda: datetime.now(UTC),
    ):
        self._store = store
        self._embedder = embedder
        self._extractor = extractor
        self._neighbours = neighbours
        self._relay = relay
        self._llm = llm
        self._policy = policy
        self._clock = clock
        self.stats = EnrichmentStats()

    async def handle(self, deliveries: list[Delivery]) -> list[Outcome]:
        """The consumer's handler: enrich what changed, skip the rest."""
        return await by_tenant(
            deliveries,
            wanted=needs_enrichment,
            work=self.enrich_ids,
            stats=self.stats,
            outcomes_metric=ENRICHED,
            what="enrichment",
        )

    async def enrich_ids(
        self, tenant: str, ids: list[str], *, forced: bool = False, reembed: bool = False
    ) -> list[str]:
        """Enrich these memories of one tenant; returns the ids written. Memories
        deleted meanwhile are skipped; raises when a dependency fails. With
        reembed, every memory is embedded again, not only those without a vector."""
        started = time.perf_counter()
        self.stats.add(tenant, inflight=len(ids))
        try:
            written = await self._enrich(tenant, ids, forced, reembed)
        finally:
            self.stats.add(tenant, inflight=-len(ids))
        self.stats.set(tenant, last_batch_seconds=time.perf_counter() - started)
        BATCH_SECONDS.observe(self.stats.last_batch_seconds)
        return written

    async def _enrich(self, tenant: str, ids: list[str], forced: bool, reembed: bool = False) -> list[str]:
        found = await self._store.get_memories(tenant, ids)
        self.stats.add(tenant, skipped=len(ids) - len(found))
        if not found:
            return []
        now = self._clock()
        # Oldest first, so the memories before a batch (in-batch neighbours) are already computed.
        memories = sorted(found.values(), key=_in_time)
        # The embedding stage's model, for the vectors it wrote for this content (a forced run keeps the vector).
        models = {} if forced or reembed else await self._store.embedding_models(tenant, list(found))
        size = max(1, self._policy.batch_size)
        batches = [memories[start : start + size] for start in range(0, len(memories), size)]
        earlier = _Computed()
        written: list[str] = []
        computing = asyncio.ensure_future(self._compute(batches[0], reembed, models))
        try:
            for index, batch in enumerate(batches):
                t0 = time.perf_counter()
                results = await computing
                if index + 1 < len(batches):
                    computing = asyncio.ensure_future(self._compute(batches[index + 1], reembed, models))
                t1 = time.perf_counter()
                earlier.add(batch, results)
                await self._link(tenant, batch, results, now, earlier)
                t2 = time.perf_counter()
                written += await self._write(tenant, batch, results, forced, now)
                log.debug(
                    "enriched batch",
                    count=len(batch),
                    compute_wait_s=round(t1 - t0, 3),
                    link_s=round(t2 - t1, 3),
                    write_s=round(time.perf_counter() - t2, 3),
                )
        finally:
            # After a failure, the next batch's models are not waited for.
            computing.cancel()
            await asyncio.gather(computing, return_exceptions=True)
        return sorted(written)

    async def _compute(
        self, memories: list[Memory], reembed: bool = False, models: dict[str, str] | None = None
    ) -> dict[str, Enrichment]:
        """Embeddings (only where missing, unless reembed), entities and a first
        factuality view. `models` names the model of vectors the embedding stage wrote."""
        to_embed = [
            m for m in memories if reembed or m.embedding is None or len(m.embedding) != self._embedder.dimension
        ]
        # The two models run side by side: each leaves the GIL for most of its work.
        vectors, entity_maps = await asyncio.gather(
            self._embed(to_embed) if to_embed else _nothing(),
            asyncio.to_thread(self._extractor.extract_many, [m.content for m in memories]),
        )
        embedded = {m.id: v for m, v in zip(to_embed, vectors, strict=True)}
        judged = await self._model_factuality(memories)
        results = {}
        for memory, entities in zip(memories, entity_maps, strict=True):
            source = memory.metadata.get("source") if isinstance(memory.metadata, dict) else None
            results[memory.id] = Enrichment(
                content=memory.content,
                embedding=embedded.get(memory.id),
                embedding_model=self._embedder.name if memory.id in embedded else (models or {}).get(memory.id),
                entities=entities,
                factuality=judged.get(memory.id) or assess(memory.content, source_trust(source)),
            )
        return results

    async def _embed(self, memories: list[Memory]) -> list[list[float]]:
        return await self._embedder.embed(await self._policy.embedding_context.texts(self._store, memories))

    async def _model_factuality(self, memories: list[Memory]) -> dict[str, Factuality]:
        """The LLM's factuality labels when a key is set; the rules fill in the rest."""
        if self._llm is None:
            return {}
        answers = await asyncio.gather(
            *(self._llm.assess_factuality(m.content, m.metadata.get("source")) for m in memories)
        )
        return {m.id: a for m, a in zip(memories, answers, strict=True) if a is not None}

    async def _link(
        self, tenant: str, memories: list[Memory], results: dict[str, Enrichment], now: datetime, earlier: _Computed
    ) -> None:
        now_us = to_micros(now)
        policy = self._policy
        # FalkorDB links the recent memories while recall searches its index.
        temporal, neighbour_lists = await asyncio.gather(
            self._store.link_preceding(
                tenant,
                [(m.id, to_micros(m.timestamp)) for m in memories],
                window_us=int(policy.temporal_window / timedelta(microseconds=1)),
                limit=policy.temporal_limit,
                now_us=now_us,
            ),
            self._neighbours.neighbours(
                tenant,
                [(m.id, _vector(m, results)) for m in memories],
                limit=policy.similarity_limit,
                min_score=policy.similarity_threshold,
            ),
        )
        in_batch = earlier.neighbours(memories, self._policy.similarity_threshold)
        pairs = []
        for memory, found in zip(memories, neighbour_lists, strict=True):
            result = results[memory.id]
            hits = {h.id: (h.score, (h.payload or {}).get("source")) for h in found}
            for other, score in in_batch.get(memory.id, []):
                hits.setdefault(other.id, (score, other.metadata.get("source")))
            ranked = sorted(((i, sc, src) for i, (sc, src) in hits.items() if i != memory.id), key=lambda x: -x[1])
            others = ranked[: policy.similarity_limit]
            pairs += [(memory.id, other_id, score) for other_id, score, _ in others]
            supporters = [src or "manual" for _, score, src in others if score >= policy.supports_threshold]
            own = memory.metadata.get("source") if isinstance(memory.metadata, dict) else None
            result.factuality = corroborate(result.factuality, supporters, own or "manual")
            result.links = LinkCounts(temporal_links=temporal.get(memory.id, 0), semantic_neighbors=len(others))
        await asyncio.gather(
            # An enrichment replaces the memory's links (its content may have changed since the last one).
            self._store.link_similar(tenant, pairs, now_us=now_us, replace_for=[m.id for m in memories]),
            self._link_patterns(tenant, memories, results, now_us),
        )

    async def _link_patterns(
        self, tenant: str, memories: list[Memory], results: dict[str, Enrichment], now_us: int
    ) -> None:
        """Entities as nodes; EXEMPLIFIES to a Pattern when enough memories of
        one type mention the same entity."""
        mentions = [(m.id, m.type, shared_entity_tags(results[m.id].entities)) for m in memories]
        counts = await self._store.link_entities_and_patterns(
            tenant,
            mentions,
            min_members=self._policy.pattern_min_members,
            max_members=self._policy.pattern_max_members,
            now_us=now_us,
            replace=True,
        )
        for memory in memories:
            results[memory.id].links.patterns_detected = counts.get(memory.id, 0)

    async def _write(
        self, tenant: str, memories: list[Memory], results: dict[str, Enrichment], forced: bool, now: datetime
    ) -> list[str]:
        """Compare-and-set on the version; on a race, re-read and re-apply when
        the content is unchanged (a newer event handles changed content)."""
        pending = memories
        written: list[str] = []
        for _ in range(self._policy.conflict_retries):
            updates = [
                (enrich(m, results[m.id], forced=forced, now=now, max_tags=self._policy.max_tags), m.version)
                for m in pending
            ]
            events = [MemoryEvent.for_memory(EventKind.ENRICHED, u, now) for u, _ in updates]
            done = set(await self._store.apply_enrichment(tenant, updates, events, now_us=to_micros(now)))
            await self._relay.submit([e for e in events if e.memory_id in done])
            written += sorted(done)
            self.stats.add(tenant, processed=len(done))
            ENRICHED.labels("written").inc(len(done))
            lost = [m.id for m in pending if m.id not in done]
            if not lost:
                break
            self.stats.add(tenant, conflicts=len(lost))
            fresh = await self._store.get_memories(tenant, lost)
            pending = [m for m in fresh.values() if m.content == results[m.id].content]
            if not pending:
                break
        return written


def _vector(memory: Memory, results: dict[str, Enrichment]) -> list[float]:
    """The memory's vector once computed: the new one, or the one it kept (one without any was embedded)."""
    vector = results[memory.id].embedding or memory.embedding
    assert vector is not None  # noqa: S101  narrows the type: _compute embeds every memory without a vector
    return vector
