"""DELETE /memory/{id} and DELETE /memory/by-tag: the node and its edges go
with their DELETED events; the vector goes through the event."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime

from services.core.domain.errors import NotFound
from services.core.domain.ids import stored_memory_id
from services.core.domain.model import EventKind, MemoryEvent
from services.core.domain.tags import required_tag_keys
from services.core.domain.times import to_micros
from services.core.domain.tombstones import REJECTED, delete_leaves_tombstone, tombstone_for
from services.core.ports import MemoryWriter, TrustStore
from services.core.relay import OutboxRelay
from services.ingest.required import require_memory, require_trust


def _not_found(memory_id: str) -> NotFound:
    return NotFound("MEMORY_NOT_FOUND", f"memory {memory_id} not found", field="id", id=memory_id)


@dataclass(frozen=True, slots=True, kw_only=True)
class Deletions:
    writer: MemoryWriter
    relay: OutboxRelay
    trust: TrustStore | None
    page_size: int
    clock: Callable[[], datetime]

    async def delete_memory(
        self, tenant: str, memory_id: str, *, reason: str = "", tombstone: bool = False
    ) -> tuple[str, str]:
        """DELETE /memory/{id}: node and edges; the vector goes through the
        event. With reason=rejected (or tombstone) a tombstone of its content
        is left in the same write, so the content cannot come back unforced.
        Returns the id and the tombstone's id ("" when none was left)."""
        memory_id = stored_memory_id(memory_id)
        leave = delete_leaves_tombstone(reason, tombstone)
        now = self.clock()
        events = [MemoryEvent.deleted(tenant, memory_id, now)]
        if leave:
            return memory_id, await self._delete_with_tombstone(tenant, memory_id, events, now)
        if not await self.writer.delete_memories(tenant, events, now_us=to_micros(now)):
            raise _not_found(memory_id)
        await self.relay.submit(events)
        return memory_id, ""

    async def _delete_with_tombstone(
        self, tenant: str, memory_id: str, events: list[MemoryEvent], now: datetime
    ) -> str:
        trust = require_trust(self.trust)
        memory = await require_memory(self.writer, tenant, memory_id)
        stone = tombstone_for(tenant, memory_id, memory.content, REJECTED, now)
        events.append(MemoryEvent.tombstone(EventKind.TOMBSTONE_SET, tenant, memory_id, stone.id, stone.reason, now))
        if not await trust.delete_with_tombstone(tenant, memory_id, stone, events, now_us=to_micros(now)):
            raise _not_found(memory_id)
        await self.relay.submit(events)
        return stone.id

    async def delete_by_tags(self, tenant: str, tags: list[str]) -> int:
        """DELETE /memory/by-tag: exact, case-insensitive, any-of, page by page."""
        wanted = required_tag_keys(tags)
        total = 0
        while ids := await self.writer.find_ids_by_tags(tenant, wanted, self.page_size):
            now = self.clock()
            events = [MemoryEvent.deleted(tenant, i, now) for i in ids]
            deleted = set(await self.writer.delete_memories(tenant, events, now_us=to_micros(now)))
            await self.relay.submit([e for e in events if e.memory_id in deleted])
            total += len(deleted)
        return total
