"""Backups on FalkorDB: a point-in-time copy to export from (GraphBackup),
and the writes a restore makes (GraphRestore).

The point in time is a scratch replica (scratch_replica.py): a redis-server
of consolidate's own syncs from FalkorDB, is cut loose, and holds the store
at one point of its write history, every write up to it and none after,
whatever runs meanwhile. The export reads it, not the store, and it is
deleted after. On a Redis Cluster each master gets a scratch replica of its
own, all synced and then cut loose together, and each graph is read from
the copy of the master that held it: every shard at one point of its own
history (not one instant across shards), so every tenant, whose records
share one graph (FALKORDB_GRAPH_LAYOUT), at one point of its own.

An earlier version snapshotted with GRAPH.COPY, whose fork (from one of the
module's own threads) hung the whole server under concurrent writes in the
bundled FalkorDB; a replica's sync forks from the server's main thread, as
its persistence does. A write fence (CLIENT PAUSE WRITE) was tried as well:
the bundled build asserts and exits when a write that was already running
when the pause began commits during it.

Nodes are read generically: every label whose nodes carry a `tenant`
(memories, entities, patterns, MetaPatterns, consolidation runs, tombstones,
audit entries, ...), but run-time state (archive.TRANSIENT_LABELS), with
every property as stored; edges are every edge between two exported nodes
of one tenant. Reads walk node ids in windows (an id range seek), one pass.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import structlog

from services.core.adapters.falkor.connection import FalkorConnection
from services.core.adapters.falkor.scratch_replica import ScratchReplica, ScratchSpec
from services.core.domain.archive import TRANSIENT_LABELS, ArchiveEdge, ArchiveNode

log = structlog.get_logger()


def _name(text: str) -> str:
    """A label or edge type as a query names it (callers pass only checked names)."""
    return "`" + text.replace("`", "") + "`"


def _tenant_filter(alias: str, tenant: str | None) -> str:
    return f"{alias}.tenant = $tenant" if tenant is not None else f"{alias}.tenant IS NOT NULL"


def _not_transient(alias: str) -> str:
    return " AND ".join(f"NOT {alias}:{_name(label)}" for label in sorted(TRANSIENT_LABELS))


class FalkorSnapshot:
    """Reads of a snapshot: nodes and edges by node id window.

    Over several graphs (FALKORDB_GRAPH_LAYOUT=bucket) a node's id is its
    address across them (FalkorConnection.node_address); a window lies
    within one graph (id_ranges). With one graph the ids are FalkorDB's."""

    def __init__(self, connection: FalkorConnection):
        self._conn = connection

    async def max_node_id(self, graph: str | None = None) -> int:
        """The highest node id of the graph (None: the first; -1 when there are none)."""
        result = await self._conn.query("MATCH (n) RETURN max(id(n))", graph=graph or self._conn.graphs()[0])
        value = result.result_set[0][0] if result.result_set else None
        return -1 if value is None else int(value)

    async def id_ranges(self, tenant: str | None) -> list[tuple[int, int]]:
        """The [start, stop) id ranges holding the tenant's (None: every tenant's) nodes, one per graph."""
        graphs = self._conn.graphs() if tenant is None else (self._conn.router.route(None, tenant=tenant),)
        ranges = []
        for graph in graphs:
            top = await self.max_node_id(graph)
            if top >= 0:
                ranges.append((self._conn.node_address(graph, 0), self._conn.node_address(graph, top + 1)))
        return ranges

    async def tenants(self) -> list[str]:
        rows = await self._conn.visit("MATCH (m:Memory) WHERE m.tenant IS NOT NULL RETURN DISTINCT m.tenant")
        return sorted({row[0] for row in rows})

    async def nodes(self, tenant: str | None, start: int, stop: int) -> list[ArchiveNode]:
        """The exported nodes with ids in [start, stop), of `tenant` (None: of every tenant), in id order."""
        graph, start = self._conn.node_graph(start)
        stop = start + (stop - self._conn.node_address(graph, start))
        base = self._conn.node_address(graph, 0)
        result = await self._conn.query(
            f"""
            MATCH (n) WHERE id(n) >= $start AND id(n) < $stop AND {_tenant_filter("n", tenant)}
              AND {_not_transient("n")}
            RETURN id(n), labels(n), properties(n) ORDER BY id(n)
            """,
            {"start": start, "stop": stop, "tenant": tenant},
            graph=graph,
        )
        # The label tests are checked on the rows too: FalkorDB's label test after an id seek can be wrong
        # for a node id reused after a delete, and a transient node must never be archived.
        return [
            ArchiveNode(base + int(ref), tuple(labels), dict(props))
            for ref, labels, props in result.result_set
            if not TRANSIENT_LABELS.intersection(labels or ())
        ]

    async def edges(self, tenant: str | None, start: int, stop: int) -> list[ArchiveEdge]:
        """The edges leaving the nodes with ids in [start, stop) to an exported node of the same tenant.

        Labels are tested in the query, not returned: two label lists per
        edge were most of the reply (3.5 s against 2.0 s for 300k edges)."""
        graph, start = self._conn.node_graph(start)
        stop = start + (stop - self._conn.node_address(graph, start))
        base = self._conn.node_address(graph, 0)
        result = await self._conn.query(
            f"""
            MATCH (a)-[e]->(b) WHERE id(a) >= $start AND id(a) < $stop AND {_tenant_filter("a", tenant)}
              AND b.tenant = a.tenant AND {_not_transient("a")} AND {_not_transient("b")}
            RETURN id(a), type(e), id(b), properties(e)
            """,
            {"start": start, "stop": stop, "tenant": tenant},
            graph=graph,
        )
        return [ArchiveEdge(kind, base + int(a), base + int(b), dict(props)) for a, kind, b, props in result.result_set]


