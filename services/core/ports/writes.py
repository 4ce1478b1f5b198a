"""Ingest's writes to the graph, each with its events in the same query (the outbox)."""

from __future__ import annotations

from typing import Protocol

from services.core.domain.idempotency import IdempotencyClaim
from services.core.domain.model import Memory, MemoryEvent, Relation
from services.core.domain.tombstones import TombstoneGuard
from services.core.ports.graph import MemoryLookup


class MemoryDeletes(Protocol):
    """Deletes with their events: what forgetting writes (and the count its progress starts from)."""

    async def count_memories(self, tenant: str | None = None) -> int: ...

    async def delete_memories(self, tenant: str, events: list[MemoryEvent], *, now_us: int) -> list[str]: ...


class MemoryWriter(MemoryLookup, MemoryDeletes, Protocol):
    """Ingest's writes. Every write records its events in the same query
    (the outbox), so an acknowledged write is never without its events."""

    async def create_memories(
        self,
        memories: list[Memory],
        events: list[MemoryEvent],
        *,
        now_us: int,
        claim: IdempotencyClaim | None = None,
        guard: TombstoneGuard | None = None,
    ) -> bool:
        """Write new Memory nodes in one query; False when another request
        holds the idempotency key. With a guard, that same query refuses
        content a tombstone holds (unless passed): TombstoneHeld, nothing written."""

    async def get_idempotency(self, tenant: str, key: str, now_us: int) -> tuple[str, list[str]] | None: ...

    async def get_idempotency_many(self, tenant: str, keys: list[str], now_us: int) -> dict[str, tuple[str, list[str]]]:
        """(request hash, memory ids) by key, for the keys held and not expired (a batch's item keys)."""

    async def claim_idempotency(self, claims: list[tuple[IdempotencyClaim, list[str]]], now_us: int) -> set[str]:
        """Claim each key for its memory ids, each on its own (an expired key
        is taken over); returns the keys another request holds."""

    async def update_memory(
        self, memory: Memory, expected_version: int, event: MemoryEvent, *, now_us: int, before: Memory | None = None
    ) -> bool:
        """Compare-and-set on the version; `before` (the record as read) gives the audit entry its diff."""

    async def find_ids_by_tags(self, tenant: str, tags_lower: list[str], limit: int) -> list[str]: ...

    async def create_relations(
        self, tenant: str, relations: list[Relation], events: list[MemoryEvent], *, now_us: int
    ) -> list[int]: ...

    async def supersede(
        self,
        old: Memory,
        expected_version: int,
        replacement: Memory,
        relation: Relation,
        events: list[MemoryEvent],
        *,
        now_us: int,
        claim: IdempotencyClaim | None = None,
        before: Memory | None = None,
        guard: TombstoneGuard | None = None,
    ) -> bool:
        """Replacement, closed old memory and edge in one query; `guard` of the replacement, as create_memories'."""
