"""Recall's reads of records and their edges."""

from __future__ import annotations

from typing import Protocol

from services.core.domain.model import Memory, Relation
from services.core.domain.recall_request import Scope
from services.core.domain.state import Successor
from services.core.ports.graph import MemoryLookup


class MemoryReader(MemoryLookup, Protocol):
    """Recall's reads of records and their edges (each scoped to a tenant),
    and the one write a read causes: the access time."""

    async def read_memory(
        self, tenant: str, memory_id: str, *, accessed_us: int, relation_limit: int
    ) -> tuple[Memory, list[Relation]] | None:
        """A read by id in one query: record (access time bumped) and relations."""

    async def read_candidates(self, tenant: str, ids: list[str]) -> dict[str, tuple[Memory, list[Successor]]]:
        """Records without embeddings, with their outgoing supersession edges."""

    async def successors(self, tenant: str, ids: list[str]) -> dict[str, list[Successor]]: ...

    async def relations_of(self, tenant: str, ids: list[str], limit: int) -> dict[str, list[Relation]]: ...

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

    async def list_memories(
        self, scope: Scope, order_by: str, limit: int, offset: int = 0, *, with_archived: bool = False
    ) -> list[Memory]:
        """Memories within the scope in a fixed order (importance or a recall
        sort); archived ones too when with_archived."""

    async def touch_memories(self, tenant: str, ids: list[str], accessed_us: int) -> None:
        """Record an access of many memories in one query: last_accessed
        only (never backwards), no version, no event."""