class _ShardCopies(FalkorConnection):
    """A cluster's snapshot: each graph read from the copy of the master that held it."""

    def __init__(self, live: FalkorConnection, copies: dict[str, FalkorConnection]):
        super().__init__(host="127.0.0.1", port=0, graph=live.graph_name, layout=live.router.layout)
        self._copies = copies

    async def query(self, cypher: str, params: dict[str, Any] | None = None, *, tenant=None, graph=None, **options):
        target = self.router.route(params, tenant=tenant, graph=graph)
        return await self._copies[target].query(cypher, params, graph=target, **options)

    async def close(self) -> None:
        """The copies are closed by the snapshot that made them."""


class FalkorGraphBackup:
    """GraphBackup on FalkorDB: snapshots are scratch replicas (the module's docstring)."""

    def __init__(self, connection: FalkorConnection, scratch: ScratchSpec | None = None):
        self._conn = connection
        self._scratch = scratch or ScratchSpec()
        # One scratch at a time from this process: each holds a copy of the store.
        self._lock = asyncio.Lock()

    @asynccontextmanager
    async def snapshot(self) -> AsyncIterator[FalkorSnapshot]:
        """The store at one point of its write history, deleted on leaving.

        Raises Unavailable: BACKUP_SNAPSHOT_TIMEOUT (not in sync within
        BACKUP_SNAPSHOT_TIMEOUT_SECONDS; the message quotes the scratch's
        log, which says why: a refused password, an unreachable store) or
        BACKUP_SNAPSHOT_FAILED (the scratch exited)."""
        password = self._conn._connect_args.get("password")  # noqa: SLF001 - the package's own connection
        async with self._lock:
            shards = await self._conn.shards()
            replicas: list[tuple[ScratchReplica, tuple[str, ...]]] = []
            copies: dict[str, FalkorConnection] = {}
            try:
                # One after another: a scratch's start sweeps what earlier backups left under the root.
                for (host, port), graphs in shards.items():
                    replica = ScratchReplica(self._scratch, master_host=host, master_port=port, password=password)
                    replicas.append((replica, graphs))
                    await replica.start()
                seconds = await asyncio.gather(*(replica.synced() for replica, _ in replicas))
                await asyncio.gather(*(replica.freeze() for replica, _ in replicas))
                log.info(
                    "backup snapshot taken",
                    graph=self._conn.graph_name,
                    shards=len(replicas),
                    sync_seconds=round(max(seconds), 3),
                )
                for replica, graphs in replicas:
                    copy = FalkorConnection(
                        host="127.0.0.1",
                        port=0,
                        unix_socket_path=replica.socket_path,
                        graph=self._conn.graph_name,
                        layout=self._conn.router.layout,
                        query_timeout_ms=self._conn._timeout_ms,  # noqa: SLF001
                    )
                    copies |= dict.fromkeys(graphs, copy)
                yield FalkorSnapshot(
                    next(iter(copies.values())) if len(replicas) == 1 else _ShardCopies(self._conn, copies)
                )
            finally:
                for copy in {id(c): c for c in copies.values()}.values():
                    await copy.close()
                await asyncio.gather(*(replica.stop() for replica, _ in replicas), return_exceptions=True)


