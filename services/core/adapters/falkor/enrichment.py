"""Enrichment's reads and writes (EnrichmentStore): the fields and edges it owns."""

from __future__ import annotations

from services.core.adapters.falkor.audit import AuditTail
from services.core.adapters.falkor.reads import FalkorLookup
from services.core.adapters.falkor.rows import encode_embedding, memory_to_row, outbox_row
from services.core.domain.embedding_text import Neighbour, Neighbours, Preceding
from services.core.domain.model import Memory, MemoryEvent

_ENRICHMENT_FIELDS = (
    "embedding", "summary", "enriched_at", "metadata", "factuality", "tags", "tag_prefixes", "search_tags",
    "search_meta", "version",
)  # fmt: skip

#: The memory just before an item (latest first) and just after it (earliest first), within the window.
_BEFORE = (
    "p.timestamp <= it.ts AND p.timestamp >= it.ts - $window AND (p.timestamp < it.ts OR p.recorded_at < it.rec)",
    "p.timestamp DESC, p.recorded_at DESC",
)
_AFTER = (
    "p.timestamp >= it.ts AND p.timestamp <= it.ts + $window AND (p.timestamp > it.ts OR p.recorded_at > it.rec)",
    "p.timestamp, p.recorded_at",
)


class FalkorEnrichmentStore(FalkorLookup):
    """EnrichmentStore on FalkorDB; every write is where the version is still the one read."""

    _audit = AuditTail()

    async def find_unenriched(self, recorded_before_us: int, limit: int) -> list[tuple[str, str]]:
        """(tenant, id) of memories enrichment has not finished (never, or not
        since their content changed), last changed before the time, oldest first."""
        return await self._oldest(
            "m.enriched_at IS NULL AND coalesce(m.updated_at, m.recorded_at) < $before", recorded_before_us, limit
        )

    async def _oldest(self, where: str, before_us: int, limit: int) -> list[tuple[str, str]]:
        """(tenant, id) of the memories matching `where`, least recently changed first, of every graph."""
        rows = await self._conn.visit(
            f"""
            MATCH (m:Memory) WHERE {where}
            WITH m, coalesce(m.updated_at, m.recorded_at) AS changed
            RETURN m.tenant, m.id, changed ORDER BY changed LIMIT $limit
            """,
            {"before": before_us, "limit": limit},
        )
        if len(self._conn.graphs()) > 1:
            rows = sorted(rows, key=lambda row: row[2])[:limit]
        return [(tenant, memory_id) for tenant, memory_id, _ in rows]

    async def count_unenriched(self, tenant: str) -> int:
        result = await self._conn.query(
            "MATCH (m:Memory {tenant: $tenant}) WHERE m.enriched_at IS NULL RETURN count(m)", {"tenant": tenant}
        )
        return int(result.result_set[0][0])

    async def record_embeddings(
        self,
        tenant: str,
        items: list[tuple[Memory, list[float] | None, str]],
        events: list[MemoryEvent],
        *,
        now_us: int,
    ) -> list[str]:
        """Per (memory as read, vector or None, model name): write the vector
        and its model (version bumped, so a PATCH that read the memory before
        retries instead of clearing the vector), or with None only record the
        event. Written only where version and content are still the ones read,
        so a concurrent content change never gets the old text's vector.
        Returns the ids written."""
        rows = []
        for (memory, vector, model), event in zip(items, events, strict=True):
            owned = {} if vector is None else {
                "embedding": encode_embedding(vector), "embedding_model": model, "version": memory.version + 1,
            }  # fmt: skip
            rows.append(
                {
                    "id": memory.id,
                    "version": memory.version,
                    "content": memory.content,
                    "row": owned,
                    "outbox": outbox_row(event, now_us),
                }
            )
        result = await self._conn.query(
            """
            UNWIND $items AS it
            MATCH (m:Memory {id: it.id})
            WHERE m.tenant = $tenant AND m.version = it.version AND m.content = it.content
            SET m += it.row
            CREATE (x:Outbox) SET x = it.outbox
            """
            + self._audit({"ids": "collect(it.id)"})
            + " RETURN ids",
            {"tenant": tenant, "items": rows},
        )
        return [i for row in result.result_set for i in row[0]]

    async def embedding_models(self, tenant: str, memory_ids: list[str]) -> dict[str, str]:
        """The model the embedding stage recorded for each memory's vector (none: client-supplied or older)."""
        result = await self._conn.query(
            """
            UNWIND $ids AS id MATCH (m:Memory {id: id})
            WHERE m.tenant = $tenant AND m.embedding_model IS NOT NULL
            RETURN m.id, m.embedding_model
            """,
            {"ids": memory_ids, "tenant": tenant},
        )
        return {memory_id: model for memory_id, model in result.result_set}

    async def count_unembedded(self, tenant: str) -> int:
        result = await self._conn.query(
            "MATCH (m:Memory {tenant: $tenant}) WHERE m.embedding IS NULL RETURN count(m)", {"tenant": tenant}
        )
        return int(result.result_set[0][0])

    async def find_unembedded(self, changed_before_us: int, limit: int) -> list[tuple[str, str]]:
        """(tenant, id) of memories without a vector, last changed before the time, oldest first."""
        return await self._oldest(
            "m.embedding IS NULL AND coalesce(m.updated_at, m.recorded_at) < $before", changed_before_us, limit
        )

    async def apply_enrichment(
        self, tenant: str, updates: list[tuple[Memory, int]], events: list[MemoryEvent], *, now_us: int
    ) -> list[str]:
        """Write enrichment's own fields where the version is still the one
        enrichment read (a concurrent PATCH wins); returns the ids written."""
        items = []
        for (memory, expected), event in zip(updates, events, strict=True):
            row = memory_to_row(memory, keep_nulls=True)
            owned = {k: row[k] for k in _ENRICHMENT_FIELDS if k in row}
            items.append({"id": memory.id, "version": expected, "row": owned, "outbox": outbox_row(event, now_us)})
        result = await self._conn.query(
            """
            UNWIND $items AS it
            MATCH (m:Memory {id: it.id}) WHERE m.tenant = $tenant AND m.version = it.version
            SET m += it.row
            CREATE (x:Outbox) SET x = it.outbox
            """
            + self._audit({"ids": "collect(it.id)"})
            + " RETURN ids",
            {"tenant": tenant, "items": items},
        )
        return [i for row in result.result_set for i in row[0]]

    async def neighbours(
        self, tenant: str, items: list[Preceding], window_us: int, *, following: bool
    ) -> dict[str, Neighbours]:
        """The memories just before and (with `following`) just after each
        (embedding_text.py): a range scan on the timestamp index per item and
        direction, nearest first (by timestamp, then recorded_at), within the
        window, sharing a tag."""
        if not items or window_us <= 0:
            return {}
        rows = [{"id": i.memory_id, "ts": i.timestamp_us, "rec": i.recorded_us, "tags": list(i.tags)} for i in items]
        params = {"tenant": tenant, "window": window_us, "items": rows}
        before = await self._nearest(_BEFORE, params)
        after = await self._nearest(_AFTER, params) if following else {}
        return {memory_id: Neighbours(before.get(memory_id), after.get(memory_id)) for memory_id in (*before, *after)}

    async def _nearest(self, direction: tuple[str, str], params: dict) -> dict[str, Neighbour]:
        within, order = direction
        result = await self._conn.query(
            f"""
            UNWIND $items AS it
            CALL {{
                WITH it
                MATCH (p:Memory)
                WHERE p.tenant = $tenant AND {within}
                  AND p.id <> it.id AND (size(it.tags) = 0 OR any(t IN p.tags WHERE t IN it.tags))
                RETURN p.id AS near, p.content AS content ORDER BY {order} LIMIT 1
            }}
            RETURN it.id, near, content
            """,
            params,
        )
        return {
            memory_id: Neighbour(near, content)
            for memory_id, near, content in result.result_set
            if isinstance(near, str) and isinstance(content, str)
        }

    async def link_preceding(
        self, tenant: str, items: list[tuple[str, int]], *, window_us: int, limit: int, now_us: int
    ) -> dict[str, int]:
        """PRECEDED_BY from each memory to the most recent earlier ones within the window.

        One read serves the batch: the memories just before its latest one
        (a range scan on the timestamp index, once per batch instead of once
        per memory). A memory whose predecessors lie deeper than that read
        reaches is looked up on its own."""
        if not items:
            return {}
        reach = len(items) + limit
        result = await self._conn.query(
            """
            MATCH (p:Memory)
            WHERE p.tenant = $tenant AND p.timestamp < $hi AND p.timestamp >= $lo
            RETURN p.id, p.timestamp ORDER BY p.timestamp DESC LIMIT $reach
            """,
            {
                "tenant": tenant,
                "hi": max(ts for _, ts in items),
                "lo": min(ts for _, ts in items) - window_us,
                "reach": reach,
            },
        )
        recent = [(memory_id, int(ts)) for memory_id, ts in result.result_set]
        complete = len(recent) < reach
        floor = recent[-1][1] if recent else 0
        pairs: list[dict[str, str]] = []
        deeper: list[tuple[str, int]] = []
        for memory_id, ts in items:
            before = [p for p, pts in recent if ts - window_us <= pts < ts and p != memory_id]
            # Every memory later than the read's oldest is in it: those are surely the most recent.
            sure = [p for p, pts in recent if floor < pts < ts and pts >= ts - window_us and p != memory_id]
            if complete or len(sure) >= limit:
                pairs += [{"src": memory_id, "dst": p} for p in before[:limit]]
            else:
                deeper.append((memory_id, ts))
        counts: dict[str, int] = {}
        if pairs:
            linked = await self._conn.query(
                """
                UNWIND $pairs AS it
                MATCH (m:Memory {id: it.src}) WHERE m.tenant = $tenant
                MATCH (p:Memory {id: it.dst}) WHERE p.tenant = $tenant
                MERGE (m)-[e:PRECEDED_BY]->(p)
                SET e.strength = 1.0, e.created_at = $now
                RETURN m.id, count(p)
                """,
                {"tenant": tenant, "pairs": pairs, "now": now_us},
            )
            counts.update({memory_id: int(count) for memory_id, count in linked.result_set})
        if deeper:
            counts.update(
                await self._link_preceding_each(tenant, deeper, window_us=window_us, limit=limit, now_us=now_us)
            )
        return counts

    async def _link_preceding_each(
        self, tenant: str, items: list[tuple[str, int]], *, window_us: int, limit: int, now_us: int
    ) -> dict[str, int]:
        """link_preceding one memory at a time (a range scan each)."""
        result = await self._conn.query(
            """
            UNWIND $items AS it
            MATCH (m:Memory {id: it.id}) WHERE m.tenant = $tenant
            CALL {
                WITH it
                MATCH (p:Memory)
                WHERE p.tenant = $tenant AND p.timestamp < it.ts AND p.timestamp >= it.ts - $window AND p.id <> it.id
                RETURN p ORDER BY p.timestamp DESC LIMIT $limit
            }
            MERGE (m)-[e:PRECEDED_BY]->(p)
            SET e.strength = 1.0, e.created_at = $now
            RETURN m.id, count(p)
            """,
            {
                "tenant": tenant,
                "items": [{"id": i, "ts": ts} for i, ts in items],
                "window": window_us,
                "limit": limit,
                "now": now_us,
            },
        )
        return {memory_id: int(count) for memory_id, count in result.result_set}

    async def link_similar(
        self, tenant: str, pairs: list[tuple[str, str, float]], *, now_us: int, replace_for: list[str] | None = None
    ) -> int:
        """SIMILAR_TO edges (source, neighbour, cosine score). With
        `replace_for`, those memories' outgoing SIMILAR_TO edges not among the
        pairs are removed first: a re-enrichment (after a content change)
        replaces the old text's neighbours instead of adding to them."""
        if replace_for:
            keep: dict[str, list[str]] = {i: [] for i in replace_for}
            for src, dst, _ in pairs:
                keep.setdefault(src, []).append(dst)
            await self._conn.query(
                """
                UNWIND $items AS it
                MATCH (a:Memory {id: it.id})-[e:SIMILAR_TO]->(b:Memory)
                WHERE a.tenant = $tenant AND NOT b.id IN it.keep
                DELETE e
                """,
                {"tenant": tenant, "items": [{"id": i, "keep": k} for i, k in keep.items()]},
            )
        if not pairs:
            return 0
        result = await self._conn.query(
            """
            UNWIND $pairs AS it
            MATCH (a:Memory {id: it.src}) WHERE a.tenant = $tenant
            MATCH (b:Memory {id: it.dst}) WHERE b.tenant = $tenant
            MERGE (a)-[e:SIMILAR_TO]->(b)
            SET e.strength = it.score, e.score = it.score, e.created_at = $now
            RETURN count(e)
            """,
            {"tenant": tenant, "pairs": [{"src": a, "dst": b, "score": s} for a, b, s in pairs], "now": now_us},
        )
        return int(result.result_set[0][0]) if result.result_set else 0

    async def link_entities_and_patterns(
        self,
        tenant: str,
        mentions: list[tuple[str, str, list[str]]],
        *,
        min_members: int,
        max_members: int,
        now_us: int,
        replace: bool = False,
    ) -> dict[str, int]:
        """MENTIONS edges from memories to their Entity nodes, then a Pattern
        (with EXEMPLIFIES edges) wherever at least `min_members` memories of
        one type mention one entity. `mentions` holds (memory id, type,
        entity tags). With `replace`, a memory's MENTIONS and EXEMPLIFIES
        edges to what `mentions` no longer names are removed first (a
        re-enrichment after a content change replaces the old text's). Returns,
        per memory id, how many patterns it exemplifies."""
        items = [{"id": i, "type": t, "tag": tag} for i, t, tags in mentions for tag in tags]
        if replace and mentions:
            named: dict[str, dict[str, set[str]]] = {}
            for memory_id, memory_type, tags in mentions:
                entry = named.setdefault(memory_id, {"tags": set(), "keys": set()})
                entry["tags"] |= set(tags)
                entry["keys"] |= {f"{memory_type}|{tag}" for tag in tags}
            await self._conn.query(
                """
                UNWIND $items AS it
                MATCH (m:Memory {id: it.id}) WHERE m.tenant = $tenant
                OPTIONAL MATCH (m)-[r:MENTIONS]->(e:Entity) WHERE NOT e.tag IN it.tags
                DELETE r
                WITH DISTINCT m, it
                OPTIONAL MATCH (m)-[x:EXEMPLIFIES]->(p:Pattern) WHERE NOT p.key IN it.keys
                DELETE x
                """,
                {
                    "tenant": tenant,
                    "items": [
                        {"id": i, "tags": sorted(v["tags"]), "keys": sorted(v["keys"])} for i, v in named.items()
                    ],
                },
            )
        if not items:
            return {}
        await self._conn.query(
            """
            UNWIND $items AS it
            MATCH (m:Memory {id: it.id}) WHERE m.tenant = $tenant
            MERGE (e:Entity {tenant: $tenant, tag: it.tag})
            MERGE (m)-[r:MENTIONS]->(e)
            SET r.created_at = $now
            """,
            {"tenant": tenant, "items": items, "now": now_us},
        )
        pairs = [{"type": t, "tag": tag} for t, tag in sorted({(it["type"], it["tag"]) for it in items})]
        groups = await self._conn.query(
            """
            UNWIND $pairs AS p
            MATCH (e:Entity {tag: p.tag})<-[:MENTIONS]-(m:Memory)
            WHERE e.tenant = $tenant AND m.tenant = $tenant AND m.type = p.type
            WITH p, collect(m.id) AS ids
            WHERE size(ids) >= $min
            RETURN p.type, p.tag, ids[0..$max]
            """,
            {"tenant": tenant, "pairs": pairs, "min": min_members, "max": max_members},
        )
        patterns = [{"key": f"{t}|{tag}", "type": t, "tag": tag, "ids": ids} for t, tag, ids in groups.result_set]
        if not patterns:
            return {}
        await self._conn.query(
            """
            UNWIND $patterns AS pt
            MERGE (p:Pattern {tenant: $tenant, key: pt.key})
            SET p.type = pt.type, p.entity_tag = pt.tag, p.members = size(pt.ids), p.updated_at = $now
            WITH p, pt
            UNWIND pt.ids AS id
            MATCH (m:Memory {id: id}) WHERE m.tenant = $tenant
            MERGE (m)-[x:EXEMPLIFIES]->(p)
            SET x.strength = 1.0, x.created_at = $now
            """,
            {"tenant": tenant, "patterns": patterns, "now": now_us},
        )
        counts: dict[str, int] = {}
        for pattern in patterns:
            for memory_id in pattern["ids"]:
                counts[memory_id] = counts.get(memory_id, 0) + 1
        return counts
