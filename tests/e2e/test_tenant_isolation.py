"""The isolation matrix: two tenants, A and B, on one stack with enrichment
running (placeholder embedder). B stores memories first (tags shared with A,
one with a known embedding, entities A mentions too); A then stores near
copies of them (the same content, the same embedding, the same entities) and
runs every route against B's memories. Nothing of B may leak into A's
answers, change, or disappear; afterwards B reads everything back as it was.

That events and vector payloads carry the tenant is covered by the NATS and
projection tests; this file looks only through the REST surface.
"""

from __future__ import annotations

import asyncio
import gzip
import hashlib
import json
import math

import httpx
import pytest

from devstack.servers import free_port
from services.core.grpc.server import start
from services.core.settings import SERVICE_NAMES
from tests.conftest import plane_of
from tests.e2e.conftest import BUILDERS
from tests.e2e.test_stream import Stream

pytestmark = pytest.mark.e2e

A_WRITE, A_ADMIN, B_WRITE = "tenant-a-write", "tenant-a-admin", "tenant-b-write"
#: Fields a read may change without anything having happened to the memory.
VOLATILE = ("last_accessed",)


@pytest.fixture
def stack_settings(settings, tmp_path):
    path = tmp_path / "tokens.json"
    entries = [(A_WRITE, "alpha", "write"), (A_ADMIN, "alpha", "admin"), (B_WRITE, "beta", "write")]
    path.write_text(
        json.dumps(
            [
                {"token_sha256": hashlib.sha256(token.encode()).hexdigest(), "tenant": tenant, "role": role}
                for token, tenant, role in entries
            ]
        )
    )
    return settings.override(
        {
            "enrichment_enabled": True,
            "memgrid_tokens_file": path,
            "enrichment_pattern_min_members": 2,  # patterns form from two memories, so both tenants get one
            "enrichment_similarity_threshold": 0.3,  # SIMILAR_TO links form readily
            "review_low_confidence_types": ["Decision"],  # a low-confidence Decision waits for review
            # Fixed ports, so enrich reaches recall for neighbours (SIMILAR_TO must stay within a tenant too).
            **{f"{name}_grpc_port": free_port() for name in SERVICE_NAMES},
        }
    )


@pytest.fixture
async def stack_services(stack_settings):
    """The four services on the ports the settings name (the shared fixture binds any free port)."""
    services = {}
    try:
        for name, build in BUILDERS.items():
            port = stack_settings.plane.grpc_port(name)
            services[name] = await start(
                name,
                build(stack_settings),
                host="127.0.0.1",
                port=port,
                grace_seconds=1.0,
                plane=plane_of(stack_settings),
            )
        yield services
    finally:
        for service in services.values():
            await service.stop()


@pytest.fixture
async def clients(gateway_url):
    opened = {
        token: httpx.AsyncClient(base_url=gateway_url, headers={"Authorization": f"Bearer {token}"}, timeout=20.0)
        for token in (A_WRITE, A_ADMIN, B_WRITE)
    }
    yield opened
    for client in opened.values():
        await client.aclose()


def known_embedding(size: int) -> list[float]:
    raw = [math.sin(i * 0.37) + 0.1 for i in range(size)]
    norm = math.sqrt(sum(v * v for v in raw))
    return [round(v / norm, 6) for v in raw]


async def wait_for(predicate, within: float = 30.0):
    for _ in range(int(within / 0.1)):
        if result := await predicate():
            return result
        await asyncio.sleep(0.1)
    raise AssertionError("condition not met in time")


async def store(client: httpx.AsyncClient, content: str, tags: list[str], **fields) -> str:
    reply = await client.post("/memory", json={"content": content, "type": "Context", "tags": tags, **fields})
    assert reply.status_code == 201, reply.text
    return reply.json()["memory_id"]


async def read(client: httpx.AsyncClient, memory_id: str) -> dict:
    reply = await client.get(f"/memory/{memory_id}", params={"state_mode": "history"})
    assert reply.status_code == 200, reply.text
    return reply.json()["memory"]


