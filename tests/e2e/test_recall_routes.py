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
    "id", "memory", "match_type", "match_score", "final_score", "score_components", "relations", "deduped_from",
}  # fmt: skip
COMPONENTS = {
    "vector", "keyword", "metadata", "tag", "exact", "relation", "importance", "confidence", "recency", "trust",
    "context", "relevance", "speaker", "neighbourhood", "related",
}  # fmt: skip


@pytest.fixture
def stack_settings(settings):
    return settings.override({"enrichment_enabled": True})


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
    assert "state_replaces" not in top and top["deduped_from"] == []  # no nulls: absent, as AutoMem's
    assert None not in top["memory"].values()
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
    # by-tag: every memory of the chain, flagged; current mode: the head in the old one's place.
    listed = (await client.get("/memory/by-tag", params={"tags": "ops"})).json()
    assert {m["id"]: (m["state"], m.get("replaced_by")) for m in listed["memories"]} == {
        old: ("superseded", head),
        middle: ("superseded", head),
        head: ("current", None),
    }
    current = (await client.get("/memory/by-tag", params={"tags": "ops", "state_mode": "current"})).json()
    assert [m["id"] for m in current["memories"]] == [head]
    assert current["memories"][0]["state_replaces"] == old
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
    # As AutoMem reads it: a whole number below 1 is 1 (not the default).
    assert len(ids_of(await client.get("/recall", params={**query, "limit": "0"}))) == 1
    assert len(ids_of(await client.get("/recall", params={**query, "limit": "-3"}))) == 1
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
    for below in ("0", "-5"):  # 1..200: below is 1, as in AutoMem
        one = (await client.get("/memory/by-tag", params={"tags": "paging", "limit": below})).json()
        assert (one["limit"], one["count"], one["has_more"]) == (1, 1, True), one
    lenient = (await client.get("/memory/by-tag", params={"tags": "paging", "limit": "many"})).json()
    assert (lenient["limit"], lenient["count"]) == (20, 5)


async def test_rebuild_from_the_graph_reproduces_the_index(client, stack_services, stack_settings):
    import io

    from services.recall.reindex import rebuild
    from tests.conftest import plane_of

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
    last = await rebuild(
        f"127.0.0.1:{stack_services['recall'].port}", batch_size=3, plane=plane_of(stack_settings), out=out
    )
    assert last.done and last.total >= 8 and last.indexed == last.total - last.skipped
    lines = out.getvalue().splitlines()
    assert len(lines) >= 3 and lines[-1].endswith("done")  # progress per batch of 3
    after = (await client.get("/recall", params=query)).json()["results"]
    assert [(r["id"], round(r["final_score"], 6)) for r in after] == [
        (r["id"], round(r["final_score"], 6)) for r in before
    ]
    assert closing not in [r["id"] for r in after]  # the window survives the rebuild
    replaced = [r for r in after if r.get("state_replaces") == old]
    assert replaced and replaced[0]["id"] == new  # and so does the supersession


async def test_by_tag_lists_what_delete_by_tag_removes_each_memory_flagged(client, stack_settings):
    current = await store(client, "Backups run nightly at two", tags=["bulk-list"], importance=0.9)
    old = await store(client, "Backups run nightly at one", tags=["bulk-list"], importance=0.8)
    reply = await client.post(
        "/memory", json={"content": "Backups run nightly at three", "supersedes_memory_id": old, "tags": ["other"]}
    )
    head = reply.json()["memory_id"]
    past = datetime.now(UTC) - timedelta(days=1)
    expired = await store(
        client,
        "Backups ran weekly once",
        tags=["Bulk-List"],
        importance=0.7,
        t_valid=(past - timedelta(days=30)).isoformat(),
        t_invalid=past.isoformat(),
    )
    archived = await store(client, "Backups were manual", tags=["bulk-list"], importance=0.6)
    assert (await client.patch(f"/memory/{archived}", json={"archived": True})).status_code == 200

    listed = (await client.get("/memory/by-tag", params={"tags": "bulk-list"})).json()
    assert listed["count"] == 4
    assert [(m["id"], m["state"], m.get("replaced_by")) for m in listed["memories"]] == [
        (current, "current", None),
        (old, "superseded", head),
        (expired, "expired", None),
        (archived, "archived", None),
    ]
    history = (await client.get("/memory/by-tag", params={"tags": "bulk-list", "state_mode": "history"})).json()
    assert [m["id"] for m in history["memories"]] == [m["id"] for m in listed["memories"]]
    # state_mode=current withholds them; the superseded one's head (without the tag) stands in its place.
    withheld = (await client.get("/memory/by-tag", params={"tags": "bulk-list", "state_mode": "current"})).json()
    assert [(m["id"], m["state"], m.get("state_replaces")) for m in withheld["memories"]] == [
        (current, "current", None),
        (head, "current", old),
    ]
    deleted = (await client.delete("/memory/by-tag", params={"tags": "bulk-list"})).json()
    assert deleted["deleted_count"] == listed["count"] == 4
    assert (await client.get("/memory/by-tag", params={"tags": "bulk-list"})).json()["memories"] == []


