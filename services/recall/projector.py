"""Recall's projection of the graph into the vector index.

Every memory event names a memory; the projector reads the record as it is
now in the graph and upserts its point (vector + vector_payload), or deletes
the point when the record is gone or has no vector yet. Reading the graph
rather than trusting the event makes redeliveries and reordering harmless.
"""

from __future__ import annotations

from collections import defaultdict

import structlog

from services.core.domain.delivery import Delivery, Outcome
from services.core.domain.event_consumers import PROJECTION
from services.core.domain.model import SUPERSESSION_RELATIONS, EventKind
from services.core.domain.projection import vector_points
from services.core.ports.graph import MemoryLookup
from services.core.ports.vector import VectorWrites
from services.recall.fresh_reads import FreshReads

log = structlog.get_logger()


def _projects(event) -> bool:
    """A kind the events table does not give the projection (PROJECTION) changes
    nothing a point holds. A new memory without a vector has no point yet:
    enrichment's event will bring it. An edge changes nothing a point holds,
    except a supersession edge, which sets its source's superseded_at."""
    if not PROJECTION.takes(event.kind):
        return False
    if event.kind is EventKind.ASSOCIATED:
        return event.relation is not None and event.relation.type in SUPERSESSION_RELATIONS
    return not _awaits_vector(event)


def _awaits_vector(event) -> bool:
    """A memory stored without a vector: enrichment's event will bring it."""
    return event.kind is EventKind.CREATED and not event.has_embedding


class Projector:
    def __init__(self, *, lookup: MemoryLookup, vectors: VectorWrites, fresh: FreshReads | None = None):
        self._lookup = lookup
        self._vectors = vectors
        #: Told what is stored without a vector and what reaches the index (a recall waits on it).
        self._fresh = fresh

    async def project(self, tenant: str, memory_ids: list[str]) -> tuple[int, int]:
        """Bring these points in line with the graph; returns (upserted, deleted)."""
        found = await self._lookup.get_memories(tenant, memory_ids)
        points, refused = vector_points(found.values(), self._vectors.dimension)
        if refused:
            # Another dimension than the index holds: refused (and counted), never truncated or padded.
            self._vectors.refused += refused
            log.error("vectors refused: dimension mismatch", count=refused, index_dimension=self._vectors.dimension)
        stale = [i for i in memory_ids if i not in found or found[i].embedding is None]
        await self._vectors.upsert(points)
        await self._vectors.delete(stale, tenant=tenant)
        if self._fresh is not None:
            self._fresh.projected(tenant, [point[0] for point in points], [i for i in memory_ids if i not in found])
        return len(points), len(stale)

    async def handle(self, deliveries: list[Delivery]) -> list[Outcome]:
        """The consumer's handler: one graph read and one upsert per tenant."""
        by_tenant: dict[str, set[str]] = defaultdict(set)
        awaited: dict[str, list[str]] = defaultdict(list)
        for d in deliveries:
            if _awaits_vector(d.event):
                awaited[d.event.tenant].append(d.event.memory_id)
            if _projects(d.event):
                by_tenant[d.event.tenant].add(d.event.memory_id)
        if self._fresh is not None:
            for tenant, stored in awaited.items():
                self._fresh.expect(tenant, stored)
        for tenant, ids in by_tenant.items():
            await self.project(tenant, sorted(ids))
        return [Outcome.DONE if _projects(d.event) else Outcome.SKIP for d in deliveries]