async def settled(client: httpx.AsyncClient, ids: list[str]) -> None:
    """Wait until each memory is enriched, embedded and found by its own
    tenant's vector search with its own embedding."""
    for memory_id in ids:

        async def ready(memory_id=memory_id):
            memory = await read(client, memory_id)
            if not (memory["enriched_at"] and memory["embedding"]):
                return False
            vector = ",".join(str(v) for v in memory["embedding"])
            params = {"embedding": vector, "limit": 100, "state_mode": "history", "diversity_factor": 0}
            results = (await client.get("/recall", params=params)).json()["results"]
            return any(memory_id in (r["id"], *r["deduped_from"]) for r in results)

        await wait_for(ready)


def snapshot(memory: dict) -> dict:
    return {k: v for k, v in memory.items() if k not in VOLATILE}


def ids_in(body: object) -> set[str]:
    """Every string anywhere in a JSON answer (ids, relations, dedupe lists...)."""
    if isinstance(body, dict):
        return set().union(*(ids_in(v) for v in body.values())) if body else set()
    if isinstance(body, list):
        return set().union(*(ids_in(v) for v in body)) if body else set()
    return {body} if isinstance(body, str) else set()


def assert_not_found(reply: httpx.Response, what: str) -> None:
    assert reply.status_code == 404, (what, reply.status_code, reply.text)
    assert reply.json()["status"] == "error" and reply.json()["code"] == 404, what


async def b_world(b: httpx.AsyncClient, vector: list[float]) -> dict[str, str]:
    world = {
        "postgres": await store(b, "Chose PostgreSQL over MongoDB for ACID transactions", ["shared", "b-only"]),
        "helm": await store(b, "We deploy with Helm charts on Kubernetes", ["shared"]),
        "helm2": await store(b, "Helm releases are pinned in Git", ["shared", "b-only"]),
        "secret": await store(b, "The staging password rotates weekly", ["b-secret"], embedding=vector),
    }
    linked = await b.post(
        "/associate", json={"memory1_id": world["postgres"], "memory2_id": world["helm"], "type": "RELATES_TO"}
    )
    assert linked.status_code == 201, linked.text
    return world


async def a_world(a: httpx.AsyncClient, vector: list[float]) -> dict[str, str]:
    return {
        "postgres": await store(a, "Chose PostgreSQL over MongoDB for ACID transactions", ["shared"]),
        "helm": await store(a, "Helm values live next to the charts", ["shared"]),
        "helm2": await store(a, "Helm upgrades run in CI with Kubernetes", ["a-only"]),
        "vector": await store(a, "A memory with tenant B's exact embedding", ["a-vec"], embedding=vector),
        "postgres2": await store(a, "We chose PostgreSQL over MongoDB for its ACID transactions", ["a-only"]),
    }


