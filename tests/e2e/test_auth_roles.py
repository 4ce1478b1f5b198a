"""Roles through the gateway over HTTP: for each token (the tokens file's
read, write, review and admin; the single-tenant AUTOMEM token with and
without X-Admin-Token; none; an unknown one), every route answers 2xx when
the role allows it, 403 when it does not, 401 without a valid token; and the
tokens file is re-read while the gateway runs."""

from __future__ import annotations

import asyncio
import hashlib
import json
import uuid
from collections.abc import Awaitable, Callable

import httpx
import pytest

from tests.e2e.conftest import API_TOKEN
from tests.waiting import wait_for

pytestmark = pytest.mark.e2e

ADMIN = "admin-secret"
TOKENS = {role: f"alpha-{role}-token" for role in ("read", "write", "review", "admin")}
RANK = {"read": 0, "write": 1, "review": 2, "admin": 3}


def entry(token: str, tenant: str, role: str, **extra) -> dict:
    return {"token_sha256": hashlib.sha256(token.encode()).hexdigest(), "tenant": tenant, "role": role, **extra}


def write_tokens(path, entries: list[dict]) -> None:
    """Written whole and renamed into place, as an operator's tool should."""
    staged = path.with_suffix(".tmp")
    staged.write_text(json.dumps(entries))
    staged.replace(path)


@pytest.fixture
def tokens_path(tmp_path):
    path = tmp_path / "tokens.json"
    write_tokens(path, [entry(token, "alpha", role) for role, token in TOKENS.items()])
    return path


@pytest.fixture
def stack_settings(settings, tokens_path):
    return settings.override(
        {
            "enrichment_enabled": False,
            "memgrid_tokens_file": tokens_path,
            "tokens_file_check_seconds": 0.1,
            "admin_api_token": ADMIN,
            # A low-confidence Decision waits for review, so the review routes have something to decide.
            "review_low_confidence_types": ["Decision"],
        }
    )


def client_for(gateway_url: str, token: str | None, **headers: str) -> httpx.AsyncClient:
    if token is not None:
        headers["Authorization"] = f"Bearer {token}"
    return httpx.AsyncClient(base_url=gateway_url, headers=headers)


async def store(client: httpx.AsyncClient, content: str, tags: list[str] | None = None) -> str:
    reply = await client.post("/memory", json={"content": content, "type": "Context", "tags": tags or ["roles"]})
    assert reply.status_code == 201, reply.text
    return reply.json()["memory_id"]


Call = Callable[[httpx.AsyncClient], Awaitable[httpx.Response]]


