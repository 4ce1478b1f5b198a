"""The graph's upkeep (GraphLifecycle): indexes and migrations at start-up, health, shutdown."""

from __future__ import annotations

import json

import redis.exceptions as redis_errors

from services.core.adapters.falkor.reads import FalkorLookup
from services.core.domain.factuality import lift_factuality
from services.core.domain.model import ComponentStatus

_INDEXES = (
    ("Memory", "id"),
    ("Memory", "tenant"),
    ("Memory", "timestamp"),  # PRECEDED_BY's range scans
    ("Outbox", "id"),
    ("Outbox", "created_at"),
    ("IdempotencyKey", "key"),
    # Enrichment's MERGEs and its Pattern grouping look these up; without an
    # index each lookup scanned every Entity (or Pattern) node.
    ("Entity", "tag"),
    ("Entity", "tenant"),
    ("Pattern", "key"),
    ("Pattern", "tenant"),
    # Consolidation's own nodes (services/core/adapters/falkor/consolidation*.py).
    ("MetaPattern", "id"),
    ("MetaPattern", "tenant"),
    ("ConsolidationRun", "id"),
    ("ConsolidationRun", "tenant"),
    ("Lease", "tenant"),
)
#: Node ids the factuality migration in ensure_schema reads per query.
FACTUALITY_MIGRATION_PAGE = 2000
#: Full-text fields of Memory: the keyword, tag and metadata arms.
_FULLTEXT_FIELDS = ("content", "search_tags", "search_meta")


class FalkorLifecycle(FalkorLookup):
    """GraphLifecycle on FalkorDB (a lookup too: the health check counts memories)."""

    async def ensure_schema(self) -> None:
        """Wait for FalkorDB (it answers LOADING after a restart), check its
        query timeouts, then create indexes."""
        await self._conn.query("RETURN 1", deadline=self._conn.wait_seconds)
        await self._conn.check_timeouts()
        for label, prop in _INDEXES:
            try:
                await self._conn.query(f"CREATE INDEX FOR (n:{label}) ON (n.{prop})")
            except redis_errors.ResponseError as exc:
                if "already indexed" not in str(exc):
                    raise
        result = await self._conn.query(
            "CALL db.indexes() YIELD label, properties, types RETURN label, properties, types"
        )
        indexed = {
            (label, prop)
            for label, props, types in result.result_set
            for prop in props
            if "FULLTEXT" in types.get(prop, [])
        }
        missing = [field for field in _FULLTEXT_FIELDS if ("Memory", field) not in indexed]
        if missing:
            fields = ", ".join(f"'{field}'" for field in missing)
            await self._conn.query(
                f"CALL db.idx.fulltext.createNodeIndex({{label: 'Memory', language: 'english'}}, {fields})"
            )
        # Records written before superseded_at was kept: reads look for supersession edges only where it is set.
        await self._conn.query(
            "MATCH (n:Memory)-[s:INVALIDATED_BY|EVOLVED_INTO]->(:Memory) WHERE n.superseded_at IS NULL "
            "SET n.superseded_at = s.created_at"
        )
        await self.migrate_factuality()

    async def migrate_factuality(self, page_size: int = FACTUALITY_MIGRATION_PAGE) -> int:
        """Move the factuality an earlier release's enrichment wrote into
        metadata out to its own property. Idempotent. One scan finds the
        span of node ids holding candidates; it is then read a window of
        `page_size` ids at a time (an id range seek, so each query reads only
        its window and the whole pass is one walk over the nodes). A record
        whose metadata.factuality is the client's own is left as it is; one
        written meanwhile (its version moved) is left to the writer, which
        wrote the new shape (row_to_memory lifts it on read). Returns how
        many it moved."""
        candidates = "n.factuality IS NULL AND n.enriched_at IS NOT NULL AND n.metadata CONTAINS '\"factuality\"'"
        span = await self._conn.query(f"MATCH (n:Memory) WHERE {candidates} RETURN min(id(n)), max(id(n))")
        low, high = span.result_set[0] if span.result_set else (None, None)
        if low is None:
            return 0
        moved = 0
        for start in range(low, high + 1, page_size):
            result = await self._conn.query(
                f"""
                MATCH (n:Memory) WHERE id(n) >= $start AND id(n) < $stop AND {candidates}
                RETURN n.id, n.tenant, n.version, n.metadata
                """,
                {"start": start, "stop": start + page_size},
            )
            items = []
            for memory_id, tenant, version, text in result.result_set:
                metadata, factuality = lift_factuality(json.loads(text or "{}"), None, enriched=True)
                if factuality is not None:
                    items.append(
                        {
                            "id": memory_id,
                            "tenant": tenant,
                            "version": version,
                            "metadata": json.dumps(metadata, ensure_ascii=False),
                            "factuality": json.dumps(factuality, ensure_ascii=False),
                        }
                    )
            if items:
                written = await self._conn.query(
                    """
                    UNWIND $items AS it
                    MATCH (n:Memory {id: it.id})
                    WHERE n.tenant = it.tenant AND n.version = it.version AND n.factuality IS NULL
                    SET n.metadata = it.metadata, n.factuality = it.factuality
                    RETURN count(n)
                    """,
                    {"items": items},
                )
                moved += written.result_set[0][0]
        return moved

    async def status(self) -> ComponentStatus:
        try:
            count = await self.count_memories()
        except Exception as exc:  # a health probe reports, never raises
            return ComponentStatus("falkordb", "unavailable", str(exc))
        return ComponentStatus("falkordb", "connected", self._conn.where, {"memories": float(count)})

    async def close(self) -> None:
        await self._conn.close()
