"""Backup and restore (services/consolidate/backup.py, restore.py) against a
real FalkorDB: an archive restored into a fresh graph reproduces the
tenant's nodes and edges exactly; a backup taken while writes run is one
point in time; tenants never cross; a tenant with memories is refused unless
merge, and a merge never overwrites a newer record; damaged archives are
refused before anything is written."""

from __future__ import annotations

import asyncio
import gzip
import hashlib
import json
import random
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from devstack.servers import free_port, start_falkordb
from services.consolidate.archive_reader import read_archive
from services.consolidate.backup import BackupScheduler, BackupWriter
from services.consolidate.backup_files import BackupFiles
from services.consolidate.restore import Restorer
from services.core.domain.archive import ArchiveError
from services.core.domain.archive_names import to_prune
from services.core.domain.embedding_codec import encode_embedding
from services.core.domain.errors import AlreadyExists, PermissionDenied
from services.core.domain.model import EventKind, Memory, MemoryEvent, Relation
from services.core.domain.tombstones import tombstone_id
from services.core.settings import Settings
from services.core.wiring import graph_store
from tests.factories import memory_at

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def falkordb_server(tmp_path_factory):
    """A FalkorDB server of this module's own, as a deployment has, rather than the session's, which
    holds every other test's graphs: each backup's snapshot is a replica of the whole server."""
    timeout = Settings(_env_file=None).graph.falkordb_query_timeout_ms
    server = start_falkordb(free_port(), tmp_path_factory.mktemp("falkordb_backup"), query_timeout_ms=timeout)
    yield server
    server.stop()


T0 = datetime(2025, 1, 15, 10, 30, 0, 123456, tzinfo=UTC)
#: The backup key of these tests' archives (a restore verifies their signature).
KEY = b"memgrid-test-backup-restore-key-0123456789"


def ID(name: str) -> str:
    """The memory id a test names by a word (memgrid mints UUIDs, and a restore accepts only those)."""
    return str(uuid.uuid5(uuid.NAMESPACE_URL, f"memgrid-test/{name}"))


def memory(memory_id: str, tenant: str = "acme", **fields) -> Memory:
    values = dict(
        content=f"content of {memory_id}",
        type="Decision",
        confidence=0.9,
        tags=["project:alpha"],
        tag_prefixes=["project", "project:alpha"],
        metadata={"k": "v", "n": [1, 2.5]},
    )
    values.update(fields)
    return memory_at(ID(memory_id), T0, tenant=tenant, **values)


async def put(store, *memories: Memory) -> None:
    events = [MemoryEvent.for_memory(EventKind.CREATED, m, T0) for m in memories]
    await store.writer.create_memories(list(memories), events, now_us=1)


async def link(store, tenant: str, source: str, target: str, kind: str = "RELATES_TO", strength: float = 0.5) -> None:
    relation = Relation(ID(source), ID(target), kind, strength, T0, {})
    await store.writer.create_relations(tenant, [relation], [MemoryEvent.associated(tenant, relation)], now_us=1)


async def dump(store, tenant: str) -> tuple[list, list]:
    """The tenant's nodes (labels, properties) and edges (type, ends named by identity, properties), sorted."""
    conn = store.connection
    nodes = await conn.query(
        "MATCH (n) WHERE n.tenant = $t AND NOT n:Outbox AND NOT n:Lease RETURN labels(n), properties(n)", {"t": tenant}
    )
    edges = await conn.query(
        """
        MATCH (a)-[e]->(b) WHERE a.tenant = $t AND b.tenant = $t
        RETURN type(e), labels(a), coalesce(a.id, a.key, a.tag), labels(b), coalesce(b.id, b.key, b.tag), properties(e)
        """,
        {"t": tenant},
    )
    as_text = lambda rows: sorted(json.dumps(r, sort_keys=True) for r in rows)  # noqa: E731
    return as_text(nodes.result_set), as_text(edges.result_set)


@pytest.fixture
async def fresh(settings):
    """A second, empty graph on the same server (a fresh stack's store)."""
    fresh = settings.graph.model_copy(update={"falkordb_graph": f"fresh_{uuid.uuid4().hex[:8]}"})
    other = graph_store(fresh, settings.process, backup=settings.backup)
    await other.lifecycle.ensure_schema()
    yield other
    await other.lifecycle.close()


