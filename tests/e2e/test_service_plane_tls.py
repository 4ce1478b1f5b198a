"""The whole stack with the service plane on mutual TLS: the gateway dials
the four services over TLS with its client certificate, and enrich reaches
recall for neighbours the same way; plaintext reaches none of them."""

from __future__ import annotations

import grpc
import httpx
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc

from devstack.servers import free_port
from gateway.app import create_app
from services.core.grpc.server import start
from services.core.settings import SERVICE_NAMES
from tests.conftest import plane_of
from tests.e2e.conftest import API_TOKEN, BUILDERS, connect, serving
from tests.integration.test_service_plane import self_signed
from tests.waiting import wait_for

pytestmark = pytest.mark.e2e


@pytest.fixture
def stack_settings(settings, tmp_path):
    cert, key = self_signed(tmp_path, "plane")
    return settings.override(
        {
            "grpc_tls_cert_file": cert,
            "grpc_tls_key_file": key,
            "grpc_tls_ca_file": cert,
            "enrichment_similarity_threshold": 0.3,  # SIMILAR_TO links form readily
            # Fixed ports, so enrich dials recall (RECALL_ADDR's default) for SIMILAR_TO neighbours.
            **{f"{name}_grpc_port": free_port() for name in SERVICE_NAMES},
        }
    )


async def test_the_stack_serves_over_mutual_tls(stack_settings):
    services = {}
    try:
        for name, build in BUILDERS.items():
            services[name] = await start(
                name,
                build(stack_settings),
                host="127.0.0.1",
                port=stack_settings.plane.grpc_port(name),
                grace_seconds=1.0,
                plane=plane_of(stack_settings),
            )
        app = create_app(stack_settings, API_TOKEN, connect(services, stack_settings))
        headers = {"Authorization": f"Bearer {API_TOKEN}"}
        async with serving(app) as url, httpx.AsyncClient(base_url=url, headers=headers, timeout=20) as client:
            health = await client.get("/health")
            assert health.status_code == 200 and set(health.json()["services"].values()) == {"SERVING"}
            first = (await client.post("/memory", json={"content": "TLS plane: Postgres runs the ledger"})).json()
            second = (await client.post("/memory", json={"content": "TLS plane: Postgres runs the ledger too"})).json()
            got = await client.get(f"/memory/{first['memory_id']}")
            assert got.status_code == 200 and got.json()["memory"]["content"].startswith("TLS plane")

            async def similar_linked():
                relations = (await client.get(f"/memory/{second['memory_id']}")).json()["memory"]["relations"]
                return any(r["type"] == "SIMILAR_TO" for r in relations)

            await wait_for(similar_linked, within=30)  # enrich found the neighbour through recall, over TLS
        for name in SERVICE_NAMES:
            async with grpc.aio.insecure_channel(f"127.0.0.1:{services[name].port}") as plain:
                with pytest.raises(grpc.aio.AioRpcError):
                    await health_pb2_grpc.HealthStub(plain).Check(health_pb2.HealthCheckRequest(), timeout=3)
    finally:
        for service in services.values():
            await service.stop()
