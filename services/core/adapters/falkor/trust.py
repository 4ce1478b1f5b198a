"""Trust states, the review queue and tombstones (TrustWriter, ReviewReads) on FalkorDB.

A tombstone is a `Tombstone` node per tenant and content hash (its id is
derived from both, so leaving one twice MERGEs into the same node). Every
change here and its events are one query, as every write is (writes.py).
"""

from __future__ import annotations

from typing import Any

from services.core.adapters.falkor.audit import AuditTail
from services.core.adapters.falkor.reads import FalkorLookup
from services.core.adapters.falkor.rows import RETURN_FIELDS, outbox_row, read_row
from services.core.domain.model import EventKind, Memory, MemoryEvent
from services.core.domain.times import from_micros, to_micros
from services.core.domain.tombstones import Tombstone
from services.core.domain.trust import TrustState

TOMBSTONE_FIELDS = "t.id, t.tenant, t.content_hash, t.reason, t.memory_id, t.created_at, t.excerpt"
_MERGE_TOMBSTONE = """
MERGE (t:Tombstone {id: $tomb.id})
ON CREATE SET t += $tomb
ON MATCH SET t.reason = $tomb.reason, t.memory_id = $tomb.memory_id, t.created_at = $tomb.created_at
"""


def _tombstone_row(tombstone: Tombstone) -> dict[str, Any]:
    return {
        "id": tombstone.id,
        "tenant": tombstone.tenant,
        "content_hash": tombstone.content_hash,
        "reason": tombstone.reason,
        "memory_id": tombstone.memory_id,
        "created_at": to_micros(tombstone.created_at),
        "excerpt": tombstone.excerpt,
    }


def tombstone_from_row(values) -> Tombstone:
    tid, tenant, digest, reason, memory_id, created, excerpt = values
    return Tombstone(tid, tenant, digest, reason or "", memory_id or "", from_micros(created), excerpt or "")


class FalkorTrustStore(FalkorLookup):
    """TrustWriter and ReviewReads on FalkorDB (a lookup too: the handlers read the record first)."""

    _audit = AuditTail()  # each write's audit entries (audit.py)

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
        """Compare-and-set the trust state (review rule, version, updated_at) of a
        memory read at `expected_version`, with its events and, for a
        rejection, its tombstone, in one query. False when the memory changed
        or vanished in between. `before`, the record as read, gives the audit
        entry of the memory's own event its diff."""
        result = await self._conn.query(
            """
            MATCH (m:Memory {id: $id}) WHERE m.tenant = $tenant AND m.version = $version
            SET m.trust_state = $trust, m.review_rule = $rule, m.version = $new_version, m.updated_at = $updated
            WITH m
            """
            + (_MERGE_TOMBSTONE + " WITH m, t " if tombstone is not None else "")
            + """
            UNWIND $outbox AS o CREATE (x:Outbox) SET x = o
            """
            + self._audit({"n": "count(x)"})
            + " RETURN n",
            {
                "id": memory.id,
                "tenant": memory.tenant,
                "version": expected_version,
                "trust": memory.trust_state,
                "rule": memory.review_rule,
                "new_version": memory.version,
                "updated": to_micros(memory.updated_at),
                "tomb": _tombstone_row(tombstone) if tombstone is not None else None,
                "outbox": [
                    outbox_row(e, now_us, before=before, after=memory)
                    if e.kind is not EventKind.TOMBSTONE_SET
                    else outbox_row(e, now_us)
                    for e in events
                ],
            },
            idempotent=False,  # a second run would find the version moved and report a conflict
        )
        return bool(result.result_set and result.result_set[0][0])

    async def delete_with_tombstone(
        self, tenant: str, memory_id: str, tombstone: Tombstone, events: list[MemoryEvent], *, now_us: int
    ) -> bool:
        """Delete the memory (and its edges) and leave its tombstone, with the
        events (DELETED, TOMBSTONE_SET), in one query; False when it is not there."""
        result = await self._conn.query(
            """
            MATCH (m:Memory {id: $id}) WHERE m.tenant = $tenant
            DETACH DELETE m
            WITH count(*) AS gone WHERE gone > 0
            """
            + _MERGE_TOMBSTONE
            + """
            WITH t UNWIND $outbox AS o CREATE (x:Outbox) SET x = o
            """
            + self._audit({"n": "count(x)"})
            + " RETURN n",
            {
                "id": memory_id,
                "tenant": tenant,
                "tomb": _tombstone_row(tombstone),
                "outbox": [outbox_row(e, now_us) for e in events],
            },
            idempotent=False,
        )
        return bool(result.result_set and result.result_set[0][0])

    async def set_tombstone(self, tombstone: Tombstone, event: MemoryEvent, *, now_us: int) -> None:
        """Leave a tombstone (a supersede with INVALIDATED_BY) with its event."""
        await self._conn.query(
            _MERGE_TOMBSTONE
            + " WITH t CREATE (x:Outbox) SET x = $outbox"
            + self._audit({"n": "count(x)"})
            + " RETURN n",
            {"tomb": _tombstone_row(tombstone), "outbox": outbox_row(event, now_us)},
            idempotent=True,  # a MERGE, and the outbox row's id is the event's: the relay publishes it once
        )

    async def list_tombstones(self, tenant: str, limit: int, offset: int) -> list[Tombstone]:
        """The tenant's tombstones, newest first."""
        result = await self._conn.query(
            f"""
            MATCH (t:Tombstone) WHERE t.tenant = $tenant
            RETURN {TOMBSTONE_FIELDS} ORDER BY t.created_at DESC, t.id ASC SKIP $offset LIMIT $limit
            """,
            {"tenant": tenant, "limit": limit, "offset": offset},
        )
        return [tombstone_from_row(row) for row in result.result_set]

    async def remove_tombstone(self, tenant: str, tombstone_id: str, event: MemoryEvent, *, now_us: int) -> bool:
        """Remove one of the tenant's tombstones with its event; False when it is not there."""
        result = await self._conn.query(
            """
            MATCH (t:Tombstone {id: $id}) WHERE t.tenant = $tenant
            DELETE t
            WITH count(*) AS gone WHERE gone > 0
            CREATE (x:Outbox) SET x = $outbox
            """
            + self._audit({"n": "count(x)"})
            + " RETURN n",
            {"id": tombstone_id, "tenant": tenant, "outbox": outbox_row(event, now_us)},
            idempotent=False,
        )
        return bool(result.result_set and result.result_set[0][0])

    async def get_tombstone(self, tenant: str, tombstone_id: str) -> Tombstone | None:
        result = await self._conn.query(
            f"MATCH (t:Tombstone {{id: $id}}) WHERE t.tenant = $tenant RETURN {TOMBSTONE_FIELDS}",
            {"id": tombstone_id, "tenant": tenant},
        )
        return tombstone_from_row(result.result_set[0]) if result.result_set else None

    async def review_queue(self, tenant: str, limit: int, offset: int) -> list[Memory]:
        """The tenant's memories waiting for review, oldest first."""
        result = await self._conn.query(
            f"""
            MATCH (n:Memory) WHERE n.tenant = $tenant AND n.trust_state = $pending
            RETURN {RETURN_FIELDS} ORDER BY n.recorded_at ASC, n.id ASC SKIP $offset LIMIT $limit
            """,
            {"tenant": tenant, "pending": TrustState.PENDING_REVIEW.value, "limit": limit, "offset": offset},
        )
        return [read_row(row) for row in result.result_set]