async def test_startup_recall_answers_in_the_reference_shape_with_only_current_lessons(client):
    lesson = await store(client, "Never force-push to main", tags=["lesson"], importance=0.95)
    critical = await store(client, "Rotate the API keys before a release", tags=["Critical"], importance=0.6)
    old = await store(client, "Deploy with the old script", tags=["lesson"], importance=0.99)
    reply = await client.post(
        "/memory",
        json={"content": "Deploy with make", "supersedes_memory_id": old, "tags": ["lesson"], "importance": 0.5},
    )
    head = reply.json()["memory_id"]
    past = datetime.now(UTC) - timedelta(days=1)
    await store(
        client,
        "Ask before deleting branches",
        tags=["ai-assistant"],
        importance=1.0,
        t_valid=(past - timedelta(days=3)).isoformat(),
        t_invalid=past.isoformat(),
    )
    rule = await store(client, "Memories are recalled at session start", tags=["memory-recall"])
    plain = await store(client, "The office plant needs water", importance=1.0)

    body = (await client.get("/startup-recall")).json()
    assert body["status"] == "success"
    # The superseded lesson's head stands in its place (and is not listed twice).
    assert [m["id"] for m in body["critical_lessons"]] == [head, lesson, critical]
    assert body["lesson_count"] == 3 and body["has_critical"] is True
    assert {"id", "content", "tags", "importance", "type", "metadata"} <= set(body["critical_lessons"][0])
    assert [m["id"] for m in body["system_rules"]] == [rule]
    assert body["summary"] == "Recalled 3 lesson(s) and 1 system rule(s)"
    # Today's listing stays: the most important current memories.
    assert body["results"][0]["id"] == plain and body["count"] == len(body["results"])
    assert old not in {r["id"] for r in body["results"]}

    await client.delete(f"/memory/{lesson}")
    body = (await client.get("/startup-recall")).json()
    assert [m["id"] for m in body["critical_lessons"]] == [head, critical] and body["has_critical"] is False


async def associate(client, one: str, two: str, strength: float, kind: str = "RELATES_TO") -> None:
    reply = await client.post(
        "/associate", json={"memory1_id": one, "memory2_id": two, "type": kind, "strength": strength}
    )
    assert reply.status_code == 201, reply.text


async def supersede(client, old: str, content: str, **fields) -> str:
    reply = await client.post("/memory", json={"content": content, "supersedes_memory_id": old, **fields})
    assert reply.status_code == 201, reply.text
    return reply.json()["memory_id"]


