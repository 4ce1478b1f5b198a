"""POST /memory/{id}/supersede: a replacement stored, the old memory closed
and the two linked, in one graph query: all of it or none of it."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from functools import partial

from services.core.domain.drafts import Draft
from services.core.domain.errors import Aborted
from services.core.domain.ids import validate_memory_id
from services.core.domain.model import EventKind, Memory, MemoryEvent
from services.core.domain.supersede import close_superseded, supersession_edge, validate_supersede_relation
from services.core.domain.times import to_micros
from services.core.domain.tombstones import INVALIDATED, tombstone_for
from services.core.ports import MemoryWriter, TrustStore
from services.core.relay import OutboxRelay
from services.ingest.compare_and_set import compare_and_set
from services.ingest.create import NewMemoryWrites
from services.ingest.prepare import Summarised
from services.ingest.required import require_memory

OLD_FIELD = "supersedes_memory_id"


@dataclass(slots=True)
class Superseded:
    replacement: Memory
    superseded: Memory
    relation: str
    published: bool
    summary: Summarised | None
    replayed: bool = False


@dataclass(frozen=True, slots=True, kw_only=True)
class Supersession:
    writer: MemoryWriter
    relay: OutboxRelay
    #: None without a trust store (unit tests of other rules): INVALIDATED_BY leaves no tombstone.
    trust: TrustStore | None
    new: NewMemoryWrites
    retries: int
    clock: Callable[[], datetime]

    async def supersede(
        self,
        tenant: str,
        old_id: str,
        draft: Draft,
        *,
        relation: str | None,
        reason: str,
        idempotency_key: str = "",
        request_hash: str = "",
        memory_limit: int | None = None,
        force: bool = False,
    ) -> Superseded:
        """Store a replacement, close the old memory and link old -> new, in
        one graph query: all of it or none of it. The replacement is a new
        memory, so it counts against `memory_limit`, and a tombstoned one is
        refused unless `force`. The old memory becomes superseded; with
        INVALIDATED_BY (it was wrong) its content is tombstoned too."""
        old_id = validate_memory_id(old_id, OLD_FIELD)
        relation_type = validate_supersede_relation(relation)
        now = self.clock()
        if replay := await self._replay(tenant, old_id, relation_type, idempotency_key, request_hash, now):
            return replay
        replacement, summarised = await self.new.preparation.prepare(tenant, draft, now)
        claim = self.new.idempotency.claim(tenant, idempotency_key, request_hash, now)

        async def attempt() -> Superseded | None:
            old = await require_memory(self.writer, tenant, old_id, field_name=OLD_FIELD)
            closed = close_superseded(old, replacement, reason=reason, now=now)
            edge = supersession_edge(old, replacement, relation_type, reason=reason, now=now)
            events = [
                MemoryEvent.for_memory(EventKind.CREATED, replacement, now),
                MemoryEvent.for_memory(EventKind.SUPERSEDED, closed, now),
                MemoryEvent.associated(tenant, edge),
            ]
            events[1].previous_trust_state = old.trust_state
            write = partial(
                self.writer.supersede,
                closed,
                old.version,
                replacement,
                edge,
                events,
                now_us=to_micros(now),
                claim=claim,
                before=old,
            )
            async with self.new.quota.hold(tenant, memory_limit, 1):
                wrote = await self.new.guarded.write(write, tenant, [replacement], events[:1], force=force)
            if wrote:
                published = await self.relay.submit(events)
                if relation_type == "INVALIDATED_BY":
                    await self._tombstone_invalidated(tenant, old, now)
                return Superseded(replacement, closed, relation_type, published, summarised)
            # Lost to a concurrent request with the same key (its result), or to a change of the old memory (None).
            if claim is None:
                return None
            return await self._replay(tenant, old_id, relation_type, idempotency_key, request_hash, now)

        return await compare_and_set(
            attempt,
            retries=self.retries,
            gave_up=lambda: Aborted("CONCURRENT_UPDATE", f"memory {old_id} kept changing; retry", field=OLD_FIELD),
        )

    async def _replay(
        self, tenant: str, old_id: str, relation: str, key: str, request_hash: str, now: datetime
    ) -> Superseded | None:
        """The first request with this key's replacement, and the old memory as it is now."""
        memories = await self.new.idempotency.replay(tenant, key, request_hash, now)
        if memories is None:
            return None
        old = await require_memory(self.writer, tenant, old_id, field_name=OLD_FIELD)
        return Superseded(memories[0], old, relation, published=True, summary=None, replayed=True)

    async def _tombstone_invalidated(self, tenant: str, old: Memory, now: datetime) -> None:
        """The content INVALIDATED_BY declared wrong stays out: a tombstone and
        its event in one write, right after the supersede's (which is done
        whatever becomes of this one)."""
        if self.trust is None:
            return
        stone = tombstone_for(tenant, old.id, old.content, INVALIDATED, now)
        event = MemoryEvent.tombstone(EventKind.TOMBSTONE_SET, tenant, old.id, stone.id, stone.reason, now)
        await self.trust.set_tombstone(stone, event, now_us=to_micros(now))
        await self.relay.submit([event])
