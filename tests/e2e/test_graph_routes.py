"""The graph views and the analysis through the gateway: /graph/types,
/graph/relations, /graph/stats, /graph/snapshot, /graph/neighbors/{id} and
/analyze, with the current-state pass flagging (or withholding) nodes."""

from __future__ import annotations

import hashlib
import json
from datetime import UTC, datetime, timedelta

import httpx
import pytest

from services.core.domain.model import AUTHORABLE_RELATIONS, MEMORY_TYPES, SYSTEM_RELATIONS

pytestmark = pytest.mark.e2e

NO_SUCH_ID = "00000000-0000-4000-8000-000000000000"
#: A token of another tenant, from a tokens file beside the single token (tenant `default`).
BETA = "tenant-beta-write"
NODE_FIELDS = {"id", "content", "type", "importance", "confidence", "tags", "timestamp", "t_valid", "state"}


@pytest.fixture
def stack_settings(settings, tmp_path):
    path = tmp_path / "tokens.json"
    entry = {"token_sha256": hashlib.sha256(BETA.encode()).hexdigest(), "tenant": "beta", "role": "write"}
    path.write_text(json.dumps([entry]))
    return settings.override({"enrichment_enabled": False, "memgrid_tokens_file": path})


@pytest.fixture
async def beta(gateway_url):
    async with httpx.AsyncClient(base_url=gateway_url, headers={"Authorization": f"Bearer {BETA}"}) as client:
        yield client


async def store(client, content: str, **fields) -> str:
    reply = await client.post("/memory", json={"content": content, "type": "Context", **fields})
    assert reply.status_code == 201, reply.text
    return reply.json()["memory_id"]


async def associate(client, a: str, b: str, kind: str, strength: float) -> None:
    reply = await client.post("/associate", json={"memory1_id": a, "memory2_id": b, "type": kind, "strength": strength})
    assert reply.status_code in (200, 201), reply.text


@pytest.fixture
async def graph(client) -> dict[str, str]:
    """a -0.9-> b -0.5-> c -0.6-> expired; a -0.7-> old, which `new` supersedes."""
    past = datetime.now(UTC) - timedelta(days=30)
    ids = {
        "a": await store(client, "Chose PostgreSQL over MongoDB", type="Decision", importance=0.9, tags=["db"]),
        "b": await store(client, "Prefer managed databases", type="Preference", importance=0.8, tags=["db", "ops"]),
        "c": await store(client, "During the Q3 migration sprint", importance=0.3),
        "old": await store(client, "Deploys run on Jenkins", type="Decision", importance=0.95),
        "expired": await store(
            client,
            "The staging password is hunter2",
            importance=0.7,
            timestamp=past.isoformat(),
            t_invalid=(past + timedelta(days=1)).isoformat(),
        ),
    }
    reply = await client.post(
        "/memory",
        json={"content": "Deploys run on GitHub Actions", "type": "Decision", "importance": 0.4,
              "supersedes_memory_id": ids["old"]},
    )  # fmt: skip
    assert reply.status_code == 201, reply.text
    ids["new"] = reply.json()["memory_id"]
    await associate(client, ids["a"], ids["b"], "RELATES_TO", 0.9)
    await associate(client, ids["b"], ids["c"], "LEADS_TO", 0.5)
    await associate(client, ids["a"], ids["old"], "RELATES_TO", 0.7)
    await associate(client, ids["c"], ids["expired"], "RELATES_TO", 0.6)
    return ids


def by_id(nodes: list[dict]) -> dict[str, dict]:
    return {n["id"]: n for n in nodes}


def edge_set(edges: list[dict]) -> set[tuple[str, str, str]]:
    return {(e["source"], e["type"], e["target"]) for e in edges}


async def test_types_and_relations_list_the_vocabularies(client):
    types = (await client.get("/graph/types")).json()
    assert types == {"status": "success", "types": list(MEMORY_TYPES), "fallback": "Memory"}
    relations = (await client.get("/graph/relations")).json()
    assert relations["authorable"] == list(AUTHORABLE_RELATIONS) and relations["system"] == list(SYSTEM_RELATIONS)
    assert relations["relations"] == [*AUTHORABLE_RELATIONS, *SYSTEM_RELATIONS]


