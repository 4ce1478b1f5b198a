"""Trust states, tombstones and the review queue (services/core/domain/trust.py,
tombstones.py): ingest and disputes write them, recall lists them."""

from __future__ import annotations

from typing import Protocol

from services.core.domain.model import Memory, MemoryEvent
from services.core.domain.tombstones import Tombstone


class DisputeStore(Protocol):
    """What marking a contradiction disputed reads and writes: both memories,
    then their trust states, each by compare-and-set."""

    async def get_memories(self, tenant: str, memory_ids: list[str]) -> dict[str, Memory]: ...

    async def set_trust(
        self,
        memory: Memory,
        expected_version: int,
        events: list[MemoryEvent],
        *,
        now_us: int,
        tombstone: Tombstone | None = None,
        before: Memory | None = None,
    ) -> bool:
        """Compare-and-set the memory's trust state with its events (and a
        rejection's tombstone); `before` (the record as read) gives the audit entry its diff."""


class TrustWriter(DisputeStore, Protocol):
    """Ingest's trust writes: review outcomes, and the tombstones a delete,
    a supersede or a review leaves or lifts (and its disputes, through this port)."""

    async def delete_with_tombstone(
        self, tenant: str, memory_id: str, tombstone: Tombstone, events: list[MemoryEvent], *, now_us: int
    ) -> bool:
        """Delete the memory and leave its tombstone, in one write; False when it is not there."""

    async def set_tombstone(self, tombstone: Tombstone, event: MemoryEvent, *, now_us: int) -> None:
        """Leave a tombstone with its event."""

    async def get_tombstone(self, tenant: str, tombstone_id: str) -> Tombstone | None: ...

    async def remove_tombstone(self, tenant: str, tombstone_id: str, event: MemoryEvent, *, now_us: int) -> bool:
        """Remove a tombstone with its event; False when it is not there."""


class ReviewReads(Protocol):
    """Recall's listings of the review queue and the tombstones."""

    async def list_tombstones(self, tenant: str, limit: int, offset: int) -> list[Tombstone]:
        """Newest first."""

    async def review_queue(self, tenant: str, limit: int, offset: int) -> list[Memory]:
        """The tenant's pending_review memories, oldest first."""
