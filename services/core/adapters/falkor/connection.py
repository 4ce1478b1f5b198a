"""FalkorConnection: the one client every graph port of the package shares.

It connects lazily, sends each query with its TIMEOUT, reads replies with
the fast reader (reply.py), retries while FalkorDB comes up, and turns
timeouts and an unreachable server into domain errors.
"""

from __future__ import annotations

import asyncio
import threading
from typing import Any

import redis.exceptions as redis_errors
import structlog
from falkordb.asyncio import FalkorDB
from redis.asyncio.cluster import ClusterNode, RedisCluster

from services.core.adapters.falkor.cluster import CLUSTER_REFUSALS, ClusterRoutes, seeds
from services.core.adapters.falkor.failures import is_read, not_sent, retryable, timed_out
from services.core.adapters.falkor.reply import params_header, read_reply
from services.core.adapters.falkor.routing import GraphRouter
from services.core.adapters.falkor.server_settings import read_durability, read_timeouts, timeout_to_send
from services.core.adapters.retry import with_backoff
from services.core.domain.errors import DeadlineExceeded, FailedPrecondition, Unavailable
from services.core.domain.graph_layout import GraphLayout

log = structlog.get_logger()

#: How FalkorDB refuses a query whose TIMEOUT is above its TIMEOUT_MAX.
_ABOVE_TIMEOUT_MAX = "The query TIMEOUT parameter value cannot exceed"
#: Node ids of one graph stay below this (FalkorDB's ids count a graph's nodes, reused after deletes):
#: a node's address across graphs is its graph's place times it plus its id (node_address).
NODE_SPAN = 1 << 40