async def test_stats_count_memories_and_relations_by_type(client, graph):
    stats = (await client.get("/graph/stats")).json()
    assert stats["totals"] == {"nodes": 6, "edges": 5}
    assert stats["by_type"] == {"Decision": 3, "Preference": 1, "Context": 2}
    assert stats["by_relationship"] == {"RELATES_TO": 3, "LEADS_TO": 1, "INVALIDATED_BY": 1}


async def test_snapshot_withholds_what_is_not_current_and_flags_the_superseded(client, graph):
    body = (await client.get("/graph/snapshot")).json()
    nodes = by_id(body["nodes"])
    assert set(nodes) == {graph[k] for k in ("a", "b", "c", "old", "new")}  # the expired one is withheld
    assert set(body["nodes"][0]) >= NODE_FIELDS and "embedding" not in body["nodes"][0]
    assert nodes[graph["old"]]["state"] == "superseded" and nodes[graph["old"]]["replaced_by"] == graph["new"]
    assert all(nodes[graph[k]]["state"] == "current" for k in ("a", "b", "c", "new"))
    assert edge_set(body["edges"]) == {
        (graph["a"], "RELATES_TO", graph["b"]),
        (graph["b"], "LEADS_TO", graph["c"]),
        (graph["a"], "RELATES_TO", graph["old"]),
        (graph["old"], "INVALIDATED_BY", graph["new"]),
    }
    assert body["stats"] == {"total_nodes": 6, "total_edges": 5, "returned_nodes": 5, "returned_edges": 4,
                             "sampled": True}  # fmt: skip
    edge = next(e for e in body["edges"] if e["source"] == graph["a"] and e["target"] == graph["b"])
    assert edge["strength"] == 0.9 and edge["id"] == f"{graph['a']}-RELATES_TO-{graph['b']}"


async def test_snapshot_limit_keeps_a_superseded_node_with_its_head_or_not_at_all(client, graph):
    # By importance: old (0.95, superseded by new), a (0.9), b (0.8)...
    two = (await client.get("/graph/snapshot", params={"limit": 2})).json()
    assert [n["id"] for n in two["nodes"]] == [graph["old"], graph["new"]] and two["meta"]["limit"] == 2
    one = (await client.get("/graph/snapshot", params={"limit": 1})).json()
    assert [n["id"] for n in one["nodes"]] == [graph["a"]]


async def test_snapshot_in_history_mode_shows_everything_flagged(client, graph):
    body = (await client.get("/graph/snapshot", params={"state_mode": "history"})).json()
    nodes = by_id(body["nodes"])
    assert len(nodes) == 6
    assert nodes[graph["expired"]]["state"] == "expired"
    assert nodes[graph["old"]]["state"] == "superseded" and nodes[graph["old"]]["replaced_by"] == graph["new"]
    assert (graph["c"], "RELATES_TO", graph["expired"]) in edge_set(body["edges"])
    bad = await client.get("/graph/snapshot", params={"state_mode": "sometimes"})
    assert bad.status_code == 400 and bad.json()["reason"] == "INVALID_STATE_MODE"


async def test_neighbors_walk_hops_nearest_first_through_current_nodes(client, graph):
    one = (await client.get(f"/graph/neighbors/{graph['a']}")).json()
    assert one["center"]["id"] == graph["a"] and one["meta"]["depth"] == 1
    # b (0.9), then old (0.7) flagged, followed by its head.
    assert [n["id"] for n in one["graph_neighbors"]] == [graph["b"], graph["old"], graph["new"]]
    assert one["graph_neighbors"][1]["state"] == "superseded"
    assert edge_set(one["edges"]) == {
        (graph["a"], "RELATES_TO", graph["b"]),
        (graph["a"], "RELATES_TO", graph["old"]),
        (graph["old"], "INVALIDATED_BY", graph["new"]),
    }
    three = (await client.get(f"/graph/neighbors/{graph['a']}", params={"depth": 3})).json()
    assert [n["id"] for n in three["graph_neighbors"]] == [graph["b"], graph["old"], graph["new"], graph["c"]]
    history = (await client.get(f"/graph/neighbors/{graph['a']}", params={"depth": 3, "state_mode": "history"})).json()
    states = {n["id"]: n["state"] for n in history["graph_neighbors"]}
    assert states[graph["expired"]] == "expired" and graph["new"] in states
    limited = (await client.get(f"/graph/neighbors/{graph['a']}", params={"limit": 1})).json()
    assert [n["id"] for n in limited["graph_neighbors"]] == [graph["b"]]


