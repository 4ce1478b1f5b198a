"""Trust states, human review and tombstones end to end (docs/trust.md):
through the gateway over HTTP, the services, FalkorDB and NATS.

The stack reviews low-confidence Decisions (REVIEW_LOW_CONFIDENCE_TYPES),
so a memory waits for review without a tenant-wide rule; the single-tenant
token reviews and administers with X-Admin-Token."""

from __future__ import annotations

import uuid

import httpx
import pytest

from tests.e2e.conftest import API_TOKEN
from tests.waiting import wait_for

pytestmark = pytest.mark.e2e

ADMIN = "trust-admin-secret"


@pytest.fixture
def stack_settings(settings):
    return settings.override(
        {
            "enrichment_enabled": False,
            "admin_api_token": ADMIN,
            "review_low_confidence_types": ["Decision"],
            "review_confidence_below": 0.6,
        }
    )


@pytest.fixture
async def admin(gateway_url):
    headers = {"Authorization": f"Bearer {API_TOKEN}", "X-Admin-Token": ADMIN}
    async with httpx.AsyncClient(base_url=gateway_url, headers=headers) as c:
        yield c


def unique(text: str) -> str:
    """Content no other test stores (tombstones outlive a test within the stack's graph)."""
    return f"{text} {uuid.uuid4().hex[:8]}"


async def store(client: httpx.AsyncClient, content: str, **fields) -> str:
    reply = await client.post("/memory", json={"content": content, "type": "Context", **fields})
    assert reply.status_code == 201, reply.text
    return reply.json()["memory_id"]


async def read(client: httpx.AsyncClient, memory_id: str) -> dict:
    reply = await client.get(f"/memory/{memory_id}")
    assert reply.status_code == 200, reply.text
    return reply.json()["memory"]


def ids(body: dict, key: str = "results") -> set[str]:
    return {item["id"] for item in body[key]}


async def recalled(client: httpx.AsyncClient, **params) -> dict:
    reply = await client.get("/recall", params={"limit": 50, **params})
    assert reply.status_code == 200, reply.text
    return reply.json()


# Tombstones ---------------------------------------------------------------------------------------------


async def test_rejected_content_is_refused_with_409_naming_the_tombstone_and_force_stores_it(client, admin):
    content = unique("Store the session tokens in localStorage")
    memory_id = await store(client, content)
    deleted = await client.delete(f"/memory/{memory_id}", params={"reason": "rejected"})
    assert deleted.status_code == 200, deleted.text
    tombstone = deleted.json()["tombstone_id"]
    assert (await client.get(f"/memory/{memory_id}")).status_code == 404

    # The same text, case and spacing aside, is refused in the envelope.
    again = await client.post("/memory", json={"content": "  " + content.upper().replace(" ", "   ") + " "})
    assert again.status_code == 409, again.text
    body = again.json()
    assert body["status"] == "error" and body["code"] == 409 and body["reason"] == "CONTENT_TOMBSTONED"
    assert tombstone in body["message"] and "rejected" in body["message"]
    assert body["details"]["tombstone_id"] == tombstone and body["details"]["tombstone_reason"] == "rejected"

    # A batch holding it is refused whole, its message naming the item.
    tag = unique("tomb-batch").replace(" ", "-")
    batch = await client.post(
        "/memory/batch", json={"memories": [{"content": unique("fine"), "tags": [tag]}, {"content": content}]}
    )
    assert batch.status_code == 409 and "index 1" in batch.json()["message"], batch.text
    assert (await client.get("/memory/by-tag", params={"tags": tag})).json()["memories"] == []

    # force=true stores it (body or query): past a reviewer's rejection, the review role's call (the single
    # token's with X-Admin-Token); the writer's own force is a 403 naming it.
    refused = await client.post("/memory", json={"content": content, "force": True})
    assert refused.status_code == 403 and "'force'" in refused.json()["message"], refused.text
    forced = await admin.post("/memory", json={"content": content, "force": True})
    assert forced.status_code == 201, forced.text
    assert (await admin.post("/memory", params={"force": "true"}, json={"content": content})).status_code == 201
    forced_batch = await admin.post("/memory/batch", json={"memories": [{"content": content}], "force": True})
    assert forced_batch.status_code == 201, forced_batch.text

    # Admin routes list and remove it; then the content is welcome again.
    listed = (await admin.get("/admin/tombstones", params={"limit": 200})).json()["tombstones"]
    mine = next(t for t in listed if t["id"] == tombstone)
    assert mine["memory_id"] == memory_id and mine["reason"] == "rejected" and mine["created_at"]
    assert (await client.get("/admin/tombstones")).status_code == 403  # the token alone is no admin
    removed = await admin.delete(f"/admin/tombstones/{tombstone}")
    assert removed.status_code == 200 and removed.json()["tombstone_id"] == tombstone, removed.text
    assert (await admin.delete(f"/admin/tombstones/{tombstone}")).status_code == 404
    assert (await client.post("/memory", json={"content": content})).status_code == 201


