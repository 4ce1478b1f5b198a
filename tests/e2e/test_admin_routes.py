"""The admin routes through the gateway, with enrichment running: POST
/admin/reindex (recall), POST /admin/reembed (enrich), /backup (consolidate;
restores are in test_backup_routes.py).
Consolidation's routes have their own file (test_consolidation.py)."""

from __future__ import annotations

import asyncio
import base64
import gzip
import json
from array import array

import pytest

from tests.waiting import wait_for

pytestmark = pytest.mark.e2e

ADMIN = "admin-secret"
AS_ADMIN = {"X-Admin-Token": ADMIN}


@pytest.fixture
def stack_settings(settings):
    return settings.override({"enrichment_enabled": True, "admin_api_token": ADMIN})


async def store(client, content: str, **fields) -> str:
    reply = await client.post("/memory", json={"content": content, "type": "Context", **fields})
    assert reply.status_code == 201, reply.text
    return reply.json()["memory_id"]


async def enriched(client, memory_id: str, since: str | None = None) -> dict:
    """The memory once enrichment has run on it (after `since`, when given)."""

    async def read():
        memory = (await client.get(f"/memory/{memory_id}")).json()["memory"]
        last = (memory["metadata"].get("enrichment") or {}).get("last_run")
        return memory if memory["enriched_at"] and last and (since is None or last > since) else None

    return await wait_for(read)


async def test_admin_routes_need_the_admin_token(client, anonymous):
    for method, path in (("POST", "/admin/reindex"), ("POST", "/admin/reembed"), ("POST", "/backup"),
                         ("GET", "/backup")):  # fmt: skip
        refused = await client.request(method, path)
        assert refused.status_code == 403 and refused.json()["reason"] == "PERMISSION_DENIED", path
        assert (await anonymous.request(method, path, headers=AS_ADMIN)).status_code == 401


async def test_reindex_rebuilds_the_index_and_answers_the_final_figures(client):
    ids = [await store(client, f"Reindex check memory number {n}") for n in range(3)]
    for memory_id in ids:
        await enriched(client, memory_id)
    reply = await client.post("/admin/reindex", headers=AS_ADMIN)
    assert reply.status_code == 200, reply.text
    body = reply.json()
    assert set(body) == {"status", "indexed", "skipped", "total", "elapsed_seconds"}
    assert body["status"] == "complete" and (body["indexed"], body["skipped"], body["total"]) == (3, 0, 3)
    assert body["elapsed_seconds"] >= 0
    # The rebuilt index answers the vector arm.
    memory = (await client.get(f"/memory/{ids[0]}")).json()["memory"]
    vector = ",".join(str(v) for v in memory["embedding"])
    found = (await client.get("/recall", params={"embedding": vector, "limit": 3})).json()
    assert ids[0] in [r["id"] for r in found["results"]]
    batched = await client.post("/admin/reindex", json={"batch_size": 1}, headers=AS_ADMIN)
    assert batched.json()["indexed"] == 3
    bad = await client.post("/admin/reindex", json={"batch_size": "many"}, headers=AS_ADMIN)
    assert bad.status_code == 400 and bad.json()["status"] == "error"


