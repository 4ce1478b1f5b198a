"""Memory limits per tenant through the gateway: a tokens file
entry's memory_limit, else TENANT_MEMORY_LIMIT; over it, POST /memory,
POST /memory/batch and supersede answer 429 naming the limit, and nothing
of the refused request is written."""

from __future__ import annotations

import asyncio
import hashlib
import json

import httpx
import pytest

from tests.e2e.conftest import API_TOKEN

pytestmark = pytest.mark.e2e

LIMITED = "alpha-token"  # memory_limit 3 in the tokens file
DEFAULTED = "beta-token"  # no memory_limit: TENANT_MEMORY_LIMIT (5)
OTHER_LIMITED = "gamma-token"  # memory_limit 3, another tenant


@pytest.fixture
def stack_settings(settings, tmp_path):
    path = tmp_path / "tokens.json"
    entries = [
        (LIMITED, "alpha", {"memory_limit": 3}),
        (DEFAULTED, "beta", {}),
        (OTHER_LIMITED, "gamma", {"memory_limit": 3}),
    ]
    path.write_text(
        json.dumps(
            [
                {"token_sha256": hashlib.sha256(t.encode()).hexdigest(), "tenant": tenant, "role": "write", **extra}
                for t, tenant, extra in entries
            ]
        )
    )
    return settings.override({"enrichment_enabled": False, "memgrid_tokens_file": path, "tenant_memory_limit": 5})


@pytest.fixture
async def as_(gateway_url):
    opened: list[httpx.AsyncClient] = []

    def open_client(token: str) -> httpx.AsyncClient:
        client = httpx.AsyncClient(base_url=gateway_url, headers={"Authorization": f"Bearer {token}"})
        opened.append(client)
        return client

    yield open_client
    for client in opened:
        await client.aclose()


async def stored(client: httpx.AsyncClient) -> list[str]:
    reply = await client.get("/memory/by-tag", params={"tags": "quota", "limit": 200, "state_mode": "history"})
    return [m["id"] for m in reply.json()["memories"]]


async def create(client: httpx.AsyncClient, content: str, **fields) -> httpx.Response:
    return await client.post("/memory", json={"content": content, "type": "Context", "tags": ["quota"], **fields})


def assert_refused(reply: httpx.Response, limit: int) -> None:
    assert reply.status_code == 429, reply.text
    body = reply.json()
    assert body["status"] == "error" and body["code"] == 429 and body["reason"] == "MEMORY_LIMIT_EXCEEDED"
    assert f"memory limit of {limit}" in body["message"]
    assert body["details"]["limit"] == str(limit)


async def test_the_create_past_the_limit_is_429_and_writes_nothing(as_):
    alpha = as_(LIMITED)
    ids = [(await create(alpha, f"note {i}")).json()["memory_id"] for i in range(3)]
    refused = await create(alpha, "one too many")
    assert_refused(refused, 3)
    assert refused.json()["details"]["stored"] == "3"
    assert sorted(await stored(alpha)) == sorted(ids)
    # Deleting one frees a place.
    assert (await alpha.delete(f"/memory/{ids[0]}")).status_code == 200
    assert (await create(alpha, "fits again")).status_code == 201
    assert_refused(await create(alpha, "full again"), 3)


async def test_a_batch_that_would_cross_the_limit_is_refused_whole(as_):
    alpha = as_(LIMITED)
    first = (await create(alpha, "the first")).json()["memory_id"]
    batch = {"memories": [{"content": f"batch {i}", "tags": ["quota"]} for i in range(3)]}
    refused = await alpha.post("/memory/batch", json=batch)
    assert_refused(refused, 3)
    assert refused.json()["details"]["requested"] == "3"
    assert await stored(alpha) == [first]
    batch["memories"] = batch["memories"][:2]
    assert (await alpha.post("/memory/batch", json=batch)).status_code == 201
    assert len(await stored(alpha)) == 3


async def test_supersede_counts_the_replacement(as_):
    alpha = as_(LIMITED)
    old = (await create(alpha, "Deploys go out on Fridays")).json()["memory_id"]
    middle = (await create(alpha, "Deploys go out on Thursdays", supersedes_memory_id=old)).json()["memory_id"]
    assert len(await stored(alpha)) == 2  # the old memory stays, closed
    await create(alpha, "filler")
    refused = await create(alpha, "Deploys go out on Wednesdays", supersedes_memory_id=middle)
    assert_refused(refused, 3)
    kept = (await alpha.get(f"/memory/{middle}")).json()["memory"]
    assert kept["state"] == "current" and kept["t_invalid"] is None and kept["content"].endswith("Thursdays")
    assert len(await stored(alpha)) == 3


async def test_an_idempotent_retry_at_the_limit_replays_instead_of_refusing(as_):
    alpha = as_(LIMITED)
    await create(alpha, "one")
    await create(alpha, "two")
    headers = {"Idempotency-Key": "quota-retry-1"}
    body = {"content": "three", "type": "Context", "tags": ["quota"]}
    first = await alpha.post("/memory", json=body, headers=headers)
    again = await alpha.post("/memory", json=body, headers=headers)
    assert first.status_code == again.status_code == 201
    assert again.headers["Idempotent-Replayed"] == "true"
    assert again.json()["memory_id"] == first.json()["memory_id"]


async def test_the_settings_limit_applies_where_the_file_sets_none_and_tenants_count_apart(as_):
    beta, legacy, gamma, alpha = as_(DEFAULTED), as_(API_TOKEN), as_(OTHER_LIMITED), as_(LIMITED)
    for client in (beta, legacy):
        for i in range(5):
            assert (await create(client, f"note {i}")).status_code == 201
        assert_refused(await create(client, "sixth"), 5)
    for client in (gamma, alpha):  # a full tenant takes no place from another
        for i in range(3):
            assert (await create(client, f"note {i}")).status_code == 201
    assert_refused(await create(gamma, "fourth"), 3)


async def test_concurrent_creates_never_overshoot_the_limit(as_):
    alpha = as_(LIMITED)
    replies = await asyncio.gather(*(create(alpha, f"racing {i}") for i in range(8)))
    assert sorted(r.status_code for r in replies) == [201] * 3 + [429] * 5
    assert len(await stored(alpha)) == 3