async def test_tenant_a_can_neither_see_nor_change_tenant_b(clients, stack_settings):
    a, admin, b = clients[A_WRITE], clients[A_ADMIN], clients[B_WRITE]
    vector = known_embedding(stack_settings.vectors.vector_size)
    bs = await b_world(b, vector)
    # B's memory for the stream check below: changed while A listens, compared with nothing.
    b_probe = await store(b, "Beta's probe for the event stream", ["b-probe"])
    await settled(b, [*bs.values(), b_probe])
    before = {key: snapshot(await read(b, memory_id)) for key, memory_id in bs.items()}
    b_ids = {*bs.values(), b_probe}
    assert all(m["tenant"] == "beta" for m in before.values())

    as_ = await a_world(a, vector)
    await settled(a, list(as_.values()))
    embedding = ",".join(str(v) for v in vector)

    async def linked_within_a():
        relations = (await read(a, as_["postgres"]))["relations"]
        return as_["postgres2"] in {r["memory_id"] for r in relations if r["type"] == "SIMILAR_TO"}

    await wait_for(linked_within_a)  # automatic links work here, so none to B below means none leaked

    # Reads by id: B's ids do not exist for A, in any state mode.
    for memory_id in b_ids:
        for mode in ("", "history"):
            assert_not_found(await a.get(f"/memory/{memory_id}", params={"state_mode": mode}), "GET /memory/{id}")
        assert_not_found(await a.get(f"/memories/{memory_id}/related"), "GET /memories/{id}/related")

    # Writes on B's ids: 404, and nothing changes.
    assert_not_found(await a.patch(f"/memory/{bs['postgres']}", json={"content": "hijacked"}), "PATCH")
    assert_not_found(await a.patch(f"/memory/{bs['helm']}", json={"tags": ["mine"], "importance": 1.0}), "PATCH")
    assert_not_found(await a.delete(f"/memory/{bs['helm2']}"), "DELETE /memory/{id}")
    replacement = {"content": "Replaced by A", "tags": ["supersede-attempt"], "supersedes_memory_id": bs["helm"]}
    assert_not_found(await a.post("/memory", json=replacement), "supersede")
    attempt = (await a.get("/memory/by-tag", params={"tags": "supersede-attempt"})).json()
    assert attempt["memories"] == [], "a refused supersede stored its replacement"

    # Associations across tenants or among B's memories: refused, no edge.
    for first, second in (
        (as_["postgres"], bs["postgres"]),
        (bs["postgres"], as_["postgres"]),
        (bs["helm"], bs["helm2"]),
    ):
        reply = await a.post("/associate", json={"memory1_id": first, "memory2_id": second, "type": "RELATES_TO"})
        assert_not_found(reply, "POST /associate")
    batch = [
        {"memory1_id": as_["helm"], "memory2_id": bs["helm"], "type": "RELATES_TO"},
        {"memory1_id": bs["helm2"], "memory2_id": bs["secret"], "type": "LEADS_TO"},
    ]
    reply = await a.post("/associate", json={"associations": batch})
    assert reply.status_code == 400 and reply.json()["created_count"] == 0, reply.text

    # Listings and ranked recall: none of B's ids anywhere in A's answers.
    reads = {
        "by-tag shared": a.get("/memory/by-tag", params={"tags": "shared", "limit": 200}),
        "by-tag shared history": a.get("/memory/by-tag", params={"tags": "shared", "state_mode": "history"}),
        "by-tag b-only": a.get("/memory/by-tag", params={"tags": "b-only,b-secret"}),
        "recall B's embedding": a.get("/recall", params={"embedding": embedding, "limit": 100}),
        "recall B's embedding, history": a.get(
            "/recall", params={"embedding": embedding, "limit": 100, "state_mode": "history"}
        ),
        "recall B's content": a.get(
            "/recall", params={"query": "Chose PostgreSQL over MongoDB for ACID transactions", "limit": 100}
        ),
        "recall B's secret": a.get("/recall", params={"query": "staging password rotates weekly", "limit": 100}),
        "recall B's tags": a.get("/recall", params={"tags": "b-only,b-secret", "limit": 100}),
        "recall expanded": a.get(
            "/recall",
            params={
                "query": "Helm Kubernetes charts",
                "expand_relations": "true",
                "expand_entities": "true",
                "limit": 100,
                "state_mode": "history",
            },
        ),
        "recall B's priority ids": a.get("/recall", params={"priority_ids": ",".join(b_ids), "query": "Helm"}),
        "recall multi-query": a.get("/recall", params={"queries": ["PostgreSQL", "Helm", "password"], "limit": 50}),
        "startup-recall": a.get("/startup-recall", params={"limit": 100}),
        "startup-recall shared": a.get("/startup-recall", params={"tags": "shared", "limit": 100}),
        **{f"related {key}": a.get(f"/memories/{memory_id}/related") for key, memory_id in as_.items()},
        **{f"get {key}": a.get(f"/memory/{memory_id}") for key, memory_id in as_.items()},
    }
    answers = dict(zip(reads, await asyncio.gather(*reads.values()), strict=True))
    for name, reply in answers.items():
        assert reply.status_code == 200, (name, reply.text)
        leaked = ids_in(reply.json()) & b_ids
        assert not leaked, (name, leaked)
    # ... and A's own memories are found, so the searches did run.
    by_tag = answers["by-tag shared"].json()["memories"]
    assert {m["id"] for m in by_tag} == {as_["postgres"], as_["helm"]}
    assert as_["vector"] in {r["id"] for r in answers["recall B's embedding"].json()["results"]}
    assert as_["postgres"] in {r["id"] for r in answers["recall B's content"].json()["results"]}

    # Reprocessing B's id as A's admin touches nothing of B.
    queued = await admin.post("/enrichment/reprocess", json={"ids": [as_["helm"], bs["helm"]]})
    assert queued.status_code == 202, queued.text

    async def forced():
        return (await read(a, as_["helm"]))["metadata"]["enrichment"].get("forced")

    await wait_for(forced)

    # The graph views and the analysis count and show A's memories only.
    a_ids, a_count = set(as_.values()), len(as_)
    assert_not_found(await a.get(f"/graph/neighbors/{bs['postgres']}"), "GET /graph/neighbors/{B id}")
    for key in ("postgres", "helm"):  # A's own neighbourhoods reach no B memory, however deep
        around = await a.get(f"/graph/neighbors/{as_[key]}", params={"depth": 3, "state_mode": "history"})
        assert around.status_code == 200 and not ids_in(around.json()) & b_ids, around.text
    snapshot_ = (await a.get("/graph/snapshot", params={"limit": 2000, "state_mode": "history"})).json()
    assert {n["id"] for n in snapshot_["nodes"]} == a_ids and snapshot_["stats"]["total_nodes"] == a_count
    assert not ids_in(snapshot_) & b_ids
    assert all(e["source"] in a_ids and e["target"] in a_ids for e in snapshot_["edges"]), snapshot_["edges"]
    stats = (await a.get("/graph/stats")).json()
    assert stats["totals"] == {"nodes": a_count, "edges": snapshot_["stats"]["total_edges"]}, stats
    assert sum(stats["by_type"].values()) == a_count
    b_stats = (await b.get("/graph/stats")).json()
    assert b_stats["totals"]["nodes"] == len(bs) + 1 and b_stats["by_relationship"].get("RELATES_TO") == 1, b_stats
    assert "RELATES_TO" not in stats["by_relationship"]  # B's one authored edge is not counted for A
    analysis = (await a.get("/analyze")).json()["analytics"]
    assert analysis["total_memories"] == a_count and not ids_in(analysis) & b_ids
    assert not {"b-only", "b-secret"} & set(analysis["tag_frequency"]), analysis["tag_frequency"]
    assert not any("password" in text for text in ids_in(analysis)), "B's content in A's analysis"

    # With both listening, A's stream carries A's events and none of B's (and B's none of A's).
    async with a.stream("GET", "/stream") as a_response, b.stream("GET", "/stream") as b_response:
        a_events, b_events = Stream(a_response), Stream(b_response)
        assert (await a_events.until(lambda name, data: name == "ready"))[-1][1]["tenant"] == "alpha"
        assert (await b_events.until(lambda name, data: name == "ready"))[-1][1]["tenant"] == "beta"
        # Changes that enrichment does not follow, so no edge of B's changes.
        assert (await b.patch(f"/memory/{b_probe}", json={"importance": 0.2})).status_code == 200
        assert (await a.patch(f"/memory/{as_['helm2']}", json={"importance": 0.2})).status_code == 200

        def updated(memory_id):
            return lambda name, data: name == "updated" and data["memory_id"] == memory_id

        def foreign(tenant: str, ids: set[str]):
            return lambda name, data: (
                isinstance(data, dict)
                and "memory_id" in data
                and (data["memory_id"] in ids or data["tenant"] != tenant)
            )

        a_seen, b_seen = await a_events.until(updated(as_["helm2"])), await b_events.until(updated(b_probe))
        for events, leaked in ((a_events, foreign("alpha", b_ids)), (b_events, foreign("beta", a_ids))):
            with pytest.raises(TimeoutError):  # a while longer, in case the other's event is merely late
                await events.until(leaked, within=1.5)
    assert not any(foreign("alpha", b_ids)(*item) for item in a_seen), a_seen
    assert not any(foreign("beta", a_ids)(*item) for item in b_seen), b_seen

    # The audit log: B's ids have no history for A, A's log and its filters hold
    # none of B's entries, and A's verify counts A's log only.
    for memory_id in b_ids:
        history_ = await a.get(f"/memory/{memory_id}/history")
        assert history_.status_code == 200 and history_.json()["entries"] == [], history_.text
    a_log = (await admin.get("/audit", params={"limit": 1000})).json()["entries"]
    assert a_log and not ids_in(a_log) & b_ids and as_["postgres"] in {e["memory_id"] for e in a_log}
    assert (await admin.get("/audit", params={"memory_id": bs["postgres"]})).json()["entries"] == []
    verdict = (await admin.post("/admin/audit/verify")).json()
    assert verdict["ok"] and verdict["last_seq"] >= len(a_log), verdict
    assert (await b.get("/audit")).status_code == 403  # a write token reads no log, its own tenant's neither
    b_history = (await b.get(f"/memory/{bs['postgres']}/history")).json()["entries"]
    b_kinds = [e["kind"] for e in b_history]  # with enrichment's entries (embedded, enriched) among them
    assert b_kinds[0] == "created" and "associated" in b_kinds and not ids_in(b_history) & a_ids
    # Enrichment's writes are its own: their actor is the service, not a token.
    assert {e["actor"] for e in b_history if e["kind"] in ("embedded", "enriched")} == {"system:enrich"}, b_history

    # Re-embedding B's ids as A's admin touches nothing of B (checked against `before` at the end).
    reembed = await admin.post("/admin/reembed", json={"ids": sorted(b_ids)})
    assert reembed.status_code == 202, reembed.text

    async def reembedded():
        progress = (await admin.get("/enrichment/status")).json()["stats"].get("reembed") or {}
        return not progress.get("running", True)

    await wait_for(reembedded)

    # A's backup holds A's graph and nothing of B's.
    backup = await admin.post("/backup")
    assert backup.status_code == 200 and backup.json()["memories"] == len(a_ids), backup.text
    download = await admin.get(f"/backup/{backup.json()['name']}")
    assert download.status_code == 200, download.text
    archive = gzip.decompress(download.content)
    document = [json.loads(line) for line in archive.splitlines()]
    assert not ids_in(document) & b_ids, "B's ids in A's backup"
    assert not any("password" in text for text in ids_in(document)), "B's content in A's backup"
    assert a_ids <= ids_in(document)

    # A's reindex drops and projects A's points only, and counts only A's memories
    # (B's vector search is checked at the end).
    reindexed = await admin.post("/admin/reindex", json={"batch_size": 2})
    assert reindexed.status_code == 200, reindexed.text
    assert (reindexed.json()["total"], reindexed.json()["indexed"]) == (len(a_ids), len(a_ids))

    # A's consolidation (every task, for real) runs over A's memories only, and
    # A's status shows A's runs only (B's records are checked against `before` at the end).
    consolidated = await a.post("/consolidate", json={"mode": "full", "dry_run": False})
    assert consolidated.status_code == 200, consolidated.text
    runs = consolidated.json()["runs"]
    assert {r["tenant"] for r in runs} == {"alpha"} and not ids_in(runs) & b_ids
    assert {r["task"]: r["counts"]["scanned"] for r in runs if r["task"] == "decay"} == {"decay": len(a_ids)}
    assert (await a.post("/consolidate", json={"every_tenant": True})).status_code == 403
    history = (await a.get("/consolidate/status")).json()["history"]
    assert history and {h["tenant"] for h in history} == {"alpha"}
    assert (await b.get("/consolidate/status")).json()["history"] == []

    # Bulk delete by a tag both tenants use: only A's go.
    deleted = await a.delete("/memory/by-tag", params={"tags": "shared"})
    assert deleted.status_code == 200 and deleted.json()["deleted_count"] == 2, deleted.text
    deleted = await a.delete("/memory/by-tag", params={"tags": "b-only,b-secret"})
    assert deleted.json()["deleted_count"] == 0

    # As B: everything is there and unchanged.
    for key, memory_id in bs.items():
        assert snapshot(await read(b, memory_id)) == before[key], key
    listed = (await b.get("/memory/by-tag", params={"tags": "shared"})).json()["memories"]
    assert {m["id"] for m in listed} == {bs["postgres"], bs["helm"], bs["helm2"]}
    found = (await b.get("/recall", params={"embedding": embedding, "limit": 10})).json()["results"]
    assert bs["secret"] in {r["id"] for r in found}
    assert as_["vector"] not in ids_in(found)
    related = (await b.get(f"/memories/{bs['postgres']}/related")).json()["related"]
    assert bs["helm"] in {r["id"] for r in related} and not ids_in(related) & set(as_.values())


