"""PATCH /memory/{id}: a compare-and-set on the memory's version."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime

from services.core.domain.drafts import Draft
from services.core.domain.errors import Aborted
from services.core.domain.ids import stored_memory_id
from services.core.domain.limits import Limits
from services.core.domain.model import Memory, MemoryEvent
from services.core.domain.times import to_micros
from services.core.domain.updates import apply_update, update_kind
from services.core.ports import MemoryWriter
from services.core.relay import OutboxRelay
from services.ingest.compare_and_set import compare_and_set
from services.ingest.required import require_memory


@dataclass(frozen=True, slots=True, kw_only=True)
class Updates:
    writer: MemoryWriter
    relay: OutboxRelay
    limits: Limits
    retries: int
    clock: Callable[[], datetime]

    async def update_memory(self, tenant: str, memory_id: str, draft: Draft, fields: set[str]) -> tuple[Memory, bool]:
        """PATCH /memory/{id}: compare-and-set on the version, retried on a race.
        A PATCH naming no field answers the memory as it is and writes
        nothing (AutoMem answers it with success too). Returns the memory
        and whether its content changed."""
        memory_id = stored_memory_id(memory_id)
        if not fields:
            return await require_memory(self.writer, tenant, memory_id), False

        async def attempt() -> tuple[Memory, bool] | None:
            now = self.clock()
            current = await require_memory(self.writer, tenant, memory_id)
            updated, content_changed = apply_update(current, draft, fields, now=now, limits=self.limits)
            kind = update_kind(current, updated, content_changed)
            event = MemoryEvent.for_memory(kind, updated, now, content_changed=content_changed)
            if updated.trust_state != current.trust_state:
                event.previous_trust_state = current.trust_state
            if not await self.writer.update_memory(
                updated, current.version, event, now_us=to_micros(now), before=current
            ):
                return None
            await self.relay.submit([event])
            return updated, content_changed

        return await compare_and_set(
            attempt,
            retries=self.retries,
            gave_up=lambda: Aborted(
                "CONCURRENT_UPDATE", f"memory {memory_id} kept changing; retry the update", field="id"
            ),
        )
