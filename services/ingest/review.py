"""POST /review/{id}/approve|reject and DELETE /admin/tombstones/{id}: a
reviewer's decision on a pending memory, and lifting a rejection's tombstone."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime

from services.core.domain.errors import Aborted, NotFound
from services.core.domain.ids import validate_memory_id
from services.core.domain.model import EventKind, Memory, MemoryEvent
from services.core.domain.review import review_outcome
from services.core.domain.times import to_micros
from services.core.ports import MemoryLookup, TrustStore
from services.core.relay import OutboxRelay
from services.ingest.compare_and_set import compare_and_set
from services.ingest.required import require_memory, require_trust


def _tombstone_not_found(tombstone_id: str) -> NotFound:
    return NotFound("TOMBSTONE_NOT_FOUND", f"tombstone {tombstone_id!r} not found", field="id", id=tombstone_id)


@dataclass(frozen=True, slots=True, kw_only=True)
class Reviews:
    lookup: MemoryLookup
    #: None without a trust store (unit tests of other rules): reviews are refused.
    trust: TrustStore | None
    relay: OutboxRelay
    retries: int
    clock: Callable[[], datetime]

    async def review(self, tenant: str, memory_id: str, *, approve: bool, note: str = "") -> tuple[Memory, str]:
        """POST /review/{id}/approve|reject: a pending memory becomes verified,
        or rejected with a tombstone of its content (one write, with the
        REVIEWED and TOMBSTONE_SET events; domain/review.py). A memory not
        pending review is FAILED_PRECONDITION. Returns the memory and the
        tombstone's id ("" on approval)."""
        trust = require_trust(self.trust)
        memory_id = validate_memory_id(memory_id)

        async def attempt() -> tuple[Memory, str] | None:
            now = self.clock()
            memory = await require_memory(self.lookup, tenant, memory_id)
            outcome = review_outcome(memory, approve=approve, note=note, now=now)
            stone = outcome.tombstone
            if not await trust.set_trust(
                outcome.memory, memory.version, outcome.events, now_us=to_micros(now), tombstone=stone, before=memory
            ):
                return None
            await self.relay.submit(outcome.events)
            return outcome.memory, stone.id if stone else ""

        return await compare_and_set(
            attempt,
            retries=self.retries,
            gave_up=lambda: Aborted(
                "CONCURRENT_UPDATE", f"memory {memory_id} kept changing; retry the review", field="id"
            ),
        )

    async def remove_tombstone(self, tenant: str, tombstone_id: str) -> str:
        """DELETE /admin/tombstones/{id}: the content may be stored again."""
        trust = require_trust(self.trust)
        tombstone_id = (tombstone_id or "").strip()
        found = await trust.get_tombstone(tenant, tombstone_id) if tombstone_id else None
        if found is None:
            raise _tombstone_not_found(tombstone_id)
        now = self.clock()
        event = MemoryEvent.tombstone(EventKind.TOMBSTONE_REMOVED, tenant, found.memory_id, found.id, found.reason, now)
        if not await trust.remove_tombstone(tenant, found.id, event, now_us=to_micros(now)):
            raise _tombstone_not_found(tombstone_id)
        await self.relay.submit([event])
        return found.id