async def test_tombstones_and_the_review_queue_stay_within_their_tenant(clients):
    """B's tombstones and B's memories under review are invisible to A's
    admin (listed nowhere, not removable, not decidable), and B's tombstone
    does not keep the same content out of A."""
    a, admin, b = clients[A_WRITE], clients[A_ADMIN], clients[B_WRITE]
    rejected = "Beta rejected this: the cache is flushed hourly"
    gone = await store(b, rejected, ["b-rejected"])
    deleted = await b.delete(f"/memory/{gone}", params={"reason": "rejected"})
    assert deleted.status_code == 200, deleted.text
    b_tombstone = deleted.json()["tombstone_id"]
    again = await b.post("/memory", json={"content": rejected})
    assert again.status_code == 409 and again.json()["details"]["tombstone_id"] == b_tombstone, again.text
    # REVIEW_LOW_CONFIDENCE_TYPES holds Decision (stack_settings): B's waits for review.
    pending = await store(b, "Beta might move to Rust", ["b-pending"], type="Decision", confidence=0.3)
    assert (await read(b, pending))["trust_state"] == "pending_review"

    listed = await admin.get("/admin/tombstones", params={"limit": 200})
    assert listed.status_code == 200 and b_tombstone not in ids_in(listed.json()), listed.text
    assert gone not in ids_in(listed.json())
    assert_not_found(await admin.delete(f"/admin/tombstones/{b_tombstone}"), "DELETE /admin/tombstones/{B id}")
    queue = await admin.get("/review", params={"limit": 200})
    assert queue.status_code == 200 and pending not in ids_in(queue.json()), queue.text
    for verdict in ("approve", "reject"):
        assert_not_found(await admin.post(f"/review/{pending}/{verdict}"), f"POST /review/{{B id}}/{verdict}")
    # A's own content is A's: B's tombstone keeps nothing out of A.
    assert (await a.post("/memory", json={"content": rejected})).status_code == 201
    # B's memory is still pending, and B's tombstone still there.
    assert (await read(b, pending))["trust_state"] == "pending_review"
    assert (await b.post("/memory", json={"content": rejected})).status_code == 409