@pytest.fixture
async def seeded(store):
    """acme: memories with a supersession chain (b superseded by c), an
    expired one, embeddings, edges; an entity, a pattern, a MetaPattern with
    IN_PATTERN edges, a node of a label no list names (Tombstone); other: a
    memory of its own."""
    vector = encode_embedding([0.25, -1.0, 3.5, 0.0])
    await put(
        store,
        memory("a", importance=0.9, embedding=[0.25, -1.0, 3.5, 0.0]),
        memory("b", superseded_at=T0 + timedelta(days=1), version=3),
        memory("c", t_valid=T0 + timedelta(days=1)),
        memory("d", t_invalid=T0, archived=True),
        memory("x", tenant="other", content="other's secret"),
    )
    await link(store, "acme", "a", "c")
    await link(store, "acme", "b", "c", kind="EVOLVED_INTO", strength=1.0)
    await link(store, "other", "x", "x")
    await store.connection.query(
        """
        MATCH (a:Memory {id: $a}), (c:Memory {id: $c})
        CREATE (e:Entity {tenant: 'acme', tag: 'entity:tools:docker', name: 'docker', updated_at: 5}),
               (p:Pattern {tenant: 'acme', key: 'Decision|entity:tools:docker', members: 2}),
               (mp:MetaPattern {id: $mp, tenant: 'acme', summary: 'two', size: 2}),
               (t:Tombstone {id: $tomb, tenant: 'acme', content_hash: 'abc', reason: 'rejected'}),
               (:Lease {task: 'decay', tenant: 'acme', owner: 'o'}),
               (a)-[:MENTIONS]->(e), (c)-[:MENTIONS]->(e), (a)-[:EXEMPLIFIES]->(p),
               (a)-[:IN_PATTERN {weight: 0.5}]->(mp), (c)-[:IN_PATTERN {weight: 0.25}]->(mp)
        """,
        {"a": ID("a"), "c": ID("c"), "mp": ID("mp-1"), "tomb": tombstone_id("acme", "abc")},
    )
    row = await store.connection.query("MATCH (m:Memory {id: $a}) RETURN m.embedding", {"a": ID("a")})
    assert row.result_set[0][0] == vector
    return store


def ours(counts: dict[str, int]) -> dict[str, int]:
    """Counts without the audit log's labels and edges (another part of memgrid writes them with every change)."""
    return {k: v for k, v in counts.items() if not k.upper().startswith("AUDIT")}


def writer_for(store, tmp_path: Path, page_size: int = 3, keep: int = 0) -> BackupWriter:
    return BackupWriter(
        graph=store.backups, files=BackupFiles(tmp_path / "backups"), page_size=page_size, keep=keep, key=KEY
    )


def restorer_for(store, page_size: int = 2) -> Restorer:
    return Restorer(graph=store.restore, read=read_archive, page_size=page_size, keys=(KEY,))


async def restore_all(store, path: Path, *, caller="acme", every_tenant=False, merge=False, page_size=2):
    progress = [
        p
        async for p in restorer_for(store, page_size).restore(
            path, caller=caller, every_tenant=every_tenant, merge=merge
        )
    ]
    assert progress[-1].done and progress[0].phase == "verify"
    return progress


async def test_restore_into_a_fresh_graph_reproduces_the_tenant_exactly(seeded, fresh, tmp_path):
    result = await writer_for(seeded, tmp_path).create("acme")
    assert result.path.name.startswith("acme-") and result.path.name.endswith(".jsonl.gz")
    manifest = result.info.manifest
    # Whatever else the writes left (the audit log's entries, say) is exported too, generically.
    assert ours(manifest.nodes) == {"Memory": 4, "Entity": 1, "Pattern": 1, "MetaPattern": 1, "Tombstone": 1}
    assert ours(manifest.edges) == {
        "RELATES_TO": 1, "EVOLVED_INTO": 1, "MENTIONS": 2, "EXEMPLIFIES": 1, "IN_PATTERN": 2,
    }  # fmt: skip
    assert "Outbox" not in manifest.nodes and "Lease" not in manifest.nodes
    assert manifest.tenants == {"acme": manifest.node_count}
    progress = await restore_all(fresh, result.path)
    assert progress[-1].created == manifest.node_count and progress[-1].edges_done == manifest.edge_count
    [acme] = progress[-1].tenants
    assert acme.tenant == "acme" and acme.memories == 4 and sorted(acme.unembedded_ids) == sorted(ID(n) for n in "bcd")
    assert await dump(fresh, "acme") == await dump(seeded, "acme")
    assert await dump(fresh, "other") == ([], [])
    # The superseded memory stays superseded and the expired one expired: the stored fields came back as they were.
    row = await fresh.connection.query("MATCH (m:Memory {id: $b}) RETURN m.superseded_at, m.version", {"b": ID("b")})
    assert row.result_set[0] == [int((T0 + timedelta(days=1)).timestamp() * 1_000_000), 3]
    got = await fresh.reader.get_memories("acme", [ID("a"), ID("d")])
    assert got[ID("a")].embedding == [0.25, -1.0, 3.5, 0.0] and got[ID("d")].t_invalid == T0 and got[ID("d")].archived


