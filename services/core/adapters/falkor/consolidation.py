"""Consolidation's store on FalkorDB: the passes (ConsolidationPasses), and by FalkorRunStore the runs and leases.

Every read is one tenant's and bounded (a page, a sample); every write is
one batched query with its outbox events. Relevance scores are derived
data: writing one bumps no version (as an access does not), so a client's
compare-and-set is never beaten by a decay pass; archiving is a change of
state and bumps it. MetaPatterns carry their own label, never `Memory`, and
point at their members by (:Memory)-[:IN_PATTERN]->(:MetaPattern).
"""

from __future__ import annotations

import time
import uuid
from collections import Counter
from datetime import datetime
from typing import Any

from services.core.adapters.falkor.audit import AuditTail
from services.core.adapters.falkor.consolidation_runs import FalkorRunStore
from services.core.adapters.falkor.rows import outbox_row, relation_row, scope_where
from services.core.domain.association import Discovery, pair_key
from services.core.domain.clustering import Cluster
from services.core.domain.consolidation import MemorySample
from services.core.domain.decay import DecayRow, RelevanceUpdate
from services.core.domain.embedding_codec import decode_embedding_packed
from services.core.domain.model import EventKind, MemoryEvent, Relation
from services.core.domain.recall_request import Scope
from services.core.domain.times import from_micros

#: The edge from a member to its MetaPattern.
IN_PATTERN = "IN_PATTERN"
_SAMPLE_FIELDS = "n.id, n.content, n.type, n.importance, n.embedding"
#: What an unreadable row carries for its times (never scored: the pass skips it).
_EPOCH = from_micros(0)


def _current_with_vector(tenant: str, now_us: int | None) -> tuple[str, dict[str, Any]]:
    """What a sample or a cluster page reads, at `now_us` (by default now):
    the memories current-mode recall shows as themselves, with a vector. The
    graph scope's terms (scope_where: not archived, valid now, not expired,
    a trust state shown by default), and not superseded: recall replaces a
    superseded memory by its head, a pass consolidation does not make."""
    at = from_micros(now_us if now_us is not None else int(time.time() * 1_000_000))
    where, params = scope_where(Scope(tenant=tenant, at=at))
    return f"{where} AND n.superseded_at IS NULL AND n.embedding IS NOT NULL", params


def _samples(rows) -> list[MemorySample]:
    """The rows as samples; one that does not read comes back with `unreadable` set (the pass skips and
    counts it), never an exception that ends the pass."""
    samples = []
    for memory_id, content, type_, importance, embedding in rows:
        try:
            vector = decode_embedding_packed(embedding)
            if vector:
                samples.append(
                    MemorySample(str(memory_id), str(content or ""), str(type_ or ""), float(importance or 0.0), vector)
                )
        except (TypeError, ValueError, OverflowError) as exc:
            samples.append(MemorySample(str(memory_id), "", "", 0.0, [], unreadable=f"{type(exc).__name__}: {exc}"))
    return samples


def _now(now_us: int) -> datetime:
    return from_micros(now_us)


def _decay_row(row, tenant: str) -> DecayRow:
    """A decay_page row as a DecayRow; one that is not a Memory of `tenant`
    or does not read comes back with `unreadable` saying why (and the node id
    where it has no memory id), never an exception that ends the page."""
    node, mid, version, type_, imp, conf, ts, accessed, edges, score, emitted, archived, vector, labels, of = row
    name = mid if isinstance(mid, str) and mid else f"node {node}"
    if "Memory" not in (labels or []) or of != tenant:
        return _unreadable(name, f"not a Memory of the tenant (labels {list(labels or [])})")
    if not isinstance(mid, str) or not mid:
        return _unreadable(name, "a Memory without an id")
    try:
        timestamp = from_micros(ts)
        if timestamp is None:
            return _unreadable(name, "a Memory without a timestamp")
        return DecayRow(
            id=mid,
            version=int(version or 1),
            type=str(type_ or ""),
            importance=float(imp if imp is not None else 0.5),
            confidence=float(conf if conf is not None else 0.5),
            timestamp=timestamp,
            last_accessed=from_micros(accessed) if accessed is not None else timestamp,
            edges=int(edges or 0),
            relevance_score=None if score is None else float(score),
            archived=bool(archived),
            has_embedding=bool(vector),
            # A score written before the emitted one was kept: the written one stands in.
            emitted_score=float(emitted) if emitted is not None else (None if score is None else float(score)),
        )
    except (TypeError, ValueError, OverflowError) as exc:
        return _unreadable(name, f"{type(exc).__name__}: {exc}")


