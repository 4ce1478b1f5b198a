"""The graph's upkeep (GraphLifecycle): indexes and migrations at start-up, health, shutdown."""

from __future__ import annotations

import asyncio
import json
import time

import redis.exceptions as redis_errors
import structlog

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
    # The audit log (audit.py): each write MERGEs its tenant's counter; history
    # reads by memory, listings and verify by (tenant, sequence) in `akey`.
    ("AuditCounter", "tenant"),
    ("AuditEntry", "akey"),
    ("AuditEntry", "memory_id"),
    # Trust (trust.py): the review queue reads by trust_state, a create looks
    # its content's hash up among the tenant's tombstones.
    ("Memory", "trust_state"),
    ("Tombstone", "id"),
    ("Tombstone", "content_hash"),
    ("Tombstone", "tenant"),
)
#: Properties unique together per label: a create sent twice (its reply lost)
#: or an id taken twice can never make a second node. FalkorDB builds a unique
#: constraint on exact-match indexes of each property (in _INDEXES above).
_UNIQUE = (("Memory", ("tenant", "id")),)
#: How often ensure_schema looks whether a constraint FalkorDB is building is done.
_CONSTRAINT_POLL_SECONDS = 0.05
log = structlog.get_logger()
#: Node ids the factuality migration in ensure_schema reads per query.
FACTUALITY_MIGRATION_PAGE = 2000
#: Full-text fields of Memory: the keyword, tag and metadata arms.
_FULLTEXT_FIELDS = ("content", "search_tags", "search_meta")


