"""Recall's reads (MemoryReader) and the vector index rebuild's (IndexSource)."""

from __future__ import annotations

import time
from dataclasses import dataclass

import structlog

from services.core.adapters.falkor.connection import NODE_SPAN, FalkorConnection
from services.core.adapters.falkor.count_cache import CountCache
from services.core.adapters.falkor.rows import (
    ORDERS,
    RETURN_FIELDS,
    edge_relation,
    read_row,
    row_to_memory,
    scope_where,
)
from services.core.domain.entity_expansion import rarest_entities
from services.core.domain.model import SEMANTIC_SYSTEM_RELATIONS, TEMPORAL_RELATIONS, Memory, Relation
from services.core.domain.recall_request import Scope
from services.core.domain.state import Successor
from services.core.domain.times import from_micros

log = structlog.get_logger()

#: Cypher's form of model.relation_rank, then strength: how an edge `e` is ordered among a memory's relations.
RELATION_ORDER = (
    "CASE WHEN type(e) IN $temporal_types THEN 2 WHEN type(e) IN $semantic_types THEN 1 ELSE 0 END,"
    " coalesce(e.strength, 0.0) DESC"
)
RELATION_ORDER_PARAMS = {"temporal_types": list(TEMPORAL_RELATIONS), "semantic_types": list(SEMANTIC_SYSTEM_RELATIONS)}


def readable(props: dict) -> Memory | None:
    """The record as a Memory, or None (logged with its id) for one that does
    not read (a field missing or of the wrong type): a read leaves it out
    rather than failing for every record beside it."""
    try:
        return row_to_memory(props)
    except (KeyError, TypeError, ValueError, OverflowError) as exc:
        log.warning("memory record does not read", memory_id=props.get("id"), error=f"{type(exc).__name__}: {exc}")
        return None


@dataclass(frozen=True, slots=True)
class EntityBounds:
    """How far a recall's entity expansion reads (RECALL_ENTITY_*): at most
    per_seed entities of each seed, the rarest first; none mentioned by more
    than max_mentions memories (the stopwords of entities: a shared mention
    of one says little and would read thousands of edges); at most max_reads
    (entity, memory) pairs in all."""

    per_seed: int = 5
    max_mentions: int = 200
    max_reads: int = 1000
    #: How long an entity's mention count is trusted (RECALL_DF_CACHE_SECONDS).
    cache_seconds: float = 300.0


class FalkorLookup:
    """MemoryLookup: records by id and counts, which every graph port offers."""

    def __init__(self, connection: FalkorConnection):
        self._conn = connection

    async def get_memory(self, tenant: str, memory_id: str) -> Memory | None:
        found = await self.get_memories(tenant, [memory_id])
        return found.get(memory_id)

    async def get_memories(self, tenant: str, memory_ids: list[str]) -> dict[str, Memory]:
        result = await self._conn.query(
            "UNWIND $ids AS id MATCH (m:Memory {id: id}) WHERE m.tenant = $tenant RETURN properties(m)",
            {"ids": memory_ids, "tenant": tenant},
        )
        memories = [m for m in (readable(dict(row[0])) for row in result.result_set) if m is not None]
        return {m.id: m for m in memories}

    async def count_memories(self, tenant: str | None = None) -> int:
        if tenant is None:  # every tenant's, in every graph
            return sum(int(row[0]) for row in await self._conn.visit("MATCH (m:Memory) RETURN count(m)"))
        else:
            result = await self._conn.query(
                "MATCH (m:Memory) WHERE m.tenant = $tenant RETURN count(m)", {"tenant": tenant}
            )
        return int(result.result_set[0][0])


