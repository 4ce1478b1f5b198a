"""Recall's reads of records and their edges, one port per use case."""

from __future__ import annotations

from typing import Protocol

from services.core.domain.model import Memory, Relation
from services.core.domain.recall_request import Scope
from services.core.domain.state import Successor
from services.core.ports.graph import MemoryLookup


class RecordRead(Protocol):
    """A read by id (GET /memory/{id})."""

    async def read_memory(
        self, tenant: str, memory_id: str, *, accessed_us: int, relation_limit: int
    ) -> tuple[Memory, list[Relation]] | None:
        """A read by id in one query: record (access time bumped) and relations."""


class CandidateReads(Protocol):
    """The records recall ranks, as the current-state pass reads them."""

    async def read_candidates(self, tenant: str, ids: list[str]) -> dict[str, tuple[Memory, list[Successor]]]:
        """Records without embeddings, with their outgoing supersession edges."""


class NeighbourReads(Protocol):
    """A memory's neighbours over its edges."""

    async def neighbours(
        self,
        tenant: str,
        ids: list[str],
        *,
        types: list[str] | None,
        per_memory: int,
        min_strength: float,
        min_importance: float,
    ) -> list[tuple[Relation, Memory]]: ...


class MemoryListing(Protocol):
    """Memories within a scope in a fixed order."""

    async def list_memories(
        self, scope: Scope, order_by: str, limit: int, offset: int = 0, *, with_archived: bool = False
    ) -> list[Memory]:
        """Memories within the scope in a fixed order (importance or a recall
        sort); archived ones too when with_archived."""


class SuccessorReads(CandidateReads, Protocol):
    """The current-state pass: candidates and the chains that supersede them."""

    async def successors(self, tenant: str, ids: list[str]) -> dict[str, list[Successor]]: ...


class ExpansionReads(CandidateReads, NeighbourReads, Protocol):
    """Recall's expansion: neighbours over edges and over shared entities."""

    async def entity_neighbours(
        self,
        tenant: str,
        ids: list[str],
        limit: int,
        *,
        per_seed: int | None = None,
        max_mentions: int | None = None,
        max_reads: int | None = None,
    ) -> list[tuple[str, int]]:
        """Memories sharing entities with these, most shared first, within
        bounds (each None: the store's, from settings)."""


class RankedReads(ExpansionReads, MemoryListing, Protocol):
    """Ranked recall's reads besides its arms: candidates, listings, relations, and its expansion's."""

    async def relations_of(self, tenant: str, ids: list[str], limit: int) -> dict[str, list[Relation]]: ...


class ListingReads(MemoryLookup, NeighbourReads, MemoryListing, Protocol):
    """The listings (by importance, recent, neighbours of a memory)."""


class ViewReads(MemoryLookup, MemoryListing, Protocol):
    """The graph views' reads of records."""


class MemoryReader(RecordRead, SuccessorReads, RankedReads, ListingReads, Protocol):
    """All of recall's reads of records and their edges (each scoped to a tenant),
    and the one write a read causes: the access time (what the bootstrap hands out)."""

    async def touch_memories(self, tenant: str, ids: list[str], accessed_us: int) -> None:
        """Record an access of many memories in one query: last_accessed
        only (never backwards), no version, no event."""