async def test_an_every_tenant_archive_restores_each_record_into_its_tenant(seeded, fresh, tmp_path):
    result = await writer_for(seeded, tmp_path).create(None)
    assert result.path.name.startswith("@all-") and set(result.info.manifest.tenants) == {"acme", "other"}
    with pytest.raises(PermissionDenied) as refused:
        await restore_all(fresh, result.path, caller="acme")
    assert refused.value.reason == "RESTORE_OTHER_TENANT" and "'other'" in refused.value.message
    assert await dump(fresh, "acme") == ([], [])  # refused before anything was written
    await restore_all(fresh, result.path, caller="acme", every_tenant=True)
    for tenant in ("acme", "other"):
        assert await dump(fresh, tenant) == await dump(seeded, tenant)


async def test_a_tenants_archive_is_refused_for_another_tenant(seeded, fresh, tmp_path):
    result = await writer_for(seeded, tmp_path).create("acme")
    with pytest.raises(PermissionDenied):
        await restore_all(fresh, result.path, caller="other")
    assert await dump(fresh, "other") == ([], []) and await dump(fresh, "acme") == ([], [])


async def test_a_tenant_with_memories_is_refused_unless_merge_and_merge_keeps_what_is_newer(seeded, fresh, tmp_path):
    result = await writer_for(seeded, tmp_path).create("acme")
    # The target holds a newer 'a' (version 9), an older 'c' (version 0 < 1), and a memory of its own.
    await put(fresh, memory("a", content="newer a", version=9), memory("c", content="older c", version=0))
    await put(fresh, memory("own", content="only in the target"))
    with pytest.raises(AlreadyExists) as refused:
        await restore_all(fresh, result.path)
    assert refused.value.reason == "TENANT_NOT_EMPTY" and refused.value.field == "merge"
    await restore_all(fresh, result.path, merge=True)
    got = await fresh.reader.get_memories("acme", [ID(n) for n in ("a", "b", "c", "d", "own")])
    assert got[ID("a")].content == "newer a" and got[ID("a")].version == 9  # never overwritten by an older version
    assert got[ID("c")].content == "content of c"  # the archive's newer version won
    assert set(got) == {ID(n) for n in ("a", "b", "c", "d", "own")}
    # Run again: nothing is doubled, neither nodes nor edges.
    again = await restore_all(fresh, result.path, merge=True)
    assert again[-1].created == 0
    count = await fresh.connection.query(
        "MATCH (a {tenant: 'acme'})-[e]->(b {tenant: 'acme'}) RETURN type(e), count(e) ORDER BY type(e)"
    )
    assert ours(dict(map(tuple, count.result_set))) == {
        "EVOLVED_INTO": 1, "EXEMPLIFIES": 1, "IN_PATTERN": 2, "MENTIONS": 2, "RELATES_TO": 1,
    }  # fmt: skip


def _rewrite(path: Path, lines: list[bytes], *, rehash: bool) -> None:
    """Write the lines back as an archive, its manifest's checksum recomputed when `rehash`."""
    if rehash:
        body = b"".join(lines[:-1])
        manifest = json.loads(lines[-1])
        manifest["manifest"]["sha256"] = hashlib.sha256(body).hexdigest()
        lines = [*lines[:-1], (json.dumps(manifest) + "\n").encode()]
    with gzip.open(path, "wb") as out:
        out.write(b"".join(lines))


