"""Backups on FalkorDB: a point-in-time copy to export from (GraphBackup), and
the writes a restore makes (GraphRestore).

The snapshot is FalkorDB's GRAPH.COPY of the whole graph to a temporary key:
the server copies the graph under its read lock, so the copy holds every
write acknowledged before it and none after, whatever runs meanwhile. The
export then reads the copy at leisure (writers are not held up) and deletes
it. The copy costs the graph's size in memory while the backup runs.

Nodes are read generically: every label whose nodes carry a `tenant`
(memories, entities, patterns, MetaPatterns, consolidation runs, tombstones,
audit entries, ...), but run-time state (archive.TRANSIENT_LABELS), with
every property as stored; edges are every edge between two exported nodes
of one tenant. Reads walk node ids in windows (an id range seek), one pass.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import redis.exceptions as redis_errors
import structlog

from services.core.adapters.falkor.connection import FalkorConnection
from services.core.domain.archive import TRANSIENT_LABELS, ArchiveEdge, ArchiveNode
from services.core.domain.errors import Unavailable

log = structlog.get_logger()

#: The server settings that start forks of their own, and their value while a copy is made (off).
_FORK_CONFIGS = {"auto-aof-rewrite-percentage": "0", "save": ""}
#: INFO persistence fields set while a child process runs.
_FORK_FLAGS = ("aof_rewrite_in_progress", "rdb_bgsave_in_progress", "module_fork_in_progress")
#: How long a backup waits for a running child (a rewrite of a large AOF) to end.
FORK_WAIT_SECONDS = 300.0  # the default of BACKUP_SNAPSHOT_WAIT_SECONDS


def _name(text: str) -> str:
    """A label or edge type as a query names it (callers pass only checked names)."""
    return "`" + text.replace("`", "") + "`"


def _tenant_filter(alias: str, tenant: str | None) -> str:
    return f"{alias}.tenant = $tenant" if tenant is not None else f"{alias}.tenant IS NOT NULL"


def _exported(labels: list[str]) -> bool:
    return not TRANSIENT_LABELS.intersection(labels)


class FalkorSnapshot:
    """Reads of one GRAPH.COPY: nodes and edges by node id window."""

    def __init__(self, connection: FalkorConnection):
        self._conn = connection

    async def max_node_id(self) -> int:
        """The highest node id of the copy (-1 when it has none)."""
        result = await self._conn.query("MATCH (n) RETURN max(id(n))")
        value = result.result_set[0][0] if result.result_set else None
        return -1 if value is None else int(value)

    async def tenants(self) -> list[str]:
        result = await self._conn.query("MATCH (m:Memory) WHERE m.tenant IS NOT NULL RETURN DISTINCT m.tenant")
        return sorted(row[0] for row in result.result_set)

    async def nodes(self, tenant: str | None, start: int, stop: int) -> list[ArchiveNode]:
        """The exported nodes with ids in [start, stop), of `tenant` (None: of every tenant), in id order."""
        result = await self._conn.query(
            f"""
            MATCH (n) WHERE id(n) >= $start AND id(n) < $stop AND {_tenant_filter("n", tenant)}
            RETURN id(n), labels(n), properties(n) ORDER BY id(n)
            """,
            {"start": start, "stop": stop, "tenant": tenant},
        )
        return [
            ArchiveNode(int(ref), tuple(labels), dict(props))
            for ref, labels, props in result.result_set
            if _exported(labels)
        ]

    async def edges(self, tenant: str | None, start: int, stop: int) -> list[ArchiveEdge]:
        """The edges leaving the nodes with ids in [start, stop) to a node of the same tenant."""
        result = await self._conn.query(
            f"""
            MATCH (a)-[e]->(b) WHERE id(a) >= $start AND id(a) < $stop AND {_tenant_filter("a", tenant)}
              AND b.tenant = a.tenant
            RETURN id(a), type(e), id(b), properties(e), labels(a), labels(b) ORDER BY id(a), id(e)
            """,
            {"start": start, "stop": stop, "tenant": tenant},
        )
        return [
            ArchiveEdge(kind, int(a), int(b), dict(props))
            for a, kind, b, props, a_labels, b_labels in result.result_set
            if _exported(a_labels) and _exported(b_labels)
        ]


class FalkorGraphBackup:
    """GraphBackup on FalkorDB: snapshots by GRAPH.COPY."""

    def __init__(self, connection: FalkorConnection, fork_wait_seconds: float = FORK_WAIT_SECONDS):
        self._conn = connection
        self._fork_wait = fork_wait_seconds

    async def _command(self, *args: Any) -> Any:
        await self._conn.query("RETURN 1")  # connects when not yet connected
        return await self._conn._graph.execute_command(*args)  # noqa: SLF001 - the package's own connection

    async def _config(self, name: str) -> str | None:
        try:
            reply = await self._command("CONFIG", "GET", name)
        except redis_errors.ResponseError:
            return None  # a managed server may refuse CONFIG
        # redis-py answers a dict (RESP3, newer clients) or [name, value]
        value = reply.get(name) if isinstance(reply, dict) else reply[1] if len(reply) == 2 else None
        return value.decode() if isinstance(value, bytes) else value

    async def _set_config(self, name: str, value: str) -> None:
        try:
            await self._command("CONFIG", "SET", name, value)
        except redis_errors.ResponseError as exc:
            log.warning("could not set FalkorDB's config for a backup", name=name, error=str(exc))

    async def _no_fork_running(self) -> None:
        """Wait until the server runs no child process (an AOF rewrite, an RDB save)."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self._fork_wait
        while True:
            info = await self._command("INFO", "persistence")
            busy = [k for k in _FORK_FLAGS if str(info.get(k, 0)) not in ("0", "")]
            if not busy:
                return
            if loop.time() > deadline:
                raise Unavailable(
                    "BACKUP_SNAPSHOT_BUSY",
                    f"FalkorDB kept a child process running ({', '.join(busy)}) for {self._fork_wait:.0f} s:"
                    " the backup's GRAPH.COPY was not sent; try again later",
                )
            await asyncio.sleep(0.05)

    @asynccontextmanager
    async def snapshot(self) -> AsyncIterator[FalkorSnapshot]:
        """A point-in-time copy of the graph, deleted on leaving.

        GRAPH.COPY forks; while another child runs (an AOF rewrite, an RDB
        save) it retries the fork holding the server's lock and the graph's
        read lock, which under concurrent writes can hang the server (seen
        with the bundled FalkorDB; docs/backup.md). So the server's own forks
        are held off (automatic AOF rewrites and RDB saves suspended), the
        copy is sent only once no child runs, and the settings come back after."""
        source = self._conn._graph_name  # noqa: SLF001
        copy_name = f"{source}__backup_{uuid.uuid4().hex[:12]}"
        saved = {name: await self._config(name) for name in _FORK_CONFIGS}
        try:
            for name, value in saved.items():
                if value is not None:
                    await self._set_config(name, _FORK_CONFIGS[name])
            await self._no_fork_running()
            await self._command("GRAPH.COPY", source, copy_name)
        finally:
            for name, value in saved.items():
                if value is not None:
                    await self._set_config(name, value)
        args = self._conn._connect_args  # noqa: SLF001
        copy = FalkorConnection(
            host=args["host"],
            port=args["port"],
            password=args.get("password"),
            graph=copy_name,
            query_timeout_ms=self._conn._timeout_ms,  # noqa: SLF001
        )
        log.info("backup snapshot taken", graph=source, copy=copy_name)
        try:
            yield FalkorSnapshot(copy)
        finally:
            await copy.close()
            try:
                await self._command("GRAPH.DELETE", copy_name)
            except Exception as exc:  # the copy outliving a failed backup is worth a warning, not a second failure
                log.warning("could not delete the backup's graph copy", copy=copy_name, error=str(exc))


