"""Ingest's writes (MemoryWriter): each write and its events in one query (the outbox)."""

from __future__ import annotations

from typing import Any

from services.core.adapters.falkor.audit import AuditTail
from services.core.adapters.falkor.reads import FalkorLookup
from services.core.adapters.falkor.rows import memory_to_row, outbox_row, relation_row
from services.core.adapters.falkor.tombstone_check import guarded, guarded_count
from services.core.domain.idempotency import IdempotencyClaim
from services.core.domain.model import SUPERSESSION_RELATIONS, EventKind, Memory, MemoryEvent, Relation
from services.core.domain.tombstones import TombstoneGuard

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


def _claim(keep: str) -> str:
    """_CLAIM keeping the variables `keep` ("a, b") past its check."""
    return _CLAIM.replace("WITH k WHERE", f"WITH k, {keep} WHERE")


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
    events recorded, whether or not the bus was reachable, and its audit
    entries (FalkorGraph turns them off with audit_log=False)."""

    _audit = AuditTail()

    async def create_memories(
        self,
        memories: list[Memory],
        events: list[MemoryEvent],
        *,
        now_us: int,
        claim: IdempotencyClaim | None = None,
        guard: TombstoneGuard | None = None,
    ) -> bool:
        """Create the nodes and their events in one query. With a claim, the
        write happens only if this request owns the idempotency key; returns
        whether it wrote. With a guard, the same query checks the tenant's
        tombstones first and writes nothing (no claim either) where one holds
        a memory's content unpassed: TombstoneHeld. Memories of several
        tenants (a batch without claim or guard) are written tenant by
        tenant, each with its events."""
        if not memories:  # nothing to write (and no tenant's audit counter to touch)
            return claim is None and guard is None
        if claim is None and guard is None and len({m.tenant for m in memories}) > 1:
            by_tenant: dict[str, tuple[list[Memory], list[MemoryEvent]]] = {}
            for m, e in zip(memories, events, strict=True):
                pair = by_tenant.setdefault(m.tenant, ([], []))
                pair[0].append(m)
                pair[1].append(e)
            for some, theirs in by_tenant.values():
                await self.create_memories(some, theirs, now_us=now_us)
            return True
        rows = [
            {"node": memory_to_row(m), "outbox": outbox_row(e, now_us, after=m)}
            for m, e in zip(memories, events, strict=True)
        ]
        # Keyed by id, and all or nothing: where the first memory is there
        # already (this very query, run before its reply was lost), they all
        # are, and the query writes nothing (no second event or audit entry),
        # so it is sent again after a lost connection. One look by id, not one
        # a row. The unique constraint on (tenant, id) (schema.py) refuses a
        # duplicate whatever the query.
        ran = "guard_ran IS NOT NULL" if guard is not None else "ran IS NOT NULL"
        body = (
            ("" if guard is not None else "OPTIONAL MATCH (ran:Memory {id: $ran_id}) WHERE ran.tenant = $ran_tenant ")
            + f"WITH {ran} AS ran "
            + (_claim("ran") if claim else "")
            # One row, the memories a list: FalkorDB's time a tenth less than a row each.
            + " FOREACH (r IN CASE WHEN ran THEN [] ELSE $rows END |"
            " CREATE (m:Memory) SET m = r.node CREATE (x:Outbox) SET x = r.outbox)"
            # The audit entries, one a memory created (none for a repeat).
            + self._audit.listed(
                {"n": "size($rows)"},
                entries="CASE WHEN ran THEN [] ELSE [r IN $rows | r.outbox] END",
                tenant="$ran_tenant",
            )
        )
        first = memories[0]
        params: dict[str, Any] = {
            **(_claim_params(claim, [m.id for m in memories], now_us) if claim else {}),
            "rows": rows,
            "ran_tenant": first.tenant,
        }
        if guard is not None:
            cypher, guard_params = guarded(guard, first.id, body)
            result = await self._conn.query(cypher, {**params, **guard_params}, idempotent=True)
            return guarded_count(result) > 0
        params["ran_id"] = first.id
        result = await self._conn.query(body + " RETURN n", params, idempotent=True)
        return claim is None or bool(result.result_set and result.result_set[0][0])

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
        await self._replicated(tenant, [key], now_us)
        request_hash, ids = result.result_set[0]
        return request_hash, list(ids)

    async def get_idempotency_many(self, tenant: str, keys: list[str], now_us: int) -> dict[str, tuple[str, list[str]]]:
        """(request hash, memory ids) by key, for the keys that are held and not expired."""
        result = await self._conn.query(
            """
            UNWIND $keys AS key
            MATCH (k:IdempotencyKey {key: key}) WHERE k.tenant = $tenant AND k.expires_at >= $now
            RETURN k.key, k.request_hash, k.memory_ids
            """,
            {"tenant": tenant, "keys": keys, "now": now_us},
        )
        await self._replicated(tenant, [row[0] for row in result.result_set], now_us)
        return {key: (request_hash, list(ids)) for key, request_hash, ids in result.result_set}

    async def _replicated(self, tenant: str, keys: list[str], now_us: int) -> None:
        """With FALKORDB_WRITE_REPLICAS, make sure a replica holds what the held `keys` answer for
        before a replay is acknowledged: the first write may have been refused as unreplicated
        (its 503 is what the client retries). A write to the keys, waited for like any write,
        does it: a replica that holds it holds every write before it in the graph's shard.
        FALKORDB_WRITE_UNREPLICATED when none does."""
        if keys and self._conn.write_replicas:
            await self._conn.query(
                "UNWIND $keys AS key MATCH (k:IdempotencyKey {key: key}) WHERE k.tenant = $tenant"
                " SET k.replayed_at = $now",
                {"tenant": tenant, "keys": keys, "now": now_us},
                idempotent=True,
            )

    async def claim_idempotency(self, claims: list[tuple[IdempotencyClaim, list[str]]], now_us: int) -> set[str]:
        """Claim each key for its memory ids (an expired key is taken over);
        each claim stands alone. Returns the keys another request holds."""
        if not claims:
            return set()
        owner, tenant, expires = claims[0][0].owner, claims[0][0].tenant, claims[0][0].expires_us
        result = await self._conn.query(
            """
            UNWIND $claims AS c
            MERGE (k:IdempotencyKey {tenant: $tenant, key: c.key})
            ON CREATE SET k.owner = $owner, k.request_hash = c.hash, k.memory_ids = c.ids, k.expires_at = $expires
            ON MATCH SET
                k.owner = CASE WHEN k.expires_at < $now THEN $owner ELSE k.owner END,
                k.request_hash = CASE WHEN k.expires_at < $now THEN c.hash ELSE k.request_hash END,
                k.memory_ids = CASE WHEN k.expires_at < $now THEN c.ids ELSE k.memory_ids END,
                k.expires_at = CASE WHEN k.expires_at < $now THEN $expires ELSE k.expires_at END
            WITH k WHERE k.owner <> $owner
            RETURN k.key
            """,
            {
                "tenant": tenant,
                "owner": owner,
                "expires": expires,
                "now": now_us,
                "claims": [{"key": c.key, "hash": c.request_hash, "ids": ids} for c, ids in claims],
            },
            idempotent=True,  # run again, it finds its own claims and reports none lost
        )
        return {row[0] for row in result.result_set}

    async def update_memory(
        self, memory: Memory, expected_version: int, event: MemoryEvent, *, now_us: int, before: Memory | None = None
    ) -> bool:
        """Compare-and-set on the version: False when someone wrote in between.
        `before`, the record as read, gives the audit entry its diff."""
        result = await self._conn.query(
            """
            MATCH (m:Memory {id: $id}) WHERE m.tenant = $tenant AND m.version = $version
            SET m += $row
            CREATE (x:Outbox) SET x = $outbox
            """
            + self._audit({"n": "count(m)"})
            + " RETURN n",
            {
                "id": memory.id,
                "tenant": memory.tenant,
                "version": expected_version,
                "row": memory_to_row(memory, keep_nulls=True),
                "outbox": outbox_row(event, now_us, before=before, after=memory),
            },
            idempotent=False,  # a second run would find the version moved and report a conflict
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
            """
            + self._audit({"ids": "collect(it.id)"})
            + " RETURN ids",
            {"tenant": tenant, "items": [{"id": e.memory_id, "outbox": outbox_row(e, now_us)} for e in events]},
            idempotent=False,  # a second run would find nothing and report the ids as missing
        )
        return [i for row in result.result_set for i in row[0]]

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
                """
                + self._audit({"idx": "collect(DISTINCT it.i)"})
                + " RETURN idx",
                {"tenant": tenant, "items": list(items.values()), "now": now_us},
                idempotent=False,  # the edges are merged, but their events would be recorded twice
            )
            written.extend(i for row in result.result_set for group in row[0] for i in group)
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
        before: Memory | None = None,
        guard: TombstoneGuard | None = None,
    ) -> bool:
        """Store the replacement, close the old memory and link them, in one
        query: all of it or none. False when the old memory changed or
        vanished, or another request holds the idempotency key. `before`,
        the old memory as read, gives its audit entry the diff. `guard`, of
        the replacement: as create_memories' (TombstoneHeld, nothing written)."""
        records = {old.id: old, replacement.id: replacement}
        claim_params = _claim_params(claim, [replacement.id], now_us) if claim else {}
        if claim:
            claim_params["tenant"] = old.tenant
        # The replacement is created only where its id is not taken yet (an
        # aggregate: FalkorDB's `WITH n WHERE n IS NULL` after an OPTIONAL
        # MATCH let the row through). Not sent again after a lost connection:
        # the caller hears the write is unconfirmed instead. Guarded, the
        # aggregate keeps the guard's verdict as its key: over no rows (the
        # guard refused), it then makes none, where a bare count makes one.
        keep = "guard_ok, " if guard is not None else ""
        # The key is claimed only once the old memory matched at its version: a claim
        # MERGEd before that match stayed written when the match failed (an enrichment
        # moved the version), and the retry then read it as IDEMPOTENT_RESULT_GONE.
        claim_part = _claim("old") if claim else ""
        body = (
            "OPTIONAL MATCH (dup:Memory {id: $new_id}) WHERE dup.tenant = $tenant"
            f" WITH {keep}count(dup) AS taken WHERE taken = 0 "
            + """
            MATCH (old:Memory {id: $old_id}) WHERE old.tenant = $tenant AND old.version = $version
            """
            + claim_part
            + f"""
            SET old += $old_row
            CREATE (new:Memory) SET new = $new_row
            CREATE (old)-[e:{relation.type}]->(new) SET e = $edge
            WITH old
            UNWIND $outbox AS o CREATE (x:Outbox) SET x = o
            """
            + self._audit({"n": "count(x)"})
        )
        params = {
            "old_id": old.id,
            "new_id": replacement.id,
            "tenant": old.tenant,
            "version": expected_version,
            "old_row": memory_to_row(old, keep_nulls=True),
            "new_row": memory_to_row(replacement),
            "edge": relation_row(relation),
            "outbox": [
                outbox_row(e, now_us)
                if e.kind is EventKind.ASSOCIATED
                else outbox_row(
                    e, now_us, before=before if e.memory_id == old.id else None, after=records.get(e.memory_id)
                )
                for e in events
            ],
            **claim_params,
        }
        if guard is not None:
            # No repeat to let through (the query is not sent twice): no id to look for.
            cypher, guard_params = guarded(guard, "", body)
            result = await self._conn.query(cypher, {**params, **guard_params}, idempotent=False)
            return guarded_count(result) > 0
        result = await self._conn.query(body + " RETURN n", params, idempotent=False)
        return bool(result.result_set and result.result_set[0][0])
