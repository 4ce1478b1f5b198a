"""Resource abuse is refused cleanly and the service stays up: huge tags and
metadata (400 naming the field), a body over MAX_REQUEST_BYTES (413),
thousands of queries in one recall (400 naming `queries`), a crowd of SSE
streams (429 past RECALL_MAX_WATCHES_PER_TENANT, another tenant unaffected),
and a 256 MiB gRPC message (RESOURCE_EXHAUSTED, the service serving after).
Each case ends with a health check and an ordinary request that works."""

from __future__ import annotations

import contextlib

import grpc
import httpx
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc

from gateway.app import create_app
from memgrid.v1 import ingest_service_pb2, ingest_service_pb2_grpc, memory_pb2
from tests.conftest import signed
from tests.e2e.conftest import API_TOKEN, connect, serving

pytestmark = pytest.mark.e2e

AUTH = {"Authorization": f"Bearer {API_TOKEN}"}
PER_TENANT_STREAMS = 100


@pytest.fixture
def stack_settings(settings):
    return settings.override(
        {
            "enrichment_enabled": False,
            "recall_max_watches": 256,
            "recall_max_watches_per_tenant": PER_TENANT_STREAMS,
            "stream_keepalive_seconds": 1.0,
        }
    )


async def still_up(client: httpx.AsyncClient) -> None:
    """/health is healthy and an ordinary write and read work."""
    health = await client.get("/health")
    assert health.status_code == 200 and health.json()["status"] == "healthy", health.text
    stored = await client.post("/memory", json={"content": "still here", "tags": ["ok"]})
    assert stored.status_code in (200, 201), stored.text
    read = await client.get(f"/memory/{stored.json()['memory_id']}")
    assert read.status_code == 200, read.text


def refused(reply: httpx.Response, code: int, *names: str) -> None:
    assert reply.status_code == code, reply.text[:500]
    body = reply.json()
    assert body["status"] == "error" and body["code"] == code
    for name in names:
        assert name in body["message"], body["message"]


async def test_huge_tags_are_refused_naming_the_field(client):
    refused(await client.post("/memory", json={"content": "a", "tags": ["x" * 1_000_000]}), 400, "tags")
    refused(await client.post("/memory", json={"content": "a", "tags": [f"t{n}" for n in range(20_000)]}), 400, "tags")
    refused(await client.post("/memory", json={"content": "a", "tags": ["a:" * 5000 + "b"]}), 400, "tags")
    await still_up(client)


async def test_huge_metadata_is_refused_naming_the_field(client):
    blob = {"blob": "x" * (4 * 1024 * 1024)}
    refused(await client.post("/memory", json={"content": "a", "metadata": blob}), 400, "metadata")
    deep = {f"k{n}": {"v": n, "w": "y" * 100} for n in range(50_000)}
    refused(await client.post("/memory", json={"content": "a", "metadata": deep}), 400, "metadata")
    stored = await client.post("/memory", json={"content": "b"})
    memory_id = stored.json()["memory_id"]
    refused(await client.patch(f"/memory/{memory_id}", json={"metadata": blob}), 400, "metadata")
    await still_up(client)


async def test_a_body_over_the_request_limit_is_a_413(client, stack_settings):
    limit = stack_settings.gateway.max_request_bytes
    body = b'{"content": "' + b"x" * (limit + 1) + b'"}'
    refused(
        await client.post("/memory", content=body, headers={"Content-Type": "application/json"}),
        413,
        str(limit),
    )
    await still_up(client)


async def test_thousands_of_recall_queries_are_refused_naming_the_field(client, stack_settings):
    many = [("queries", f"q{n}") for n in range(3000)]
    refused(await client.get("/recall", params=many), 400, "queries", str(stack_settings.recall.recall_max_queries))
    one_long = " ".join(["word"] * 5000)
    refused(await client.get("/recall", params={"query": one_long}), 400, "query")
    await still_up(client)


async def test_a_crowd_of_streams_is_capped_per_tenant(gateway_url, stack_settings, stack_services):
    limits = httpx.Limits(max_connections=PER_TENANT_STREAMS + 10)
    other_settings = stack_settings.override({"default_tenant": "other"})
    other_app = create_app(other_settings, API_TOKEN, connect(stack_services, stack_settings))
    async with (
        httpx.AsyncClient(base_url=gateway_url, headers=AUTH, limits=limits, timeout=30) as client,
        serving(other_app) as other_url,
        httpx.AsyncClient(base_url=other_url, headers=AUTH) as other,
        contextlib.AsyncExitStack() as streams,
    ):
        for _ in range(PER_TENANT_STREAMS):
            response = await streams.enter_async_context(client.stream("GET", "/stream"))
            assert response.status_code == 200
        refused(await client.get("/stream"), 429, "RECALL_MAX_WATCHES_PER_TENANT")
        # Another tenant still gets a stream of its own.
        async with other.stream("GET", "/stream") as theirs:
            assert theirs.status_code == 200
        health = await client.get("/health")
        assert health.status_code == 200, health.text
        await streams.aclose()
        # The slots come back once the streams close.
        async with client.stream("GET", "/stream") as again:
            assert again.status_code == 200
        await still_up(client)


async def test_a_256_mib_grpc_message_is_refused_and_the_service_stays_up(client, stack_services):
    channel = grpc.aio.insecure_channel(f"127.0.0.1:{stack_services['ingest'].port}")
    try:
        ingest = ingest_service_pb2_grpc.IngestServiceStub(channel)
        huge = ingest_service_pb2.CreateMemoryRequest(memory=memory_pb2.MemoryDraft(content="x" * (256 * 1024 * 1024)))
        with pytest.raises(grpc.aio.AioRpcError) as error:
            await ingest.CreateMemory(huge, metadata=signed("default"), timeout=120)
        assert error.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
        del huge
        health = await health_pb2_grpc.HealthStub(channel).Check(health_pb2.HealthCheckRequest(service=""))
        assert health.status == health_pb2.HealthCheckResponse.SERVING
        small = ingest_service_pb2.CreateMemoryRequest(memory=memory_pb2.MemoryDraft(content="small"))
        assert (await ingest.CreateMemory(small, metadata=signed("default"))).memory.content == "small"
    finally:
        await channel.close()
    await still_up(client)