async def test_neighbors_of_a_memory_that_is_not_current_show_it_flagged(client, graph):
    body = (await client.get(f"/graph/neighbors/{graph['expired']}")).json()
    assert body["center"]["state"] == "expired"
    assert [n["id"] for n in body["graph_neighbors"]] == [graph["c"]]
    old = (await client.get(f"/graph/neighbors/{graph['old']}")).json()
    assert old["center"]["state"] == "superseded" and old["center"]["replaced_by"] == graph["new"]
    assert {n["id"] for n in old["graph_neighbors"]} == {graph["new"], graph["a"]}


async def test_neighbors_validate_their_parameters(client, graph):
    for params, reason in (({"depth": 4}, "INVALID_DEPTH"), ({"state_mode": "x"}, "INVALID_STATE_MODE")):
        reply = await client.get(f"/graph/neighbors/{graph['a']}", params=params)
        assert reply.status_code == 400 and reply.json()["reason"] == reason
    missing = await client.get(f"/graph/neighbors/{NO_SUCH_ID}")
    assert missing.status_code == 404 and missing.json()["status"] == "error"
    assert (await client.get("/graph/neighbors/not-an-id")).status_code == 400


async def test_analyze_counts_every_memory_of_the_tenant(client, graph):
    body = (await client.get("/analyze")).json()
    assert body["status"] == "success"
    analytics = body["analytics"]
    # AutoMem's envelope: generated_at and query_time_ms beside the analytics.
    assert body["generated_at"] == analytics["generated_at"] and body["generated_at"].endswith("+00:00")
    assert isinstance(body["query_time_ms"], (int, float))
    assert analytics["total_memories"] == 6
    assert analytics["memory_types"]["Decision"]["count"] == 3
    assert analytics["memory_types"]["Preference"] == {
        "count": 1, "average_confidence": 0.9, "average_importance": 0.8,
    }  # fmt: skip
    assert analytics["states"]["superseded"] == 1 and analytics["states"]["expired"] == 1
    assert analytics["states"]["current"] == 4
    assert analytics["tag_frequency"] == {"db": 2, "ops": 1}
    assert analytics["averages"]["importance"] == pytest.approx((0.9 + 0.8 + 0.3 + 0.95 + 0.7 + 0.4) / 6, abs=1e-3)
    distribution = analytics["time_distribution"]
    assert sum(distribution["by_month"].values()) == 6 and sum(distribution["by_weekday"].values()) == 6
    assert sum(v["count"] for v in analytics["temporal_insights"].values()) == 6
    assert sum(analytics["confidence_distribution"].values()) == 6
    assert analytics["entity_frequency"] == {} and analytics["patterns"] == []


async def test_graph_routes_need_a_token(anonymous):
    for path in ("/graph/types", "/graph/relations", "/graph/stats", "/graph/snapshot", "/analyze",
                 f"/graph/neighbors/{NO_SUCH_ID}"):  # fmt: skip
        reply = await anonymous.get(path)
        assert reply.status_code == 401 and reply.json()["status"] == "error"


async def test_every_view_is_the_callers_tenant_only(client, beta, graph):
    theirs = [await store(beta, "Beta chose MySQL", type="Decision", importance=1.0, tags=["db"]) for _ in range(2)]
    await associate(beta, theirs[0], theirs[1], "RELATES_TO", 1.0)
    stats = (await client.get("/graph/stats")).json()
    assert stats["totals"] == {"nodes": 6, "edges": 5}
    assert (await beta.get("/graph/stats")).json()["totals"] == {"nodes": 2, "edges": 1}
    snapshot = (await client.get("/graph/snapshot", params={"state_mode": "history"})).json()
    assert not set(theirs) & {n["id"] for n in snapshot["nodes"]}
    assert (await client.get(f"/graph/neighbors/{theirs[0]}")).status_code == 404
    assert (await beta.get(f"/graph/neighbors/{graph['a']}")).status_code == 404
    deep = (await client.get(f"/graph/neighbors/{graph['a']}", params={"depth": 3, "state_mode": "history"})).json()
    assert not set(theirs) & {n["id"] for n in deep["graph_neighbors"]}
    analytics = (await client.get("/analyze")).json()["analytics"]
    assert analytics["total_memories"] == 6 and analytics["tag_frequency"]["db"] == 2
    assert (await beta.get("/analyze")).json()["analytics"]["total_memories"] == 2
