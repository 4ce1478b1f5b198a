"""The relay's view of the graph (Outbox): events waiting for the bus, expired idempotency keys."""

from __future__ import annotations

import base64

from memgrid.v1 import events_pb2
from services.core.adapters.falkor.connection import FalkorConnection
from services.core.codec import event_from_pb
from services.core.domain.outbox import OutboxEntry


class FalkorOutbox:
    """Outbox on FalkorDB."""

    def __init__(self, connection: FalkorConnection):
        self._conn = connection

    async def pending_outbox(self, older_than_us: int, limit: int) -> list[OutboxEntry]:
        """Events recorded before `older_than_us` that the bus never acknowledged."""
        result = await self._conn.query(
            "MATCH (x:Outbox) WHERE x.created_at < $before RETURN x.id, x.payload ORDER BY x.created_at LIMIT $limit",
            {"before": older_than_us, "limit": limit},
        )
        entries = []
        for event_id, payload in result.result_set:
            pb = events_pb2.MemoryEvent()
            pb.ParseFromString(base64.b64decode(payload))
            entries.append(OutboxEntry(event_id, event_from_pb(pb)))
        return entries

    async def delete_outbox(self, event_ids: list[str]) -> None:
        await self._conn.query(
            "UNWIND $ids AS id MATCH (x:Outbox {id: id}) DELETE x", {"ids": event_ids}, idempotent=True
        )

    async def purge_idempotency(self, now_us: int) -> int:
        """Forget expired idempotency keys; returns how many."""
        result = await self._conn.query(
            "MATCH (k:IdempotencyKey) WHERE k.expires_at < $now DELETE k RETURN count(k)",
            {"now": now_us},
            idempotent=True,
        )
        return int(result.result_set[0][0]) if result.result_set else 0
