"""The consolidation passes over the graph: decay and forgetting, creative
association, clustering."""

from __future__ import annotations

from typing import Protocol

from services.core.domain.association import Discovery
from services.core.domain.clustering import Cluster
from services.core.domain.consolidation import MemorySample
from services.core.domain.decay import DecayRow, RelevanceUpdate


class ConsolidationPasses(Protocol):
    """The passes' reads and writes over the graph: per tenant, in pages,
    each write with its events in one query (the outbox). Deletes go through
    MemoryWriter.delete_memories."""

    async def decay_page(self, tenant: str, cursor: int, limit: int) -> tuple[int, list[DecayRow]]:
        """Up to `limit` of the tenant's memories (archived ones too) after a
        cursor (-1 to start), and the next cursor."""

    async def write_relevance(self, tenant: str, updates: list[RelevanceUpdate], *, now_us: int) -> list[str]:
        """Set relevance_score (no version bump) where the version is still
        the one read, with a DECAYED event for each written update that
        emits, in one query; the ids written."""

    async def archive(self, tenant: str, rows: list[DecayRow], *, now_us: int) -> list[str]:
        """Archive each memory whose version is still the row's (archived,
        archived_at, version + 1) with its ARCHIVED event, in one query; the ids archived."""

    async def association_sample(self, tenant: str, limit: int, *, now_us: int | None = None) -> list[MemorySample]:
        """A random sample of at most `limit` of the tenant's current memories
        with vectors (not archived, superseded or invalid at now_us, default now)."""

    async def connected_pairs(self, tenant: str, ids: list[str]) -> set[tuple[str, str]]:
        """The pairs among `ids` joined by any edge, either direction, each as (smaller id, larger id)."""

    async def link_discovered(self, tenant: str, links: list[Discovery], *, now_us: int) -> list[Discovery]:
        """Create each link's edge (its type, similarity, confidence, reason,
        created_at) with an ASSOCIATED event, only where both ends are the
        tenant's and no edge joins the pair in either direction; the links made."""

    async def cluster_inputs(
        self, tenant: str, after_id: str, limit: int, *, now_us: int | None = None
    ) -> list[MemorySample]:
        """A page of the tenant's current memories with vectors, in id order after `after_id`."""

    async def write_clusters(self, tenant: str, task: str, clusters: list[Cluster], *, now_us: int) -> list[str]:
        """Replace the tenant's MetaPatterns from `task` with these (each
        linked to its members, a CLUSTERED event per member); the new ids."""
