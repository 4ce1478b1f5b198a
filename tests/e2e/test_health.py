"""GET /health tells a probe what is up, and only an admin where it runs:
hosts, ports, URLs (a NATS URL may hold a password) and error strings are
details an admin sees."""

from __future__ import annotations

import httpx
import pytest

from tests.e2e.conftest import API_TOKEN
from tests.waiting import wait_for

pytestmark = pytest.mark.e2e

ADMIN_TOKEN = "health-admin-token"


@pytest.fixture
def stack_settings(stack_settings):
    return stack_settings.override({"admin_api_token": ADMIN_TOKEN})


def places(settings) -> list[str]:
    """Every string that says where a store runs (a bare port number could
    turn up by chance in a timestamp's digits, so ports go with their host)."""
    return [
        settings.bus.nats_url,
        settings.bus.nats_url.split("://", 1)[1],
        f"{settings.graph.falkordb_host}:{settings.graph.falkordb_port}",
        settings.graph.falkordb_host,
    ]


async def test_anyone_but_an_admin_sees_statuses_only(gateway_url, stack_settings):
    async with httpx.AsyncClient(base_url=gateway_url) as c:
        anonymous = await c.get("/health")
        caller = await c.get("/health", headers={"Authorization": f"Bearer {API_TOKEN}"})
        wrong_admin = await c.get("/health", headers={"Authorization": f"Bearer {API_TOKEN}", "X-Admin-Token": "no"})
        admin_header_alone = await c.get("/health", headers={"X-Admin-Token": ADMIN_TOKEN})
        admin = await c.get("/health", headers={"Authorization": f"Bearer {API_TOKEN}", "X-Admin-Token": ADMIN_TOKEN})
    for reply in (anonymous, caller, wrong_admin, admin_header_alone):
        assert reply.status_code == 200, reply.text
        body = reply.json()
        assert body["falkordb"] == body["nats"] == body["qdrant"] == "connected"
        assert body["services"]["recall"] == "SERVING"
        for where in places(stack_settings):
            assert where not in reply.text, (where, reply.text)
        for name, component in body["components"].items():
            assert "detail" not in component and component["status"] == "connected", name
        assert body["vector_index"]["dimension"] == stack_settings.vectors.vector_size  # figures stay
    assert caller.json()["memory_count"] == 0
    details = admin.json()["components"]
    assert f"{stack_settings.graph.falkordb_host}:{stack_settings.graph.falkordb_port}" in details["falkordb"]["detail"]
    assert stack_settings.bus.nats_url in details["nats"]["detail"]
    assert details["vector_index"]["detail"]


async def test_a_degraded_health_names_no_error_to_a_stranger(gateway_url, stack_services):
    await stack_services["recall"].stop()
    async with httpx.AsyncClient(base_url=gateway_url) as c:
        anonymous = await c.get("/health")
        admin = await c.get("/health", headers={"Authorization": f"Bearer {API_TOKEN}", "X-Admin-Token": ADMIN_TOKEN})
    assert anonymous.status_code == admin.status_code == 503
    assert anonymous.json()["services"]["recall"] == "UNAVAILABLE"
    assert all(set(c) == {"status"} for c in anonymous.json()["components"].values()), anonymous.text
    assert "recall unavailable" in admin.json()["components"]["falkordb"]["detail"]


async def test_the_vector_index_reports_its_lag_and_last_check(anonymous):
    """Recall's convergence check runs at start-up; /health shows what it found."""

    async def checked():
        index = (await anonymous.get("/health")).json()["vector_index"]
        return index if index.get("last_check", 0) > 0 else None

    index = await wait_for(checked)
    assert index["lag"] == 0 and index["checking"] in (0, 1)
    assert {"repaired_tenants", "repaired_points"} <= set(index)


async def test_health_has_the_figures_automem_s_client_reports(client, stack_settings):
    """vector_count, sync_status and vector_dimensions, as AutoMem answers them
    (its MCP client's check_health passes them on)."""
    body = (await client.get("/health")).json()
    assert (body["memory_count"], body["vector_count"], body["sync_status"]) == (0, 0, "synced")
    size = stack_settings.vectors.vector_size
    assert body["vector_dimensions"] == {"configured": size, "effective": size, "collection": size, "mismatch": False}
    reply = await client.post("/memory", json={"content": "no vector yet"})  # enrichment is off: never embedded
    assert reply.status_code == 201, reply.text
    body = (await client.get("/health")).json()
    assert (body["memory_count"], body["vector_count"], body["sync_status"]) == (1, 0, "drift_detected")