class FalkorConnection:
    """A lazily opened FalkorDB client for the graphs of one layout (one
    graph by default), with the retry and timeout rules. Each query goes to
    the graph of its tenant (routing.py)."""

    def __init__(
        self,
        *,
        host: str,
        port: int,
        graph: str,
        password: str | None = None,
        wait_seconds: float = 120.0,
        retry_initial_seconds: float = 0.1,
        retry_max_seconds: float = 2.0,
        request_retry_seconds: float = 3.0,
        query_timeout_ms: int = 0,
        socket_margin_seconds: float = 300.0,
        appendfsync: str | None = None,
        unix_socket_path: str | None = None,
        layout: GraphLayout | None = None,
        write_replicas: int = 0,
        write_replicas_timeout_ms: int = 1000,
        max_in_flight: int = 64,
    ):
        """`host`: one host, or several `host[:port]`, comma-separated (a cluster's nodes, tried in
        turn when the connection opens: cluster.seeds);
        `unix_socket_path`: connect there rather than to host:port (a backup's scratch replica);
        `layout`: how tenants map to graphs (FALKORDB_GRAPH_LAYOUT; None: every tenant in `graph`);
        `write_replicas`: how many replicas must hold a write before it is acknowledged
        (FALKORDB_WRITE_REPLICAS, WAIT; 0: none waited for);
        `max_in_flight`: queries sent at once; the others wait here for their turn
        (FALKORDB_MAX_IN_FLIGHT)."""
        #: The nodes FALKORDB_HOST names; _connect_args holds the one that answered last (the first until then).
        self._seeds = seeds(host, port)
        first_host, first_port = self._seeds[0]
        self._connect_args: dict[str, Any] = {"host": first_host, "port": first_port, "password": password}
        if unix_socket_path:
            self._connect_args["unix_socket_path"] = unix_socket_path
        #: Sent with every query (GRAPH.QUERY ... TIMEOUT); 0 sends none.
        self._timeout_ms = max(0, int(query_timeout_ms))
        if self._timeout_ms:
            # The server stops a query at its timeout; the client gives up on
            # the connection only this much later (a hung connection), since a
            # process whose GIL another thread holds reads no reply meanwhile.
            self._connect_args["socket_timeout"] = self._timeout_ms / 1000 + socket_margin_seconds
        #: The server's (TIMEOUT_DEFAULT, TIMEOUT_MAX) as ensure_schema read them; None: not read.
        self.server_timeouts: tuple[int, int] | None = None
        self._graph_name = graph
        self.router = GraphRouter(layout or GraphLayout(graph))
        self._db: FalkorDB | None = None
        #: The library's graph objects by name (its reply parser reads a graph's labels through one).
        self._graphs: dict[str, Any] = {}
        #: On a Redis Cluster (detected when opened), the master of each graph; None on one server.
        self.routes: ClusterRoutes | None = None
        self._write_replicas = max(0, int(write_replicas))
        self._replicas_timeout_ms = max(1, int(write_replicas_timeout_ms))
        self.where = f"{unix_socket_path or ','.join(f'{h}:{p}' for h, p in self._seeds)}/{graph}"
        self.wait_seconds = wait_seconds
        self._initial = retry_initial_seconds
        self._max = retry_max_seconds
        self._request_retry = request_retry_seconds
        #: The appendfsync FALKORDB_APPENDFSYNC expects of the server (None: not checked).
        self._appendfsync = appendfsync
        #: The server's (appendonly, appendfsync) as check_durability read them; None: not read.
        self.durability: tuple[str, str] | None = None
        # The client's pool holds 100 connections and refuses the next query at once ("Too many
        # connections"), which the retries then hammer for their whole budget: a burst while the server
        # was slow failed requests that waiting would have served (docs/reliability.md, make soak).
        self._max_in_flight = max(1, int(max_in_flight))
        self._turns: tuple[asyncio.AbstractEventLoop, asyncio.Semaphore] | None = None
        # The first queries may arrive together: one client is built, the others wait for it.
        self._opening = threading.Lock()

    async def query(
        self,
        cypher: str,
        params: dict[str, Any] | None = None,
        *,
        deadline: float | None = None,
        idempotent: bool | None = None,
        tenant: str | None = None,
        graph: str | None = None,
        wait_replicas: bool = True,
    ):
        """Run one query (retried while FalkorDB is coming up, for at most
        `deadline` seconds, by default the request retry budget) on `graph`,
        else on the graph of `tenant`, else on that of the tenant its
        parameters name (routing.py).

        A connection lost mid-call leaves unknown whether the query ran: it is
        sent again only when `idempotent` (running it twice leaves what running
        it once does; a create keyed by id is). None: idempotent when the query
        has no write clause. A write that is not is sent again only where it
        surely never reached the server; otherwise the caller gets
        FALKORDB_WRITE_UNCONFIRMED, never a second, blind attempt.

        `wait_replicas` False: a write not waited for (FALKORDB_WRITE_REPLICAS) however the
        connection is set, for what every start makes again (the schema and its migrations), so
        a process starts while a shard has lost its replica."""
        repeatable = is_read(cypher) if idempotent is None else idempotent
        target = self.router.route(params, tenant=tenant, graph=graph)
        try:
            return await with_backoff(
                "falkordb",
                lambda: self._attempt(cypher, params, target, wait_replicas),
                retryable=retryable if repeatable else not_sent,
                deadline_seconds=self._request_retry if deadline is None else deadline,
                initial_seconds=self._initial,
                max_seconds=self._max,
            )
        except Exception as exc:
            if timed_out(exc):
                raise DeadlineExceeded(
                    "FALKORDB_QUERY_TIMEOUT",
                    f"the graph query did not finish within {self._timeout_ms} ms (FALKORDB_QUERY_TIMEOUT_MS): {exc}",
                    timeout_ms=self._timeout_ms,
                ) from exc
            # The client's message names the store's internal address: logged, never answered.
            if not_sent(exc) or (repeatable and retryable(exc)):
                log.warning("falkordb unavailable", where=self.where, error=str(exc))
                raise Unavailable(
                    "FALKORDB_UNAVAILABLE",
                    f"the graph store is unavailable (retried for {self._request_retry:g} s); try again shortly",
                ) from exc
            if retryable(exc):
                log.warning("falkordb write unconfirmed", where=self.where, error=str(exc))
                raise Unavailable(
                    "FALKORDB_WRITE_UNCONFIRMED",
                    "the connection to the graph store was lost during a write, which may or may not have been"
                    " applied (not sent again: it is not idempotent); read before retrying, or retry with an"
                    " Idempotency-Key",
                ) from exc
            raise

    async def shards(self) -> dict[tuple[str, int], tuple[str, ...]]:
        """Where the layout's graphs live now: (host, port) of each server holding some, with them.
        One server holds every graph; on a Redis Cluster, each master its buckets. A store that
        does not answer is taken for one server at the first address (its callers report it)."""
        try:
            await self._open()
        except (redis_errors.RedisError, OSError) as exc:
            log.warning("falkordb unreachable: taken for one server", where=self.where, error=str(exc))
        if self.routes is None:
            return {(self._connect_args["host"], int(self._connect_args["port"])): self.graphs()}
        return await self.routes.masters(self.graphs())

    async def _open(self) -> FalkorDB:
        if self._db is None:
            # The client probes the server synchronously when built: keep that off the loop.
            db = await asyncio.to_thread(self._connect_once)
            if self.routes is None and isinstance(db.connection, RedisCluster):
                self.routes = ClusterRoutes(db.connection, self._connect_args)
        assert self._db is not None  # noqa: S101  narrows the type: set by _connect_once
        return self._db

    def _connect_once(self) -> FalkorDB:
        """The client, built by the first caller; callers arriving while it is
        built wait for it rather than build their own (each has its own pool)."""
        with self._opening:
            if self._db is None:
                self._db = self._connect()
            return self._db

    def _connect(self) -> FalkorDB:
        """A client of the first node that answers, in FALKORDB_HOST's order; on a cluster it knows
        them all, so it can read the slot map from another once this one goes. The last node's
        error when none answers; FALKORDB_HOST_NOT_A_CLUSTER when several are listed and the one
        that answers is a server of its own."""
        if "unix_socket_path" in self._connect_args or len(self._seeds) == 1:
            return FalkorDB(**self._connect_args)
        startup = [ClusterNode(h, p) for h, p in self._seeds]
        for index, (host, port) in enumerate(self._seeds):
            try:
                db = FalkorDB(**{**self._connect_args, "host": host, "port": port}, startup_nodes=startup)
            except redis_errors.ConnectionError as exc:
                log.info("falkordb node not answering, trying the next", node=f"{host}:{port}", error=str(exc))
                if index == len(self._seeds) - 1:
                    raise
                continue
            if not isinstance(db.connection, RedisCluster):
                # Independent servers would each hold other data: which one answered must not decide.
                raise FailedPrecondition(
                    "FALKORDB_HOST_NOT_A_CLUSTER",
                    f"FALKORDB_HOST lists {len(self._seeds)} nodes but {host}:{port} is no Redis Cluster node:"
                    " name one server, or every node of one cluster",
                )
            self._connect_args |= {"host": host, "port": port}
            return db
        raise AssertionError("unreachable: seeds() names at least one node")

    def _graph(self, name: str):
        graph = self._graphs.get(name)
        if graph is None:
            assert self._db is not None  # noqa: S101  narrows the type: opened by _open
            graph = self._graphs[name] = self._db.select_graph(name)
        return graph

    async def _attempt(self, cypher: str, params: dict[str, Any] | None, target: str, wait_replicas: bool = True):
        await self._open()
        graph = self._graph(target)
        # The library's query(), with a faster reader for all-scalar replies (reply.py).
        try:
            async with self._turn():
                response = await self._send(graph, cypher, params, wait_replicas)
        except (redis_errors.ConnectionError, redis_errors.TimeoutError, *CLUSTER_REFUSALS):
            if self.routes is not None:  # a master failed or a slot moved: where is the graph now?
                await self.routes.refresh(failed_graph=graph.name)
            raise
        except redis_errors.ResponseError as exc:
            # The server's TIMEOUT_MAX is below ours (lowered since start-up, or met
            # before check_timeouts ran): FalkorDB refused the query without running
            # it, so it is sent again once with the server's limit.
            before = self._timeout_ms
            if not str(exc).startswith(_ABOVE_TIMEOUT_MAX) or await self.check_timeouts() is None:
                raise
            if self._timeout_ms == before:
                raise
            async with self._turn():
                response = await self._send(graph, cypher, params)
        return await read_reply(graph, response)

    def _turn(self) -> asyncio.Semaphore:
        """The semaphore of max_in_flight turns, of the running loop (one is bound to the loop it waits on)."""
        loop = asyncio.get_running_loop()
        if self._turns is None or self._turns[0] is not loop:
            self._turns = (loop, asyncio.Semaphore(self._max_in_flight))
        return self._turns[1]

    async def _send(self, graph, cypher: str, params: dict[str, Any] | None, wait_replicas: bool = True):
        timeout = ("TIMEOUT", str(self._timeout_ms)) if self._timeout_ms else ()
        command = ("GRAPH.QUERY", graph.name, params_header(params) + cypher, "--compact", *timeout)
        waits = wait_replicas and self._write_replicas > 0 and not is_read(cypher)
        if self.routes is None and not waits:
            return await graph.execute_command(*command)
        assert self._db is not None  # noqa: S101  narrows the type: opened by _attempt
        client = await self.routes.client_for(graph.name) if self.routes else self._db.connection
        if not waits:
            return await client.execute_command(*command)
        # WAIT counts the replicas holding this connection's writes: it goes on the write's own connection.
        async with client.pipeline(transaction=False) as pipe:
            pipe.execute_command(*command)
            pipe.execute_command("WAIT", self._write_replicas, self._replicas_timeout_ms)
            reply, acked = await pipe.execute(raise_on_error=False)
        if isinstance(reply, Exception):
            raise reply
        if isinstance(acked, Exception) or int(acked) < self._write_replicas:
            log.warning("falkordb write not replicated", where=self.where, graph=graph.name, replicas=str(acked))
            raise Unavailable(
                "FALKORDB_WRITE_UNREPLICATED",
                f"the write reached the graph store but {acked} of {self._write_replicas} replicas confirmed it"
                f" within {self._replicas_timeout_ms} ms (FALKORDB_WRITE_REPLICAS); read before retrying, or retry"
                " with an Idempotency-Key",
                replicas=self._write_replicas,
            )
        return reply

    async def _admin(self, *args: str):
        """A command about the server, not a graph (CONFIG, GRAPH.CONFIG): on a cluster, the answer of the
        master serving the layout's first graph (the nodes are started alike)."""
        if self.routes is not None:
            return await (await self.routes.client_for(self.graphs()[0])).execute_command(*args)
        assert self._db is not None  # noqa: S101  narrows the type: callers open the connection first
        return await self._db.execute_command(*args)

    async def command(self, *args: str, graph: str | None = None):
        """Send one raw command about `graph` (GRAPH.CONSTRAINT and the
        like), after the first query opened the connection; sent again only
        where it never reached the server."""
        assert self._db is not None  # noqa: S101  narrows the type: the first query opened it

        async def send():
            if self.routes is not None and graph is not None:
                return await (await self.routes.client_for(graph)).execute_command(*args)
            return await self._db.execute_command(*args)

        return await with_backoff(
            "falkordb",
            send,
            retryable=not_sent,
            deadline_seconds=self._request_retry,
            initial_seconds=self._initial,
            max_seconds=self._max,
        )

    @property
    def write_replicas(self) -> int:
        """How many replicas each write waits for (FALKORDB_WRITE_REPLICAS)."""
        return self._write_replicas

    @property
    def graph_name(self) -> str:
        """FALKORDB_GRAPH: the one graph of the shared layout, the others' names' stem."""
        return self._graph_name

    def graphs(self) -> tuple[str, ...]:
        """Every graph of the layout: what cross-tenant work visits."""
        return self.router.layout.graphs()

    async def visit(self, cypher: str, params: dict[str, Any] | None = None, **options: Any) -> list[list[Any]]:
        """Run a query naming no tenant on every graph of the layout in turn; their rows, graph after graph."""
        rows: list[list[Any]] = []
        for graph in self.graphs():
            rows.extend((await self.query(cypher, params, graph=graph, **options)).result_set)
        return rows

    def node_address(self, graph: str, node_id: int) -> int:
        """A node's id across the layout's graphs: the graph's place times NODE_SPAN plus its id in it
        (the node's own id where there is one graph)."""
        return self.graphs().index(graph) * NODE_SPAN + node_id

    def node_graph(self, address: int) -> tuple[str, int]:
        """The graph and the node id of a node_address."""
        index, node_id = divmod(address, NODE_SPAN)
        return self.graphs()[index], node_id

    def by_graph(self, items: list, tenant_of) -> dict[str, list]:
        """`items` grouped by the graph of each one's tenant, for a batch that spans tenants."""
        return self.router.by_graph(items, tenant_of)

    @staticmethod
    def group_by(items: list, graph_of) -> dict[str, list]:
        """`items` grouped by the graph `graph_of(item)` names, in their order."""
        groups: dict[str, list] = {}
        for item in items:
            groups.setdefault(graph_of(item), []).append(item)
        return groups

    async def check_timeouts(self) -> tuple[int, int] | None:
        """Read the server's TIMEOUT_DEFAULT and TIMEOUT_MAX (milliseconds, 0:
        none) and warn where they leave queries unbounded (server_settings.py).
        Not a refusal: memgrid's own queries carry their TIMEOUT whatever the
        server says. A TIMEOUT_MAX below FALKORDB_QUERY_TIMEOUT_MS would make
        FalkorDB refuse every query, so the timeout sent comes down to it.
        None when the server does not let us read them."""
        assert self._db is not None  # noqa: S101  narrows the type: called after the first query
        found = await read_timeouts(self._admin, self.where)
        if found is None:
            return None
        self.server_timeouts = found
        self._timeout_ms = timeout_to_send(self._timeout_ms, found[1])
        return found

    async def check_durability(self) -> tuple[str, str] | None:
        """Read the server's appendonly and appendfsync, log them, and warn
        where a write FalkorDB acknowledged could be lost on a crash beyond
        what FALKORDB_APPENDFSYNC accepts (server_settings.py). None when the
        server does not answer CONFIG GET."""
        assert self._db is not None  # noqa: S101  narrows the type: called after the first query
        found = await read_durability(self._admin, self.where, self._appendfsync)
        if found is not None:
            self.durability = found
        return found

    async def close(self) -> None:
        if self.routes is not None:
            await self.routes.close()
            self.routes = None
        if self._db is not None:
            await self._db.aclose()
            self._db = None
            self._graphs.clear()