async def test_expand_relations_appends_what_is_one_edge_away(client):
    seed = await store(client, "Zebrafish tanks need weekly water changes", tags=["lab"])
    near = await store(client, "The aquarium room key hangs by the door", tags=["facilities"])
    old = await store(client, "Pumps are serviced in March", tags=["lab"])
    new = await supersede(client, old, "Pumps are serviced in April", tags=["lab"])
    await associate(client, seed, near, 0.8)
    await associate(client, seed, old, 0.6)
    await indexed(client, seed, near, old, new)
    params = {"query": "zebrafish water changes", "limit": 1}
    plain = (await client.get("/recall", params=params)).json()
    assert [r["id"] for r in plain["results"]] == [seed] and "expansion" not in plain
    body = (await client.get("/recall", params={**params, "expand_relations": "true"})).json()
    assert body["results"][0]["id"] == seed and body["count"] == 3  # appended after the limit's results
    by_id = {r["id"]: r for r in body["results"][1:]}
    assert set(by_id) == {near, new}
    assert by_id[near]["match_type"] == "relation" and by_id[near]["relation_score"] == 0.8
    assert by_id[near]["related_to"] == [{"type": "RELATES_TO", "strength": 0.8, "from": seed}]
    # The state pass runs over what is appended: the superseded neighbour shows as its head.
    assert by_id[new]["match_type"] == "state_replacement" and by_id[new]["state_replaces"] == old
    assert body["expansion"] == {
        "enabled": True, "seed_count": 1, "expanded_count": 2, "relation_limit": 5, "expansion_limit": 10,
        "respect_tags": False,
    }  # fmt: skip
    for alias in ("expand", "expand_associations"):
        again = (await client.get("/recall", params={**params, alias: "true"})).json()
        assert ids_of_body(again) == ids_of_body(body) and again["expansion"]["expanded_count"] == 2
    capped = (await client.get("/recall", params={**params, "expand_relations": "true", "expansion_limit": 1})).json()
    assert capped["count"] == 2 and capped["expansion"]["expanded_count"] == 1
    capped = (await client.get("/recall", params={**params, "expand": "true", "relation_expansion_limit": 1})).json()
    assert capped["expansion"]["expansion_limit"] == 1
    # Expansion leaves the tag scope unless expand_respect_tags keeps it in.
    tagged = {**params, "tags": "lab", "expand_relations": "true"}
    assert set(ids_of_body((await client.get("/recall", params=tagged)).json())) == {seed, near, new}
    kept = (await client.get("/recall", params={**tagged, "expand_respect_tags": "true"})).json()
    assert ids_of_body(kept) == [seed, new] and kept["expansion"]["respect_tags"] is True


def ids_of_body(body: dict) -> list[str]:
    return [r["id"] for r in body["results"]]


async def entity_tagged(client, memory_id: str, tag: str) -> None:
    async def tagged():
        return tag in (await client.get(f"/memory/{memory_id}")).json()["memory"]["tags"]

    await wait_for(tagged)


async def test_expand_entities_appends_memories_sharing_an_entity(client):
    first = await store(client, "We deploy the billing service with Helm charts")
    second = await store(client, "Helm values for staging live in the infra repository")
    for memory_id in (first, second):
        await entity_tagged(client, memory_id, "entity:tools:helm")
    await indexed(client, first, second)
    params = {"query": "billing service deploy", "limit": 1}
    plain = (await client.get("/recall", params=params)).json()
    assert ids_of_body(plain) == [first] and "entity_expansion" not in plain
    body = (await client.get("/recall", params={**params, "expand_entities": "true"})).json()
    assert ids_of_body(body) == [first, second]
    appended = body["results"][1]
    assert appended["match_type"] == "entity_expansion" and appended["expanded_from_entity"] == "helm"
    assert body["entity_expansion"]["enabled"] is True and body["entity_expansion"]["expanded_count"] == 1
    assert "helm" in body["entity_expansion"]["entities_found"]
    alias = (await client.get("/recall", params={**params, "entity_expansion": "true"})).json()
    assert ids_of_body(alias) == [first, second]


async def test_the_envelope_has_the_reference_fields_under_its_conditions(client):
    one = await store(client, "Glacier hikes start at dawn", tags=["trips"])
    two = await store(client, "glacier hikes  start at dawn", tags=["trips"])
    old = await store(client, "The glacier hut sleeps eight", tags=["trips"])
    new = await supersede(client, old, "The glacier hut sleeps twelve", tags=["trips"])
    await indexed(client, one, two, old, new)
    plain = (await client.get("/recall", params={"query": "glacier hikes hut", "limit": 10})).json()
    assert plain["dedup_removed"] == 1 and plain["vector_search"] == {"enabled": True, "matched": True}
    assert plain["keywords"] == ["glacier", "hikes", "hut"] and "queries" not in plain
    assert (plain["tag_mode"], plain["tag_match"], plain["state_mode"]) == ("any", "prefix", "current")
    assert plain["state_filter"] == {"current_only": True, "suppressed_count": 1, "replacement_count": 1}
    for absent in ("tags", "tag_scope", "exclude_tags", "time_window", "expansion", "entity_expansion",
                   "score_filter", "scope_fallback", "context_priority"):  # fmt: skip
        assert absent not in plain, absent
    debug = (await client.get("/recall", params={"query": "glacier hut", "state_debug": "true"})).json()
    assert {"id": old, "reason": "superseded", "replacement_id": new} in debug["state_filter"]["suppressed"]
    assert debug["state_filter"]["replacements"] == [{"id": new, "replaces_id": old}]
    multi = (await client.get("/recall", params=[("queries", "glacier"), ("queries", "hut")])).json()
    assert multi["queries"] == ["glacier", "hut"] and "keywords" not in multi
    scoped = await client.get(
        "/recall",
        params={
            "query": "glacier",
            "tags": "Trips",
            "exclude_tags": "x",
            "time_query": "last 7 days",
            "tag_mode": "all",
        },
    )
    body = scoped.json()
    assert body["tags"] == ["trips"] and body["exclude_tags"] == ["x"] and body["tag_mode"] == "all"
    assert body["tag_scope"]["filtered"] is True and body["tag_scope"]["gated_low_evidence"] == 0
    assert body["tag_scope"]["pool_size_hint"] >= 3
    assert set(body["time_window"]) == {"start", "end"}
    history = (await client.get("/recall", params={"query": "glacier", "state_mode": "history"})).json()
    assert "state_filter" not in history and history["state_mode"] == "history"
    assert (await client.get("/recall", params={"order_by": "time_asc", "query": "glacier"})).json()["sort"] == (
        "time_asc"
    )
    assert "time_window" in (await client.get("/recall", params={"query": "glacier", "time": "today"})).json()


