"""FalkorDB's query timeout against real servers: every query carries
FALKORDB_QUERY_TIMEOUT_MS, a query past it is a DeadlineExceeded (never
retried, a write rolled back), and start-up reads the server's
TIMEOUT_DEFAULT/TIMEOUT_MAX, warning where they are unset and keeping under
TIMEOUT_MAX."""

from __future__ import annotations

import time
import uuid

import pytest
import redis
from structlog.testing import capture_logs

from devstack.servers import free_port, start_falkordb
from services.core.adapters.falkor import FalkorGraph
from services.core.domain.errors import DeadlineExceeded

pytestmark = pytest.mark.integration

SLOW_READ = "UNWIND range(1, 10000000) AS x WITH x WHERE x % 7 = 0 RETURN count(x)"
SLOW_WRITE = "UNWIND range(1, 5000000) AS x CREATE (:Slow {v: x})"


def store_on(port: int, timeout_ms: int) -> FalkorGraph:
    return FalkorGraph(
        host="127.0.0.1", port=port, graph=f"timeout_{uuid.uuid4().hex[:8]}", query_timeout_ms=timeout_ms
    )


@pytest.fixture
def server(tmp_path):
    """A FalkorDB of its own, loaded without any query timeout."""
    started = start_falkordb(free_port(), tmp_path / "falkordb")
    yield started
    started.stop()


async def test_a_query_past_the_timeout_is_deadline_exceeded_and_not_retried(falkordb_server, monkeypatch):
    store = store_on(falkordb_server.port, 50)
    try:
        await store.lifecycle.ensure_schema()
        attempts = []
        attempt = store.connection._attempt

        async def counted(cypher, params, graph, *rest):
            attempts.append(cypher)
            return await attempt(cypher, params, graph, *rest)

        monkeypatch.setattr(store.connection, "_attempt", counted)
        started = time.monotonic()
        with pytest.raises(DeadlineExceeded) as caught:
            await store.connection.query(SLOW_READ)
        assert time.monotonic() - started < 5  # FalkorDB stopped it, nothing waited on it
        assert attempts == [SLOW_READ]
        assert caught.value.reason == "FALKORDB_QUERY_TIMEOUT"
        assert caught.value.status == "DEADLINE_EXCEEDED"
        assert caught.value.details == {"timeout_ms": "50"}
        # A write past the timeout is rolled back whole.
        with pytest.raises(DeadlineExceeded):
            await store.connection.query(SLOW_WRITE)
        assert (await store.connection.query("MATCH (n:Slow) RETURN count(n)")).result_set == [[0]]
        # Quick queries still answer on the same store.
        assert (await store.connection.query("RETURN 1")).result_set == [[1]]
    finally:
        await store.lifecycle.close()


async def test_start_up_reads_the_test_servers_timeouts(falkordb_server, settings):
    store = store_on(falkordb_server.port, settings.graph.falkordb_query_timeout_ms)
    try:
        with capture_logs() as logs:
            await store.lifecycle.ensure_schema()
        assert store.connection.server_timeouts == (settings.graph.falkordb_query_timeout_ms,) * 2
        assert not [e for e in logs if e["log_level"] == "warning"]
    finally:
        await store.lifecycle.close()


async def test_a_server_without_timeouts_is_warned_about_and_a_lower_max_is_kept(server):
    store = store_on(server.port, 8000)
    try:
        with capture_logs() as logs:
            await store.lifecycle.ensure_schema()
        assert store.connection.server_timeouts == (0, 0)
        assert any("no query timeout" in e["event"] for e in logs if e["log_level"] == "warning")
        # Our own queries are bounded all the same.
        assert (await store.connection.query("RETURN 1")).result_set == [[1]]
    finally:
        await store.lifecycle.close()

    admin = redis.Redis(port=server.port)
    admin.execute_command("GRAPH.CONFIG", "SET", "TIMEOUT_MAX", 100)
    admin.execute_command("GRAPH.CONFIG", "SET", "TIMEOUT_DEFAULT", 100)
    admin.close()
    store = store_on(server.port, 8000)
    try:
        with capture_logs() as logs:
            await store.lifecycle.ensure_schema()
        assert store.connection.server_timeouts == (100, 100)
        assert any("above the server's TIMEOUT_MAX" in e["event"] for e in logs)
        # 8000 ms would be refused by the server; the store sends 100 and is answered.
        assert (await store.connection.query("RETURN 1")).result_set == [[1]]
        with pytest.raises(DeadlineExceeded):
            await store.connection.query(SLOW_READ)
    finally:
        await store.lifecycle.close()


async def test_the_devstack_loads_falkordb_with_the_timeouts(tmp_path):
    started = start_falkordb(free_port(), tmp_path / "falkordb", query_timeout_ms=1234)
    try:
        client = redis.Redis(port=started.port)
        for name in ("TIMEOUT_DEFAULT", "TIMEOUT_MAX"):
            assert client.execute_command("GRAPH.CONFIG", "GET", name) == [name.encode(), 1234]
        client.close()
    finally:
        started.stop()