@pytest.mark.parametrize("damage", ["flip_a_byte", "truncate", "wrong_version", "edit_a_line", "drop_manifest"])
async def test_a_damaged_archive_is_refused_before_anything_is_written(seeded, fresh, tmp_path, damage):
    result = await writer_for(seeded, tmp_path).create("acme")
    data = result.path.read_bytes()
    lines = gzip.decompress(data).splitlines(keepends=True)
    expected = {
        "flip_a_byte": {"ARCHIVE_CORRUPT", "ARCHIVE_CHECKSUM_MISMATCH"},
        "truncate": {"ARCHIVE_TRUNCATED"},
        "wrong_version": {"ARCHIVE_VERSION_UNSUPPORTED"},
        # Its tenant renamed: the node no longer belongs to the archive's tenant (caught before the checksum).
        "edit_a_line": {"ARCHIVE_CHECKSUM_MISMATCH", "ARCHIVE_TENANT_MISMATCH"},
        "drop_manifest": {"ARCHIVE_TRUNCATED"},
    }[damage]
    if damage == "flip_a_byte":
        middle = len(data) // 2
        result.path.write_bytes(data[:middle] + bytes([data[middle] ^ 0x40]) + data[middle + 1 :])
    elif damage == "truncate":
        result.path.write_bytes(data[: len(data) * 2 // 3])
    elif damage == "wrong_version":
        header = json.loads(lines[0])
        header["version"] = 99
        _rewrite(result.path, [(json.dumps(header) + "\n").encode(), *lines[1:]], rehash=True)
    elif damage == "edit_a_line":
        _rewrite(result.path, [lines[0], lines[1].replace(b'"acme"', b'"acmf"', 1), *lines[2:]], rehash=False)
    else:
        _rewrite(result.path, lines[:-1], rehash=False)
    with pytest.raises(ArchiveError) as refused:
        await restore_all(fresh, result.path)
    assert refused.value.reason in expected and refused.value.field == "archive"
    assert await dump(fresh, "acme") == ([], [])


async def test_a_backup_taken_while_writes_run_is_one_point_in_time(store, fresh, tmp_path):
    """Two loads run while the backup reads the graph in small pages: one
    moves balance between two random memories of tenant 'bank' in each
    query (so at any instant their balances sum to the same total; a read
    page by page, not of one instant, sees a transfer's one side and not
    the other), the other adds log memories linked to an account. The archive's
    balances sum to the total, and it holds every log memory acknowledged
    before the backup began, each with its edge."""
    accounts, total = 150, 150 * 100
    account_ids = [ID(f"acct-{i}") for i in range(accounts)]
    await store.connection.query(
        "UNWIND $ids AS id CREATE (:Memory {id: id, tenant: 'bank', balance: 100})", {"ids": account_ids}
    )
    acknowledged: list[str] = []
    transfers = 0
    stop = asyncio.Event()
    rng = random.Random(7)

    async def transfer() -> None:
        nonlocal transfers
        while not stop.is_set():
            a, b = rng.sample(range(accounts), 2)
            await store.connection.query(
                """
                MATCH (a:Memory {id: $a}), (b:Memory {id: $b})
                SET a.balance = a.balance - 7, b.balance = b.balance + 7
                """,
                {"a": account_ids[a], "b": account_ids[b]},
            )
            transfers += 1

    async def grow() -> None:
        while not stop.is_set():
            memory_id = str(uuid.uuid4())
            await store.connection.query(
                "MATCH (a:Memory {id: $first})"
                " CREATE (:Memory {id: $id, tenant: 'bank', log: true})-[:RELATES_TO]->(a)",
                {"id": memory_id, "first": account_ids[0]},
            )
            acknowledged.append(memory_id)

    loads = [asyncio.create_task(transfer()), asyncio.create_task(grow())]
    await asyncio.sleep(0.3)
    before, transfers_before = list(acknowledged), transfers
    try:
        result = await writer_for(store, tmp_path, page_size=3).create(None)
    finally:
        stop.set()
        await asyncio.gather(*loads)
    assert len(acknowledged) > len(before) and transfers > transfers_before  # writes ran through the backup
    lines = [json.loads(x) for x in gzip.decompress(result.path.read_bytes()).splitlines()]
    nodes = {x["node"]: x["properties"] for x in lines if "node" in x}
    balances = [p["balance"] for p in nodes.values() if p["tenant"] == "bank" and "balance" in p]
    assert len(balances) == accounts and sum(balances) == total
    logged = {p["id"] for p in nodes.values() if p.get("log")}
    assert set(before) <= logged
    # It restores whole: every edge has both ends (the decoder refuses any other).
    progress = await restore_all(fresh, result.path, caller="x", every_tenant=True, page_size=100)
    assert progress[-1].created == len(nodes)
    edges = await fresh.connection.query(
        "MATCH (:Memory {log: true})-[e]->(:Memory {id: $first}) RETURN count(e)", {"first": account_ids[0]}
    )
    assert edges.result_set[0][0] == len(logged)


async def test_retention_keeps_the_newest_archives_of_each_tenant(seeded, tmp_path):
    times = iter(T0 + timedelta(minutes=i) for i in range(10))
    writer = BackupWriter(
        graph=seeded.backups,
        files=BackupFiles(tmp_path / "backups"),
        page_size=50,
        keep=2,
        clock=lambda: next(times),
        key=KEY,
    )
    made = [(await writer.create(tenant)).path.name for tenant in ("acme", "acme", "other", "acme", None)]
    names = writer.files.names()
    assert names == [made[4], made[3], made[2], made[1]]  # newest first; acme's oldest pruned
    assert not (tmp_path / "backups" / (made[0] + ".manifest.json")).exists()
    assert to_prune(names, 2) == []
    listing = writer.files.listing()
    assert listing[0].header.scope == "every_tenant" and listing[1].manifest.memories == 4


async def test_scheduled_backups_are_taken_by_one_replica(seeded, tmp_path):
    """Two consolidate replicas' schedulers over one graph: each interval, one archive of every tenant."""
    files = BackupFiles(tmp_path / "backups")
    times = iter(T0 + timedelta(seconds=i) for i in range(100))
    writer = BackupWriter(graph=seeded.backups, files=files, page_size=50, clock=lambda: next(times))
    now = [T0]
    replicas = [
        BackupScheduler(writer, seeded.consolidation, interval_seconds=60, clock=lambda: now[0]) for _ in range(2)
    ]
    for replica in replicas:
        await replica._pass()  # noqa: SLF001 - one pass each, as the loop would run them
    assert len(files.names()) == 1 and files.names()[0].startswith("@all-")
    now[0] = T0 + timedelta(seconds=61)  # the lease lapsed: the next interval's pass writes the next one
    for replica in reversed(replicas):
        await replica._pass()  # noqa: SLF001
    assert len(files.names()) == 2


async def test_a_tenant_that_keeps_an_audit_log_keeps_its_own_through_a_merge(seeded, fresh, tmp_path):
    """Merged into a tenant with a log of its own, the archive's audit entries are not written beside
    it: the tenant's sequence stays one, gapless, and its counter unchanged."""
    result = await writer_for(seeded, tmp_path).create("acme")
    archived = await seeded.connection.query("MATCH (a:AuditEntry {tenant: 'acme'}) RETURN count(a)")
    assert archived.result_set[0][0] > 0  # the archive carries acme's log
    await put(fresh, memory("own", content="only in the target"), memory("own2", content="also the target's"))
    before = await fresh.connection.query("MATCH (a:AuditEntry {tenant: 'acme'}) RETURN a.seq ORDER BY a.seq")
    own = [row[0] for row in before.result_set]
    assert own == list(range(1, len(own) + 1)) and own
    progress = await restore_all(fresh, result.path, merge=True)
    after = await fresh.connection.query("MATCH (a:AuditEntry {tenant: 'acme'}) RETURN a.seq ORDER BY a.seq")
    assert [row[0] for row in after.result_set] == own
    counter = await fresh.connection.query("MATCH (c:AuditCounter {tenant: 'acme'}) RETURN c.seq")
    assert counter.result_set == [[len(own)]]
    assert progress[-1].kept >= archived.result_set[0][0]
    got = await fresh.reader.get_memories("acme", [ID("a"), ID("b"), ID("own")])
    assert set(got) == {ID("a"), ID("b"), ID("own")}  # the records themselves are merged
