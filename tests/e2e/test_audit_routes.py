"""The audit log through REST: one memory's history in order with its actor,
the tenant's log page by page, verify, and each route's errors."""

from __future__ import annotations

import hashlib
import json

import httpx
import pytest

from tests.waiting import wait_for

pytestmark = pytest.mark.e2e

WRITER, ADMIN = "audit-writer-token", "audit-admin-token"


@pytest.fixture
def stack_settings(settings, tmp_path):
    path = tmp_path / "tokens.json"
    entries = [(WRITER, "write", "ci-bot"), (ADMIN, "admin", None)]
    path.write_text(
        json.dumps(
            [
                {
                    "token_sha256": hashlib.sha256(token.encode()).hexdigest(),
                    "tenant": "acme",
                    "role": role,
                    **({"id": token_id} if token_id else {}),
                }
                for token, role, token_id in entries
            ]
        )
    )
    return settings.override({"enrichment_enabled": False, "memgrid_tokens_file": path, "audit_seal_seconds": 0.1})


@pytest.fixture
async def writer(gateway_url):
    async with httpx.AsyncClient(base_url=gateway_url, headers={"Authorization": f"Bearer {WRITER}"}) as c:
        yield c


@pytest.fixture
async def admin(gateway_url):
    async with httpx.AsyncClient(base_url=gateway_url, headers={"Authorization": f"Bearer {ADMIN}"}) as c:
        yield c


async def test_history_lists_create_patch_supersede_and_archive_in_order_with_the_actor(writer, admin):
    created = await writer.post("/memory", json={"content": "Deploys go out on Fridays", "tags": ["ops"]})
    assert created.status_code == 201, created.text
    old = created.json()["memory_id"]
    patched = await writer.patch(f"/memory/{old}", json={"importance": 0.9, "tags": ["ops", "deploys"]})
    assert patched.status_code == 200, patched.text
    replaced = await writer.post(
        "/memory", json={"content": "Deploys go out on Thursdays", "supersedes_memory_id": old}
    )
    assert replaced.status_code == 201, replaced.text
    new = replaced.json()["memory_id"]
    archived = await admin.patch(f"/memory/{old}", json={"archived": True})
    assert archived.status_code == 200, archived.text

    reply = await writer.get(f"/memory/{old}/history")
    assert reply.status_code == 200, reply.text
    everything = reply.json()["entries"]
    # The supersession's edge (old -> new) is a change of the old memory too
    # (and so is a tombstone the supersession leaves, when it leaves one).
    expected = ["created", "updated", "superseded", "associated", "archived"]
    entries = [e for e in everything if e["kind"] in expected]
    assert [e["kind"] for e in entries] == expected
    assert {e["actor"] for e in everything if e["kind"] not in expected} <= {"ci-bot"}
    assert [e["actor"] for e in entries[:4]] == ["ci-bot"] * 4
    assert entries[4]["actor"].startswith("sha256-")  # the admin token has no id: its digest's start names it
    assert entries[3]["detail"]["relation"]["target"] == replaced.json()["memory_id"]
    seqs = [e["seq"] for e in entries]
    assert seqs == sorted(seqs) and len(set(seqs)) == 5
    assert entries[1]["diff"]["importance"][1] == 0.9 and entries[1]["diff"]["tags"] == [["ops"], ["ops", "deploys"]]
    # Each change of the record starts from the record the one before left.
    records = [e for e in entries if e["kind"] != "associated"]
    for earlier, later in zip(records, records[1:], strict=False):
        assert later["before_hash"] == earlier["after_hash"] != later["after_hash"]
    assert WRITER not in reply.text and ADMIN not in reply.text  # never the token
    # The replacement's history starts with its own creation; the association is the tenant log's.
    new_history = (await writer.get(f"/memory/{new}/history")).json()["entries"]
    assert [e["kind"] for e in new_history] == ["created"]

    # The whole log, a page at a time, filtered by kind and by memory.
    pages, token = [], None
    while True:
        params = {"limit": 2, **({"page_token": token} if token else {})}
        body = (await admin.get("/audit", params=params)).json()
        pages.append(body["entries"])
        token = body["next_page_token"]
        if not token:
            break
    log = [e for page in pages for e in page]
    assert [e["seq"] for e in log] == list(range(1, len(log) + 1))
    assert {e["kind"] for e in log} >= {"created", "updated", "superseded", "associated", "archived"}
    only = (await admin.get("/audit", params={"kind": "superseded"})).json()["entries"]
    assert [(e["kind"], e["memory_id"]) for e in only] == [("superseded", old)]
    assert len((await admin.get("/audit", params={"memory_id": old})).json()["entries"]) == len(everything)
    assert (await admin.get("/audit", params={"until": "2000-01-01T00:00:00Z"})).json()["entries"] == []

    # Sealed in the background; verify passes and names nothing.
    async def sealed():
        body = (await admin.post("/admin/audit/verify")).json()
        return body if body["sealed_through"] == body["last_seq"] == len(log) else None

    verdict = await wait_for(sealed)
    assert verdict["ok"] and verdict["broken_seq"] is None and verdict["checked"] == len(log)


async def test_a_deleted_memory_keeps_its_history(writer):
    memory_id = (await writer.post("/memory", json={"content": "Short-lived"})).json()["memory_id"]
    assert (await writer.delete(f"/memory/{memory_id}")).status_code == 200
    entries = (await writer.get(f"/memory/{memory_id}/history")).json()["entries"]
    assert [e["kind"] for e in entries] == ["created", "deleted"]
    assert entries[1]["before_hash"] == entries[0]["after_hash"] and entries[1]["after_hash"] == ""


@pytest.mark.parametrize(
    ("params", "field"),
    [
        ({"since": "yesterday"}, "since"),
        ({"until": "2025-13-01"}, "until"),
        ({"since": "2025-02-01T00:00:00Z", "until": "2025-01-01T00:00:00Z"}, "until"),
        ({"limit": 100000}, "limit"),
        ({"page_token": "not-a-token"}, "page_token"),
        ({"memory_id": "not-an-id"}, "memory_id"),
        ({"kind": "renamed"}, "kind"),
    ],
)
async def test_a_bad_listing_parameter_is_a_400_naming_it(admin, params, field):
    reply = await admin.get("/audit", params=params)
    assert reply.status_code == 400, reply.text
    body = reply.json()
    assert body["status"] == "error" and body["code"] == 400 and f"'{field}'" in body["message"], body
