"""The vector index, what a rebuild of it reads from the graph, and the nearest-neighbour lookups enrichment makes."""

from __future__ import annotations

from collections.abc import Awaitable
from contextlib import AbstractAsyncContextManager
from typing import Protocol

from services.core.domain.model import ComponentStatus, Memory
from services.core.domain.projection import VectorHit, VectorQuery
from services.core.ports.graph import MemoryLookup


class IndexSource(MemoryLookup, Protocol):
    """What a rebuild of the vector index reads: the graph alone reproduces it."""

    async def scan_memories(self, cursor: int, limit: int, tenant: str | None = None) -> tuple[int, list[Memory]]:
        """A page of the tenant's (with None, every tenant's) memories with
        embeddings after a cursor (-1 to start), and the next cursor (index rebuilds)."""

    async def embedded_counts(self) -> dict[str, int]:
        """Per tenant, the memories with an embedding: the points the vector
        index should hold, but for vectors of another dimension (its convergence check)."""


class VectorSearch(Protocol):
    """Recall's vector arm: nearest points to query vectors."""

    dimension: int

    async def search_many(self, queries: list[VectorQuery], *, with_payload: bool = False) -> list[list[VectorHit]]:
        """Per query, its hits best first (several searches in one trip)."""


class VectorWrites(Protocol):
    """The projector's writes of the graph's memories as points."""

    dimension: int
    #: Vectors turned away because their dimension is not the index's.
    refused: int

    async def upsert(self, points: list[tuple[str, list[float], dict]]) -> None:
        """Insert or replace points (id, vector, payload from vector_payload)."""

    async def delete(self, ids: list[str], *, tenant: str) -> None:
        """Remove the tenant's points of these memories. A point's id is derived from its tenant
        and memory id (projection.point_id): no tenant's ids name another tenant's point."""


class VectorIndex(VectorSearch, VectorWrites, Protocol):
    """Recall's projection of the graph into vectors, whole: what the
    bootstrap opens and closes, and the rebuild and the convergence check use."""

    def open(self) -> Awaitable[None] | None:
        """Open or create the index (a service start-up step, sync or async).
        An existing index keeps its dimension: adopted with autodetection,
        else the index stays closed and status() says `dimension_mismatch`."""

    async def count_by_tenant(self, limit: int) -> dict[str, int]:
        """Points per tenant (at most `limit` tenants), exact: the convergence
        check's side of the comparison with the graph."""

    async def clear(self, tenant: str | None = None) -> None:
        """Remove the tenant's points, or with None every point (a rebuild
        from the graph starts here); the index keeps its dimension and payload
        indexes and stays usable."""

    def bulk_load(self) -> AbstractAsyncContextManager[None]:
        """Around a rebuild's upserts: the engine defers indexing (HNSW)
        until they are all in, and builds the index once at the end."""

    async def optimize(self) -> None:
        """Index what was written since the last optimisation (HNSW), now.
        An engine that optimises on its own (a Qdrant server) does nothing."""

    async def status(self) -> ComponentStatus: ...

    async def close(self) -> None: ...


class NeighbourFinder(Protocol):
    """Nearest current memories of a tenant to vectors (recall's vector arm)."""

    async def neighbours(
        self, tenant: str, queries: list[tuple[str, list[float]]], *, limit: int, min_score: float
    ) -> list[list[VectorHit]]:
        """Per (memory id, vector): its neighbours (itself left out), with
        their payloads (source for corroboration)."""

    async def close(self) -> None:
        """Release what it holds (enrich's shutdown)."""