async def test_a_delete_leaves_a_tombstone_only_when_asked(client):
    plain = unique("Standups are at nine")
    gone = await store(client, plain)
    reply = await client.delete(f"/memory/{gone}")
    assert reply.status_code == 200 and "tombstone_id" not in reply.json(), reply.text
    assert (await client.post("/memory", json={"content": plain})).status_code == 201
    flagged = unique("Standups are at ten")
    gone = await store(client, flagged)
    assert (await client.delete(f"/memory/{gone}", params={"tombstone": "true"})).json()["tombstone_id"]
    assert (await client.post("/memory", json={"content": flagged})).status_code == 409
    bad = await client.delete(f"/memory/{await store(client, unique('x'))}", params={"reason": "boring"})
    assert bad.status_code == 400 and "reason" in bad.json()["message"], bad.text


async def test_a_supersede_marks_the_old_memory_superseded_and_invalidated_by_tombstones_it(client):
    old_content = unique("The API rate limit is 100 per minute")
    old = await store(client, old_content)
    reply = await client.post(
        "/memory", json={"content": unique("The API rate limit is 500 per minute"), "supersedes_memory_id": old}
    )
    assert reply.status_code == 201, reply.text
    assert (await read(client, old))["trust_state"] == "superseded"
    assert (await read(client, reply.json()["memory_id"]))["trust_state"] == "active"
    refused = await client.post("/memory", json={"content": old_content})
    assert refused.status_code == 409 and refused.json()["details"]["tombstone_reason"] == "invalidated"
    # EVOLVED_INTO outgrows the old memory: no tombstone.
    grown_content = unique("We ship monthly")
    grown = await store(client, grown_content)
    evolved = await client.post(
        "/memory",
        json={"content": unique("We ship weekly"), "supersedes_memory_id": grown, "supersede_relation": "EVOLVED_INTO"},
    )
    assert evolved.status_code == 201, evolved.text
    assert (await read(client, grown))["trust_state"] == "superseded"
    assert (await client.post("/memory", json={"content": grown_content})).status_code == 201


# Human review -------------------------------------------------------------------------------------------


