"""Restore treats an archive as untrusted input. Played as a hostile tenant
(or a hostile file) would: hand-made archives holding what no backup writes
(an Outbox event, a Lease, an IdempotencyKey, an unknown label or edge), a
tenant that is no tenant's name, ids that are not memgrid's, an edge joining
two tenants, another tenant's records, a forged audit chain, a tombstone
forged for another tenant, unsigned and foreign-signed archives, and a memory
id colliding with another tenant's memory and vector point. Against the real
FalkorDB (services/consolidate/restore.py) and, for who may ask what, the
whole stack through the gateway."""

from __future__ import annotations

import asyncio
import dataclasses
import gzip
import hashlib
import json
import os
import uuid
from datetime import UTC, datetime
from pathlib import Path

import httpx
import pytest

from services.consolidate.archive_reader import read_archive
from services.consolidate.restore import Restorer
from services.core.adapters.edge_index import EdgeVectorIndex
from services.core.adapters.qdrant_index import QdrantClientIndex
from services.core.domain import audit
from services.core.domain.archive import ArchiveEdge, ArchiveEncoder, ArchiveError, ArchiveNode, Header, sign
from services.core.domain.errors import InvalidArgument
from services.core.domain.model import EventKind, MemoryEvent
from services.core.domain.projection import VectorQuery, vector_payload
from services.core.domain.tombstones import tombstone_id
from services.core.wiring import graph_store
from tests.conftest import TEST_BACKUP_KEY
from tests.e2e import conftest as e2e
from tests.factories import memory_at
from tests.fakes import nearest

#: The whole stack's fixtures (tests/e2e/conftest.py), for the gateway's part.
stack_services, gateway_url, client = e2e.stack_services, e2e.gateway_url, e2e.client

pytestmark = pytest.mark.integration

KEY = TEST_BACKUP_KEY.encode()
FOREIGN_KEY = b"another-deployment-backup-signing-key-0123456789"
T0 = datetime(2026, 1, 15, 10, 30, tzinfo=UTC)


@pytest.fixture
async def store(settings):
    graph = graph_store(settings.graph, settings.process, recall=settings.recall, backup=settings.backup)
    await graph.lifecycle.ensure_schema()
    yield graph
    await graph.lifecycle.close()


def mid(name: str) -> str:
    return str(uuid.uuid5(uuid.NAMESPACE_URL, f"memgrid-security/{name}"))


def memory_props(tenant: str, name: str, **extra) -> dict:
    """A memory node's properties, as the graph stores them (what an archive carries)."""
    return {
        "id": mid(name),
        "tenant": tenant,
        "content": f"content of {name}",
        "type": "Context",
        "version": 1,
        **extra,
    }


def write_archive(
    path: Path,
    nodes: list[tuple[int, str, dict]],
    edges: list[tuple[str, int, int]] = (),
    *,
    key: bytes | None = KEY,
    scope: str = "every_tenant",
    tenant: str | None = None,
    extra: list[bytes] = (),
) -> Path:
    """A hand-made archive: checksummed and counted as a backup's (`extra` raw lines too, so only the
    restore's own checks can refuse them), signed with `key` (None: unsigned)."""
    encoder = ArchiveEncoder(Header(created_at="2026-01-15T10:30:00Z", scope=scope, tenant=tenant))
    lines = [encoder.header_line()]
    lines += [encoder.node_line(ArchiveNode(ref, (label,), props)) for ref, label, props in nodes]
    lines += [encoder.edge_line(ArchiveEdge(kind, a, b, {"strength": 0.5})) for kind, a, b in edges]
    lines += list(extra)
    body = b"".join(lines)
    manifest = dataclasses.replace(
        encoder.manifest(), lines=len(lines), sha256=hashlib.sha256(body).hexdigest(), bytes=len(body)
    )
    last: dict = {"manifest": manifest.as_dict()}
    if key is not None:
        last["signature"] = sign(key, manifest)
    with gzip.open(path, "wb") as out:
        out.write(body + (json.dumps(last) + "\n").encode())
    return path


def restorer(store) -> Restorer:
    return Restorer(graph=store.restore, read=read_archive, page_size=50, keys=(KEY,))


async def restore(store, path: Path, *, caller="alpha", every_tenant=True, allow_unsigned=False, merge=False):
    progress = [
        p
        async for p in restorer(store).restore(
            path, caller=caller, every_tenant=every_tenant, merge=merge, allow_unsigned=allow_unsigned
        )
    ]
    assert progress[-1].done
    return progress[-1]