def routes(owner: httpx.AsyncClient, kept: str, other: str) -> list[tuple[str, str, Call]]:
    """(name, role needed, call) for every route; calls that consume a memory
    make a fresh one first (as `owner`, an admin of the same tenant)."""

    async def supersede(c):
        # Unique: a supersede (INVALIDATED_BY) tombstones the old content, which a later call stores again.
        old = await store(owner, f"Deploys go out on Fridays {uuid.uuid4()}")
        return await c.post("/memory", json={"content": "Deploys go out on Thursdays", "supersedes_memory_id": old})

    async def delete(c):
        return await c.delete(f"/memory/{await store(owner, 'A note to delete')}")

    async def pending() -> str:
        # REVIEW_LOW_CONFIDENCE_TYPES holds Decision (stack_settings): this one waits for review.
        reply = await owner.post(
            "/memory", json={"content": f"Maybe move to Rust {uuid.uuid4()}", "type": "Decision", "confidence": 0.3}
        )
        assert reply.status_code == 201 and reply.json()["memory_id"], reply.text
        return reply.json()["memory_id"]

    async def approve(c):
        return await c.post(f"/review/{await pending()}/approve")

    async def reject(c):
        return await c.post(f"/review/{await pending()}/reject", json={"note": "not ours"})

    async def reject_by_delete(c):
        return await c.delete(f"/memory/{await store(owner, f'A rejected note {uuid.uuid4()}')}?reason=rejected")

    async def remove_tombstone(c):
        gone = await store(owner, f"A tombstoned note {uuid.uuid4()}")
        deleted = await owner.delete(f"/memory/{gone}", params={"tombstone": "true"})
        assert deleted.status_code == 200, deleted.text
        return await c.delete(f"/admin/tombstones/{deleted.json()['tombstone_id']}")

    return [
        ("GET /memory/{id}", "read", lambda c: c.get(f"/memory/{kept}")),
        ("GET /memory/by-tag", "read", lambda c: c.get("/memory/by-tag", params={"tags": "roles"})),
        ("GET /recall", "read", lambda c: c.get("/recall", params={"query": "roles"})),
        ("GET /startup-recall", "read", lambda c: c.get("/startup-recall")),
        ("GET /memories/{id}/related", "read", lambda c: c.get(f"/memories/{kept}/related")),
        ("GET /enrichment/status", "read", lambda c: c.get("/enrichment/status")),
        ("POST /memory", "write", lambda c: c.post("/memory", json={"content": "Tabs over spaces"})),
        ("POST /memory/batch", "write", lambda c: c.post("/memory/batch", json={"memories": [{"content": "x"}]})),
        ("PATCH /memory/{id}", "write", lambda c: c.patch(f"/memory/{kept}", json={"importance": 0.7})),
        ("POST /associate", "write", lambda c: c.post("/associate", json=association(kept, other))),
        ("POST /memory (supersede)", "write", supersede),
        ("DELETE /memory/{id}", "write", delete),
        ("DELETE /memory/by-tag", "write", lambda c: c.delete("/memory/by-tag", params={"tags": "nothing-here"})),
        ("POST /enrichment/reprocess", "admin", lambda c: c.post("/enrichment/reprocess", json={"ids": [kept]})),
        ("GET /memory/{id}/history", "read", lambda c: c.get(f"/memory/{kept}/history")),
        ("GET /audit", "admin", lambda c: c.get("/audit", params={"limit": 5})),
        ("POST /admin/audit/verify", "admin", lambda c: c.post("/admin/audit/verify")),
        ("GET /review", "review", lambda c: c.get("/review")),
        ("POST /review/{id}/approve", "review", approve),
        ("POST /review/{id}/reject", "review", reject),
        ("DELETE /memory/{id}?reason=rejected", "write", reject_by_delete),
        ("GET /admin/tombstones", "admin", lambda c: c.get("/admin/tombstones")),
        ("DELETE /admin/tombstones/{id}", "admin", remove_tombstone),
    ]


def association(a: str, b: str) -> dict:
    return {"memory1_id": a, "memory2_id": b, "type": "RELATES_TO", "strength": 0.5}


async def answers(
    gateway_url: str, token: str | None, owner_token: str = TOKENS["admin"], **headers: str
) -> dict[str, tuple[str, int]]:
    """Every route's (needed role, status) for this token, on memories
    `owner_token` (a writer of the same tenant) stores."""
    async with client_for(gateway_url, owner_token) as owner, client_for(gateway_url, token, **headers) as c:
        kept, other = await store(owner, "Runbooks live in Notion"), await store(owner, "Alerts go to PagerDuty")
        found = {}
        for name, needed, call in routes(owner, kept, other):
            reply = await call(c)
            found[name] = (needed, reply.status_code)
            if reply.status_code >= 400:
                body = reply.json()
                assert body["status"] == "error" and body["code"] == reply.status_code, (name, body)
        return found


@pytest.mark.parametrize("role", list(TOKENS))
async def test_each_role_reaches_exactly_its_routes(gateway_url, role):
    for name, (needed, status) in (await answers(gateway_url, TOKENS[role])).items():
        if RANK[role] >= RANK[needed]:
            assert 200 <= status < 300, (role, name, status)
        else:
            assert status == 403, (role, name, status)


async def test_the_single_tenant_token_writes_but_needs_x_admin_token_for_admin_routes(gateway_url):
    for name, (needed, status) in (await answers(gateway_url, API_TOKEN, API_TOKEN)).items():
        if needed in ("review", "admin"):
            assert status == 403, (name, status)
        else:
            assert 200 <= status < 300, (name, status)
    for name, (_, status) in (await answers(gateway_url, API_TOKEN, API_TOKEN, **{"X-Admin-Token": ADMIN})).items():
        assert 200 <= status < 300, (name, status)
    wrong = await answers(gateway_url, API_TOKEN, API_TOKEN, **{"X-Admin-Token": "guess"})
    assert wrong["POST /enrichment/reprocess"][1] == 403