async def test_scope_fallback_fills_from_outside_the_tags(client):
    inside = await store(client, "Kiln firing schedule for the ceramics class", tags=["ceramics"])
    outside = await store(client, "Kiln maintenance checklist", tags=["facilities"])
    await indexed(client, inside, outside)
    params = {"query": "kiln", "tags": "ceramics", "limit": 3}
    scoped = (await client.get("/recall", params=params)).json()
    assert ids_of_body(scoped) == [inside] and "scope_fallback" not in scoped
    body = (await client.get("/recall", params={**params, "scope_fallback": "true"})).json()
    assert ids_of_body(body) == [inside, outside] and body["scope_fallback"] is True
    assert body["results"][1]["outside_tag_scope"] is True and "outside_tag_scope" not in body["results"][0]
    excluded = await client.get("/recall", params={**params, "scope_fallback": "true", "exclude_tags": "facilities"})
    assert ids_of_body(excluded.json()) == [inside] and "scope_fallback" not in excluded.json()


async def test_auto_decompose_and_per_query_limit(client):
    ids = [
        await store(client, content)
        for content in ("kiln alpha", "kiln beta", "kiln gamma", "glaze delta", "glaze epsilon", "glaze zeta")
    ]
    await indexed(client, *ids)
    both = [("queries", "kiln"), ("queries", "glaze"), ("limit", "10"), ("diversity_factor", "0")]
    assert (await client.get("/recall", params=both)).json()["count"] == 6
    capped = (await client.get("/recall", params=[*both, ("per_query_limit", "1")])).json()
    assert capped["count"] == 2 and {r["memory"]["content"].split()[0] for r in capped["results"]} == {"kiln", "glaze"}
    question = {"query": "Would Caroline pursue writing?"}
    decomposed = (await client.get("/recall", params={**question, "auto_decompose": "true"})).json()
    assert decomposed["queries"] == ["Would Caroline pursue writing?", "Caroline", "Caroline writing"]
    assert "keywords" not in decomposed
    assert "queries" not in (await client.get("/recall", params=question)).json()


async def test_context_hints_boost_and_bring_the_contexts_notes(client):
    style = await store(client, "Four spaces per indent level", tags=["python-style"], type="Style")
    other = await store(client, "Four spaces fit the terminal width", tags=["misc"])
    await indexed(client, style, other)
    hinted = {"query": "four spaces", "limit": 5}
    for hint in ({"language": "python"}, {"lang": "py"}, {"active_path": "src/app.py"}, {"file_path": "a.py"},
                 {"focus_path": "b.py"}):  # fmt: skip
        body = (await client.get("/recall", params={**hinted, **hint})).json()
        scores = {r["id"]: r["score_components"]["context"] for r in body["results"]}
        assert scores == {style: 1.0, other: 0.0}, hint
        assert body["context_priority"]["language"] == "python"
        assert body["context_priority"]["priority_types"] == ["Preference", "Style"]
    plain = (await client.get("/recall", params=hinted)).json()
    assert {r["score_components"]["context"] for r in plain["results"]} == {0.0} and "context_priority" not in plain
    # The context's notes join the candidates even when the query's words miss them.
    missed = {"query": "terminal width"}
    assert ids_of_body((await client.get("/recall", params=missed)).json()) == [other]
    brought = (await client.get("/recall", params={**missed, "language": "python"})).json()
    assert set(ids_of_body(brought)) == {style, other} and brought["context_priority"]["injected"] is True
    labelled = (await client.get("/recall", params={**missed, "context": "Misc"})).json()
    assert (
        labelled["context_priority"]["priority_tags"] == ["misc"] and labelled["context_priority"]["language"] is None
    )


