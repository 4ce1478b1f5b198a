"""Ingest's writes (MemoryWriter): each write and its events in one query (the outbox)."""

from __future__ import annotations

from typing import Any

from services.core.adapters.falkor.reads import FalkorLookup
from services.core.adapters.falkor.rows import memory_to_row, outbox_row, relation_row
from services.core.domain.model import SUPERSESSION_RELATIONS, Memory, MemoryEvent, Relation
from services.core.ports import IdempotencyClaim

_CLAIM = """
MERGE (k:IdempotencyKey {tenant: $tenant, key: $key})
ON CREATE SET k.owner = $owner, k.request_hash = $hash, k.memory_ids = $ids, k.expires_at = $expires
ON MATCH SET
    k.owner = CASE WHEN k.expires_at < $now THEN $owner ELSE k.owner END,
    k.request_hash = CASE WHEN k.expires_at < $now THEN $hash ELSE k.request_hash END,
    k.memory_ids = CASE WHEN k.expires_at < $now THEN $ids ELSE k.memory_ids END,
    k.expires_at = CASE WHEN k.expires_at < $now THEN $expires ELSE k.expires_at END
WITH k WHERE k.owner = $owner
"""


def _claim_params(claim: IdempotencyClaim, memory_ids: list[str], now_us: int) -> dict[str, Any]:
    return {
        "tenant": claim.tenant,
        "key": claim.key,
        "owner": claim.owner,
        "hash": claim.request_hash,
        "ids": memory_ids,
        "expires": claim.expires_us,
        "now": now_us,
    }


