"""FALKORDB_MAX_IN_FLIGHT against a real server: a burst of queries larger
than the client's pool (100 connections) waits for its turns in the process
and is served whole, where without the bound the queries past the pool were
refused at once ("Too many connections") and retried."""

from __future__ import annotations

import asyncio
import uuid

import pytest
from structlog.testing import capture_logs

from services.core.adapters.falkor import FalkorGraph

pytestmark = pytest.mark.integration

READ = "UNWIND range(1, 20000) AS x RETURN count(x)"


def store_on(port: int, **options) -> FalkorGraph:
    return FalkorGraph(host="127.0.0.1", port=port, graph=f"in_flight_{uuid.uuid4().hex[:8]}", **options)


async def burst(store: FalkorGraph, size: int) -> tuple[list[int], list[dict]]:
    await store.connection.query("RETURN 1")  # opened first: the burst shares one client and its pool
    with capture_logs() as logs:
        results = await asyncio.gather(*(store.connection.query(READ) for _ in range(size)))
    refused = [e for e in logs if "Too many connections" in str(e.get("error", ""))]
    return [r.result_set[0][0] for r in results], refused


async def test_a_burst_past_the_pool_waits_for_its_turns(falkordb_server):
    store = store_on(falkordb_server.port)  # the default bound, 64
    try:
        counts, refused = await burst(store, 300)
        assert counts == [20000] * 300
        assert refused == []
    finally:
        await store.connection.close()
    # Without the bound (above the pool's 100) the same burst meets the pool's refusals.
    unbounded = store_on(falkordb_server.port, max_in_flight=1000)
    try:
        counts, refused = await burst(unbounded, 300)
        assert counts == [20000] * 300  # served in the end, by the retries
        assert refused
    finally:
        await unbounded.connection.close()


async def test_no_more_than_the_bound_are_sent_at_once(falkordb_server):
    store = store_on(falkordb_server.port, max_in_flight=3)
    sending, most = 0, 0
    send = store.connection._send

    async def counted(*args, **kwargs):
        nonlocal sending, most
        sending += 1
        most = max(most, sending)
        try:
            return await send(*args, **kwargs)
        finally:
            sending -= 1

    store.connection._send = counted
    try:
        counts, refused = await burst(store, 30)
        assert counts == [20000] * 30 and not refused
        assert most == 3
    finally:
        await store.connection.close()


async def test_first_queries_arriving_together_build_one_client(falkordb_server):
    store = store_on(falkordb_server.port)
    connection = store.connection
    built = []
    connect = connection._connect

    def counted():
        built.append(1)
        return connect()

    connection._connect = counted  # type: ignore[method-assign]
    try:
        results = await asyncio.gather(*(connection.query("RETURN 1") for _ in range(20)))
        assert [r.result_set[0][0] for r in results] == [1] * 20
        assert len(built) == 1  # one client and one pool, whatever the order they arrived in
    finally:
        await connection.close()