async def test_score_filters_and_the_adaptive_floor(client):
    ids = [await store(client, f"Basalt column survey {word}") for word in ("north", "south", "east", "west")]
    ids.append(await store(client, "Basalt"))
    await indexed(client, *ids)
    query = {"query": "basalt column survey north", "limit": 10}
    assert "score_filter" not in (await client.get("/recall", params={**query, "adaptive_floor": "false"})).json()
    everything = (await client.get("/recall", params=query)).json()
    floored = (await client.get("/recall", params={**query, "adaptive_floor": "true"})).json()
    if "score_filter" in floored:
        floor = floored["score_filter"]["adaptive_floor"]
        assert all(r["final_score"] >= floor for r in floored["results"])
        assert floored["count"] + floored["score_filter"]["filtered_count"] == everything["count"]
        assert floored["count"] * 2 >= everything["count"]  # at least half stay
    # Scores fall a little between two requests (recency): the bar is set between two clear levels.
    bar = everything["results"][0]["final_score"] - 0.01
    above = sum(1 for r in everything["results"] if r["final_score"] >= bar)
    strict = (await client.get("/recall", params={**query, "min_score": str(bar)})).json()
    assert strict["score_filter"] == {"min_score": bar, "adaptive_floor": None, "filtered_count": 0}
    assert strict["count"] == above < everything["count"]


async def test_recall_request_limits_are_400s_naming_the_field(client):
    too_many = await client.get("/recall", params=[("queries", f"q{i}") for i in range(11)])
    assert too_many.status_code == 400 and "'queries'" in too_many.json()["message"]
    too_long = await client.get("/recall", params={"query": " ".join(["word"] * 65)})
    assert too_long.status_code == 400 and "'query'" in too_long.json()["message"]
    bad_id = await client.get("/recall", params={"query": "x", "priority_ids": "nope"})
    assert bad_id.status_code == 400 and "'priority_ids'" in bad_id.json()["message"]
    ids = ",".join(f"0b0c5d6e-0000-4000-8000-{i:012d}" for i in range(101))
    too_many_ids = await client.get("/recall", params={"query": "x", "priority_ids": ids})
    assert too_many_ids.status_code == 400 and "'priority_ids'" in too_many_ids.json()["message"]


async def test_related_walks_max_depth_and_takes_relationship_types(client, stack_settings):
    words = ("alder", "birch", "cedar", "dogwood", "elm")
    a, b, c, d, e = [await store(client, f"Related walk {word}") for word in words]
    await associate(client, a, b, 0.9)
    await associate(client, b, c, 0.8, "LEADS_TO")
    await associate(client, c, d, 0.7)
    await associate(client, d, e, 0.7)
    one = (await client.get(f"/memories/{a}/related", params={"relation_types": "RELATES_TO,LEADS_TO"})).json()
    assert [r["id"] for r in one["related"]] == [b] and "state_replaces" not in one["related"][0]
    two = (await client.get(f"/memories/{a}/related", params={"types": "RELATES_TO,LEADS_TO", "max_depth": 2})).json()
    assert [r["id"] for r in two["related"]] == [b, c]
    assert (two["related"][1]["relation_type"], two["related"][1]["direction"]) == ("LEADS_TO", "outgoing")
    three = await client.get(f"/memories/{a}/related", params={"types": "RELATES_TO,LEADS_TO", "max_depth": 9})
    assert [r["id"] for r in three.json()["related"]] == [b, c, d]  # at most 3 edges out: not e
    only = await client.get(f"/memories/{a}/related", params={"relationship_types": "RELATES_TO", "max_depth": 3})
    assert [r["id"] for r in only.json()["related"]] == [b]  # b's LEADS_TO is not a RELATES_TO