async def node_count(store, tenant: str) -> int:
    result = await store.connection.query("MATCH (n) WHERE n.tenant = $t RETURN count(n)", {"t": tenant})
    return result.result_set[0][0]


@pytest.mark.parametrize("label", ["Outbox", "Lease", "Evil", "AuditEntry_"])
async def test_a_label_no_backup_writes_refuses_the_whole_archive(store, tmp_path, label):
    """An Outbox node would be published by the relay as an event; a Lease stops a tenant's passes;
    an IdempotencyKey answers another create with a memory of the archive's choosing."""
    path = write_archive(
        tmp_path / "a.jsonl.gz",
        [(0, "Memory", memory_props("alpha", "m")), (1, label, {"tenant": "alpha", "id": str(uuid.uuid4())})],
    )
    with pytest.raises(ArchiveError) as refused:
        await restore(store, path)
    assert refused.value.reason == "ARCHIVE_LABEL_REFUSED" and refused.value.field == "archive"
    assert "line 3" in refused.value.message and "labels" in refused.value.message
    assert await node_count(store, "alpha") == 0  # refused before anything was written


async def test_an_idempotency_key_is_left_out_and_counted(store, tmp_path):
    """Archives written before this release held the tenant's idempotency keys: such a key would answer
    a create with the memory the archive names. Left out one by one, so an older archive still restores."""
    key = {"tenant": "alpha", "key": "k1", "memory_id": mid("m"), "request_hash": "h", "expires_at": 1}
    nodes = [(0, "Memory", memory_props("alpha", "m")), (1, "IdempotencyKey", key)]
    done = await restore(store, write_archive(tmp_path / "a.jsonl.gz", nodes))
    assert done.skipped == 1 and done.created == 1 and "IdempotencyKey labels" in done.problems[0], done.problems
    found = await store.connection.query("MATCH (k:IdempotencyKey) RETURN count(k)")
    assert found.result_set[0][0] == 0


async def test_an_edge_type_no_backup_writes_refuses_the_whole_archive(store, tmp_path):
    nodes = [(0, "Memory", memory_props("alpha", "m")), (1, "Memory", memory_props("alpha", "n"))]
    path = write_archive(tmp_path / "a.jsonl.gz", nodes, [("OWNS_EVERYTHING", 0, 1)])
    with pytest.raises(ArchiveError) as refused:
        await restore(store, path)
    assert refused.value.reason == "ARCHIVE_EDGE_REFUSED" and "line 4" in refused.value.message
    assert await node_count(store, "alpha") == 0


@pytest.mark.parametrize("tenant", ["../etc", "a b", "x" * 65, "", "tenant\x00"])
async def test_a_tenant_that_is_no_tenants_name_is_refused(store, tmp_path, tenant):
    path = write_archive(tmp_path / "a.jsonl.gz", [(0, "Memory", memory_props(tenant, "m"))])
    with pytest.raises(ArchiveError) as refused:
        await restore(store, path)
    assert refused.value.reason == "ARCHIVE_TENANT_INVALID" and "properties.tenant" in refused.value.message


async def test_an_edge_joining_two_tenants_is_refused_even_for_an_operator(store, tmp_path):
    nodes = [(0, "Memory", memory_props("alpha", "a")), (1, "Memory", memory_props("beta", "b"))]
    path = write_archive(tmp_path / "a.jsonl.gz", nodes, [("RELATES_TO", 0, 1)])
    with pytest.raises(ArchiveError) as refused:
        await restore(store, path, every_tenant=True)
    assert refused.value.reason == "ARCHIVE_EDGE_ACROSS_TENANTS" and "line 4" in refused.value.message
    assert await node_count(store, "alpha") == 0 and await node_count(store, "beta") == 0


async def test_a_tenant_archive_holding_another_tenants_node_is_refused(store, tmp_path):
    nodes = [(0, "Memory", memory_props("alpha", "a")), (1, "Memory", memory_props("beta", "b"))]
    path = write_archive(tmp_path / "a.jsonl.gz", nodes, scope="tenant", tenant="alpha")
    with pytest.raises(ArchiveError) as refused:
        await restore(store, path, every_tenant=False)
    assert refused.value.reason == "ARCHIVE_TENANT_MISMATCH" and "line 3" in refused.value.message


