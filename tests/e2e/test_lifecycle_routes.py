"""The lifecycle from the read side: PATCH archives and restores, an archived
memory is withheld by every read but the flagged ones, MetaPattern nodes
are never memory results, and the relevance weight of recall."""

from __future__ import annotations

import pytest

from services.core.wiring import graph_store
from tests.waiting import wait_for

pytestmark = pytest.mark.e2e


@pytest.fixture
def relevance_weight() -> float:
    return 0.0


@pytest.fixture
def enrichment() -> bool:
    return True


@pytest.fixture
def stack_settings(settings, relevance_weight, enrichment):
    weights = {intent: {**w, "relevance": relevance_weight} for intent, w in settings.recall.recall_weights.items()}
    return settings.override({"enrichment_enabled": enrichment, "recall_weights": weights})


async def store(client, content: str, **fields) -> str:
    reply = await client.post("/memory", json={"content": content, "type": "Context", **fields})
    assert reply.status_code == 201, reply.text
    return reply.json()["memory_id"]


async def cypher(settings, query: str, params: dict) -> None:
    graph = graph_store(settings.graph, settings.process, recall=settings.recall, backup=settings.backup)
    try:
        await graph.connection.query(query, params)
    finally:
        await graph.lifecycle.close()


async def embedding_of(client, memory_id: str) -> str:
    async def embedded():
        memory = (await client.get(f"/memory/{memory_id}")).json()["memory"]
        return memory.get("embedding")

    return ",".join(str(v) for v in await wait_for(embedded))


async def recalled(client, **params) -> list[str]:
    reply = await client.get("/recall", params={"limit": 50, "diversity_factor": 0, **params})
    assert reply.status_code == 200, reply.text
    return [i for r in reply.json()["results"] for i in (r["id"], *r["deduped_from"])]


async def every_read(client, target: str, neighbour: str) -> dict[str, bool]:
    """Whether each read mode returns `target` (`neighbour` is linked to it)."""
    by_tag = (await client.get("/memory/by-tag", params={"tags": "lifecycle"})).json()["memories"]
    startup = (await client.get("/startup-recall")).json()
    related = (await client.get(f"/memories/{neighbour}/related")).json()["related"]
    snapshot = (await client.get("/graph/snapshot")).json()["nodes"]
    neighbours = (await client.get(f"/graph/neighbors/{neighbour}")).json()["graph_neighbors"]
    return {
        "recall": target in await recalled(client, query="cold storage bucket"),
        "by_tag": target in [m["id"] for m in by_tag],
        "startup": target in [m["id"] for m in (*startup["results"], *startup["critical_lessons"])],
        "related": target in [r["id"] for r in related],
        "snapshot": target in [n["id"] for n in snapshot],
        "neighbours": target in [n["id"] for n in neighbours],
    }


async def test_patch_archives_every_read_withholds_it_and_archived_false_brings_it_back(client):
    target = await store(
        client, "Nightly backups go to the cold storage bucket", tags=["lifecycle", "lesson"], importance=0.9
    )
    neighbour = await store(client, "Backups are verified every Monday", tags=["lifecycle"], importance=0.5)
    reply = await client.post(
        "/associate", json={"memory1_id": neighbour, "memory2_id": target, "type": "RELATES_TO", "strength": 0.9}
    )
    assert reply.status_code == 201, reply.text
    vector = await embedding_of(client, target)
    await wait_for(lambda: _found_by_vector(client, vector, target))
    assert set((await every_read(client, target, neighbour)).values()) == {True}

    refused = await client.patch(f"/memory/{target}", json={"archived": "yes"})
    assert refused.status_code == 400 and "'archived'" in refused.json()["message"]

    version = (await client.get(f"/memory/{target}")).json()["memory"]["version"]
    archived = (await client.patch(f"/memory/{target}", json={"archived": True})).json()["memory"]
    assert archived["archived"] is True and archived["archived_at"] and archived["version"] == version + 1
    # The vector arm follows through the event (the projector re-reads the record).
    await wait_for(lambda: _withheld_by_vector(client, vector, target))
    assert await every_read(client, target, neighbour) == {
        "recall": False,
        "by_tag": True,  # by-tag lists it, flagged (by design: what delete-by-tag would remove)
        "startup": False,
        "related": False,
        "snapshot": False,
        "neighbours": False,
    }
    flagged = (await client.get("/memory/by-tag", params={"tags": "lifecycle"})).json()["memories"]
    assert {m["id"]: m["state"] for m in flagged}[target] == "archived"
    read = (await client.get(f"/memory/{target}")).json()["memory"]
    assert read["state"] == "archived" and read["archived"] is True
    history = (await client.get(f"/graph/neighbors/{neighbour}", params={"state_mode": "history"})).json()
    assert {n["id"]: n["state"] for n in history["graph_neighbors"]}[target] == "archived"

    restored = (await client.patch(f"/memory/{target}", json={"archived": False})).json()["memory"]
    assert restored["archived"] is False and restored["archived_at"] is None and restored["version"] == version + 2
    await wait_for(lambda: _found_by_vector(client, vector, target))
    assert set((await every_read(client, target, neighbour)).values()) == {True}
    assert (await client.get(f"/memory/{target}")).json()["memory"]["state"] == "current"


async def _found_by_vector(client, vector: str, memory_id: str) -> bool:
    return memory_id in await recalled(client, embedding=vector)


async def _withheld_by_vector(client, vector: str, memory_id: str) -> bool:
    return memory_id not in await recalled(client, embedding=vector)


