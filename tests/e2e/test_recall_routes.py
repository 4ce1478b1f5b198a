"""GET /recall through the gateway, with enrichment embedding memories
(placeholder embedder) and recall projecting them: the arms, every
parameter, and the current-state pass."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta

import pytest

from tests.waiting import wait_for

pytestmark = pytest.mark.e2e

RESULT_FIELDS = {
    "id", "memory", "match_type", "match_score", "final_score", "score_components", "relations", "state_replaces",
    "deduped_from",
}  # fmt: skip
COMPONENTS = {
    "vector", "keyword", "metadata", "tag", "exact", "relation", "importance", "confidence", "recency", "trust",
    "context",
}  # fmt: skip


@pytest.fixture
def stack_settings(settings):
    return settings.model_copy(update={"enrichment_enabled": True})


async def store(client, content: str, **fields) -> str:
    reply = await client.post("/memory", json={"content": content, "type": "Context", **fields})
    assert reply.status_code == 201, reply.text
    return reply.json()["memory_id"]


async def indexed(client, *ids: str, state_mode: str = "history") -> None:
    """Wait until every memory is embedded and its point projected (found by
    the vector arm with its own embedding)."""

    for memory_id in ids:

        async def found(memory_id=memory_id):
            memory = (await client.get(f"/memory/{memory_id}")).json()["memory"]
            if not memory.get("embedding"):
                return None
            vector = ",".join(str(v) for v in memory["embedding"])
            reply = await client.get(
                "/recall", params={"embedding": vector, "limit": 100, "state_mode": state_mode, "diversity_factor": 0}
            )
            return any(
                memory_id in (r["id"], *r["deduped_from"]) and r["score_components"]["vector"] > 0.99
                for r in reply.json()["results"]
            )

        await wait_for(found)


def ids_of(reply) -> list[str]:
    assert reply.status_code == 200, reply.text
    return [r["id"] for r in reply.json()["results"]]


async def test_hybrid_recall_returns_the_reference_fields(client):
    postgres = await store(client, "Chose PostgreSQL over MongoDB for ACID transactions", tags=["project:alpha"])
    redis = await store(client, "Redis caches sessions for the web tier", tags=["project:beta"])
    await indexed(client, postgres, redis)
    reply = await client.get("/recall", params={"query": "PostgreSQL transactions"})
    body = reply.json()
    assert body["status"] == "success" and body["count"] == len(body["results"]) >= 1
    top = body["results"][0]
    assert top["id"] == postgres and set(top) >= RESULT_FIELDS
    assert set(top["score_components"]) == COMPONENTS
    assert top["score_components"]["vector"] > 0 and top["score_components"]["keyword"] > 0
    assert top["match_type"] in ("vector", "keyword") and top["final_score"] > 0
    assert top["memory"]["content"].startswith("Chose PostgreSQL") and "embedding" not in top["memory"]
    assert top["state_replaces"] is None and top["deduped_from"] == []
    # The keyword arm alone still finds it (a word the placeholder vector hardly weighs).
    assert postgres in ids_of(await client.get("/recall", params={"query": "MongoDB"}))


async def test_the_vector_arm_withholds_a_memory_once_its_window_closes(client):
    """The reference's bug: t_invalid set at store time, no client embedding,
    the payload written by the default path; once expired, the vector arm
    must not return it."""
    closes = datetime.now(UTC) + timedelta(seconds=6)
    memory_id = await store(client, "The staging password rotates weekly", t_invalid=closes.isoformat())
    await indexed(client, memory_id)
    memory = (await client.get(f"/memory/{memory_id}")).json()["memory"]
    vector = ",".join(str(v) for v in memory["embedding"])
    if datetime.now(UTC) < closes - timedelta(seconds=1):  # still open: current recall finds it
        assert memory_id in ids_of(await client.get("/recall", params={"embedding": vector}))
    await asyncio.sleep(max(0.0, (closes - datetime.now(UTC)).total_seconds()) + 0.2)
    assert memory_id not in ids_of(await client.get("/recall", params={"embedding": vector}))
    assert memory_id not in ids_of(await client.get("/recall", params={"query": "staging password rotates"}))
    debug = (await client.get("/recall", params={"query": "staging password", "state_debug": "true"})).json()
    assert "state_debug" in debug
    history = await client.get("/recall", params={"embedding": vector, "state_mode": "history"})
    assert memory_id in ids_of(history)
    assert memory_id in ids_of(await client.get("/recall", params={"embedding": vector, "current_only": "false"}))
    read = (await client.get(f"/memory/{memory_id}")).json()["memory"]
    assert read["state"] == "expired"


async def test_a_superseded_memory_is_replaced_by_the_head_of_its_chain(client):
    old = await store(client, "Deploys go out on Fridays", tags=["ops"], importance=1.0)
    middle = (
        await client.post(
            "/memory",
            json={"content": "Deploys go out on Thursdays", "supersedes_memory_id": old, "tags": ["ops"]},
        )
    ).json()["memory_id"]
    head = (
        await client.post(
            "/memory",
            json={
                "content": "Deploys go out on Wednesdays",
                "supersedes_memory_id": middle,
                "supersede_relation": "EVOLVED_INTO",
                "tags": ["ops"],
                "importance": 0.1,
            },
        )
    ).json()["memory_id"]
    await indexed(client, old, middle, head)
    reply = (await client.get("/recall", params={"query": "Deploys go out on Fridays", "limit": 1})).json()
    [result] = reply["results"]
    assert result["id"] == head and result["match_type"] == "state_replacement"
    assert result["state_replaces"] == old
    history = ids_of(await client.get("/recall", params={"query": "Deploys Fridays", "state_mode": "history"}))
    assert old in history
    read = (await client.get(f"/memory/{old}")).json()["memory"]
    assert read["state"] == "superseded" and read["replaced_by"] == head
    assert (await client.get(f"/memory/{head}")).json()["memory"]["state"] == "current"
    # by-tag: one entry per chain, the head in the old one's place.
    listed = (await client.get("/memory/by-tag", params={"tags": "ops"})).json()
    assert [m["id"] for m in listed["memories"]] == [head]
    assert listed["memories"][0]["state_replaces"] == old
    history_list = (await client.get("/memory/by-tag", params={"tags": "ops", "state_mode": "history"})).json()
    assert {m["id"] for m in history_list["memories"]} == {old, middle, head}
    # related: the old memory's neighbour is the middle one, shown as the head.
    related = (await client.get(f"/memories/{old}/related")).json()
    assert [(r["id"], r["state_replaces"]) for r in related["related"]] == [(head, middle)]
    # startup-recall never shows what was superseded.
    startup = ids_of(await client.get("/startup-recall", params={"tags": "ops"}))
    assert startup == [head]


async def test_supersession_cycles_and_associate_edges_are_walked_safely(client):
    a = await store(client, "Cache TTL is 60 seconds")
    b = await store(client, "Cache TTL is 120 seconds")
    for source, target in ((a, b), (b, a)):
        reply = await client.post(
            "/associate", json={"memory1_id": source, "memory2_id": target, "type": "INVALIDATED_BY"}
        )
        assert reply.status_code == 201, reply.text
    await indexed(client, a, b)
    reply = await client.get("/recall", params={"query": "Cache TTL seconds", "state_debug": "true"})
    assert reply.status_code == 200
    # Each is superseded by the other: the walk stops at the cycle, and one answer stands.
    assert len(ids_of(reply)) <= 2


async def test_not_yet_valid_and_contradicted_memories(client):
    later = (datetime.now(UTC) + timedelta(days=3)).isoformat()
    future = await store(client, "The new office opens in Lisbon", t_valid=later)
    claim = await store(client, "The office is in Porto")
    counter = await store(client, "The office is in Braga")
    await client.post("/associate", json={"memory1_id": claim, "memory2_id": counter, "type": "CONTRADICTS"})
    await indexed(client, future, claim, counter)
    current = ids_of(await client.get("/recall", params={"query": "office Lisbon Porto Braga", "limit": 10}))
    assert future not in current and claim in current and counter in current  # CONTRADICTS hides nothing
    history = ids_of(
        await client.get("/recall", params={"query": "office Lisbon", "limit": 10, "state_mode": "history"})
    )
    assert future in history
    assert (await client.get(f"/memory/{future}")).json()["memory"]["state"] == "not_yet_valid"


async def test_state_mode_and_time_parameters_are_validated(client):
    for params, field in (
        ({"state_mode": "sometimes"}, "state_mode"),
        ({"current_only": "maybe"}, "current_only"),
        ({"start": "yesterday-ish"}, "start"),
        ({"end": "not a date"}, "end"),
        ({"time_query": "when the moon is full"}, "time_query"),
        ({"sort": "random"}, "sort"),
        ({"tag_mode": "some"}, "tag_mode"),
        ({"tag_match": "fuzzy"}, "tag_match"),
        ({"intent": "guess"}, "intent"),
        ({"min_score": "high"}, "min_score"),
        ({"diversity_factor": "2"}, "diversity_factor"),
        ({"as_of": "then"}, "as_of"),
        ({"start": "2026-02-01T00:00:00Z", "end": "2026-01-01T00:00:00Z"}, "start"),
    ):
        reply = await client.get("/recall", params={"query": "x", **params})
        assert reply.status_code == 400, (params, reply.text)
        body = reply.json()
        assert body["status"] == "error" and field in body["message"], (params, body)


async def test_limits_tags_windows_and_sorting(client):
    now = datetime.now(UTC)
    ids = []
    for i in range(8):
        ids.append(
            await store(
                client,
                f"Incident review number {i} about the payments service",
                tags=["team:payments" if i % 2 else "team:search", f"n{i}"],
                timestamp=(now - timedelta(days=i * 10)).isoformat(),
                importance=0.2 + i * 0.1,
            )
        )
    await indexed(client, *ids)
    query = {"query": "incident review payments"}
    assert len(ids_of(await client.get("/recall", params=query))) == 5  # default limit
    assert len(ids_of(await client.get("/recall", params={**query, "limit": "abc"}))) == 5
    assert len(ids_of(await client.get("/recall", params={**query, "limit": "0"}))) == 5
    assert len(ids_of(await client.get("/recall", params={**query, "limit": "1000"}))) == 8  # capped at 100
    assert len(ids_of(await client.get("/recall", params={**query, "limit": "3"}))) == 3
    payments = set(ids_of(await client.get("/recall", params={**query, "tags": "team", "limit": 20})))
    assert payments == set(ids)  # prefix match: "team" covers team:payments and team:search
    exact = set(ids_of(await client.get("/recall", params={**query, "tags": "team:payments", "limit": 20})))
    assert exact == set(ids[1::2])
    none = ids_of(await client.get("/recall", params={**query, "tags": "team", "tag_match": "exact"}))
    assert none == []
    both = ids_of(
        await client.get("/recall", params=[("query", "incident"), ("tags", "team:search"), ("tags", "n2"),
                                            ("tag_mode", "all"), ("limit", "20")])
    )  # fmt: skip
    assert both == [ids[2]]
    excluded = set(ids_of(await client.get("/recall", params={**query, "exclude_tags": "team:search", "limit": 20})))
    assert excluded == set(ids[1::2])
    window = await client.get(
        "/recall", params={"time_query": "last 25 days", "limit": 20}
    )  # no query: a listing, newest first
    assert ids_of(window) == ids[:3] and window.json()["sort"] == "time_desc"
    assert "time_window" in window.json()
    oldest_first = ids_of(await client.get("/recall", params={**query, "sort": "time_asc", "limit": 20}))
    assert oldest_first == list(reversed(ids))
    between = ids_of(
        await client.get(
            "/recall",
            params={"start": (now - timedelta(days=35)).isoformat(), "end": (now - timedelta(days=15)).isoformat()},
        )
    )
    assert set(between) == {ids[2], ids[3]}
    scores = [r["final_score"] for r in (await client.get("/recall", params={**query, "limit": 20})).json()["results"]]
    high = (await client.get("/recall", params={**query, "limit": 20, "min_score": str(scores[2])})).json()
    assert all(r["final_score"] >= scores[2] for r in high["results"]) and high["count"] <= 3
    first = ids_of(await client.get("/recall", params={**query, "priority_ids": ids[7], "limit": 3}))
    assert first[0] == ids[7]


async def test_dedupe_context_boosts_intent_and_expansion(client):
    one = await store(client, "Use tabs for indentation in Go files", tags=["style"])
    two = await store(client, "use tabs for  indentation in Go files", tags=["style"])
    pref = await store(client, "Prefer short functions in Go", tags=["style"], type="Preference")
    linked = await store(client, "Our linter config lives in tools/lint.yaml", tags=["style"])
    await client.post(
        "/associate", json={"memory1_id": pref, "memory2_id": linked, "type": "RELATES_TO", "strength": 0.9}
    )
    await indexed(client, one, two, pref, linked)
    results = (await client.get("/recall", params={"query": "tabs indentation Go", "limit": 10})).json()["results"]
    merged = [r for r in results if r["id"] in (one, two)]
    assert len(merged) == 1 and merged[0]["deduped_from"] in ([one], [two])
    boosted = (await client.get("/recall", params={"query": "Go", "context_types": "Preference", "limit": 10})).json()[
        "results"
    ]
    assert boosted[0]["id"] == pref and boosted[0]["score_components"]["context"] == 1.0
    browse = (await client.get("/recall", params={"query": "Go", "intent": "browse"})).json()
    assert browse["intent"] == "browse"
    plain = ids_of(await client.get("/recall", params={"query": "short functions", "limit": 10, "tags": "style"}))
    expanded = (
        await client.get(
            "/recall", params={"query": "short functions", "limit": 10, "expand_relations": "true", "tags": "style"}
        )
    ).json()["results"]
    via = {r["id"]: r for r in expanded}
    assert linked in via
    if linked not in plain:
        assert via[linked]["match_type"] == "relation" and via[linked]["score_components"]["relation"] >= 0.9
    assert any(rel["memory_id"] == linked and rel["type"] == "RELATES_TO" for rel in via[pref]["relations"])


async def test_diversity_and_source_trust(client):
    ids = []
    for i in range(4):
        ids.append(await store(client, f"Quarterly budget note {i}", metadata={"source": "slack"}))
    ids.append(await store(client, "Quarterly budget note from email", metadata={"source": "gmail"}))
    await indexed(client, *ids)
    results = (await client.get("/recall", params={"query": "quarterly budget note", "limit": 3})).json()["results"]
    sources = [r["memory"]["metadata"]["source"] for r in results]
    assert "gmail" in sources[:2]  # diversity interleaves the lone gmail memory
    trust = {r["memory"]["metadata"]["source"]: r["score_components"]["trust"] for r in results}
    assert trust["gmail"] == 0.95 and trust["slack"] == 0.9
    flat = (
        await client.get("/recall", params={"query": "quarterly budget note", "limit": 5, "diversity_factor": "0"})
    ).json()["results"]
    finals = [r["final_score"] for r in flat]
    assert finals == sorted(finals, reverse=True)


async def test_as_of_answers_with_what_was_current_then(client):
    old = await store(client, "The API rate limit is 100 requests per minute")
    await indexed(client, old)
    before = datetime.now(UTC)
    await asyncio.sleep(0.05)
    new = (
        await client.post(
            "/memory", json={"content": "The API rate limit is 500 requests per minute", "supersedes_memory_id": old}
        )
    ).json()["memory_id"]
    await indexed(client, new)
    now_ids = ids_of(await client.get("/recall", params={"query": "API rate limit requests", "limit": 5}))
    assert new in now_ids and old not in now_ids
    then = ids_of(await client.get("/recall", params={"query": "API rate limit requests", "as_of": before.isoformat()}))
    assert old in then and new not in then


async def test_by_tag_pages_in_a_stable_order(client):
    ids = []
    for i in range(5):
        ids.append(await store(client, f"Paged memory {i}", tags=["Paging"], importance=0.5 + (i % 2) * 0.2))
    pages, offset = [], 0
    while True:
        page = (await client.get("/memory/by-tag", params={"tags": "paging", "limit": 2, "offset": offset})).json()
        pages.append([m["id"] for m in page["memories"]])
        offset += page["count"]
        if not page["has_more"]:
            break
    flat = [i for p in pages for i in p]
    assert sorted(flat) == sorted(ids) and len(pages) == 3
    assert flat[:2] == sorted([ids[1], ids[3]], key=lambda i: flat.index(i))
    assert (await client.get("/memory/by-tag")).status_code == 400
    over = (await client.get("/memory/by-tag", params={"tags": "paging", "limit": 5000})).json()
    assert over["limit"] == 200


async def test_rebuild_from_the_graph_reproduces_the_index(client, stack_services):
    import io

    from services.recall.reindex import rebuild

    expired = (datetime.now(UTC) + timedelta(seconds=2)).isoformat()
    ids = [await store(client, f"Rebuild check memory {i} about vector projections") for i in range(6)]
    closing = await store(client, "Rebuild check memory that expires soon", t_invalid=expired)
    old = ids[0]
    new = (
        await client.post("/memory", json={"content": "Rebuild check replacement", "supersedes_memory_id": old})
    ).json()["memory_id"]
    await indexed(client, *ids[1:], closing, new)
    await asyncio.sleep(2.2)
    query = {"query": "rebuild check memory vector projections", "limit": 20, "diversity_factor": 0}
    before = (await client.get("/recall", params=query)).json()["results"]
    out = io.StringIO()
    last = await rebuild(f"127.0.0.1:{stack_services['recall'].port}", batch_size=3, out=out)
    assert last.done and last.total >= 8 and last.indexed == last.total - last.skipped
    lines = out.getvalue().splitlines()
    assert len(lines) >= 3 and lines[-1].endswith("done")  # progress per batch of 3
    after = (await client.get("/recall", params=query)).json()["results"]
    assert [(r["id"], round(r["final_score"], 6)) for r in after] == [
        (r["id"], round(r["final_score"], 6)) for r in before
    ]
    assert closing not in [r["id"] for r in after]  # the window survives the rebuild
    replaced = [r for r in after if r["state_replaces"] == old]
    assert replaced and replaced[0]["id"] == new  # and so does the supersession
