"""The gateway counts every request by route template, method and status."""

from __future__ import annotations

import httpx
from prometheus_client import REGISTRY, generate_latest

from gateway.app import create_app
from services.core.settings import Settings

TOKEN = "unit-token"


def sample(name: str, **labels: str) -> float:
    return REGISTRY.get_sample_value(name, labels) or 0.0


async def test_requests_are_counted_by_route_template_and_status():
    app = create_app(Settings(_env_file=None), TOKEN)
    route = "/memory/{memory_id}"
    before = {
        "denied": sample("memgrid_gateway_requests_total", method="GET", route=route, status="401"),
        "unmatched": sample("memgrid_gateway_requests_total", method="GET", route="unmatched", status="404"),
        "timed": sample("memgrid_gateway_request_seconds_count", route=route),
    }
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://gateway") as client:
        for memory_id in ("a", "b", "c"):  # no token: each one a 401 from the route's auth
            assert (await client.get(f"/memory/{memory_id}")).status_code == 401
        assert (await client.get("/no/such/route")).status_code == 404
        # Not on the public app (its own port serves them: GATEWAY_METRICS_PORT, gateway/main.py).
        assert (await client.get("/metrics/")).status_code == 404  # unmatched too: 2 in all
    exposed = generate_latest(REGISTRY).decode()
    assert sample("memgrid_gateway_requests_total", method="GET", route=route, status="401") == before["denied"] + 3
    assert sample("memgrid_gateway_requests_total", method="GET", route="unmatched", status="404") == (
        before["unmatched"] + 2
    )
    assert sample("memgrid_gateway_request_seconds_count", route=route) == before["timed"] + 3
    assert 'memgrid_gateway_requests_total{method="GET",route="/memory/{memory_id}",status="401"}' in exposed
