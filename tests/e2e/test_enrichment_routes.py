"""GET /enrichment/status and POST /enrichment/reprocess through the gateway,
with enrichment running."""

from __future__ import annotations

import pytest

from tests.waiting import wait_for

pytestmark = pytest.mark.e2e

ADMIN = "admin-secret"


@pytest.fixture
def stack_settings(settings):
    return settings.override({"enrichment_enabled": True, "admin_api_token": ADMIN})


async def test_status_counts_what_was_enriched(client):
    before = (await client.get("/enrichment/status")).json()
    assert before["status"] == "running" and before["max_attempts"] == 3
    for key in ("queue_size", "pending", "inflight", "processed", "failed", "stats"):
        assert key in before
    memory_id = (await client.post("/memory", json={"content": "Runbooks live in Notion"})).json()["memory_id"]

    async def processed():
        status = (await client.get("/enrichment/status")).json()
        return status if status["processed"] > before["processed"] else None

    status = await wait_for(processed)
    assert status["failed"] == 0
    memory = (await client.get(f"/memory/{memory_id}")).json()["memory"]
    assert memory["enriched_at"] is not None and "entity:tools:notion" in memory["tags"]


async def test_reprocess_needs_the_admin_token_and_forces_a_run(client):
    memory_id = (
        await client.post("/memory", json={"content": "We deploy with Helm charts", "type": "Context"})
    ).json()["memory_id"]

    async def enriched():
        memory = (await client.get(f"/memory/{memory_id}")).json()["memory"]
        return memory if memory["enriched_at"] else None

    await wait_for(enriched)
    refused = await client.post("/enrichment/reprocess", json={"ids": [memory_id]})
    assert refused.status_code == 403 and refused.json()["status"] == "error"
    admin = {"X-Admin-Token": ADMIN}
    assert (await client.post("/enrichment/reprocess", json={}, headers=admin)).status_code == 400
    assert (await client.post("/enrichment/reprocess", json={"ids": ["nope"]}, headers=admin)).status_code == 400
    queued = await client.post("/enrichment/reprocess", json={"ids": [memory_id]}, headers=admin)
    assert queued.status_code == 202
    assert queued.json() == {"status": "queued", "count": 1, "ids": [memory_id]}

    async def forced():
        memory = (await client.get(f"/memory/{memory_id}")).json()["memory"]
        return memory if memory["metadata"]["enrichment"]["forced"] else None

    memory = await wait_for(forced)
    assert memory["tags"].count("entity:tools:helm") == 1


async def test_what_enrichment_derives_stays_out_of_the_clients_metadata(client):
    """metadata holds what the client sent plus the two keys reserved
    for enrichment (entities, enrichment); factuality is a field of its own,
    so a PATCH replacing metadata reads back exactly what it sent and keeps it."""
    sent = {"source": "slack", "ticket": 42}
    memory_id = (
        await client.post("/memory", json={"content": "We moved CI to GitHub Actions", "metadata": sent})
    ).json()["memory_id"]

    async def enriched():
        memory = (await client.get(f"/memory/{memory_id}")).json()["memory"]
        return memory if memory["enriched_at"] else None

    memory = await wait_for(enriched)
    assert memory["factuality"]["label"] in ("FACT", "UNVERIFIED", "FICTION")
    assert set(memory["factuality"]) == {"label", "confidence", "rationale"}
    assert memory["metadata"].keys() == {*sent, "entities", "enrichment"}
    assert {k: memory["metadata"][k] for k in sent} == sent
    replaced = {"source": "gmail", "nested": {"a": [1, "two"]}}
    assert (await client.patch(f"/memory/{memory_id}", json={"metadata": replaced})).status_code == 200
    after = (await client.get(f"/memory/{memory_id}")).json()["memory"]
    assert after["metadata"] == replaced  # a PATCH queues no enrichment: nothing is added back
    assert after["factuality"] == memory["factuality"]