async def test_reembed_queues_every_memory_of_the_tenant(client):
    ids = [await store(client, "Kubernetes runs the API"), await store(client, "Terraform manages the VPC")]
    first = {i: await enriched(client, i) for i in ids}
    # A plain reprocess keeps the vectors (no embedding model recorded for the run) ...
    runs = {i: m["metadata"]["enrichment"]["last_run"] for i, m in first.items()}
    assert (await client.post("/enrichment/reprocess", json={"ids": ids}, headers=AS_ADMIN)).status_code == 202
    again = {i: await enriched(client, i, since=runs[i]) for i in ids}
    assert all(m["metadata"]["enrichment"]["embedding_model"] is None for m in again.values())
    # ... a re-embed embeds every memory anew.
    runs = {i: m["metadata"]["enrichment"]["last_run"] for i, m in again.items()}
    reply = await client.post("/admin/reembed", headers=AS_ADMIN)
    assert reply.status_code == 202 and reply.json() == {"status": "queued", "count": 2}
    for memory_id in ids:
        memory = await enriched(client, memory_id, since=runs[memory_id])
        assert memory["metadata"]["enrichment"]["forced"] is True
        assert memory["metadata"]["enrichment"]["embedding_model"].startswith("placeholder")
        assert len(memory["embedding"]) == 384

    async def finished():
        stats = (await client.get("/enrichment/status")).json()["stats"]
        return stats if stats["reembed"] and not stats["reembed"]["running"] else None

    assert (await wait_for(finished))["reembed"] == {"queued": 2, "done": 2, "failed": 0, "running": False}
    one = await client.post("/admin/reembed", json={"ids": [ids[0]], "batch_size": 1}, headers=AS_ADMIN)
    assert one.status_code == 202 and one.json()["count"] == 1
    for bad in ({"ids": "not-an-id"}, {"ids": [1]}, {"batch_size": -1}, {"batch_size": "x"}):
        reply = await client.post("/admin/reembed", json=bad, headers=AS_ADMIN)
        assert reply.status_code in (400, 409) and reply.json()["status"] == "error", bad


async def test_backup_writes_the_tenants_graph_with_every_field(client, stack_settings):
    old = await store(client, "Deploys run on Jenkins", tags=["ci"], t_valid="2024-01-01T00:00:00+00:00")
    reply = await client.post(
        "/memory", json={"content": "Deploys run on GitHub Actions with Docker", "supersedes_memory_id": old}
    )
    new = reply.json()["memory_id"]
    await enriched(client, new)
    await enriched(client, old)
    reply = await client.post("/backup", headers=AS_ADMIN)
    assert reply.status_code == 200, reply.text
    body = reply.json()
    assert body["status"] == "success" and body["memories"] == 2 and body["scope"] == "tenant"
    assert "path" not in body  # the answer names no server path
    path = (stack_settings.process.memgrid_data_dir / "backups").resolve() / body["name"]
    assert path.name.startswith("default-") and path.name.endswith(".jsonl.gz")
    assert not list(path.parent.glob("*.partial"))
    lines = [json.loads(x) for x in gzip.decompress(await asyncio.to_thread(path.read_bytes)).splitlines()]
    assert lines[0]["format"] == "memgrid-backup" and lines[0]["tenant"] == "default" and "manifest" in lines[-1]
    nodes = {x["node"]: x for x in lines if "node" in x}
    memories = {n["properties"]["id"]: n["properties"] for n in nodes.values() if n["labels"] == ["Memory"]}
    assert set(memories) == {old, new}
    stored = (await client.get(f"/memory/{old}", params={"state_mode": "history"})).json()["memory"]
    record = memories[old]
    for name in ("content", "type", "confidence", "importance", "tags", "summary", "archived", "version"):
        assert record[name] == stored[name], name
    assert record["t_invalid"] and record["superseded_at"] and json.loads(record["metadata"]) == stored["metadata"]
    vector = array("f")
    vector.frombytes(base64.b64decode(record["embedding"]))
    assert len(vector) == 384 and vector.tolist() == pytest.approx(stored["embedding"], abs=1e-6)
    edges = {
        (
            nodes[e["from"]]["properties"].get("id"),
            e["edge"],
            nodes[e["to"]]["labels"][0],
            nodes[e["to"]]["properties"].get("id"),
        )
        for e in lines
        if "edge" in e
    }
    assert (old, "INVALIDATED_BY", "Memory", new) in edges
    assert body["relations"] == sum(1 for e in lines if "edge" in e) == sum(body["edges"].values())
    assert any(label == "Entity" for _, _, label, _ in edges)  # enrichment's MENTIONS of docker
    assert body["entities"] == body["nodes"]["Entity"] >= 1
    again = await client.get("/backup", headers=AS_ADMIN)
    assert again.status_code == 200 and again.json()["name"] != body["name"]
