"""A tenant's admin is an admin of its own tenant only. Played as a hostile
tokens-file admin of tenant alpha on a stack that also holds tenant beta:
every admin route (backups, restores, audit, verify, tombstones, reindex,
re-embed, reprocess, review) and every every_tenant flag, aimed at beta's
data, through the real gateway and services. What crosses tenants is an
operator's: a tokens-file entry of role `operator` (it names no tenant), or
the single token with X-Admin-Token; the same calls are checked to work for
one, so the refusals are the boundary and not a broken route."""

from __future__ import annotations

import gzip
import hashlib
import json

import httpx
import pytest

from tests.e2e.conftest import API_TOKEN
from tests.e2e.conftest import gateway_url as gateway_url  # noqa: F401 (the e2e stack's fixtures)
from tests.e2e.conftest import stack_services as stack_services  # noqa: F401
from tests.e2e.test_cli import memgrid
from tests.waiting import wait_for

pytestmark = pytest.mark.e2e

A_ADMIN, A_WRITE, B_ADMIN, B_WRITE, OPERATOR = "alpha-admin", "alpha-write", "beta-admin", "beta-write", "ops"
ADMIN_API_TOKEN = "boundary-admin-secret"


def digest(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


@pytest.fixture
def stack_settings(settings, tmp_path):
    path = tmp_path / "tokens.json"
    entries = [(A_ADMIN, "alpha", "admin"), (A_WRITE, "alpha", "write"), (B_ADMIN, "beta", "admin")]
    entries.append((B_WRITE, "beta", "write"))
    path.write_text(
        json.dumps(
            [{"token_sha256": digest(t), "tenant": tenant, "role": role} for t, tenant, role in entries]
            + [{"token_sha256": digest(OPERATOR), "role": "operator", "id": "ops"}]
        )
    )
    return settings.override(
        {
            "enrichment_enabled": False,
            "memgrid_tokens_file": path,
            "admin_api_token": ADMIN_API_TOKEN,
            "tokens_file_check_seconds": 0.1,
            "review_low_confidence_types": ["Decision"],  # a low-confidence Decision waits for review
        }
    )


@pytest.fixture
async def clients(gateway_url):  # noqa: F811
    opened = {
        token: httpx.AsyncClient(base_url=gateway_url, headers={"Authorization": f"Bearer {token}"}, timeout=60.0)
        for token in (A_ADMIN, A_WRITE, B_ADMIN, B_WRITE, OPERATOR)
    }
    legacy = {"Authorization": f"Bearer {API_TOKEN}", "X-Admin-Token": ADMIN_API_TOKEN}
    opened["legacy-operator"] = httpx.AsyncClient(base_url=gateway_url, headers=legacy, timeout=60.0)
    opened["legacy"] = httpx.AsyncClient(
        base_url=gateway_url, headers={"Authorization": f"Bearer {API_TOKEN}"}, timeout=60.0
    )
    yield opened
    for client in opened.values():
        await client.aclose()


async def store(client: httpx.AsyncClient, content: str, tags: list[str], **fields) -> str:
    reply = await client.post("/memory", json={"content": content, "type": "Context", "tags": tags, **fields})
    assert reply.status_code == 201, reply.text
    return reply.json()["memory_id"]


async def read(client: httpx.AsyncClient, memory_id: str) -> dict:
    reply = await client.get(f"/memory/{memory_id}", params={"state_mode": "history"})
    assert reply.status_code == 200, reply.text
    return {k: v for k, v in reply.json()["memory"].items() if k != "last_accessed"}


def strings_in(body: object) -> set[str]:
    """Every string anywhere in a JSON answer or archive."""
    if isinstance(body, dict):
        return set().union(set(body), *(strings_in(v) for v in body.values()))
    if isinstance(body, list):
        return set().union(*(strings_in(v) for v in body)) if body else set()
    return {body} if isinstance(body, str) else set()


def archive_strings(data: bytes) -> set[str]:
    return strings_in([json.loads(line) for line in gzip.decompress(data).splitlines() if line.strip()])


def assert_refused(reply: httpx.Response, status: int, what: str, names: str | None = None) -> None:
    assert reply.status_code == status, (what, reply.status_code, reply.text)
    assert reply.json()["status"] == "error", what
    if names is not None:
        assert names in reply.json()["message"], (what, reply.json()["message"])


async def beta_world(b: httpx.AsyncClient, b_admin: httpx.AsyncClient) -> dict[str, str]:
    """Beta's memories (one secret), a tombstone, one waiting for review, and beta's own backup."""
    world = {
        "secret": await store(b, "Beta's staging password rotates on Mondays", ["beta-secret"]),
        "plan": await store(b, "Beta moves its queue to NATS in March", ["beta-plan"]),
    }
    rejected = await store(b, "Beta rejected this: cache everything forever", ["beta-rejected"])
    deleted = await b.delete(f"/memory/{rejected}", params={"reason": "rejected"})
    assert deleted.status_code == 200, deleted.text
    world["tombstone"] = deleted.json()["tombstone_id"]
    world["pending"] = await store(b, "Beta might rewrite in Rust", ["beta-pending"], type="Decision", confidence=0.3)
    backup = await b_admin.post("/backup")
    assert backup.status_code == 200, backup.text
    world["archive"] = backup.json()["name"]
    return world


async def test_alpha_s_admin_reaches_nothing_of_beta_through_any_admin_route(clients):
    admin, a, b, b_admin, operator = (clients[k] for k in (A_ADMIN, A_WRITE, B_WRITE, B_ADMIN, OPERATOR))
    beta = await beta_world(b, b_admin)
    mine = await store(a, "Alpha keeps its runbooks in git", ["alpha"])
    every = await operator.post("/backup", json={"every_tenant": True})
    assert every.status_code == 200, every.text
    every_name = every.json()["name"]
    before = {key: await read(b, beta[key]) for key in ("secret", "plan", "pending")}
    beta_ids = {beta[key] for key in ("secret", "plan", "pending", "tombstone")}

    # Every every_tenant flag: 403 naming it.
    assert_refused(await admin.post("/backup", json={"every_tenant": True}), 403, "POST /backup", "every_tenant")
    assert_refused(
        await admin.post("/consolidate", json={"mode": "decay", "every_tenant": True}),
        403,
        "POST /consolidate",
        "every_tenant",
    )
    assert_refused(
        await admin.post("/admin/reindex", json={"every_tenant": True}), 403, "POST /admin/reindex", "every_tenant"
    )

    # Backups: alpha's own archive holds alpha only; beta's and the every-tenant one are not there for alpha.
    own = await admin.post("/backup")
    assert own.status_code == 200 and own.json()["tenant"] == "alpha", own.text
    listed = await admin.get("/backups")
    assert listed.status_code == 200, listed.text
    names = [item["name"] for item in listed.json()["backups"]]
    assert own.json()["name"] in names
    assert beta["archive"] not in names and every_name not in names, names
    assert {item["tenant"] for item in listed.json()["backups"]} == {"alpha"}
    downloaded = await admin.get(f"/backup/{own.json()['name']}")
    assert downloaded.status_code == 200
    assert mine in archive_strings(downloaded.content) and not archive_strings(downloaded.content) & beta_ids
    admin_404 = await admin.get(f"/backup/{beta['archive']}")
    for name in (beta["archive"], every_name):
        assert_refused(await admin.get(f"/backup/{name}"), 404, f"GET /backup/{name}")
        assert_refused(await admin.post("/restore", json={"name": name, "merge": True}), 404, f"restore {name}")
    # ... and the same 404 as a name that never existed: nothing tells alpha beta's archive is there.
    unknown = await admin.get(f"/backup/{beta['archive'].replace('beta-2', 'beta-1', 1)}")
    assert unknown.status_code == 404 and unknown.json()["reason"] == admin_404.json()["reason"], unknown.text

    # Restore: beta's archive (and the every-tenant one), uploaded by alpha's admin, writes nothing into beta.
    for name in (beta["archive"], every_name):
        data = (await operator.get(f"/backup/{name}")).content
        restored = await admin.post(
            "/restore", params={"merge": "true"}, content=data, headers={"Content-Type": "application/gzip"}
        )
        assert restored.status_code in (400, 403), (name, restored.status_code, restored.text)

    # Audit, verify, tombstones, review: alpha's own only.
    audit = await admin.get("/audit", params={"limit": 1000})
    assert audit.status_code == 200 and not strings_in(audit.json()) & beta_ids, audit.text
    assert mine in strings_in(audit.json())
    assert (await admin.get("/audit", params={"memory_id": beta["secret"]})).json()["entries"] == []
    verified = await admin.post("/admin/audit/verify")
    assert verified.status_code == 200 and verified.json()["ok"] is True, verified.text
    assert verified.json()["last_seq"] == len(audit.json()["entries"])  # alpha's own sequence
    tombstones = await admin.get("/admin/tombstones", params={"limit": 200})
    assert tombstones.status_code == 200 and beta["tombstone"] not in strings_in(tombstones.json())
    assert_refused(await admin.delete(f"/admin/tombstones/{beta['tombstone']}"), 404, "DELETE beta's tombstone")
    queue = await admin.get("/review", params={"limit": 200})
    assert queue.status_code == 200 and beta["pending"] not in strings_in(queue.json())
    for verdict in ("approve", "reject"):
        assert_refused(await admin.post(f"/review/{beta['pending']}/{verdict}"), 404, f"{verdict} beta's memory")

    # Reindex, re-embed, reprocess, consolidation: alpha's memories only.
    reindexed = await admin.post("/admin/reindex")
    assert reindexed.status_code == 200 and reindexed.json()["total"] == 1, reindexed.text
    reembed = await admin.post("/admin/reembed", json={"ids": sorted(beta_ids)})
    assert reembed.status_code == 202, reembed.text
    reprocess = await admin.post("/enrichment/reprocess", json={"ids": sorted(beta_ids)})
    assert reprocess.status_code == 202, reprocess.text  # it echoes the ids asked; beta's are checked unchanged below
    consolidated = await admin.post("/consolidate", json={"mode": "full", "dry_run": False})
    assert consolidated.status_code == 200, consolidated.text
    assert {run["tenant"] for run in consolidated.json()["runs"]} == {"alpha"}

    # /health: alpha's own count, none of every tenant's figures, no component details.
    health = (await admin.get("/health")).json()
    assert health["memory_count"] == 1, health
    for component in health["components"].values():
        assert not {"memories", "messages", "points", "detail"} & set(component), component

    # Alpha's own archive alpha's admin restores, into alpha alone.
    restored = await admin.post("/restore", json={"name": own.json()["name"], "merge": True})
    assert restored.status_code == 200, restored.text
    assert [t["tenant"] for t in restored.json()["tenants"]] == ["alpha"]

    # Beta, afterwards: every memory as it was, its tombstone and its review still in force.
    for key, memory in before.items():
        assert await read(b, beta[key]) == memory, key
    again = await b.post("/memory", json={"content": "Beta rejected this: cache everything forever"})
    assert again.status_code == 409, again.text


async def test_an_operator_crosses_tenants_where_a_tenant_admin_may_not(clients):
    admin, b, b_admin, operator = (clients[k] for k in (A_ADMIN, B_WRITE, B_ADMIN, OPERATOR))
    beta = await beta_world(b, b_admin)
    await store(clients[A_WRITE], "Alpha's one memory", ["alpha"])

    every = await operator.post("/backup", json={"every_tenant": True})
    assert every.status_code == 200 and every.json()["scope"] == "every_tenant", every.text
    assert set(every.json()["tenants"]) >= {"alpha", "beta"}
    names = [item["name"] for item in (await operator.get("/backups")).json()["backups"]]
    assert {beta["archive"], every.json()["name"]} <= set(names)
    archive = await operator.get(f"/backup/{beta['archive']}")
    assert archive.status_code == 200 and beta["secret"] in archive_strings(archive.content)
    consolidated = await operator.post("/consolidate", json={"mode": "decay", "every_tenant": True})
    assert consolidated.status_code == 200, consolidated.text
    assert {run["tenant"] for run in consolidated.json()["runs"]} >= {"alpha", "beta"}
    reindexed = await operator.post("/admin/reindex", json={"every_tenant": True})
    assert reindexed.status_code == 200 and reindexed.json()["total"] >= 3, reindexed.text  # beta's and alpha's
    health = (await operator.get("/health")).json()
    assert health["components"]["falkordb"]["memories"] >= 3 and "detail" in health["components"]["falkordb"]
    # An operator's restore goes into the tenant the archive names (beta's memories, merged: kept).
    restored = await operator.post("/restore", json={"name": beta["archive"], "merge": True})
    assert restored.status_code == 200, restored.text
    assert [t["tenant"] for t in restored.json()["tenants"]] == ["beta"]
    # Beta's own admin sees beta's archive; alpha's never did (the other test).
    assert beta["archive"] in [item["name"] for item in (await b_admin.get("/backups")).json()["backups"]]
    assert beta["archive"] not in [item["name"] for item in (await admin.get("/backups")).json()["backups"]]


async def test_the_single_token_is_the_operator_only_with_x_admin_token(clients):
    legacy, legacy_operator = clients["legacy"], clients["legacy-operator"]
    assert_refused(await legacy.post("/backup", json={"every_tenant": True}), 403, "the single token alone")
    assert_refused(await legacy.post("/consolidate", json={"every_tenant": True}), 403, "consolidate", "every_tenant")
    every = await legacy_operator.post("/backup", json={"every_tenant": True})
    assert every.status_code == 200 and every.json()["scope"] == "every_tenant", every.text
    consolidated = await legacy_operator.post("/consolidate", json={"mode": "decay", "every_tenant": True})
    assert consolidated.status_code == 200, consolidated.text


async def test_the_cli_writes_an_operator_entry_with_no_tenant_and_refuses_one_with_a_tenant(
    gateway_url,  # noqa: F811
    stack_settings,
):
    path = str(stack_settings.gateway.memgrid_tokens_file)
    for wrong in (("--tenant", "alpha"), ("--memory-limit", "5")):
        code, _, err = await memgrid(
            gateway_url, None, "tokens", "create", "--role", "operator", *wrong, "--file", path
        )
        assert code != 0 and "belongs to no tenant" in err, err
    code, _, err = await memgrid(gateway_url, None, "tokens", "create", "--role", "admin", "--file", path)
    assert code != 0 and "--tenant" in err, err
    code, out, err = await memgrid(
        gateway_url, None, "--json", "tokens", "create", "--role", "operator", "--id", "ops-cli", "--file", path
    )
    assert code == 0, err
    made = json.loads(out)
    entry = next(
        e for e in json.loads(stack_settings.gateway.memgrid_tokens_file.read_text()) if e.get("id") == "ops-cli"
    )
    assert "tenant" not in entry and entry["role"] == "operator"
    async with httpx.AsyncClient(base_url=gateway_url, headers={"Authorization": f"Bearer {made['token']}"}) as ops:

        async def accepted():
            return (await ops.get("/backups")).status_code == 200

        await wait_for(accepted)
        every = await ops.post("/backup", json={"every_tenant": True})
        assert every.status_code == 200 and every.json()["scope"] == "every_tenant", every.text
    code, out, err = await memgrid(gateway_url, None, "--json", "tokens", "list", "--file", path)
    assert code == 0, err
    assert {"tenant": None, "role": "operator", "id": "ops-cli"}.items() <= json.loads(out)["tokens"][-1].items()