async def test_a_pending_memory_is_invisible_to_every_read_mode_until_approved(client, admin):
    word = f"zebracorn{uuid.uuid4().hex[:6]}"
    tag = f"review-{uuid.uuid4().hex[:6]}"
    pending = await store(client, f"Maybe adopt {word} for queues", type="Decision", confidence=0.3, tags=[tag])
    anchor = await store(client, f"Queues run on {word} today", tags=[tag])
    linked = await client.post("/associate", json={"memory1_id": anchor, "memory2_id": pending, "type": "RELATES_TO"})
    assert linked.status_code in (200, 201), linked.text

    # A read by id is a direct read: shown, with its state and the rule that caught it.
    record = await read(client, pending)
    assert record["trust_state"] == "pending_review" and record["review_rule"] == "low_confidence"

    async def invisible_everywhere() -> None:
        reads = {
            "recall by word": (await recalled(client, query=word))["results"],
            "recall by tag": (await recalled(client, tags=tag))["results"],
            "recall history": (await recalled(client, query=word, state_mode="history"))["results"],
            "recall expanded": (await recalled(client, query=word, expand_relations="true"))["results"],
            "by-tag": (await client.get("/memory/by-tag", params={"tags": tag})).json()["memories"],
            "by-tag current": (
                await client.get("/memory/by-tag", params={"tags": tag, "state_mode": "current"})
            ).json()["memories"],
            "startup": (await client.get("/startup-recall", params={"tags": tag})).json()["results"],
            "related": (await client.get(f"/memories/{anchor}/related")).json()["related"],
            "neighbors": (await client.get(f"/graph/neighbors/{anchor}")).json()["graph_neighbors"],
            "snapshot": (await client.get("/graph/snapshot", params={"limit": 2000})).json()["nodes"],
        }
        for name, found in reads.items():
            shown = {item.get("id") or item.get("memory", {}).get("id") for item in found}
            assert pending not in shown, name
        assert anchor in {r["id"] for r in reads["recall by tag"]}  # the reads did run

    await invisible_everywhere()
    # Asked for explicitly, it is there, flagged.
    asked = await recalled(client, query=word, trust_states="pending_review")
    assert ids(asked) == {pending} and asked["results"][0]["trust_state"] == "pending_review"
    everything = await recalled(client, query=word, trust_states="all")
    assert {pending, anchor} <= ids(everything)

    # The queue lists it (review role), with the rule.
    queue = (await admin.get("/review", params={"limit": 200})).json()
    assert queue["status"] == "success"
    queued = next(m for m in queue["memories"] if m["id"] == pending)
    assert queued["review_rule"] == "low_confidence" and queued["trust_state"] == "pending_review"
    assert (await client.get("/review")).status_code == 403  # write is not review

    approved = await admin.post(f"/review/{pending}/approve", json={"note": "agreed in the meeting"})
    assert approved.status_code == 200, approved.text
    assert approved.json()["trust_state"] == "verified" and "tombstone_id" not in approved.json()
    assert pending not in {m["id"] for m in (await admin.get("/review", params={"limit": 200})).json()["memories"]}

    async def found_again():
        return pending in ids(await recalled(client, query=word))

    await wait_for(found_again)
    result = next(r for r in (await recalled(client, query=word))["results"] if r["id"] == pending)
    assert result["trust_state"] == "verified" and result["memory"]["trust_state"] == "verified"
    assert pending in {m["id"] for m in (await client.get("/memory/by-tag", params={"tags": tag})).json()["memories"]}
    # ... and the graph reads that withheld it show it now (so they did withhold it).
    related = (await client.get(f"/memories/{anchor}/related")).json()["related"]
    assert pending in {r["id"] for r in related}
    neighbors = (await client.get(f"/graph/neighbors/{anchor}")).json()["graph_neighbors"]
    assert pending in {n["id"] for n in neighbors}
    snapshot = (await client.get("/graph/snapshot", params={"limit": 2000})).json()["nodes"]
    assert pending in {n.get("id") for n in snapshot}
    # Decided once: a second decision is refused.
    twice = await admin.post(f"/review/{pending}/reject")
    assert twice.status_code == 400 and twice.json()["reason"] == "NOT_PENDING_REVIEW", twice.text


async def test_a_rejection_keeps_the_memory_as_history_and_its_content_out(client, admin):
    content = unique("Maybe rewrite everything in COBOL")
    pending = await store(client, content, type="Decision", confidence=0.2)
    rejected = await admin.post(f"/review/{pending}/reject", json={"note": "no"})
    assert rejected.status_code == 200, rejected.text
    assert rejected.json()["trust_state"] == "rejected" and rejected.json()["tombstone_id"]
    assert (await read(client, pending))["trust_state"] == "rejected"
    assert pending not in ids(await recalled(client, query="COBOL"))
    assert pending in ids(await recalled(client, query="COBOL", trust_states="rejected"))
    refused = await client.post("/memory", json={"content": content, "type": "Decision", "confidence": 0.9})
    assert refused.status_code == 409 and refused.json()["details"]["tombstone_reason"] == "review_rejected"
    assert (await admin.post(f"/review/{pending}/approve")).status_code == 400
    assert (await admin.post("/review/00000000-0000-4000-8000-000000000000/approve")).status_code == 404