class FalkorMemoryReader(FalkorLookup):
    """MemoryReader on FalkorDB: records, their edges and neighbours, listings."""

    def __init__(self, connection: FalkorConnection, entity_bounds: EntityBounds):
        super().__init__(connection)
        self._entity_bounds = entity_bounds
        #: (tenant, entity tag) -> how many memories mention it (counted up to max_mentions + 1).
        self._mention_cache = CountCache(seconds=entity_bounds.cache_seconds)

    async def read_memory(
        self, tenant: str, memory_id: str, *, accessed_us: int, relation_limit: int
    ) -> tuple[Memory, list[Relation]] | None:
        """One query for a read by id: the record, its access time bumped,
        and its first relations (RELATION_ORDER: by kind, then strength)."""
        result = await self._conn.query(
            f"""
            MATCH (m:Memory {{id: $id}}) WHERE m.tenant = $tenant
            SET m.last_accessed = $at
            WITH m
            OPTIONAL MATCH (m)-[e]-(o:Memory) WHERE o.tenant = $tenant
            WITH m, e, o ORDER BY {RELATION_ORDER}
            WITH m, collect(CASE WHEN e IS NULL THEN NULL ELSE [type(e), startNode(e) = m, o.id, properties(e)] END)
                AS edges
            RETURN properties(m), edges[0..$limit]
            """,
            {"id": memory_id, "tenant": tenant, "at": accessed_us, "limit": relation_limit, **RELATION_ORDER_PARAMS},
        )
        if not result.result_set:
            return None
        row, edges = result.result_set[0]
        return row_to_memory(dict(row)), [edge_relation(memory_id, *edge) for edge in edges]

    async def read_candidates(self, tenant: str, ids: list[str]) -> dict[str, tuple[Memory, list[Successor]]]:
        """Records (without embeddings) and their outgoing supersession edges.

        Only a record with superseded_at set can have such an edge (every path
        that creates one sets it; ensure_schema backfills older data), so the
        edges are read for those alone: usually none, and one query instead
        of an OPTIONAL MATCH and a collect over every record (a fraction of
        its time at scale; docs/performance.md)."""
        if not ids:
            return {}
        result = await self._conn.query(
            f"UNWIND $ids AS id MATCH (n:Memory {{id: id}}) WHERE n.tenant = $tenant RETURN {RETURN_FIELDS}",
            {"tenant": tenant, "ids": ids},
        )
        memories = [read_row(values) for values in result.result_set]
        superseded = [m.id for m in memories if m.superseded_at is not None]
        edges = await self.successors(tenant, superseded) if superseded else {}
        return {m.id: (m, edges.get(m.id, [])) for m in memories}

    async def successors(self, tenant: str, ids: list[str]) -> dict[str, list[Successor]]:
        """Outgoing supersession edges of each id (an empty list when none)."""
        result = await self._conn.query(
            """
            UNWIND $ids AS id
            MATCH (n:Memory {id: id})-[s:INVALIDATED_BY|EVOLVED_INTO]->(h:Memory)
            WHERE n.tenant = $tenant AND h.tenant = $tenant
            RETURN n.id, h.id, type(s), s.created_at
            """,
            {"tenant": tenant, "ids": ids},
        )
        found: dict[str, list[Successor]] = {i: [] for i in ids}
        for source, target, kind, at in result.result_set:
            found[source].append(Successor(target, kind, from_micros(at)))
        return found

    async def relations_of(self, tenant: str, ids: list[str], limit: int) -> dict[str, list[Relation]]:
        """The first `limit` relations of each memory, both directions: by
        kind (model.relation_rank: a user's links before memgrid's similar
        ones before temporal adjacency), then strength."""
        if not ids or limit <= 0:
            return {i: [] for i in ids}
        result = await self._conn.query(
            f"""
            UNWIND $ids AS id
            MATCH (n:Memory {{id: id}}) WHERE n.tenant = $tenant
            CALL {{
                WITH n
                MATCH (n)-[e]-(o:Memory) WHERE o.tenant = $tenant
                RETURN e, o ORDER BY {RELATION_ORDER} LIMIT $limit
            }}
            RETURN n.id, type(e), startNode(e) = n, o.id, properties(e)
            """,
            {"tenant": tenant, "ids": ids, "limit": limit, **RELATION_ORDER_PARAMS},
        )
        found: dict[str, list[Relation]] = {i: [] for i in ids}
        for memory_id, kind, outgoing, other, props in result.result_set:
            found[memory_id].append(edge_relation(memory_id, kind, outgoing, other, props))
        return found

    async def neighbours(
        self,
        tenant: str,
        ids: list[str],
        *,
        types: list[str] | None,
        per_memory: int,
        min_strength: float,
        min_importance: float,
    ) -> list[tuple[Relation, Memory]]:
        """Memories one edge away from each id (strongest first, per id), with
        the edge as seen from that id."""
        type_filter = "AND type(e) IN $types" if types else ""
        result = await self._conn.query(
            f"""
            UNWIND $ids AS id
            MATCH (a:Memory {{id: id}}) WHERE a.tenant = $tenant
            CALL {{
                WITH a
                MATCH (a)-[e]-(n:Memory)
                WHERE n.tenant = $tenant AND coalesce(e.strength, 0.0) >= $min_strength
                  AND n.importance >= $min_importance {type_filter}
                RETURN e, n ORDER BY {RELATION_ORDER} LIMIT $per
            }}
            RETURN a.id, type(e), startNode(e) = a, properties(e), {RETURN_FIELDS}
            """,
            {
                "tenant": tenant,
                "ids": ids,
                "types": types or [],
                "per": per_memory,
                "min_strength": min_strength,
                "min_importance": min_importance,
                **RELATION_ORDER_PARAMS,
            },
        )
        found = []
        for source, kind, outgoing, props, *values in result.result_set:
            other = read_row(values)
            found.append((edge_relation(source, kind, outgoing, other.id, props), other))
        return found

    async def entity_neighbours(
        self,
        tenant: str,
        ids: list[str],
        limit: int,
        *,
        per_seed: int | None = None,
        max_mentions: int | None = None,
        max_reads: int | None = None,
    ) -> list[tuple[str, int]]:
        """Other memories mentioning the same entities as these, by shared
        entities, within the bounds (EntityBounds; each None: the store's):
        each seed's rarest entities, none held by more than max_mentions
        memories, at most max_reads mentions read, the rarest entities' first."""
        bounds = self._entity_bounds
        over = (bounds.max_mentions if max_mentions is None else max_mentions) + 1
        pairs = await self._conn.query(
            """
            UNWIND $ids AS id
            MATCH (a:Memory {id: id})-[:MENTIONS]->(e:Entity)
            WHERE a.tenant = $tenant
            RETURN a.id, e.tag
            """,
            {"tenant": tenant, "ids": ids},
        )
        seeds_entities = [(seed, tag) for seed, tag in pairs.result_set]
        mentions = await self._mention_counts(tenant, sorted({tag for _, tag in seeds_entities}), over)
        chosen = rarest_entities(
            seeds_entities, mentions, per_seed=bounds.per_seed if per_seed is None else per_seed, over=over
        )
        if not chosen:
            return []
        # From the entities (bound before the second MATCH: the planner would
        # otherwise start from the tenant's memories and read all of them).
        result = await self._conn.query(
            """
            UNWIND $tags AS tag
            MATCH (e:Entity {tag: tag}) WHERE e.tenant = $tenant
            WITH e
            MATCH (e)<-[:MENTIONS]-(b:Memory)
            WHERE b.tenant = $tenant AND NOT b.id IN $ids
            WITH e, b LIMIT $max_reads
            RETURN b.id, count(DISTINCT e) AS shared ORDER BY shared DESC, b.id LIMIT $limit
            """,
            {
                "tenant": tenant,
                "tags": chosen,
                "ids": ids,
                "limit": limit,
                "max_reads": bounds.max_reads if max_reads is None else max_reads,
            },
        )
        return [(memory_id, int(shared)) for memory_id, shared in result.result_set]

    async def _mention_counts(self, tenant: str, tags: list[str], over: int) -> dict[str, int]:
        """How many memories mention each entity, counted up to `over` and
        cached for EntityBounds.cache_seconds. Counting an entity walks all of
        its mentions however low the cap (FalkorDB expands a node's edges
        whole before a LIMIT): 40-70 ms a recall for a hub's at a million
        memories, so the counts are kept (docs/performance.md)."""
        now = time.monotonic()
        counts: dict[str, int] = {}
        missing = []
        for tag in tags:
            cached = self._mention_cache.get((tenant, tag), now=now, cap=over)
            if cached is None:
                missing.append(tag)
            else:
                counts[tag] = cached
        if missing:
            result = await self._conn.query(
                """
                UNWIND $tags AS tag
                MATCH (e:Entity {tag: tag}) WHERE e.tenant = $tenant
                CALL { WITH e MATCH (e)<-[:MENTIONS]-(x) WITH x LIMIT $over RETURN count(x) AS mentions }
                RETURN tag, mentions
                """,
                {"tenant": tenant, "tags": missing, "over": over},
            )
            counted = {tag: int(n) for tag, n in result.result_set}
            for tag in missing:
                counts[tag] = counted.get(tag, 0)
                self._mention_cache.put((tenant, tag), counts[tag], now=now, cap=over)
        return counts

    async def list_memories(
        self, scope: Scope, order_by: str, limit: int, offset: int = 0, *, with_archived: bool = False
    ) -> list[Memory]:
        """Memories within the scope in a fixed order (importance: importance
        desc, timestamp desc, id asc; or a recall sort), paged. with_archived
        lists archived ones too (by-tag's flagged listing: delete-by-tag
        removes them as well)."""
        where, params = scope_where(scope, with_archived=with_archived)
        result = await self._conn.query(
            f"MATCH (n:Memory) WHERE {where} RETURN {RETURN_FIELDS} "
            f"ORDER BY {ORDERS[order_by]} SKIP $offset LIMIT $limit",
            {**params, "offset": offset, "limit": limit},
        )
        return [read_row(row) for row in result.result_set]

    async def touch_memories(self, tenant: str, ids: list[str], accessed_us: int) -> None:
        """Record an access of the tenant's memories in one query: only
        last_accessed moves (never updated_at or version, and no event: an
        access is no change to project or enrich), and never backwards."""
        if not ids:
            return
        await self._conn.query(
            """
            UNWIND $ids AS id
            MATCH (m:Memory {id: id}) WHERE m.tenant = $tenant
              AND (m.last_accessed IS NULL OR m.last_accessed < $at)
            SET m.last_accessed = $at
            """,
            {"ids": ids, "tenant": tenant, "at": accessed_us},
        )


