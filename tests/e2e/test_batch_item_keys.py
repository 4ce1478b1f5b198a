"""POST /memory/batch with an idempotency_key per item (what `memgrid import`
sends), through the gateway to FalkorDB."""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.e2e


async def test_keyed_items_are_stored_once_whatever_batch_they_come_in(client):
    first = await client.post(
        "/memory/batch",
        json={"memories": [{"content": "a", "idempotency_key": "ka"}, {"content": "b", "idempotency_key": "kb"}]},
    )
    assert first.status_code == 201, first.text
    assert first.json()["replayed"] == 0
    ids = first.json()["memory_ids"]

    again = await client.post(
        "/memory/batch",
        json={"memories": [{"content": "b", "idempotency_key": "kb"}, {"content": "c", "idempotency_key": "kc"}]},
    )
    assert again.status_code == 201, again.text
    assert again.json()["replayed"] == 1 and again.json()["memory_ids"][0] == ids[1]

    listed = (await client.get("/memories/export")).json()
    assert sorted(m["content"] for m in listed["memories"]) == ["a", "b", "c"]
    assert listed["next_page_token"] is None


async def test_an_item_key_reused_for_another_memory_or_of_the_wrong_type_is_refused(client):
    await client.post("/memory/batch", json={"memories": [{"content": "a", "idempotency_key": "k"}]})
    reused = await client.post(
        "/memory/batch", json={"memories": [{"content": "x"}, {"content": "not a", "idempotency_key": "k"}]}
    )
    assert reused.status_code == 409 and "index 1" in reused.json()["message"]
    twice = await client.post(
        "/memory/batch",
        json={"memories": [{"content": "p", "idempotency_key": "d"}, {"content": "q", "idempotency_key": "d"}]},
    )
    assert twice.status_code == 400 and "idempotency_key" in twice.json()["message"]
    wrong = await client.post("/memory/batch", json={"memories": [{"content": "p", "idempotency_key": 5}]})
    assert wrong.status_code == 400 and "idempotency_key" in wrong.json()["message"]


async def test_the_export_pages_through_every_memory_in_id_order(client):
    stored = await client.post("/memory/batch", json={"memories": [{"content": f"m{i}"} for i in range(7)]})
    archived = stored.json()["memory_ids"][0]
    await client.patch(f"/memory/{archived}", json={"archived": True})
    seen, token = [], None
    while True:
        page = await client.get("/memories/export", params={"limit": 3, **({"page_token": token} if token else {})})
        assert page.status_code == 200, page.text
        body = page.json()
        assert body["count"] <= 3 and body["limit"] == 3
        seen += body["memories"]
        token = body["next_page_token"]
        if token is None:
            break
    assert [m["id"] for m in seen] == sorted(stored.json()["memory_ids"])
    assert next(m for m in seen if m["id"] == archived)["archived"] is True  # archived ones too
    assert "embedding" not in seen[0]
    with_vectors = (await client.get("/memories/export", params={"with_embedding": "true"})).json()
    assert "embedding" in with_vectors["memories"][0]
    bad = await client.get("/memories/export", params={"page_token": "x" * 300})
    assert bad.status_code == 400 and "page_token" in bad.json()["message"]
