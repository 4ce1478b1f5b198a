"""FalkorDB on a Redis Cluster: which node serves a graph, and a client per node.

A graph is one key, so it lives whole on the master owning its key's slot
(docs/scaling.md, FalkorDB). The library detects a cluster and gives a
redis-py RedisCluster; its slot map says which master serves a graph. Each
query goes to that master on a plain client of its own (one per node), so
that a write and the WAIT after it (FALKORDB_WRITE_REPLICAS) share one
connection, as WAIT requires. After a failover the old master's slots move:
a refused or failed command refreshes the map before it is sent again.
"""

from __future__ import annotations

from typing import Any

import redis.asyncio as aredis
import redis.exceptions as redis_errors
import structlog
from redis.asyncio.cluster import RedisCluster
from redis.asyncio.retry import Retry
from redis.backoff import NoBackoff

log = structlog.get_logger()

#: Errors by which the cluster refuses a command unrun: its slot moved, the
#: cluster is failing over (no master for the slot yet), or it asks again later.
CLUSTER_REFUSALS = (
    redis_errors.MovedError,
    redis_errors.AskError,
    redis_errors.ClusterDownError,
    redis_errors.TryAgainError,
    redis_errors.SlotNotCoveredError,
)


def seeds(host: str, port: int) -> list[tuple[str, int]]:
    """The nodes FALKORDB_HOST names: one host, or several `host[:port]`, comma-separated, each on
    `port` (FALKORDB_PORT) unless it gives its own. A cluster's client tries them in turn, so a
    process starts while the first one is down (docs/scaling.md)."""
    nodes = []
    for item in (part.strip() for part in host.split(",")):
        if not item:
            continue
        name, colon, own = item.rpartition(":")
        nodes.append((name, int(own)) if colon and own.isdigit() and name else (item, port))
    if not nodes:
        raise ValueError("FALKORDB_HOST names no host")
    return nodes


class ClusterRoutes:
    """The master serving each graph, from the cluster's slot map, and a client per master."""

    def __init__(self, cluster: RedisCluster, connect_args: dict[str, Any]):
        self._cluster = cluster
        self._args = {k: v for k, v in connect_args.items() if k in ("password", "socket_timeout")}
        self._clients: dict[str, aredis.Redis] = {}

    async def client_for(self, graph: str) -> aredis.Redis:
        """The client of the master serving `graph` now (the slot map read at first use)."""
        if not self._cluster.nodes_manager.slots_cache:
            await self._cluster.initialize()
        node = self._cluster.get_node_from_key(graph)
        assert node is not None  # noqa: S101  narrows the type: every slot has a master once initialized
        client = self._clients.get(node.name)
        if client is None:
            # No retries of its own (redis-py's default backs off for seconds on a dead node): the query's
            # retry reads the slot map again first, which the client's own retry would not.
            client = self._clients[node.name] = aredis.Redis(
                host=node.host, port=int(node.port), decode_responses=True, retry=Retry(NoBackoff(), 0), **self._args
            )
        return client

    async def masters(self, graphs: tuple[str, ...]) -> dict[tuple[str, int], tuple[str, ...]]:
        """The master serving each of `graphs` now, read from a fresh slot map: (host, port) -> its graphs."""
        await self.refresh()
        shards: dict[tuple[str, int], list[str]] = {}
        for graph in graphs:
            node = self._cluster.get_node_from_key(graph)
            assert node is not None  # noqa: S101  narrows the type: a fresh map has a master for every slot
            shards.setdefault((node.host, int(node.port)), []).append(graph)
        return {address: tuple(held) for address, held in shards.items()}

    def node_of(self, graph: str) -> str:
        """host:port of the master serving `graph` by the current map (for logs and tests)."""
        node = self._cluster.get_node_from_key(graph)
        assert node is not None  # noqa: S101  narrows the type: every slot has a master once initialized
        return node.name

    async def refresh(self, failed_graph: str | None = None) -> None:
        """Read the slot map again (after a node failed or a slot moved), asking last the node that
        served `failed_graph` (it may be the dead one); a failure leaves the old map."""
        try:
            node = self._cluster.get_node_from_key(failed_graph) if failed_graph else None
            failed = node.name if node is not None else None
        except (redis_errors.RedisError, LookupError):
            failed = None
        try:
            await self._cluster.nodes_manager.initialize(last_failed_node_name=failed)
        except (redis_errors.RedisError, OSError) as exc:
            log.warning("falkordb cluster map not refreshed", error=str(exc))

    async def close(self) -> None:
        for client in self._clients.values():
            await client.aclose()
        self._clients.clear()
