"""POST /memory then GET /memory/{id} through the gateway and the services."""

from __future__ import annotations

import random
from datetime import datetime

import httpx
import pytest

from tests.e2e.conftest import API_TOKEN

pytestmark = pytest.mark.e2e


def same_instant(a: str, b: str) -> bool:
    return datetime.fromisoformat(a.replace("Z", "+00:00")) == datetime.fromisoformat(b)


async def test_every_field_sent_comes_back(client, settings):
    rng = random.Random(7)
    embedding = [round(rng.uniform(-1, 1), 4) for _ in range(settings.vectors.vector_size)]
    sent = {
        "content": "Chose PostgreSQL over MongoDB. Need ACID guarantees for transactions.",
        "type": "Decision",
        "confidence": 0.85,
        "importance": 0.9,
        "tags": ["project-alpha", "Database", "team:core/backend"],
        "metadata": {"files_modified": ["db/config.py"], "count": 3, "ratio": 1.5, "nested": {"ok": True}},
        "timestamp": "2025-01-15T10:30:00Z",
        "t_valid": "2025-01-16T00:00:00+02:00",
        "t_invalid": "2030-01-01T00:00:00Z",
        "updated_at": "2025-01-17T08:00:00.250000Z",
        "last_accessed": "2025-01-18T09:00:00Z",
        "embedding": embedding,
        "id": "client-chosen-id-is-ignored",
    }
    created = await client.post("/memory", json=sent)
    assert created.status_code == 201, created.text
    body = created.json()
    assert body["status"] == "success" and body["memory_id"] != sent["id"]
    assert body["type"] == "Decision" and body["confidence"] == 0.85
    assert body["metadata"] == sent["metadata"]
    assert body["timestamp"] == "2025-01-15T10:30:00+00:00"
    for key in (
        "stored_at",
        "qdrant",
        "embedding_status",
        "enrichment",
        "updated_at",
        "last_accessed",
        "query_time_ms",
    ):
        assert key in body

    fetched = await client.get(f"/memory/{body['memory_id']}")
    assert fetched.status_code == 200, fetched.text
    memory = fetched.json()["memory"]
    for key in ("content", "type", "confidence", "importance", "tags", "metadata", "embedding"):
        assert memory[key] == sent[key], key
    for key in ("timestamp", "t_valid", "t_invalid", "updated_at"):
        assert same_instant(sent[key], memory[key]), key
        assert memory[key].endswith("+00:00")
    assert memory["t_valid"] == "2025-01-15T22:00:00+00:00"
    assert memory["tag_prefixes"] == ["project-alpha", "database", "team", "team:core", "team:core/backend"]
    assert memory["id"] == body["memory_id"] and memory["relations"] == []
    # Reading is an access: last_accessed moves to now, past what was sent.
    assert datetime.fromisoformat(memory["last_accessed"]) > datetime.fromisoformat("2025-01-18T09:00:00+00:00")


async def test_defaults_follow_the_spec(client):
    created = (await client.post("/memory", json={"content": "plain note"})).json()
    memory = (await client.get(f"/memory/{created['memory_id']}")).json()["memory"]
    assert memory["type"] == "Memory" and memory["confidence"] == 0.3
    assert memory["importance"] == 0.5 and memory["tags"] == [] and memory["metadata"] == {}
    assert memory["t_valid"] == memory["timestamp"] == memory["updated_at"]
    assert memory["t_invalid"] is None and memory["embedding"] is None


@pytest.mark.parametrize(
    "headers, params",
    [
        ({"Authorization": f"Bearer {API_TOKEN}"}, {}),
        ({"X-API-Key": API_TOKEN}, {}),
        ({}, {"api_key": API_TOKEN}),
    ],
)
async def test_each_auth_form_is_accepted(anonymous, headers, params):
    reply = await anonymous.post("/memory", json={"content": "auth"}, headers=headers, params=params)
    assert reply.status_code == 201, reply.text


async def test_missing_or_wrong_token_is_401_in_the_envelope(anonymous):
    for headers in ({}, {"Authorization": "Bearer wrong"}, {"X-API-Key": "wrong"}):
        reply = await anonymous.get("/memory/anything", headers=headers)
        assert reply.status_code == 401
        assert reply.json()["status"] == "error" and reply.json()["code"] == 401


@pytest.mark.parametrize(
    "payload, field",
    [
        ({"content": "x" * 2001}, "content"),
        ({}, "content"),
        ({"content": "ok", "importance": 1.5}, "importance"),
        ({"content": "ok", "importance": "high"}, "importance"),
        ({"content": "ok", "tags": 5}, "tags"),
        ({"content": "ok", "metadata": [1, 2]}, "metadata"),
        ({"content": "ok", "timestamp": "yesterday-ish"}, "timestamp"),
        ({"content": "ok", "embedding": [0.1, 0.2]}, "embedding"),
    ],
)
async def test_bad_input_is_400_naming_the_field(client, payload, field):
    reply = await client.post("/memory", json=payload)
    assert reply.status_code == 400, reply.text
    body = reply.json()
    assert body["status"] == "error" and body["code"] == 400
    assert field in body["message"]


async def test_malformed_bodies_and_unknown_routes_use_the_envelope(client):
    for content in (b"{not json", b"[1, 2]", b""):
        reply = await client.post("/memory", content=content, headers={"content-type": "application/json"})
        assert reply.status_code == 400 and reply.json()["status"] == "error"
    missing = await client.get("/memory/00000000-0000-0000-0000-000000000000")
    assert missing.status_code == 404 and missing.json()["code"] == 404
    assert (await client.get("/no/such/route")).json() == {
        "status": "error",
        "code": 404,
        "message": "no route for /no/such/route",
    }
    assert (await client.put("/memory")).status_code == 405


async def test_health_needs_no_auth_and_lists_everything(anonymous, client):
    await client.post("/memory", json={"content": "counted"})
    reply = await anonymous.get("/health")
    assert reply.status_code == 200, reply.text
    body = reply.json()
    assert body["status"] == "healthy"
    assert body["services"] == {"ingest": "SERVING", "recall": "SERVING", "enrich": "SERVING", "consolidate": "SERVING"}
    assert body["falkordb"] == body["nats"] == body["qdrant"] == "connected"
    assert body["memory_count"] == 1
    assert body["vector_index"]["dimension"] == 384


async def test_metrics_are_exposed_on_their_own_port_only(anonymous):
    from devstack.servers import free_port
    from services.core.observability import start_metrics_server

    assert (await anonymous.get("/metrics/")).status_code == 404  # the public port serves no metrics
    port = free_port()
    start_metrics_server(port, host="127.0.0.1")  # as gateway/main.py does on GATEWAY_METRICS_PORT
    async with httpx.AsyncClient() as scraper:
        reply = await scraper.get(f"http://127.0.0.1:{port}/metrics")
    assert reply.status_code == 200 and "memgrid_grpc_requests_total" in reply.text


async def test_health_is_503_and_names_the_service_that_is_down(anonymous, stack_services):
    assert (await anonymous.get("/health")).json()["services"]["enrich"] == "SERVING"
    await stack_services["enrich"].stop()
    reply = await anonymous.get("/health")
    assert reply.status_code == 503
    body = reply.json()
    assert body["status"] == "degraded" and body["services"]["enrich"] == "UNAVAILABLE"
    assert body["services"]["ingest"] == "SERVING" and body["falkordb"] == "connected"