@pytest.mark.parametrize(
    "label, props",
    [
        ("Memory", {"id": "not-a-uuid"}),
        ("Memory", {"id": str(uuid.uuid4()).upper()}),  # memgrid's memory ids are canonical
        ("MetaPattern", {"id": "mp-1"}),
        ("ConsolidationRun", {"id": 7}),
    ],
)
async def test_a_record_whose_id_is_not_a_uuid_is_left_out_alone(store, tmp_path, label, props):
    nodes = [
        (0, "Memory", memory_props("alpha", "good")),
        (1, label, {"tenant": "alpha", "content": "forged", **props}),
        (2, "Memory", memory_props("alpha", "also-good")),
    ]
    path = write_archive(tmp_path / "a.jsonl.gz", nodes, [("RELATES_TO", 0, 1), ("RELATES_TO", 0, 2)])
    done = await restore(store, path)
    assert done.skipped == 2  # the record and its edge; the rest is restored
    assert done.created == 2 and done.edges_done == 2
    assert any("line 3" in p and "properties.id" in p and label in p for p in done.problems), done.problems
    stored = await store.connection.query("MATCH (n {tenant: 'alpha'}) RETURN n.content ORDER BY n.content")
    assert [r[0] for r in stored.result_set] == ["content of also-good", "content of good"]


async def test_a_memory_twice_is_left_out_the_second_time(store, tmp_path):
    nodes = [(0, "Memory", memory_props("alpha", "m")), (1, "Memory", memory_props("alpha", "m", content="again"))]
    done = await restore(store, write_archive(tmp_path / "a.jsonl.gz", nodes))
    assert done.skipped == 1 and done.created == 1 and "the same memory again" in done.problems[0]


async def test_a_tombstone_forged_with_another_tenants_id_is_left_out(store, tmp_path):
    """A tombstone is found by its id, which its tenant and content hash give: one forged in alpha's
    archive with beta's id would be the node beta's next rejection of that content MERGEs into."""
    digest = hashlib.sha256(b"beta's rejected content").hexdigest()
    nodes = [
        (0, "Tombstone", {"id": tombstone_id("beta", digest), "tenant": "alpha", "content_hash": digest}),
        (1, "Tombstone", {"id": tombstone_id("alpha", digest), "tenant": "alpha", "content_hash": digest}),
    ]
    done = await restore(store, write_archive(tmp_path / "a.jsonl.gz", nodes))
    assert done.skipped == 1 and done.created == 1
    found = await store.connection.query("MATCH (t:Tombstone) RETURN t.id")
    assert [r[0] for r in found.result_set] == [tombstone_id("alpha", digest)]


@pytest.mark.parametrize(
    "line",
    [b"[" * 100_000 + b"\n", b'{"node": 5, "labels": ["Memory"], "properties": {"tenant": "alpha", "x": {"a": 1}}}\n'],
)
async def test_a_line_nested_too_deep_or_holding_an_object_is_refused(store, tmp_path, line):
    path = write_archive(tmp_path / "a.jsonl.gz", [(0, "Memory", memory_props("alpha", "m"))], extra=[line])
    with pytest.raises(ArchiveError) as refused:
        await restore(store, path)
    assert refused.value.reason in {"ARCHIVE_CORRUPT", "ARCHIVE_PROPERTY_INVALID"} and "line 3" in refused.value.message
    assert await node_count(store, "alpha") == 0


async def test_a_file_put_in_the_archives_place_between_the_check_and_the_write_is_never_read(store, tmp_path):
    """An upload sent again under its handle replaces the file while the restore runs: the write
    pass must read what the check passed, not the forgery (here: beta's records, in alpha's restore)."""
    path = write_archive(tmp_path / "a.jsonl.gz", [(0, "Memory", memory_props("alpha", "checked"))])
    forged = write_archive(tmp_path / "f.jsonl.gz", [(0, "Memory", memory_props("beta", "forged"))])
    steps = restorer(store).restore(path, caller="alpha", every_tenant=False, merge=False)
    assert (await anext(steps)).phase == "verify"
    os.replace(forged, path)
    async for _ in steps:
        pass
    assert await node_count(store, "beta") == 0 and await node_count(store, "alpha") == 1


# -- the audit log ---------------------------------------------------------------------------------