class FalkorLifecycle(FalkorLookup):
    """GraphLifecycle on FalkorDB (a lookup too: the health check counts memories)."""

    async def ensure_schema(self) -> None:
        """Wait for FalkorDB (it answers LOADING after a restart), check its
        query timeouts, then create indexes, in every graph of the layout.

        Each graph is waited for (DEPENDENCY_WAIT_SECONDS): on a cluster, a
        shard failing over serves its graphs again within seconds. The schema's
        writes wait for no replica (FALKORDB_WRITE_REPLICAS): every start makes
        them again, and a shard that lost its replica must not stop a start."""
        graphs = self._conn.graphs()
        await self._conn.query("RETURN 1", deadline=self._conn.wait_seconds, graph=graphs[0])
        await self._conn.check_timeouts()
        await self._conn.check_durability()
        for graph in graphs:
            await self._conn.query("RETURN 1", deadline=self._conn.wait_seconds, graph=graph)
            await self._ensure_graph(graph)

    async def _ensure_graph(self, graph: str) -> None:
        for label, prop in _INDEXES:
            try:
                await self._conn.query(f"CREATE INDEX FOR (n:{label}) ON (n.{prop})", graph=graph, wait_replicas=False)
            except redis_errors.ResponseError as exc:
                if "already indexed" not in str(exc):
                    raise
        result = await self._conn.query(
            "CALL db.indexes() YIELD label, properties, types RETURN label, properties, types", graph=graph
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
                f"CALL db.idx.fulltext.createNodeIndex({{label: 'Memory', language: 'english'}}, {fields})",
                graph=graph,
                wait_replicas=False,
            )
        await self.ensure_constraints(graph)
        # Records written before superseded_at was kept: reads look for supersession edges only where it is set.
        await self._conn.query(
            "MATCH (n:Memory)-[s:INVALIDATED_BY|EVOLVED_INTO]->(:Memory) WHERE n.superseded_at IS NULL "
            "SET n.superseded_at = s.created_at",
            graph=graph,
            wait_replicas=False,
        )
        await self.migrate_factuality(graph=graph)

    async def constraints(self, graph: str | None = None) -> dict[tuple[str, tuple[str, ...]], str]:
        """The graph's unique node constraints: (label, properties) -> status
        (PENDING while FalkorDB builds one, OPERATIONAL, FAILED); properties sorted.
        `graph`: which of the layout's graphs (None: FALKORDB_GRAPH)."""
        result = await self._conn.query(
            "CALL db.constraints() YIELD type, label, properties, entitytype, status"
            " WHERE type = 'UNIQUE' AND entitytype = 'NODE' RETURN label, properties, status",
            graph=graph or self._conn.graphs()[0],
        )
        return {(label, tuple(sorted(props))): status for label, props, status in result.result_set}

    async def ensure_constraints(self, graph: str | None = None) -> None:
        """Create the unique constraints of _UNIQUE where absent and wait (at
        most DEPENDENCY_WAIT_SECONDS) until FalkorDB has built them. One that
        fails (the graph already holds duplicates) is logged and dropped, so
        the next start tries again once the duplicates are resolved: the
        service keeps running, without the guarantee, rather than refusing to start."""
        graph = graph or self._conn.graphs()[0]
        for label, props in _UNIQUE:
            try:
                await self._conn.command(
                    "GRAPH.CONSTRAINT",
                    "CREATE",
                    graph,
                    "UNIQUE",
                    "NODE",
                    label,
                    "PROPERTIES",
                    str(len(props)),
                    *props,
                    graph=graph,
                )
            except redis_errors.ResponseError as exc:
                if "already exists" not in str(exc):
                    raise
        # db.constraints() lists the properties in its own order: matched sorted, dropped as created.
        wanted = {(label, tuple(sorted(props))): props for label, props in _UNIQUE}
        deadline = time.monotonic() + self._conn.wait_seconds
        while True:
            states = {key: status for key, status in (await self.constraints(graph)).items() if key in wanted}
            if all(states.get(key) != "PENDING" for key in wanted) or time.monotonic() > deadline:
                break
            await asyncio.sleep(_CONSTRAINT_POLL_SECONDS)
        for (label, listed), status in states.items():
            props = wanted[(label, listed)]
            if status == "FAILED":
                log.error(
                    "unique constraint could not be built: the graph holds duplicates; dropped, retried at next start",
                    label=label,
                    properties=list(props),
                    hint=f"find them: MATCH (n:{label}) WITH {', '.join(f'n.{p} AS {p}' for p in props)}, count(n) AS c"
                    f" WHERE c > 1 RETURN {', '.join(props)}, c",
                )
                await self._conn.command(
                    "GRAPH.CONSTRAINT",
                    "DROP",
                    graph,
                    "UNIQUE",
                    "NODE",
                    label,
                    "PROPERTIES",
                    str(len(props)),
                    *props,
                    graph=graph,
                )
            elif status == "PENDING":
                log.warning("unique constraint still being built", label=label, properties=list(props))

    async def migrate_factuality(self, page_size: int = FACTUALITY_MIGRATION_PAGE, *, graph: str | None = None) -> int:
        """Move the factuality an earlier release's enrichment wrote into
        metadata out to its own property. Idempotent. One scan finds the
        span of node ids holding candidates; it is then read a window of
        `page_size` ids at a time (an id range seek, so each query reads only
        its window and the whole pass is one walk over the nodes). A record
        whose metadata.factuality is the client's own is left as it is; one
        written meanwhile (its version moved) is left to the writer, which
        wrote the new shape (row_to_memory lifts it on read). Returns how
        many it moved. `graph`: which of the layout's graphs (None: FALKORDB_GRAPH)."""
        graph = graph or self._conn.graphs()[0]
        candidates = "n.factuality IS NULL AND n.enriched_at IS NOT NULL AND n.metadata CONTAINS '\"factuality\"'"
        span = await self._conn.query(f"MATCH (n:Memory) WHERE {candidates} RETURN min(id(n)), max(id(n))", graph=graph)
        low, high = span.result_set[0] if span.result_set else (None, None)
        if low is None or high is None:  # both, or neither: min and max of one set
            return 0
        moved = 0
        for start in range(low, high + 1, page_size):
            result = await self._conn.query(
                f"""
                MATCH (n:Memory) WHERE id(n) >= $start AND id(n) < $stop AND {candidates}
                RETURN n.id, n.tenant, n.version, n.metadata
                """,
                {"start": start, "stop": start + page_size},
                graph=graph,
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
                    graph=graph,
                    wait_replicas=False,
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