def _unreadable(name: str, why: str) -> DecayRow:
    return DecayRow(
        id=name,
        version=0,
        type="",
        importance=0.0,
        confidence=0.0,
        timestamp=_EPOCH,
        last_accessed=_EPOCH,
        edges=0,
        relevance_score=None,
        archived=False,
        has_embedding=False,
        unreadable=why,
    )


class FalkorConsolidationStore(FalkorRunStore):
    """ConsolidationPasses on FalkorDB (history and leases: FalkorRunStore)."""

    _audit = AuditTail()

    async def tenants(self) -> list[str]:
        """The tenants holding at least one memory, sorted."""
        rows = await self._conn.visit("MATCH (n:Memory) RETURN DISTINCT n.tenant AS t ORDER BY t")
        return sorted({row[0] for row in rows if row[0] is not None})

    async def decay_page(self, tenant: str, cursor: int, limit: int) -> tuple[int, list[DecayRow]]:
        """Up to `limit` of the tenant's memories (archived too) after the
        internal node id `cursor` (-1 to start), in id order, and the next
        cursor. The read is a label scan from the cursor (Node By Label and
        ID Scan): it walks the Memory label's ids upwards and stops at the
        limit, so a page costs its own size and the other tenants' memories
        in its range. The tenant is compared after a projection, so that the
        planner does not scan the tenant's index instead (about 6.5 ms a page
        at 100k, whatever the page's size). It used to be an id seek with
        the label in the WHERE, whose label test FalkorDB gets wrong for a
        node id reused after a delete: it handed back AuditEntry nodes.
        Each row is checked anyway: one that is not a Memory of the tenant,
        or whose fields do not read, comes back with `unreadable` set, for
        the pass to skip and count. The edge count is the memory's edges to
        other memories either way, each counted once (a named edge: with an
        anonymous one FalkorDB folds parallel edges to one neighbour into
        one), by one traversal over the page rather than one per node."""
        result = await self._conn.query(
            """
            MATCH (n:Memory) WHERE ID(n) > $after
            WITH n, n.tenant AS owner WHERE owner = $tenant
            WITH n LIMIT $limit
            OPTIONAL MATCH (n)-[e]-(:Memory)
            WITH n, count(e) AS edges
            RETURN ID(n), n.id, n.version, n.type, n.importance, n.confidence, n.timestamp, n.last_accessed,
                   edges, n.relevance_score, n.relevance_emitted, coalesce(n.archived, false),
                   n.embedding IS NOT NULL, labels(n), n.tenant
            """,
            {"tenant": tenant, "after": cursor, "limit": max(0, limit)},
        )
        # The aggregation does not keep the scan's order: the page is sorted here (the cursor is its last id).
        ordered = sorted(result.result_set, key=lambda row: row[0])
        rows = [_decay_row(row, tenant) for row in ordered]
        return (int(ordered[-1][0]) if ordered else cursor), rows

    async def write_relevance(self, tenant: str, updates: list[RelevanceUpdate], *, now_us: int) -> list[str]:
        """Scores where the version is still the one read, with a DECAYED
        event for each written update that emits, in one query; the ids
        written. An emitting update also records its score as the last one
        emitted (`relevance_emitted`), which the next pass's event threshold
        compares with; a memory's first score is that baseline, with no event."""
        if not updates:
            return []
        at = _now(now_us)
        items = [
            {
                "id": u.id,
                "version": u.version,
                "score": float(u.score),
                "emit": bool(u.emit),
                "outbox": [
                    outbox_row(
                        MemoryEvent.consolidated(EventKind.DECAYED, tenant, u.id, u.version, at, has_embedding=False),
                        now_us,
                    )
                ]
                if u.emit
                else [],
            }
            for u in updates
        ]
        result = await self._conn.query(
            """
            UNWIND $items AS it
            MATCH (n:Memory {id: it.id}) WHERE n.tenant = $tenant AND n.version = it.version
            SET n.relevance_score = it.score,
                n.relevance_emitted = CASE WHEN it.emit OR n.relevance_emitted IS NULL
                                      THEN it.score ELSE n.relevance_emitted END
            FOREACH (o IN it.outbox | CREATE (x:Outbox) SET x = o)
            RETURN collect(it.id) AS ids
            """,
            # Not audited: the relevance score is derived (the record hash leaves it out), and a
            # daily pass would add an entry per memory; the run history keeps its counts and a sample.
            {"tenant": tenant, "items": items},
        )
        return [i for row in result.result_set for i in row[0]]

    async def archive(self, tenant: str, rows: list[DecayRow], *, now_us: int) -> list[str]:
        """Archive each memory still at the row's version and not archived
        (archived, archived_at, version + 1) with its ARCHIVED event, in one
        query; the ids archived."""
        if not rows:
            return []
        at = _now(now_us)
        items = []
        for row in rows:
            event = MemoryEvent.archived(tenant, row.id, row.version, at, has_embedding=row.has_embedding)
            items.append({"id": row.id, "version": row.version, "outbox": outbox_row(event, now_us)})
        result = await self._conn.query(
            """
            UNWIND $items AS it
            MATCH (n:Memory {id: it.id})
            WHERE n.tenant = $tenant AND n.version = it.version AND NOT coalesce(n.archived, false)
            SET n.archived = true, n.archived_at = $now, n.version = it.version + 1
            CREATE (x:Outbox) SET x = it.outbox
            """
            + self._audit({"ids": "collect(it.id)"})
            + " RETURN ids",
            {"tenant": tenant, "items": items, "now": now_us},
        )
        return [i for row in result.result_set for i in row[0]]

    async def association_sample(self, tenant: str, limit: int, *, now_us: int | None = None) -> list[MemorySample]:
        """A random sample of the tenant's current memories with vectors at `now_us` (_current_with_vector)."""
        where, params = _current_with_vector(tenant, now_us)
        result = await self._conn.query(
            f"MATCH (n:Memory) WHERE {where} WITH n ORDER BY rand() LIMIT $limit RETURN {_SAMPLE_FIELDS}",
            {**params, "limit": max(0, limit)},
        )
        return _samples(result.result_set)

    async def connected_pairs(self, tenant: str, ids: list[str]) -> set[tuple[str, str]]:
        """The pairs among `ids` joined by any edge (either direction), as (smaller id, larger id)."""
        if len(ids) < 2:
            return set()
        result = await self._conn.query(
            """
            MATCH (a:Memory)-[]-(b:Memory)
            WHERE a.id IN $ids AND a.tenant = $tenant AND b.id IN $ids AND a.id < b.id
            RETURN DISTINCT a.id, b.id
            """,
            {"tenant": tenant, "ids": list(ids)},
        )
        return {(a, b) for a, b in result.result_set}

    async def link_discovered(self, tenant: str, links: list[Discovery], *, now_us: int) -> list[Discovery]:
        """An edge per link (similarity as strength; similarity, confidence,
        reason, created_at on it) and its ASSOCIATED event, only where both
        ends are the tenant's and no edge of any type joins the pair either
        way (checked in the same query, so a concurrent link is not doubled);
        a pair twice in `links` is made once; the links made."""
        at = _now(now_us)
        by_type: dict[str, list[dict[str, Any]]] = {}
        chosen: dict[tuple[str, str], Discovery] = {}
        for link in links:
            key = pair_key(link.source_id, link.target_id)
            if key[0] == key[1] or key in chosen:
                continue
            chosen[key] = link
            relation = Relation(
                link.source_id,
                link.target_id,
                link.type,
                round(float(link.similarity), 4),
                at,
                {
                    "similarity": round(float(link.similarity), 4),
                    "confidence": round(float(link.confidence), 4),
                    "reason": link.reason,
                },
            )
            by_type.setdefault(link.type, []).append(
                {
                    "key": list(key),
                    "src": link.source_id,
                    "dst": link.target_id,
                    "props": relation_row(relation),
                    "outbox": outbox_row(MemoryEvent.associated(tenant, relation), now_us),
                }
            )
        made: list[Discovery] = []
        for rel_type, items in by_type.items():
            if rel_type not in ("DISCOVERED", "CONTRADICTS"):
                raise ValueError(f"link_discovered makes DISCOVERED or CONTRADICTS edges, not {rel_type}")
            # Relation types cannot be parameters; rel_type is one of the two checked above.
            result = await self._conn.query(
                f"""
                UNWIND $items AS it
                MATCH (a:Memory {{id: it.src}}) WHERE a.tenant = $tenant
                MATCH (b:Memory {{id: it.dst}}) WHERE b.tenant = $tenant AND NOT (a)-[]-(b)
                CREATE (a)-[e:{rel_type}]->(b) SET e = it.props
                CREATE (x:Outbox) SET x = it.outbox
                """
                + self._audit({"keys": "collect(it.key)"})
                + " RETURN keys",
                {"tenant": tenant, "items": items},
            )
            made.extend(chosen[tuple(key)] for row in result.result_set for key in row[0])
        return made

    async def cluster_inputs(
        self, tenant: str, after_id: str, limit: int, *, now_us: int | None = None
    ) -> list[MemorySample]:
        """A page of the tenant's current memories with vectors (_current_with_vector), in id order after `after_id`."""
        where, params = _current_with_vector(tenant, now_us)
        result = await self._conn.query(
            f"""
            MATCH (n:Memory) WHERE n.id > $after AND {where}
            WITH n ORDER BY n.id LIMIT $limit RETURN {_SAMPLE_FIELDS}
            """,
            {**params, "after": after_id, "limit": max(0, limit)},
        )
        return _samples(result.result_set)

    async def write_clusters(self, tenant: str, task: str, clusters: list[Cluster], *, now_us: int) -> list[str]:
        """Replace the tenant's MetaPatterns from `task` with these, each
        linked from its members (the tenant's, still present) and a CLUSTERED
        event per member, in one query; the new MetaPatterns' ids (one whose
        members were all deleted meanwhile is not kept)."""
        at = _now(now_us)
        rows: list[dict[str, Any]] = []
        for group in clusters:
            pattern_id = str(uuid.uuid4())
            rows.append(
                {
                    "node": {
                        "id": pattern_id,
                        "tenant": tenant,
                        "task": task,
                        "summary": group.summary,
                        "size": group.size,
                        "cohesion": float(group.cohesion),
                        "dominant_type": group.dominant_type,
                        "created_at": now_us,
                    },
                    "members": [
                        {
                            "id": member,
                            "rank": rank,
                            "outbox": outbox_row(
                                MemoryEvent.consolidated(
                                    EventKind.CLUSTERED, tenant, member, 0, at, has_embedding=True
                                ),
                                now_us,
                            ),
                        }
                        for rank, member in enumerate(group.member_ids)
                    ],
                }
            )
        result = await self._conn.query(
            f"""
            OPTIONAL MATCH (old:MetaPattern {{tenant: $tenant}}) WHERE old.task = $task
            DETACH DELETE old
            WITH DISTINCT 1 AS one
            UNWIND $rows AS r
            CREATE (p:MetaPattern) SET p = r.node
            WITH p, r
            UNWIND r.members AS mem
            MATCH (m:Memory {{id: mem.id}}) WHERE m.tenant = $tenant
            CREATE (m)-[:{IN_PATTERN} {{created_at: $now, rank: mem.rank}}]->(p)
            CREATE (x:Outbox) SET x = mem.outbox
            """
            + self._audit({"linked": "collect(p.id)"})
            + " RETURN linked",
            {"tenant": tenant, "task": task, "rows": rows, "now": now_us},
        )
        # One p.id per member linked.
        linked = Counter(pattern_id for row in result.result_set for pattern_id in row[0])
        if any(linked.get(r["node"]["id"], 0) != r["node"]["size"] for r in rows):
            # Members deleted since they were read: the size says what is linked, and a pattern left with none goes.
            # (FalkorDB drops a SET followed by a DELETE in one query's WITH chain: two queries.)
            sized = await self._conn.query(
                f"""
                MATCH (p:MetaPattern) WHERE p.id IN $ids
                OPTIONAL MATCH (m:Memory)-[:{IN_PATTERN}]->(p)
                WITH p, count(m) AS members
                SET p.size = members
                RETURN p.id, members
                """,
                {"ids": [r["node"]["id"] for r in rows]},
                tenant=tenant,
            )
            empty = [pattern_id for pattern_id, members in sized.result_set if not members]
            if empty:
                await self._conn.query(
                    "MATCH (p:MetaPattern) WHERE p.id IN $ids DELETE p", {"ids": empty}, tenant=tenant
                )
        return [r["node"]["id"] for r in rows if linked.get(r["node"]["id"], 0)]
