"""A write whose ingest replica stored it and then died before it replied is
retried by the gateway's channel on the other replica, and stored once: the
gateway gave it an idempotency key, so the retry replays the first result.

The dying replica is a relay in front of a real ingest: it passes the call
on (the memory is stored), then answers UNAVAILABLE, as a connection lost
with a killed process does. The other replica is a second real ingest on the
same graph; the gateway dials both in one list address."""

from __future__ import annotations

from collections import Counter

import grpc
import httpx
import pytest
from falkordb import FalkorDB
from grpc_health.v1 import health, health_pb2, health_pb2_grpc

from gateway.app import create_app
from gateway.clients import ServiceClients
from services.core.grpc.server import start
from services.ingest.bootstrap import build_app as build_ingest
from tests.conftest import plane_of
from tests.e2e.conftest import API_TOKEN, serving

pytestmark = pytest.mark.e2e

INGEST = "memgrid.v1.IngestService"
AUTH = {"Authorization": f"Bearer {API_TOKEN}"}


class DyingReplica:
    """Passes every ingest call to `upstream`, then loses the reply (UNAVAILABLE)."""

    def __init__(self, upstream_port: int):
        self.upstream = grpc.aio.insecure_channel(f"127.0.0.1:{upstream_port}")
        self.passed: Counter[str] = Counter()

    async def start(self) -> int:
        self.server = grpc.aio.server()
        checks = health.aio.HealthServicer()
        health_pb2_grpc.add_HealthServicer_to_server(checks, self.server)

        def relay(method: str):
            async def passed_on(request: bytes, context) -> bytes:
                await self.upstream.unary_unary(method)(request, metadata=context.invocation_metadata(), timeout=10)
                self.passed[method.rsplit("/", 1)[-1]] += 1
                await context.abort(grpc.StatusCode.UNAVAILABLE, "the replica died before it replied")

            return grpc.unary_unary_rpc_method_handler(passed_on)

        class Everything(grpc.GenericRpcHandler):
            def service(self, details):
                return relay(details.method) if details.method.startswith(f"/{INGEST}/") else None

        self.server.add_generic_rpc_handlers((Everything(),))
        port = self.server.add_insecure_port("127.0.0.1:0")
        await self.server.start()
        await checks.set(INGEST, health_pb2.HealthCheckResponse.SERVING)
        return port

    async def stop(self) -> None:
        await self.server.stop(0)
        await self.upstream.close()


@pytest.fixture
async def two_ingests(stack_settings, stack_services):
    """The stack's ingest behind a dying relay, and a second ingest on the same graph."""
    second = await start(
        "ingest",
        build_ingest(stack_settings),
        host="127.0.0.1",
        port=0,
        grace_seconds=1.0,
        plane=plane_of(stack_settings),
    )
    dying = DyingReplica(stack_services["ingest"].port)
    port = await dying.start()
    try:
        yield dying, f"127.0.0.1:{port},127.0.0.1:{second.port}"
    finally:
        await dying.stop()
        await second.stop()


def stored(settings, tag: str) -> Counter[str]:
    """How many Memory nodes hold each content, for the memories tagged `tag`."""
    graph = FalkorDB(host="127.0.0.1", port=settings.graph.falkordb_port).select_graph(settings.graph.falkordb_graph)
    rows = graph.ro_query("MATCH (m:Memory) WHERE $tag IN m.tags RETURN m.content", {"tag": tag}).result_set
    return Counter(row[0] for row in rows)


async def test_a_write_whose_replica_died_after_storing_it_is_stored_once(stack_settings, stack_services, two_ingests):
    dying, ingest_address = two_ingests
    targets = {name: f"127.0.0.1:{s.port}" for name, s in stack_services.items()} | {"ingest": ingest_address}
    clients = ServiceClients.connect(targets, plane_of(stack_settings))
    async with (
        serving(create_app(stack_settings, API_TOKEN, clients)) as url,
        httpx.AsyncClient(base_url=url, headers=AUTH, timeout=30) as client,
    ):
        replies = [
            await client.post("/memory", json={"content": f"replica retry {n}", "tags": ["retry"]}) for n in range(12)
        ]
        batch = await client.post(
            "/memory/batch",
            json={"memories": [{"content": f"replica batch {n}", "tags": ["retry"]} for n in range(3)]},
        )
    assert [r.status_code for r in replies] == [201] * 12, [r.text for r in replies if r.status_code != 201]
    assert batch.status_code == 201, batch.text
    # The relay stored some writes and lost their replies: those were retried on the other replica.
    assert dying.passed["CreateMemory"] > 0, dying.passed
    # None answered as a replay of the client's key: the client sent none, and sent each write once.
    assert not [r for r in replies if "idempotent-replayed" in r.headers]
    contents = stored(stack_settings, "retry")
    expected = {f"replica retry {n}" for n in range(12)} | {f"replica batch {n}" for n in range(3)}
    assert set(contents) == expected
    assert set(contents.values()) == {1}, {c: n for c, n in contents.items() if n > 1}
    # Each reply names the memory stored, whichever attempt stored it.
    assert {r.json()["memory_id"] for r in replies} == set(await ids_of(stack_settings, "replica retry"))


async def ids_of(settings, prefix: str) -> list[str]:
    graph = FalkorDB(host="127.0.0.1", port=settings.graph.falkordb_port).select_graph(settings.graph.falkordb_graph)
    query = "MATCH (m:Memory) WHERE m.content STARTS WITH $p RETURN m.id"
    return [row[0] for row in graph.ro_query(query, {"p": prefix}).result_set]