async def test_a_confident_decision_needs_no_review(client):
    memory_id = await store(client, unique("Chose Postgres"), type="Decision", confidence=0.9)
    record = await read(client, memory_id)
    assert record["trust_state"] == "active" and "review_rule" not in record


# Trust states in recall ---------------------------------------------------------------------------------


async def test_deprecated_is_withheld_unless_asked_for_and_trust_states_returns_the_asked_states(client):
    word = f"quokka{uuid.uuid4().hex[:6]}"
    kept = await store(client, f"The {word} service runs on port 8080")
    old = await store(client, f"The {word} service ran on port 8000")
    patched = await client.patch(f"/memory/{old}", json={"trust_state": "deprecated"})
    assert patched.status_code == 200 and patched.json()["memory"]["trust_state"] == "deprecated", patched.text

    async def withheld():
        return ids(await recalled(client, query=word)) == {kept}

    await wait_for(withheld)
    assert ids(await recalled(client, query=word, trust_states="deprecated")) == {old}
    assert ids(await recalled(client, query=word, trust_states=["active", "deprecated"])) == {kept, old}
    by_tag = await client.get("/memory/by-tag", params={"tags": "nothing"})
    assert by_tag.status_code == 200
    bad = await client.get("/recall", params={"query": word, "trust_states": "trusted"})
    assert bad.status_code == 400 and "trust_states" in bad.json()["message"], bad.text
    # Undone by a PATCH; a state only reviews and edges set is refused.
    assert (await client.patch(f"/memory/{old}", json={"trust_state": "active"})).status_code == 200
    refused = await client.patch(f"/memory/{old}", json={"trust_state": "verified"})
    assert refused.status_code == 400 and "trust_state" in refused.json()["message"], refused.text
    # The MCP client's metadata key means the same.
    mcp = await client.patch(f"/memory/{old}", json={"metadata": {"deprecated": True}})
    assert mcp.status_code == 200 and mcp.json()["memory"]["trust_state"] == "deprecated", mcp.text


async def test_a_contradicted_memory_is_disputed_and_ranks_below_its_equal(client):
    word = f"okapi{uuid.uuid4().hex[:6]}"
    older = await store(client, f"The {word} cluster has three nodes", timestamp="2025-01-01T00:00:00Z")
    twin = await store(client, f"The {word} cluster has three nodes!", timestamp="2025-01-01T00:00:00Z")

    def score(body: dict, memory_id: str) -> float:
        return next(r["final_score"] for r in body["results"] if r["id"] == memory_id)

    before = await recalled(client, query=f"{word} cluster nodes")
    assert {older, twin} <= ids(before)
    newer = await store(client, f"The {word} cluster has five nodes now")
    linked = await client.post("/associate", json={"memory1_id": newer, "memory2_id": older, "type": "CONTRADICTS"})
    assert linked.status_code in (200, 201), linked.text
    assert (await read(client, older))["trust_state"] == "disputed"
    assert (await read(client, newer))["trust_state"] == "active"  # the newer one stands (no review rule for it)
    after = await recalled(client, query=f"{word} cluster nodes")
    disputed = next(r for r in after["results"] if r["id"] == older)
    assert disputed["trust_state"] == "disputed"
    # Down-weighted by RECALL_DISPUTED_WEIGHT (0.6): well below its undisputed twin, which it matched before.
    assert abs(score(before, older) - score(before, twin)) < 0.05 * score(before, twin)
    assert score(after, older) < 0.8 * score(after, twin)
