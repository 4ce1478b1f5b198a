"""AutoMem's MCP client against memgrid: the requests it sends (extra body
fields, parameters the server ignores, recency_bias as a word, its
client-side supersede flow) are accepted, and the fields it reads are there
with the names and JSON types it expects."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

pytestmark = pytest.mark.e2e

NUMBER = (int, float)


def is_number(value) -> bool:
    return isinstance(value, NUMBER) and not isinstance(value, bool)


async def test_store_single_and_batch(client):
    # The client's single-store body: tags always, `id` when given (ignored), undefined fields dropped.
    reply = await client.post(
        "/memory",
        json={
            "content": "Chose PostgreSQL over MongoDB for ACID guarantees",
            "type": "Decision",
            "confidence": 0.9,
            "id": "client-chosen-id",
            "tags": ["db", "compat"],
            "importance": 0.9,
            "metadata": {"files_modified": ["db/config.py"]},
            "timestamp": "2025-01-15T10:30:00Z",
        },
    )
    assert reply.status_code == 201, reply.text
    memory_id = reply.json()["memory_id"]
    assert isinstance(memory_id, str) and memory_id != "client-chosen-id"

    batch = [
        {"content": "Redis caches sessions", "tags": ["compat"], "importance": 0.6, "type": "Context"},
        {"content": "Deploys go through Helm", "tags": ["compat"], "metadata": {"k": 1}, "confidence": 0.5},
    ]
    reply = await client.post("/memory/batch", json={"memories": batch})
    assert reply.status_code == 201, reply.text
    body = reply.json()
    assert isinstance(body["memory_ids"], list) and all(isinstance(i, str) for i in body["memory_ids"])
    assert body["stored"] == len(body["memory_ids"]) == 2 and isinstance(body["stored"], int)

    read = (await client.get(f"/memory/{memory_id}")).json()["memory"]  # fetchMemoryById reads .memory
    assert read["metadata"] == {"files_modified": ["db/config.py"]} and read["tags"] == ["db", "compat"]


async def supersede_as_the_client_does(client, old_id: str, content: str) -> str:
    """store_memory with supersedes_memory_id, as the MCP client runs it:
    GET the old one, POST the replacement, PATCH the old one, POST /associate."""
    old = (await client.get(f"/memory/{old_id}")).json()["memory"]
    new_id = (await client.post("/memory", json={"content": content, "tags": old["tags"]})).json()["memory_id"]
    patched = await client.patch(
        f"/memory/{old_id}",
        json={
            "t_invalid": datetime.now(UTC).isoformat().replace("+00:00", "Z"),
            "metadata": {**old["metadata"], "deprecated": True, "superseded_by": new_id},
        },
    )
    assert patched.status_code == 200 and patched.json()["memory_id"] == old_id, patched.text
    linked = await client.post(
        "/associate", json={"memory1_id": old_id, "memory2_id": new_id, "type": "INVALIDATED_BY", "strength": 0.9}
    )
    assert linked.status_code == 201 and linked.json()["status"] == "success", linked.text
    assert isinstance(linked.json()["message"], str)
    return new_id


async def test_recall_with_everything_the_client_sends(client):
    old_id = (
        await client.post(
            "/memory", json={"content": "The staging cluster runs Kubernetes 1.27 with Calico", "tags": ["k8s"]}
        )
    ).json()["memory_id"]
    new_id = await supersede_as_the_client_does(client, old_id, "The staging cluster runs Kubernetes 1.30")
    other = (await client.post("/memory", json={"content": "Kubernetes upgrades happen on Tuesdays"})).json()
    linked = await client.post(
        "/associate",
        json={"memory1_id": other["memory_id"], "memory2_id": new_id, "type": "RELATES_TO", "strength": 0.7},
    )
    assert linked.status_code == 201, linked.text

    params = [
        # Calico: the old memory ranks above its replacement, so its place shows the head (state_replaces);
        # were the head ranked first, the old one would merely be left out.
        ("query", "staging cluster Calico"),
        ("limit", "10"),
        ("tag_mode", "any"),
        ("tag_match", "prefix"),
        ("expand_relations", "false"),
        ("expand_respect_tags", "true"),
        ("expand_entities", "false"),
        ("auto_decompose", "false"),
        ("expansion_limit", "5"),
        ("relation_limit", "5"),
        ("expand_min_importance", "0"),
        ("expand_min_strength", "0"),
        ("current_only", "true"),
        ("state_debug", "false"),
        ("state_mode", "current"),
        ("recency_bias", "auto"),
        ("scope_fallback", "true"),
        ("min_score", "0"),
        ("adaptive_floor", "false"),
        ("context", "coding"),
        ("language", "python"),
        ("active_path", "src/app.py"),
        ("context_tags", "k8s"),
        ("context_types", "Context"),
        ("priority_ids", other["memory_id"]),
        ("per_query_limit", "5"),
        ("sort", "score"),
        ("format", "detailed"),
        ("offset", "0"),
    ]
    for recency in ("auto", "on", "off"):
        sent = [(k, recency if k == "recency_bias" else v) for k, v in params]
        reply = await client.get("/recall", params=sent)
        assert reply.status_code == 200, (recency, reply.text)
    body = reply.json()
    assert isinstance(body["results"], list) and body["results"] and is_number(body["count"])
    for result in body["results"]:
        assert isinstance(result["id"], str)
        assert isinstance(result["memory"], dict) and result["memory"]["id"] == result["id"]
        assert isinstance(result["memory"]["content"], str) and isinstance(result["memory"]["tags"], list)
        assert isinstance(result["match_type"], str)
        assert is_number(result["match_score"]) and is_number(result["final_score"])
        assert isinstance(result["score_components"], dict)
        assert all(is_number(v) for v in result["score_components"].values())
        assert isinstance(result["relations"], list)
        assert isinstance(result.get("state_replaces", ""), str)  # absent, or the id it replaces
        assert isinstance(result["deduped_from"], list)
    by_id = {r["id"]: r for r in body["results"]}
    assert old_id not in by_id, "the superseded memory is replaced by its head"
    assert by_id[new_id]["relations"], "relations are listed"
    replaced = [r for r in body["results"] if r.get("state_replaces") == old_id]
    assert [r["id"] for r in replaced] == [new_id] and replaced[0]["match_type"] == "state_replacement"

    expanded = await client.get(
        "/recall", params={"query": "staging cluster", "expand_relations": "true", "recency_bias": "on"}
    )
    assert expanded.status_code == 200, expanded.text


async def test_enumeration_by_tag_and_bulk_delete(client):
    for n in range(3):
        await client.post("/memory", json={"content": f"scratch note {n}", "tags": ["scratch", "test-run"]})
    listed = await client.get("/memory/by-tag", params=[("tags", "scratch"), ("limit", "2"), ("offset", "1")])
    body = listed.json()
    assert listed.status_code == 200 and isinstance(body["memories"], list) and len(body["memories"]) == 2
    assert (body["count"], body["limit"], body["offset"], body["has_more"]) == (2, 2, 1, False)
    deleted = await client.delete("/memory/by-tag", params=[("tags", "scratch"), ("tags", "test-run")])
    assert deleted.status_code == 200 and deleted.json()["deleted_count"] == 3
    assert isinstance(deleted.json()["deleted_count"], int) and deleted.json()["tags"] == ["scratch", "test-run"]


async def test_associate_batch_reports_what_the_client_reads(client):
    ids = [
        (await client.post("/memory", json={"content": f"compat association {n}"})).json()["memory_id"]
        for n in range(3)
    ]
    # sanitizeAssociationInput: the four fields plus the optional properties it passes through.
    associations = [
        {"memory1_id": ids[0], "memory2_id": ids[1], "type": "RELATES_TO", "strength": 0.8, "context": "compat"},
        {"memory1_id": ids[1], "memory2_id": ids[2], "type": "PREFERS_OVER", "strength": 0.6, "reason": "faster"},
    ]
    reply = await client.post("/associate", json={"associations": associations})
    assert reply.status_code == 201, reply.text
    body = reply.json()
    assert body["status"] == "success"
    assert (body["created_count"], body["failed_count"]) == (2, 0)
    assert isinstance(body["succeeded"], list) and len(body["succeeded"]) == 2 and body["failed"] == []

    mixed = associations[:1] + [{"memory1_id": ids[0], "memory2_id": ids[0], "type": "RELATES_TO", "strength": 0.5}]
    reply = await client.post("/associate", json={"associations": mixed})
    assert reply.status_code == 207, reply.text
    body = reply.json()
    assert body["status"] == "partial_success" and (body["created_count"], body["failed_count"]) == (1, 1)
    assert body["failed"][0]["index"] == 1 and isinstance(body["failed"][0]["reason"], str)


async def test_update_delete_and_health_answer_what_the_client_reads(client):
    memory_id = (await client.post("/memory", json={"content": "to update then delete"})).json()["memory_id"]
    updated = await client.patch(f"/memory/{memory_id}", json={"importance": 0.7, "tags": ["x"], "format": "json"})
    assert updated.status_code == 200 and updated.json()["memory_id"] == memory_id, updated.text
    deleted = await client.delete(f"/memory/{memory_id}")
    assert deleted.status_code == 200 and deleted.json()["memory_id"] == memory_id
    missing = await client.get(f"/memory/{memory_id}")
    assert missing.status_code == 404 and isinstance(missing.json()["message"], str)  # the client maps 404 to "none"
    health = (await client.get("/health")).json()
    assert health["status"] in ("healthy", "degraded") and isinstance(health["memory_count"], int)