class FalkorMemoryWriter(FalkorLookup):
    """MemoryWriter on FalkorDB. Each write and the events it causes are one
    query (a transactional outbox): an acknowledged write always has its
    events recorded, whether or not the bus was reachable."""

    async def create_memories(
        self, memories: list[Memory], events: list[MemoryEvent], *, now_us: int, claim: IdempotencyClaim | None = None
    ) -> bool:
        """Create the nodes and their events in one query. With a claim, the
        write happens only if this request owns the idempotency key; returns
        whether it wrote."""
        rows = [
            {"node": memory_to_row(m), "outbox": outbox_row(e, now_us)} for m, e in zip(memories, events, strict=True)
        ]
        create = "UNWIND $rows AS r CREATE (m:Memory) SET m = r.node CREATE (x:Outbox) SET x = r.outbox"
        if claim is None:
            await self._conn.query(create, {"rows": rows})
            return True
        result = await self._conn.query(
            _CLAIM + create + " RETURN count(m)",
            {**_claim_params(claim, [m.id for m in memories], now_us), "rows": rows},
        )
        return bool(result.result_set and result.result_set[0][0])

    async def get_idempotency(self, tenant: str, key: str, now_us: int) -> tuple[str, list[str]] | None:
        """(request hash, memory ids) recorded under a key that has not expired."""
        result = await self._conn.query(
            """
            MATCH (k:IdempotencyKey {key: $key}) WHERE k.tenant = $tenant AND k.expires_at >= $now
            RETURN k.request_hash, k.memory_ids
            """,
            {"tenant": tenant, "key": key, "now": now_us},
        )
        if not result.result_set:
            return None
        request_hash, ids = result.result_set[0]
        return request_hash, list(ids)

    async def update_memory(self, memory: Memory, expected_version: int, event: MemoryEvent, *, now_us: int) -> bool:
        """Compare-and-set on the version: False when someone wrote in between."""
        result = await self._conn.query(
            """
            MATCH (m:Memory {id: $id}) WHERE m.tenant = $tenant AND m.version = $version
            SET m += $row
            CREATE (x:Outbox) SET x = $outbox
            RETURN count(m)
            """,
            {
                "id": memory.id,
                "tenant": memory.tenant,
                "version": expected_version,
                "row": memory_to_row(memory, keep_nulls=True),
                "outbox": outbox_row(event, now_us),
            },
        )
        return bool(result.result_set and result.result_set[0][0])

    async def delete_memories(self, tenant: str, events: list[MemoryEvent], *, now_us: int) -> list[str]:
        """Delete nodes and their edges (one DELETED event each); returns the ids deleted."""
        result = await self._conn.query(
            """
            UNWIND $items AS it
            MATCH (m:Memory {id: it.id}) WHERE m.tenant = $tenant
            DETACH DELETE m
            CREATE (x:Outbox) SET x = it.outbox
            RETURN it.id
            """,
            {"tenant": tenant, "items": [{"id": e.memory_id, "outbox": outbox_row(e, now_us)} for e in events]},
        )
        return [row[0] for row in result.result_set]

    async def find_ids_by_tags(self, tenant: str, tags_lower: list[str], limit: int) -> list[str]:
        """Ids of memories with any of the tags (exact, case-insensitive)."""
        result = await self._conn.query(
            """
            MATCH (m:Memory) WHERE m.tenant = $tenant AND any(t IN m.tags WHERE toLower(t) IN $tags)
            RETURN m.id LIMIT $limit
            """,
            {"tenant": tenant, "tags": tags_lower, "limit": limit},
        )
        return [row[0] for row in result.result_set]

    async def create_relations(
        self, tenant: str, relations: list[Relation], events: list[MemoryEvent], *, now_us: int
    ) -> list[int]:
        """MERGE the edges whose two ends exist in the tenant (strength and
        properties are refreshed on a repeat); returns the indexes written."""
        # One row per edge: FalkorDB answers a MERGE of the same edge twice in
        # one query with a single row, so a repeat within the request is folded
        # into its first (properties set in order, as successive requests would).
        by_type: dict[str, dict[tuple[str, str], dict[str, Any]]] = {}
        for index, (relation, event) in enumerate(zip(relations, events, strict=True)):
            row = by_type.setdefault(relation.type, {}).setdefault(
                (relation.source_id, relation.target_id),
                {"i": [], "src": relation.source_id, "dst": relation.target_id, "props": {}, "outbox": []},
            )
            row["i"].append(index)
            row["props"].update(relation_row(relation))
            row["outbox"].append(outbox_row(event, now_us))
        written: list[int] = []
        for rel_type, items in by_type.items():
            # A supersession edge makes its source superseded (a system time, kept once set).
            supersedes = (
                ", a.superseded_at = coalesce(a.superseded_at, $now)" if rel_type in SUPERSESSION_RELATIONS else ""
            )
            # Relation types cannot be parameters; rel_type comes from the validated vocabulary.
            result = await self._conn.query(
                f"""
                UNWIND $items AS it
                MATCH (a:Memory {{id: it.src}}) WHERE a.tenant = $tenant
                MATCH (b:Memory {{id: it.dst}}) WHERE b.tenant = $tenant
                MERGE (a)-[e:{rel_type}]->(b)
                SET e += it.props{supersedes}
                WITH it
                UNWIND it.outbox AS o CREATE (x:Outbox) SET x = o
                RETURN DISTINCT it.i
                """,
                {"tenant": tenant, "items": list(items.values()), "now": now_us},
            )
            written.extend(i for row in result.result_set for i in row[0])
        return sorted(written)

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
    ) -> bool:
        """Store the replacement, close the old memory and link them, in one
        query: all of it or none. False when the old memory changed or
        vanished, or another request holds the idempotency key."""
        claim_part = _CLAIM if claim else ""
        claim_params = _claim_params(claim, [replacement.id], now_us) if claim else {}
        if claim:
            claim_params["tenant"] = old.tenant
        result = await self._conn.query(
            claim_part
            + f"""
            MATCH (old:Memory {{id: $old_id}}) WHERE old.tenant = $tenant AND old.version = $version
            SET old += $old_row
            CREATE (new:Memory) SET new = $new_row
            CREATE (old)-[e:{relation.type}]->(new) SET e = $edge
            WITH old
            UNWIND $outbox AS o CREATE (x:Outbox) SET x = o
            RETURN count(x)
            """,
            {
                "old_id": old.id,
                "tenant": old.tenant,
                "version": expected_version,
                "old_row": memory_to_row(old, keep_nulls=True),
                "new_row": memory_to_row(replacement),
                "edge": relation_row(relation),
                "outbox": [outbox_row(e, now_us) for e in events],
                **claim_params,
            },
        )
        return bool(result.result_set and result.result_set[0][0])