class FalkorGraphRestore:
    """GraphRestore on FalkorDB: nodes written with their stored properties, edges by node id.

    A node id taken from a row goes through WITH first: `WHERE id(a) = r.a`
    is planned as a scan of every node per row, `WITH r.a AS ref ... WHERE
    id(a) = ref` as an id seek (measured: 1.3 s against 3 ms for 500 edges
    over 5,000 nodes)."""

    def __init__(self, connection: FalkorConnection):
        self._conn = connection

    def _by_graph(self, rows: list) -> dict[str, list[int]]:
        """The indexes of `rows` (node properties) by the graph of each one's tenant, in order."""
        return self._conn.by_graph(list(range(len(rows))), lambda i: rows[i]["tenant"])

    async def count_memories(self, tenant: str) -> int:
        result = await self._conn.query("MATCH (m:Memory) WHERE m.tenant = $tenant RETURN count(m)", {"tenant": tenant})
        return int(result.result_set[0][0])

    async def count_label(self, label: str, tenant: str) -> int:
        result = await self._conn.query(
            f"MATCH (n:{_name(label)}) WHERE n.tenant = $tenant RETURN count(n)", {"tenant": tenant}
        )
        return int(result.result_set[0][0])

    async def find(
        self, label: str, prop: str | None, keys: list[tuple[str, Any]]
    ) -> list[tuple[int, dict[str, Any]] | None]:
        """For each (tenant, value), the stored node of `label` whose `prop` is
        the value (prop None: the tenant's one node of the label), or None."""
        where = f"n.{_name(prop)} = value AND n.tenant = tenant" if prop else "n.tenant = tenant"
        rows = [{"tenant": t, "value": v} for t, v in keys]
        found: list[tuple[int, dict[str, Any]] | None] = [None] * len(keys)
        for graph, indexes in self._by_graph(rows).items():
            result = await self._conn.query(
                f"""
                UNWIND range(0, size($keys) - 1) AS i
                WITH i, $keys[i].value AS value, $keys[i].tenant AS tenant
                OPTIONAL MATCH (n:{_name(label)}) WHERE {where}
                WITH i, collect(n)[0] AS n
                RETURN i, id(n), properties(n) ORDER BY i
                """,
                {"keys": [rows[i] for i in indexes]},
                graph=graph,
            )
            for i, ref, props in result.result_set:
                if ref is not None:
                    found[indexes[int(i)]] = (self._conn.node_address(graph, int(ref)), dict(props or {}))
        return found

    async def create_nodes(self, labels: tuple[str, ...], rows: list[dict[str, Any]]) -> list[int]:
        """Create one node per row with exactly its properties; their ids in order."""
        label = ":".join(_name(x) for x in labels)
        made = [0] * len(rows)
        for graph, indexes in self._by_graph(rows).items():
            result = await self._conn.query(
                f"""
                UNWIND range(0, size($rows) - 1) AS i
                CREATE (n:{label}) SET n = $rows[i]
                RETURN i, id(n) ORDER BY i
                """,
                {"rows": [rows[i] for i in indexes]},
                graph=graph,
            )
            for i, ref in result.result_set:
                made[indexes[int(i)]] = self._conn.node_address(graph, int(ref))
        return made

    async def replace_nodes(self, rows: list[tuple[int, dict[str, Any]]]) -> None:
        """Give stored nodes (by id) exactly these properties."""
        for graph, group in self._conn.group_by(rows, lambda row: self._conn.node_graph(row[0])[0]).items():
            await self._conn.query(
                "UNWIND $rows AS r WITH r, r.id AS ref MATCH (n) WHERE id(n) = ref SET n = r.p",
                {"rows": [{"id": self._conn.node_graph(ref)[1], "p": props} for ref, props in group]},
                graph=graph,
            )

    async def create_edges(self, kind: str, rows: list[tuple[int, int, dict[str, Any]]], *, merge: bool) -> int:
        """Edges of one type between stored nodes (by id); `merge`: only where
        no edge of the type joins them yet (one that does keeps its
        properties). Returns how many rows were written or found."""
        make = (
            f"MERGE (a)-[e:{_name(kind)}]->(b) ON CREATE SET e = r.p"
            if merge
            else f"CREATE (a)-[e:{_name(kind)}]->(b) SET e = r.p"
        )
        written = 0
        # An edge joins two nodes of one tenant, so of one graph.
        for graph, group in self._conn.group_by(rows, lambda row: self._conn.node_graph(row[0])[0]).items():
            result = await self._conn.query(
                f"""
                UNWIND $rows AS r
                WITH r, r.a AS source, r.b AS target
                MATCH (a) WHERE id(a) = source
                MATCH (b) WHERE id(b) = target
                {make}
                RETURN count(e)
                """,
                {
                    "rows": [
                        {"a": self._conn.node_graph(a)[1], "b": self._conn.node_graph(b)[1], "p": props}
                        for a, b, props in group
                    ]
                },
                graph=graph,
            )
            written += int(result.result_set[0][0]) if result.result_set else 0
        return written