async def test_the_admin_token_is_read_where_automem_reads_it(gateway_url):
    """X-Admin-Token, X-Admin-Api-Key or ?admin_token=, beside the API token."""
    async with httpx.AsyncClient(base_url=gateway_url, headers={"Authorization": f"Bearer {API_TOKEN}"}) as c:
        for headers, params in (
            ({"X-Admin-Token": ADMIN}, {}),
            ({"X-Admin-Api-Key": ADMIN}, {}),
            ({}, {"admin_token": ADMIN}),
        ):
            reply = await c.get("/audit", headers=headers, params={"limit": 1, **params})
            assert reply.status_code == 200, (headers, params, reply.text)
        for headers, params in (({"X-Admin-Api-Key": "guess"}, {}), ({}, {"admin_token": "guess"}), ({}, {})):
            reply = await c.get("/audit", headers=headers, params={"limit": 1, **params})
            assert reply.status_code == 403, (headers, params, reply.text)


async def test_x_admin_token_does_not_lift_a_file_token_role(gateway_url):
    found = await answers(gateway_url, TOKENS["write"], **{"X-Admin-Token": ADMIN})
    assert found["POST /enrichment/reprocess"][1] == 403


@pytest.mark.parametrize("token", [None, "not-a-token", TOKENS["read"] + "x", TOKENS["admin"][:-1]])
async def test_no_or_an_unknown_token_is_401_everywhere(gateway_url, token):
    async with client_for(gateway_url, TOKENS["admin"]) as owner, client_for(gateway_url, token) as c:
        kept = await store(owner, "A memory")
        for name, _, call in routes(owner, kept, kept):
            reply = await call(c)
            assert reply.status_code == 401, (name, reply.status_code)
            body = reply.json()
            assert (body["status"], body["code"], body["reason"]) == ("error", 401, "UNAUTHENTICATED")


async def test_health_stays_open(anonymous):
    assert (await anonymous.get("/health")).status_code in (200, 503)


async def test_every_place_a_token_may_come_from_works_for_file_tokens(gateway_url):
    async with httpx.AsyncClient(base_url=gateway_url) as c:
        token = TOKENS["read"]
        for reply in (
            await c.get("/startup-recall", headers={"X-API-Key": token}),
            await c.get("/startup-recall", params={"api_key": token}),
            await c.get("/startup-recall", headers={"Authorization": f"bearer {token}"}),
        ):
            assert reply.status_code == 200, reply.text


async def test_the_tokens_file_is_reread_while_running(gateway_url, tokens_path):
    async with client_for(gateway_url, "gamma-token") as gamma, client_for(gateway_url, TOKENS["read"]) as reader:
        assert (await gamma.get("/startup-recall")).status_code == 401
        assert (await reader.post("/memory", json={"content": "x"})).status_code == 403
        write_tokens(
            tokens_path,
            [
                entry("gamma-token", "gamma", "write"),
                entry(TOKENS["read"], "alpha", "write"),
                entry(TOKENS["admin"], "alpha", "admin"),
            ],
        )

        async def reloaded() -> bool:
            return (await gamma.get("/startup-recall")).status_code == 200

        await wait_for(reloaded)
        assert (await reader.post("/memory", json={"content": "promoted"})).status_code == 201
        # Revoked: the write token is gone from the file.
        async with client_for(gateway_url, TOKENS["write"]) as revoked:
            assert (await revoked.get("/startup-recall")).status_code == 401
        # A broken file is refused; the last good one stays in force.
        tokens_path.write_text('[{"token_sha256": ')
        await asyncio.sleep(0.3)
        assert (await gamma.get("/startup-recall")).status_code == 200
        # The new tenant sees only its own memories.
        created = await gamma.post("/memory", json={"content": "gamma's own", "tags": ["roles"]})
        listed = (await gamma.get("/memory/by-tag", params={"tags": "roles"})).json()["memories"]
        assert [m["id"] for m in listed] == [created.json()["memory_id"]]
        assert listed[0]["tenant"] == "gamma"
