"""FALKORDB_GRAPH_LAYOUT=bucket on a real FalkorDB: each tenant's records and
outbox events live in its bucket's graph, and the cross-tenant work (the
relay's sweep, the enrichment sweeps, consolidation's tenants, the index
scan, an every-tenant backup and its restore) visits every bucket."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime

import pytest

from devstack.servers import free_port, start_falkordb
from services.consolidate.archive_reader import read_archive
from services.consolidate.backup import BackupWriter
from services.consolidate.backup_files import BackupFiles
from services.consolidate.restore import Restorer
from services.core.domain.graph_layout import GraphLayout
from services.core.domain.model import EventKind, MemoryEvent, Relation
from services.core.settings import Settings
from services.core.wiring import graph_layout, graph_store
from tests.factories import memory_at

pytestmark = pytest.mark.integration

T0 = datetime(2025, 3, 1, 12, 0, tzinfo=UTC)
KEY = b"memgrid-test-graph-buckets-key-0123456789"
BUCKETS = 4


@pytest.fixture(scope="module")
def falkordb_server(tmp_path_factory):
    """A server of this module's own: a backup's snapshot is a replica of the whole server."""
    timeout = Settings(_env_file=None).graph.falkordb_query_timeout_ms
    server = start_falkordb(free_port(), tmp_path_factory.mktemp("falkordb_buckets"), query_timeout_ms=timeout)
    yield server
    server.stop()


def spread(layout: GraphLayout, count: int) -> list[str]:
    """`count` tenants, each in a bucket of its own."""
    found: dict[str, str] = {}
    for n in range(10_000):
        found.setdefault(layout.graph_for(f"tenant-{n}"), f"tenant-{n}")
        if len(found) == count:
            return list(found.values())
    raise AssertionError("no spread found")


@pytest.fixture
def bucketed(settings):
    return settings.override({"falkordb_graph_layout": "bucket", "falkordb_graph_buckets": BUCKETS})


@pytest.fixture
async def store(bucketed):
    graph = graph_store(bucketed.graph, bucketed.process, recall=bucketed.recall, backup=bucketed.backup)
    await graph.lifecycle.ensure_schema()
    yield graph
    await graph.lifecycle.close()


def ID(name: str) -> str:
    return str(uuid.uuid5(uuid.NAMESPACE_URL, f"memgrid-test/{name}"))


async def put(store, tenant: str, *names: str, **fields) -> None:
    memories = [memory_at(ID(f"{tenant}/{n}"), T0, tenant=tenant, content=f"{tenant} {n}", **fields) for n in names]
    events = [MemoryEvent.for_memory(EventKind.CREATED, m, T0) for m in memories]
    await store.writer.create_memories(memories, events, now_us=1)


async def labels_in(store, graph: str) -> dict[str, int]:
    rows = await store.connection.query("MATCH (n) RETURN labels(n)[0], count(n)", graph=graph)
    return {label: int(count) for label, count in rows.result_set}


async def test_each_tenant_and_its_events_live_in_its_buckets_graph(store, bucketed):
    layout = graph_layout(bucketed.graph)
    tenants = spread(layout, 3)
    for i, tenant in enumerate(tenants):
        await put(store, tenant, *[f"m{k}" for k in range(i + 1)])
    # One batch of two tenants in two buckets: each written, with its events, in its own graph.
    await store.writer.create_memories(
        [memory_at(ID("mix/a"), T0, tenant=tenants[0]), memory_at(ID("mix/b"), T0, tenant=tenants[1])],
        [
            MemoryEvent.for_memory(EventKind.CREATED, memory_at(ID("mix/a"), T0, tenant=tenants[0]), T0),
            MemoryEvent.for_memory(EventKind.CREATED, memory_at(ID("mix/b"), T0, tenant=tenants[1]), T0),
        ],
        now_us=1,
    )
    expected = {tenants[0]: 2, tenants[1]: 3, tenants[2]: 3}
    for tenant, count in expected.items():
        held = await labels_in(store, layout.graph_for(tenant))
        assert held["Memory"] == held["Outbox"] == count, (tenant, held)
        assert await store.reader.count_memories(tenant) == count
        others = [t for t in tenants if t != tenant]
        assert await store.reader.get_memory(others[0], ID(f"{tenant}/m0")) is None
    assert await store.reader.count_memories() == sum(expected.values())
    assert await store.consolidation.tenants() == sorted(tenants)
    # Graphs the layout names and nothing else: no shared graph of the stem.
    listed = await store.connection._db.list_graphs()  # noqa: SLF001
    assert bucketed.graph.falkordb_graph not in listed and set(layout.graphs()) <= set(listed)


async def test_the_relay_and_the_sweeps_visit_every_bucket(store, bucketed):
    layout = graph_layout(bucketed.graph)
    tenants = spread(layout, 3)
    for tenant in tenants:
        await put(store, tenant, "a", "b")
    pending = await store.outbox.pending_outbox(2**62, 100)
    assert len(pending) == 6 and {e.event.tenant for e in pending} == set(tenants)
    assert len(await store.outbox.pending_outbox(2**62, 4)) == 4  # the limit holds over the buckets together
    unembedded = await store.enrichment.find_unembedded(2**62, 100)
    assert sorted(unembedded) == sorted((t, ID(f"{t}/{n}")) for t in tenants for n in "ab")
    assert len(await store.enrichment.find_unenriched(2**62, 5)) == 5
    # Cleared where the relay knows each event's tenant: in its bucket alone.
    first = [e for e in pending if e.event.tenant == tenants[0]]
    await store.outbox.delete_outbox([e.event_id for e in first], [e.event.tenant for e in first])
    assert {e.event.tenant for e in await store.outbox.pending_outbox(2**62, 100)} == set(tenants[1:])
    # Without tenants (an operator's call), every bucket is looked in.
    await store.outbox.delete_outbox([e.event_id for e in pending])
    assert await store.outbox.pending_outbox(2**62, 100) == []


async def test_an_every_tenant_scan_walks_each_bucket_once(store, bucketed):
    tenants = spread(graph_layout(bucketed.graph), 3)
    for tenant in tenants:
        await put(store, tenant, *[f"m{k}" for k in range(5)], embedding=[1.0, 0.0, 0.0, 0.0])
    seen, cursor = [], -1
    while True:
        cursor, page = await store.index_source.scan_memories(cursor, 2)
        if not page:
            break
        seen += [(m.tenant, m.id) for m in page]
    assert sorted(seen) == sorted((t, ID(f"{t}/m{k}")) for t in tenants for k in range(5))
    assert await store.index_source.embedded_counts() == dict.fromkeys(tenants, 5)


async def test_an_every_tenant_backup_restores_into_another_bucketed_store(store, bucketed, tmp_path):
    tenants = spread(graph_layout(bucketed.graph), 3)
    for tenant in tenants:
        await put(store, tenant, "a", "b", "c")
        relation = Relation(ID(f"{tenant}/a"), ID(f"{tenant}/b"), "RELATES_TO", 0.5, T0)
        await store.writer.create_relations(tenant, [relation], [MemoryEvent.associated(tenant, relation)], now_us=1)
    writer = BackupWriter(graph=store.backups, files=BackupFiles(tmp_path / "b"), page_size=2, keep=0, key=KEY)
    result = await writer.create(None)
    manifest = result.info.manifest
    assert manifest.nodes["Memory"] == 9 and manifest.edges["RELATES_TO"] == 3
    assert set(manifest.tenants) == set(tenants)
    fresh_settings = bucketed.override({"falkordb_graph": f"fresh_{uuid.uuid4().hex[:8]}"})
    fresh = graph_store(
        fresh_settings.graph, fresh_settings.process, recall=fresh_settings.recall, backup=fresh_settings.backup
    )
    await fresh.lifecycle.ensure_schema()
    try:
        restorer = Restorer(graph=fresh.restore, read=read_archive, page_size=2, keys=(KEY,))
        progress = [p async for p in restorer.restore(result.path, caller=tenants[0], every_tenant=True, merge=False)]
        assert progress[-1].done and progress[-1].edges_done == manifest.edge_count
        for tenant in tenants:
            assert await fresh.reader.count_memories(tenant) == 3
            read = await fresh.reader.read_memory(tenant, ID(f"{tenant}/a"), accessed_us=2, relation_limit=10)
            assert read is not None and [r.target_id for r in read[1]] == [ID(f"{tenant}/b")]
            held = await labels_in(fresh, graph_layout(fresh_settings.graph).graph_for(tenant))
            assert held["Memory"] == 3
    finally:
        await fresh.lifecycle.close()
