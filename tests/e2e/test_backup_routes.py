"""Backup and restore through the gateway (gateway/routes/backups.py): a
backup of one stack, restored into a second, fresh stack (its own graph,
event stream and vector index), answers 50 recall queries, gets by id and
graph neighbours as the first did; the routes' refusals (a tenant that holds
memories without merge, a damaged archive, a non-admin)."""

from __future__ import annotations

import asyncio
import gzip
import json
import uuid
from contextlib import asynccontextmanager

import httpx
import pytest

from gateway.app import create_app
from services.core.grpc.server import start
from tests.conftest import plane_of
from tests.e2e.conftest import API_TOKEN, BUILDERS, connect, serving
from tests.waiting import wait_for

pytestmark = pytest.mark.e2e

ADMIN = "admin-secret"
AS_ADMIN = {"X-Admin-Token": ADMIN}
TOPICS = ["database", "deploy", "testing", "frontend", "security", "billing", "search", "mobile", "logging", "cache"]
QUERIES = [f"{topic} {word}" for topic in TOPICS for word in ("decision", "problem", "team", "choice", "rule")]


@pytest.fixture
def stack_settings(settings):
    return settings.override({"enrichment_enabled": True, "admin_api_token": ADMIN})


@asynccontextmanager
async def second_stack(settings, tmp_path):
    """A fresh stack on the same servers: its own graph, stream, subjects and data directory."""
    unique = uuid.uuid4().hex[:8]
    fresh = settings.override(
        {
            "falkordb_graph": f"fresh_{unique}",
            "nats_stream": f"FRESH_{unique}",
            "nats_subject_prefix": f"f{unique}.events",
            "memgrid_data_dir": tmp_path / "fresh-data",
        }
    )
    services = {}
    try:
        for name, build in BUILDERS.items():
            services[name] = await start(
                name, build(fresh), host="127.0.0.1", port=0, grace_seconds=1.0, plane=plane_of(fresh)
            )
        app = create_app(fresh, API_TOKEN, connect(services, fresh))
        headers = {"Authorization": f"Bearer {API_TOKEN}"}
        async with serving(app) as url, httpx.AsyncClient(base_url=url, headers=headers, timeout=60) as client:
            yield client
    finally:
        for service in services.values():
            await service.stop()


async def seed(client) -> list[str]:
    """30 memories over ten topics, some superseded, one expired, a few linked; all embedded."""
    ids = []
    for n, topic in enumerate(TOPICS):
        for k, kind in enumerate(("Decision", "Pattern", "Context")):
            reply = await client.post(
                "/memory",
                json={
                    "content": f"The {topic} team made {kind.lower()} number {n}-{k} about {topic} for the project",
                    "type": kind,
                    "tags": [topic, f"k{k}"],
                    "importance": round(0.3 + 0.05 * k + 0.01 * n, 2),
                },
            )
            assert reply.status_code == 201, reply.text
            ids.append(reply.json()["memory_id"])
    for n in range(0, 30, 7):  # supersessions: the old one must stay superseded after the restore
        reply = await client.post(
            "/memory",
            json={"content": f"Replacement {n}: the newer rule for {TOPICS[n // 3]}", "supersedes_memory_id": ids[n]},
        )
        assert reply.status_code == 201, reply.text
        ids.append(reply.json()["memory_id"])
    expired = await client.post(
        "/memory", json={"content": "The cache rule that expired", "t_invalid": "2024-01-01T00:00:00+00:00"}
    )
    ids.append(expired.json()["memory_id"])
    for a, b in zip(ids[1:20:3], ids[2:21:3], strict=True):
        assert (
            await client.post("/associate", json={"memory1_id": a, "memory2_id": b, "type": "RELATES_TO"})
        ).status_code == 201

    async def all_embedded():
        status = (await client.get("/enrichment/status")).json()
        return status if status["pending"] == 0 else None

    await wait_for(all_embedded, within=60)
    return ids


async def answers(client, ids: list[str]) -> dict:
    """What the fixed queries, gets by id and neighbour walks answer (ids, states, fields; no timings)."""
    found = {}
    for query in QUERIES:
        body = (await client.get("/recall", params={"query": query, "limit": 5})).json()
        found[query] = [(r["id"], r["memory"].get("state")) for r in body["results"]]
    for memory_id in ids:
        memory = (await client.get(f"/memory/{memory_id}", params={"state_mode": "history"})).json()["memory"]
        found[memory_id] = {
            k: memory.get(k) for k in ("content", "type", "tags", "state", "t_invalid", "superseded_at", "version")
        }
        neighbours = (await client.get(f"/graph/neighbors/{memory_id}", params={"state_mode": "history"})).json()
        found[f"n:{memory_id}"] = sorted(n["id"] for n in neighbours["graph_neighbors"])
    return found