class FalkorGraphRestore:
    """GraphRestore on FalkorDB: nodes written with their stored properties, edges by node id.

    A node id taken from a row goes through WITH first: `WHERE id(a) = r.a`
    is planned as a scan of every node per row, `WITH r.a AS ref ... WHERE
    id(a) = ref` as an id seek (measured: 1.3 s against 3 ms for 500 edges
    over 5,000 nodes)."""

    def __init__(self, connection: FalkorConnection):
        self._conn = connection

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
        result = await self._conn.query(
            f"""
            UNWIND range(0, size($keys) - 1) AS i
            WITH i, $keys[i].value AS value, $keys[i].tenant AS tenant
            OPTIONAL MATCH (n:{_name(label)}) WHERE {where}
            WITH i, collect(n)[0] AS n
            RETURN i, id(n), properties(n) ORDER BY i
            """,
            {"keys": [{"tenant": t, "value": v} for t, v in keys]},
        )
        found: list[tuple[int, dict[str, Any]] | None] = [None] * len(keys)
        for i, ref, props in result.result_set:
            if ref is not None:
                found[int(i)] = (int(ref), dict(props or {}))
        return found

    async def create_nodes(self, labels: tuple[str, ...], rows: list[dict[str, Any]]) -> list[int]:
        """Create one node per row with exactly its properties; their ids in order."""
        label = ":".join(_name(x) for x in labels)
        result = await self._conn.query(
            f"""
            UNWIND range(0, size($rows) - 1) AS i
            CREATE (n:{label}) SET n = $rows[i]
            RETURN i, id(n) ORDER BY i
            """,
            {"rows": rows},
        )
        return [int(ref) for _, ref in result.result_set]

    async def replace_nodes(self, rows: list[tuple[int, dict[str, Any]]]) -> None:
        """Give stored nodes (by id) exactly these properties."""
        await self._conn.query(
            "UNWIND $rows AS r WITH r, r.id AS ref MATCH (n) WHERE id(n) = ref SET n = r.p",
            {"rows": [{"id": ref, "p": props} for ref, props in rows]},
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
        result = await self._conn.query(
            f"""
            UNWIND $rows AS r
            WITH r, r.a AS source, r.b AS target
            MATCH (a) WHERE id(a) = source
            MATCH (b) WHERE id(b) = target
            {make}
            RETURN count(e)
            """,
            {"rows": [{"a": a, "b": b, "p": props} for a, b, props in rows]},
        )
        return int(result.result_set[0][0]) if result.result_set else 0