class FalkorIndexSource(FalkorLookup):
    """IndexSource on FalkorDB: the graph's memories with embeddings, page by page."""

    async def scan_memories(self, cursor: int, limit: int, tenant: str | None = None) -> tuple[int, list[Memory]]:
        """A page of the tenant's (None: every tenant's) memories, embeddings
        included, after the internal node id `cursor` (-1 to start); returns
        the next cursor. The id range is a seek, so each page costs its own
        size (and the other tenants' nodes in its range), not the graph's.
        Every tenant's scan over several graphs walks them in turn, the
        cursor being the last node's address across them (node_address)."""
        graphs = self._conn.graphs()
        if tenant is not None or len(graphs) == 1:
            return await self._scan(cursor, limit, tenant, None)
        index, after = (0, -1) if cursor < 0 else divmod(cursor, NODE_SPAN)
        while index < len(graphs):
            last, page = await self._scan(after, limit, None, graphs[index])
            if last != after:
                return self._conn.node_address(graphs[index], last), page
            index, after = index + 1, -1
        return cursor, []

    async def _scan(self, cursor: int, limit: int, tenant: str | None, graph: str | None) -> tuple[int, list[Memory]]:
        # A label scan from the cursor (Node By Label and ID Scan), which walks the
        # label's ids upwards and stops at the limit: a page costs its own size
        # (and the other tenants' nodes in its range). No ORDER BY: with one,
        # FalkorDB read and sorted every node after the cursor for each page, so
        # a scan cost the square of the graph's size (165 ms a page at 1M, half
        # way through). The tenant is compared after a projection, so that the
        # planner does not scan the tenant's index instead (in index order).
        of = "" if tenant is None else " WITH m, m.tenant AS owner WHERE owner = $tenant WITH m"
        result = await self._conn.query(
            f"MATCH (m:Memory) WHERE ID(m) > $after{of} RETURN ID(m), properties(m), labels(m) LIMIT $limit",
            {"after": cursor, "limit": limit, "tenant": tenant},
            graph=graph,
        )
        if not result.result_set:
            return cursor, []
        rows = result.result_set
        if any(rows[i][0] >= rows[i + 1][0] for i in range(len(rows) - 1)):
            raise RuntimeError("the memory scan came back out of id order: its cursor would skip memories")
        memories = []
        for node, props, labels in rows:
            # Checked, not trusted: a row that is not a Memory or does not read is left out (and logged),
            # never the end of the rebuild.
            if "Memory" not in (labels or []):
                log.warning("index scan skipped a node that is not a Memory", node=node, labels=list(labels or []))
            elif (found := readable(dict(props))) is not None:
                memories.append(found)
        return int(rows[-1][0]), memories

    async def embedded_counts(self) -> dict[str, int]:
        """Per tenant, the memories with an embedding: one label scan that
        tests the property's presence (about 45 ms at 100k; measuring the
        embedding's length instead took ten times as long)."""
        rows = await self._conn.visit("MATCH (m:Memory) WHERE m.embedding IS NOT NULL RETURN m.tenant, count(m)")
        return {row[0]: int(row[1]) for row in rows if row[0] is not None}