async def test_a_backup_restored_into_a_fresh_stack_answers_the_same(client, stack_settings, tmp_path):
    ids = await seed(client)
    made = await client.post("/backup", headers=AS_ADMIN)
    assert made.status_code == 200, made.text
    name = made.json()["name"]
    listed = (await client.get("/backups", headers=AS_ADMIN)).json()["backups"]
    assert listed[0]["name"] == name and listed[0]["nodes"]["Memory"] == len(ids) and listed[0]["sha256"]
    download = await client.get(f"/backup/{name}", headers=AS_ADMIN)
    assert download.status_code == 200 and download.headers["content-type"] == "application/gzip"
    archive = download.content
    assert json.loads(gzip.decompress(archive).splitlines()[0])["format"] == "memgrid-backup"
    before = await answers(client, ids)
    assert sum(1 for q in QUERIES if before[q]) >= 45  # the queries find something

    async with second_stack(stack_settings, tmp_path) as fresh:
        restored = await fresh.post(
            "/restore", content=archive, headers={**AS_ADMIN, "Content-Type": "application/gzip"}
        )
        assert restored.status_code == 200, restored.text
        body = restored.json()
        assert body["nodes"] == sum(listed[0]["nodes"].values()) and body["edges"] == sum(listed[0]["edges"].values())
        [tenant] = body["tenants"]
        assert tenant == {"tenant": "default", "memories": len(ids), "indexed": len(ids), "reembedding": 0}
        assert body["backup"]["sha256"] == listed[0]["sha256"]
        assert await answers(fresh, ids) == before
        # The same archive again: the tenant now holds memories.
        again = await fresh.post("/restore", content=archive, headers={**AS_ADMIN, "Content-Type": "application/gzip"})
        assert again.status_code == 409 and again.json()["reason"] == "TENANT_NOT_EMPTY", again.text
        merged = await fresh.post(
            "/restore",
            params={"merge": "true"},
            content=archive,
            headers={**AS_ADMIN, "Content-Type": "application/gzip"},
        )
        assert merged.status_code == 200 and merged.json()["created"] == 0, merged.text
        assert await answers(fresh, ids) == before


async def test_restore_refusals(client):
    await client.post("/memory", json={"content": "A memory so the tenant is not empty"})
    name = (await client.post("/backup", headers=AS_ADMIN)).json()["name"]
    # A listed backup into the tenant it came from: it holds memories.
    refused = await client.post("/restore", json={"name": name}, headers=AS_ADMIN)
    assert refused.status_code == 409 and refused.json()["reason"] == "TENANT_NOT_EMPTY"
    assert "merge" in refused.json()["message"]
    kept = await client.post("/restore", json={"name": name, "merge": True}, headers=AS_ADMIN)
    assert kept.status_code == 200 and kept.json()["created"] == 0 and kept.json()["kept"] >= 1, kept.text
    # A damaged archive, uploaded: refused naming the problem.
    archive = (await client.get(f"/backup/{name}", headers=AS_ADMIN)).content
    for damaged, reasons in (
        (archive[: len(archive) // 2], {"ARCHIVE_TRUNCATED", "ARCHIVE_CORRUPT"}),
        (b"not gzip at all", {"ARCHIVE_CORRUPT"}),
    ):
        reply = await client.post("/restore", content=damaged, headers={**AS_ADMIN, "Content-Type": "application/gzip"})
        assert reply.status_code == 400 and reply.json()["reason"] in reasons, reply.text
        assert "archive" in reply.json()["message"]
    missing = await client.post("/restore", json={"name": "default-20200101T000000000000Z.jsonl.gz"}, headers=AS_ADMIN)
    assert missing.status_code == 404 and missing.json()["reason"] == "BACKUP_NOT_FOUND"
    for bad in ({"name": "../../etc/passwd"}, {}, {"name": name, "merge": "yes"}):
        assert (await client.post("/restore", json=bad, headers=AS_ADMIN)).status_code == 400, bad
    assert (await client.get("/backup/..%2F..%2Fapi_token", headers=AS_ADMIN)).status_code in (400, 404)
    # Admin only, every route.
    for method, path in (("GET", "/backups"), ("GET", f"/backup/{name}"), ("POST", "/restore")):
        assert (await client.request(method, path)).status_code == 403, path
    await asyncio.sleep(0)