def audit_nodes(tenant: str, count: int, *, first_ref: int, sealed: int | None = None) -> list[tuple[int, str, dict]]:
    """A tenant's audit log as the store keeps it: `count` entries, the first `sealed` of them sealed."""
    sealed = count if sealed is None else sealed
    entries = [
        audit.AuditEntry(
            tenant, seq, 1_000 + seq, str(uuid.uuid4()),
            json.dumps({"memory_id": mid(f"m{seq}"), "kind": "created", "actor": "x"}, sort_keys=True),
        )
        for seq in range(1, count + 1)
    ]  # fmt: skip
    seals = {s.seq: s for s in audit.seal(audit.GENESIS, entries[:sealed])}
    nodes = []
    for i, e in enumerate(entries):
        props = {
            "tenant": tenant, "seq": e.seq, "at": e.at_us, "akey": f"{tenant}/{e.seq:015d}", "event_id": e.event_id,
            "record": e.record, "memory_id": mid(f"m{e.seq}"), "kind": "created",
        }  # fmt: skip
        if e.seq in seals:
            props |= {"content_hash": seals[e.seq].content_hash, "chain": seals[e.seq].chain_hash}
        nodes.append((first_ref + i, "AuditEntry", props))
    counter = {"tenant": tenant, "seq": count, "sealed_seq": sealed}
    if sealed:
        counter["sealed_chain"] = seals[sealed].chain_hash
    nodes.append((first_ref + count, "AuditCounter", counter))
    return nodes


async def audit_seqs(store, tenant: str) -> list[int]:
    found = await store.connection.query(
        "MATCH (a:AuditEntry) WHERE a.tenant = $t RETURN a.seq ORDER BY a.seq", {"t": tenant}
    )
    return [r[0] for r in found.result_set]


async def test_an_audit_log_that_verifies_is_written(store, tmp_path):
    nodes = [(0, "Memory", memory_props("alpha", "m")), *audit_nodes("alpha", 3, first_ref=1)]
    done = await restore(store, write_archive(tmp_path / "a.jsonl.gz", nodes))
    assert done.audit_left_out == 0 and await audit_seqs(store, "alpha") == [1, 2, 3]


@pytest.mark.parametrize("forgery", ["edited_record", "dropped_entry", "other_tenants_akey", "rechained_by_hand"])
async def test_a_forged_audit_chain_is_left_out_and_counted(store, tmp_path, forgery):
    log = audit_nodes("alpha", 3, first_ref=1)
    entry = log[1][2]
    if forgery == "edited_record":
        entry["record"] = entry["record"].replace('"x"', '"someone else"')
    elif forgery == "dropped_entry":
        log.pop(1)
    elif forgery == "other_tenants_akey":
        entry["akey"] = "beta/000000000000002"  # beta's verify and listings read entries by akey
    else:  # an attacker recomputes the content hash but cannot chain it to the sealed entries after it
        entry["record"] = entry["record"].replace('"x"', '"someone else"')
        stored = audit.AuditEntry("alpha", 2, entry["at"], entry["event_id"], entry["record"])
        entry["content_hash"] = audit.content_hash(stored)
    nodes = [(0, "Memory", memory_props("alpha", "m")), *log]
    done = await restore(store, write_archive(tmp_path / "a.jsonl.gz", nodes))
    assert done.audit_left_out == len(log) and done.created == 1  # the memory is restored, the log is not
    assert any("audit log is left out" in p for p in done.problems), done.problems
    assert await audit_seqs(store, "alpha") == []
    counters = await store.connection.query("MATCH (c:AuditCounter {tenant: 'alpha'}) RETURN count(c)")
    assert counters.result_set[0][0] == 0


async def test_an_unsealed_tail_is_trusted_only_in_this_deployments_archive(store, settings, tmp_path):
    nodes = [(0, "Memory", memory_props("alpha", "m")), *audit_nodes("alpha", 3, first_ref=1, sealed=1)]
    unsigned = write_archive(tmp_path / "u.jsonl.gz", nodes, key=None)
    done = await restore(store, unsigned, allow_unsigned=True)
    assert done.signature == "unsigned" and done.audit_left_out == 4 and await audit_seqs(store, "alpha") == []
    fresh = settings.graph.model_copy(update={"falkordb_graph": f"other_{uuid.uuid4().hex[:8]}"})
    other = graph_store(fresh, settings.process, backup=settings.backup)
    await other.lifecycle.ensure_schema()
    try:
        done = await restore(other, write_archive(tmp_path / "s.jsonl.gz", nodes))
        assert done.signature == "signed" and done.audit_left_out == 0 and await audit_seqs(other, "alpha") == [1, 2, 3]
    finally:
        await other.lifecycle.close()