async def test_nothing_in_a_request_chooses_the_tenant(clients):
    a, b = clients[A_WRITE], clients[B_WRITE]
    body = {"content": "Whose is this?", "tags": ["probe"], "tenant": "beta", "metadata": {"tenant": "beta"}}
    reply = await a.post(
        "/memory", json=body, params={"tenant": "beta"}, headers={"X-Memgrid-Tenant": "beta", "X-Tenant": "beta"}
    )
    assert reply.status_code == 201, reply.text
    memory_id = reply.json()["memory_id"]
    assert (await read(a, memory_id))["tenant"] == "alpha"
    assert_not_found(await b.get(f"/memory/{memory_id}"), "B reads A's probe")
    batch = {"memories": [{"content": "batch probe", "tags": ["probe"], "tenant": "beta"}], "tenant": "beta"}
    batch_reply = await a.post("/memory/batch", json=batch, headers={"X-Memgrid-Tenant": "beta"})
    assert batch_reply.status_code == 201
    [batch_id] = batch_reply.json()["memory_ids"]
    assert (await read(a, batch_id))["tenant"] == "alpha"
    patched = await a.patch(f"/memory/{memory_id}", json={"tenant": "beta", "importance": 0.9})
    assert patched.status_code == 200 and patched.json()["memory"]["tenant"] == "alpha"
    for params in ({"tags": "probe"}, {"tags": "probe", "tenant": "alpha"}):
        listed = (await b.get("/memory/by-tag", params=params, headers={"X-Memgrid-Tenant": "alpha"})).json()
        assert listed["memories"] == [], params


async def test_health_counts_the_callers_memories_and_tells_a_stranger_none(clients, gateway_url):
    a, admin, b = clients[A_WRITE], clients[A_ADMIN], clients[B_WRITE]
    await store(a, "Alpha keeps its runbooks in git", ["probe"])
    for n in range(2):
        await store(b, f"Beta keeps runbook {n} in a wiki", ["probe"])
    async with httpx.AsyncClient(base_url=gateway_url) as anonymous:
        stranger = (await anonymous.get("/health")).json()
    assert stranger["memory_count"] is None
    assert stranger["falkordb"] == "connected" and stranger["services"]["recall"] == "SERVING"
    for component in stranger["components"].values():
        assert not {"memories", "messages", "points"} & set(component), component
    assert (await a.get("/health")).json()["memory_count"] == 1
    assert (await b.get("/health")).json()["memory_count"] == 2
    # A tenant's admin is no operator: its own count, none of every tenant's figures
    # (tests/security/test_tenant_admin_boundary.py shows an operator's).
    own = (await admin.get("/health")).json()
    assert own["memory_count"] == 1
    for component in own["components"].values():
        assert not {"memories", "messages", "points"} & set(component), component
