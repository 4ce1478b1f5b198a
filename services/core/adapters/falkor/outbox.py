"""The relay's view of the graph (Outbox): events waiting for the bus, expired idempotency keys.

Cross-tenant: each call visits every graph of the layout (one, by default).
"""

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
        """Events recorded before `older_than_us` that the bus never acknowledged, oldest first (of every graph)."""
        rows = await self._conn.visit(
            "MATCH (x:Outbox) WHERE x.created_at < $before"
            " RETURN x.id, x.payload, x.created_at ORDER BY x.created_at LIMIT $limit",
            {"before": older_than_us, "limit": limit},
        )
        if len(self._conn.graphs()) > 1:
            rows = sorted(rows, key=lambda row: row[2])[:limit]
        entries = []
        for event_id, payload, _ in rows:
            pb = events_pb2.MemoryEvent()
            pb.ParseFromString(base64.b64decode(payload))
            entries.append(OutboxEntry(event_id, event_from_pb(pb)))
        return entries

    async def delete_outbox(self, event_ids: list[str], tenants: list[str] | None = None) -> None:
        """Clear these events; `tenants`, each one's tenant in the same order
        where the caller knows them (the relay does), clears each in its
        tenant's graph alone instead of in every graph."""
        cypher = "UNWIND $ids AS id MATCH (x:Outbox {id: id}) DELETE x"
        if tenants is None:
            for graph in self._conn.graphs():
                await self._conn.query(cypher, {"ids": event_ids}, idempotent=True, graph=graph)
            return
        pairs = list(zip(event_ids, tenants, strict=True))
        for graph, group in self._conn.by_graph(pairs, lambda pair: pair[1]).items():
            await self._conn.query(cypher, {"ids": [i for i, _ in group]}, idempotent=True, graph=graph)

    async def purge_idempotency(self, now_us: int) -> int:
        """Forget expired idempotency keys (of every graph); returns how many."""
        rows = await self._conn.visit(
            "MATCH (k:IdempotencyKey) WHERE k.expires_at < $now DELETE k RETURN count(k)",
            {"now": now_us},
            idempotent=True,
        )
        return sum(int(row[0]) for row in rows)