# -- signatures ------------------------------------------------------------------------------------


async def test_an_unsigned_or_foreign_archive_needs_allow_unsigned(store, tmp_path):
    nodes = [(0, "Memory", memory_props("alpha", "m"))]
    cases = ((None, "ARCHIVE_UNSIGNED", "unsigned"), (FOREIGN_KEY, "ARCHIVE_SIGNATURE_UNKNOWN", "foreign"))
    for key, reason, state in cases:
        path = write_archive(tmp_path / f"{state}.jsonl.gz", nodes, key=key)
        with pytest.raises(InvalidArgument) as refused:
            await restore(store, path)
        assert refused.value.reason == reason and refused.value.field == "allow_unsigned"
        assert await node_count(store, "alpha") == 0
    done = await restore(store, path, allow_unsigned=True)
    assert done.signature == "foreign" and done.created == 1
    # A signed archive whose manifest was edited after signing (its counts, say) no longer verifies.
    lines = gzip.decompress(write_archive(tmp_path / "s.jsonl.gz", nodes).read_bytes()).splitlines(keepends=True)
    last = json.loads(lines[-1])
    last["signature"]["mac"] = "0" * 64
    (tmp_path / "t.jsonl.gz").write_bytes(gzip.compress(b"".join([*lines[:-1], (json.dumps(last) + "\n").encode()])))
    with pytest.raises(InvalidArgument) as refused:
        await restore(store, tmp_path / "t.jsonl.gz", merge=True)
    assert refused.value.reason == "ARCHIVE_SIGNATURE_UNKNOWN"


# -- a memory id another tenant holds --------------------------------------------------------------


async def test_a_memory_id_another_tenant_holds_touches_neither_its_memory_nor_its_vector_point(store, tmp_path):
    """Graph side: alpha's restore of beta's memory id makes alpha's own node (the unique key is
    (tenant, id), a lookup is by both) and no edge reaches beta's. Vector side: the point id is
    derived from (tenant, id), so alpha's reindex neither overwrites beta's point nor deletes it."""
    beta = memory_at(mid("shared"), T0, tenant="beta", content="beta's own memory", version=1)
    await store.writer.create_memories([beta], [MemoryEvent.for_memory(EventKind.CREATED, beta, T0)], now_us=1)
    nodes = [
        (0, "Memory", memory_props("alpha", "shared", content="alpha's forgery", version=99)),
        (1, "Memory", memory_props("alpha", "other")),
    ]
    done = await restore(store, write_archive(tmp_path / "a.jsonl.gz", nodes, [("RELATES_TO", 1, 0)]))
    assert done.created == 2
    kept = await store.reader.get_memories("beta", [mid("shared")])
    assert kept[mid("shared")].content == "beta's own memory" and kept[mid("shared")].version == 1
    edges = await store.connection.query("MATCH (a)-[e]->(b) WHERE a.tenant <> b.tenant RETURN count(e)")
    assert edges.result_set[0][0] == 0
    both = await store.connection.query(
        "MATCH (m:Memory {id: $id}) RETURN m.tenant, m.content ORDER BY m.tenant", {"id": mid("shared")}
    )
    assert both.result_set == [["alpha", "alpha's forgery"], ["beta", "beta's own memory"]]
    shared = mid("shared")
    beta = memory_at(shared, T0, tenant="beta", content="beta's", embedding=[1.0, 0.0, 0.0, 0.0])
    alpha = memory_at(shared, T0, tenant="alpha", content="alpha's", embedding=[0.0, 1.0, 0.0, 0.0])
    edge = EdgeVectorIndex(path=tmp_path / "vectors" / "m", collection="m", vector_size=4, quantization="none")
    edge.open()
    client = QdrantClientIndex(collection="m", vector_size=4, location=":memory:")
    await client.open()
    for index in (edge, client):
        try:
            await index.upsert([(shared, beta.embedding, vector_payload(beta))])
            await index.upsert([(shared, alpha.embedding, vector_payload(alpha))])  # alpha's restore, reindexed
            assert await index.count() == 2 and await index.count_by_tenant(10) == {"alpha": 1, "beta": 1}
            query = VectorQuery(vector=[1.0, 0.0, 0.0, 0.0], tenant="beta", limit=5)
            [hit] = await nearest(index, query, with_payload=True)
            assert hit.id == shared and hit.payload["tenant"] == "beta" and hit.payload["memory_id"] == shared
            excluded = VectorQuery(vector=[0.0, 1.0, 0.0, 0.0], tenant="alpha", limit=5, exclude_ids=(shared,))
            assert await nearest(index, excluded) == [] and [h.id for h in await nearest(index, query)] == [shared]
            await index.delete([shared], tenant="alpha")
            assert [h.id for h in await nearest(index, query)] == [shared] and await index.count() == 1
        finally:
            await index.close()