@pytest.mark.parametrize("enrichment", [False])
async def test_meta_patterns_are_never_memory_results_and_the_snapshot_shows_them_on_request(client, stack_settings):
    first = await store(client, "The cold storage bucket holds backups", tags=["lifecycle", "lesson"], importance=0.6)
    second = await store(client, "Backups in cold storage expire after a year", tags=["lifecycle"], importance=0.5)
    reply = await client.post(
        "/associate", json={"memory1_id": first, "memory2_id": second, "type": "RELATES_TO", "strength": 0.8}
    )
    assert reply.status_code == 201, reply.text
    tenant = (await client.get(f"/memory/{first}")).json()["memory"]["tenant"]
    # A MetaPattern as consolidation writes it (members -IN_PATTERN->), dressed
    # as a memory (every field a memory read could match on) and with a memory
    # relation type back to a member: only its label tells it apart.
    await cypher(
        stack_settings,
        """
        MATCH (a:Memory {id: $first}), (b:Memory {id: $second})
        CREATE (p:MetaPattern {id: 'pattern-1', tenant: $tenant, summary: 'Backups in cold storage', size: 2,
                content: 'cold storage bucket backups', type: 'Pattern', importance: 1.0, confidence: 1.0,
                tags: ['lifecycle', 'lesson'], tag_prefixes: ['lifecycle', 'lesson'], archived: false,
                timestamp: a.timestamp, t_valid: a.t_valid, updated_at: a.updated_at,
                last_accessed: a.last_accessed, recorded_at: a.recorded_at, version: 1, metadata: '{}'})
        CREATE (a)-[:IN_PATTERN {rank: 0}]->(p), (b)-[:IN_PATTERN {rank: 1}]->(p),
               (p)-[:RELATES_TO {strength: 1.0}]->(a)
        """,
        {"first": first, "second": second, "tenant": tenant},
    )

    def memory_ids(items) -> set[str]:
        return {item["id"] for item in items}

    assert set(await recalled(client, query="cold storage bucket backups")) == {first, second}
    assert set(await recalled(client, tags="lifecycle")) == {first, second}
    by_tag = (await client.get("/memory/by-tag", params={"tags": "lifecycle"})).json()["memories"]
    assert memory_ids(by_tag) == {first, second}
    startup = (await client.get("/startup-recall")).json()
    assert memory_ids([*startup["results"], *startup["critical_lessons"]]) == {first, second}
    related = (await client.get(f"/memories/{first}/related")).json()["related"]
    assert memory_ids(related) == {second}
    neighbours = (await client.get(f"/graph/neighbors/{first}", params={"depth": 2})).json()
    assert memory_ids(neighbours["graph_neighbors"]) == {second}
    assert {(e["source"], e["target"]) for e in neighbours["edges"]} == {(first, second)}
    stats = (await client.get("/graph/stats")).json()
    assert stats["totals"] == {"nodes": 2, "edges": 1}
    read = (await client.get(f"/memory/{first}")).json()["memory"]
    assert "pattern-1" not in {r["memory_id"] for r in read.get("relations", [])}
    assert (await client.get("/memory/pattern-1")).status_code in (400, 404)

    plain = (await client.get("/graph/snapshot")).json()
    assert memory_ids(plain["nodes"]) == {first, second}
    assert {(e["source"], e["target"]) for e in plain["edges"]} == {(first, second)}

    shown = (await client.get("/graph/snapshot", params={"include_patterns": "true"})).json()
    assert shown["nodes"][-1] == {"id": "pattern-1", "kind": "meta_pattern", "summary": "Backups in cold storage",
                                  "size": 2}  # fmt: skip
    assert memory_ids(shown["nodes"][:-1]) == {first, second}
    assert {(e["source"], e["type"], e["target"]) for e in shown["edges"]} == {
        (first, "RELATES_TO", second),
        (first, "IN_PATTERN", "pattern-1"),
        (second, "IN_PATTERN", "pattern-1"),
        ("pattern-1", "RELATES_TO", first),
    }
    # Another tenant's patterns never show (the pattern is the caller's tenant's, checked on both ends).
    await cypher(stack_settings, "MATCH (p:MetaPattern {id: 'pattern-1'}) SET p.tenant = 'other'", {})
    assert memory_ids((await client.get("/graph/snapshot", params={"include_patterns": "1"})).json()["nodes"]) == {
        first,
        second,
    }
    bad = await client.get("/graph/snapshot", params={"include_patterns": "maybe"})
    assert bad.status_code == 400 and "'include_patterns'" in bad.json()["message"]


@pytest.mark.parametrize(("relevance_weight", "enrichment"), [(0.0, False), (0.5, False)])
async def test_a_relevance_weight_reorders_memories_that_differ_only_in_relevance(
    client, stack_settings, relevance_weight
):
    # The same words, the same importance and confidence: the exact phrase
    # puts `matching` first on its own; its relevance is low.
    matching = await store(client, "rotate staging credentials monthly", importance=0.5)
    fresher = await store(client, "monthly: rotate the staging credentials", importance=0.5)
    for memory_id, value in ((matching, 0.1), (fresher, 1.0)):
        await cypher(
            stack_settings, "MATCH (m:Memory {id: $id}) SET m.relevance_score = $v", {"id": memory_id, "v": value}
        )
    reply = await client.get("/recall", params={"query": "rotate staging credentials monthly", "diversity_factor": 0})
    results = reply.json()["results"]
    assert {r["id"]: r["score_components"]["relevance"] for r in results} == {matching: 0.1, fresher: 1.0}
    expected = [matching, fresher] if relevance_weight == 0 else [fresher, matching]
    assert [r["id"] for r in results] == expected