# -- through the gateway: who may restore what -----------------------------------------------------

ADMIN = "operator-secret"
ALPHA_ADMIN = "alpha-admin-token"


@pytest.fixture
def stack_settings(settings, tmp_path):
    path = tmp_path / "tokens.json"
    entry = {"token_sha256": hashlib.sha256(ALPHA_ADMIN.encode()).hexdigest(), "tenant": "alpha", "role": "admin"}
    path.write_text(json.dumps([entry]))
    return settings.override({"enrichment_enabled": False, "memgrid_tokens_file": path, "admin_api_token": ADMIN})


@pytest.fixture
async def alpha_admin(gateway_url):
    async with httpx.AsyncClient(base_url=gateway_url, headers={"Authorization": f"Bearer {ALPHA_ADMIN}"}) as c:
        yield c


GZIP = {"Content-Type": "application/gzip"}
AS_OPERATOR = {"X-Admin-Token": ADMIN, **GZIP}


async def restored(client, archive: bytes, params: dict) -> httpx.Response:
    """POST /restore as the operator, once the re-embed the last restore queued (a memory enrichment
    never embedded, enrichment being off here) is done: another is refused meanwhile (409)."""
    for _ in range(100):
        reply = await client.post("/restore", params=params, content=archive, headers=AS_OPERATOR)
        if reply.status_code != 409 or reply.json().get("reason") != "REEMBED_RUNNING":
            return reply
        await asyncio.sleep(0.1)
    return reply


@pytest.mark.e2e
async def test_through_the_gateway_an_unsigned_archive_needs_an_operator_and_the_flag(client, alpha_admin, tmp_path):
    made = (await client.post("/memory", json={"content": "the operator's default tenant"})).json()
    assert made["memory_id"]
    name = (await client.post("/backup", headers={"X-Admin-Token": ADMIN})).json()["name"]
    signed = (await client.get(f"/backup/{name}", headers={"X-Admin-Token": ADMIN})).content
    lines = gzip.decompress(signed).splitlines(keepends=True)
    last = json.loads(lines[-1])
    assert last["signature"]["alg"] == "HMAC-SHA256"  # memgrid's own archives are signed
    del last["signature"]
    unsigned = gzip.compress(b"".join([*lines[:-1], (json.dumps(last) + "\n").encode()]))

    refused = await client.post("/restore", params={"merge": "true"}, content=unsigned, headers=AS_OPERATOR)
    assert refused.status_code == 400 and refused.json()["reason"] == "ARCHIVE_UNSIGNED", refused.text
    assert refused.json()["details"]["field"] == "allow_unsigned" and "allow_unsigned" in refused.json()["message"]
    allowed = await restored(client, unsigned, {"merge": "true", "allow_unsigned": "true"})
    assert allowed.status_code == 200 and allowed.json()["signature"] == "unsigned", allowed.text
    signed_again = await restored(client, signed, {"merge": "true"})
    assert signed_again.status_code == 200 and signed_again.json()["signature"] == "signed", signed_again.text

    # A tenant's admin: the flag is an operator's (403 naming it, before the archive is taken) ...
    for params in ({"allow_unsigned": "true"},):
        denied = await alpha_admin.post("/restore", params=params, content=unsigned, headers=GZIP)
        assert denied.status_code == 403 and "allow_unsigned" in denied.json()["message"], denied.text
    denied = await alpha_admin.post("/restore", json={"name": name, "allow_unsigned": True})
    assert denied.status_code == 403 and "allow_unsigned" in denied.json()["message"], denied.text
    # ... and a signed archive of another tenant's records is refused to it.
    other = await alpha_admin.post("/restore", content=signed, headers=GZIP)
    assert other.status_code == 403 and other.json()["reason"] == "RESTORE_OTHER_TENANT", other.text
