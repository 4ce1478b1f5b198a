"""python -m services.core.graph_migration on a real FalkorDB: a shared graph
moved into 4 buckets keeps every tenant's nodes, edges, pending events and
recall answers; a run cut short resumes from its checkpoint, copying each
tenant once; the shared graph is left as it was."""

from __future__ import annotations

import json
import uuid
from datetime import UTC, datetime

import pytest

from services.core import graph_migration
from services.core.adapters.falkor.migration import GraphCopy
from services.core.domain.model import EventKind, MemoryEvent, Relation
from services.core.wiring import graph_layout, graph_store
from tests.factories import memory_at

pytestmark = pytest.mark.integration

T0 = datetime(2025, 3, 1, 12, 0, tzinfo=UTC)
TENANTS = ["acme", "globex", "initech", "umbrella", "hooli"]


def ID(name: str) -> str:
    return str(uuid.uuid5(uuid.NAMESPACE_URL, f"memgrid-test/{name}"))


@pytest.fixture
async def shared(settings):
    store = graph_store(settings.graph, settings.process, recall=settings.recall, backup=settings.backup)
    await store.lifecycle.ensure_schema()
    for n, tenant in enumerate(TENANTS):
        memories = [
            memory_at(
                ID(f"{tenant}/{k}"), T0, tenant=tenant, content=f"{tenant} note {k} about rockets", importance=k / 10
            )
            for k in range(n + 2)
        ]
        events = [MemoryEvent.for_memory(EventKind.CREATED, m, T0) for m in memories]
        await store.writer.create_memories(memories, events, now_us=1)
        relation = Relation(memories[0].id, memories[1].id, "RELATES_TO", 0.5, T0)
        await store.writer.create_relations(tenant, [relation], [MemoryEvent.associated(tenant, relation)], now_us=1)
    yield store
    await store.lifecycle.close()


async def test_a_shared_graph_moves_into_buckets_checked_and_resumable(shared, settings, tmp_path, monkeypatch, capsys):
    checkpoint = tmp_path / "migration.json"
    before = {t: await GraphCopy(shared.connection, shared.connection).counts(shared.connection, t) for t in TENANTS}
    # A first run cut short: the third tenant's copy dies after its nodes, before its edges.
    linked: list[str] = []
    real_link = GraphCopy._link

    async def dying_link(self, tenant, kind, rows):
        if tenant not in linked:
            linked.append(tenant)
        if len(linked) == 3:
            raise RuntimeError("killed")
        return await real_link(self, tenant, kind, rows)

    monkeypatch.setattr(GraphCopy, "_link", dying_link)
    with pytest.raises(RuntimeError):
        await graph_migration.migrate(settings, checkpoint, buckets=4, page_size=3)
    assert sorted(json.loads(checkpoint.read_text())["done"]) == sorted(linked[:2])
    cut = linked[2]
    monkeypatch.setattr(GraphCopy, "_link", real_link)
    capsys.readouterr()  # the first run's lines

    assert await graph_migration.migrate(settings, checkpoint, buckets=4, page_size=3) == 0
    out = [json.loads(line) for line in capsys.readouterr().out.splitlines() if line.startswith("{")]
    resumed = {line["tenant"]: line for line in out}
    assert set(resumed) == set(TENANTS) - set(linked[:2])  # the two done are not copied again
    assert resumed[cut]["cleared_first"] > 0  # what the cut-short copy left was cleared, then copied whole
    done = json.loads(checkpoint.read_text())["done"]
    assert sorted(done) == sorted(TENANTS)
    bucketed = settings.override({"falkordb_graph_layout": "bucket", "falkordb_graph_buckets": 4})
    target = graph_store(bucketed.graph, bucketed.process, recall=bucketed.recall, backup=bucketed.backup)
    try:
        copy = GraphCopy(shared.connection, target.connection)
        for n, tenant in enumerate(TENANTS):
            after = await copy.counts(target.connection, tenant)
            assert after == before[tenant]
            assert after.nodes["Memory"] == n + 2 and after.edges["RELATES_TO"] == 1
            assert done[tenant]["nodes"] == sum(after.nodes.values())
            assert await graph_migration.same_recall(shared, target, tenant) == []
            # Pending events came along, in the tenant's bucket: the relay publishes them from there.
            pending = [e for e in await target.outbox.pending_outbox(2**62, 1000) if e.event.tenant == tenant]
            assert len(pending) == n + 3
        graphs = {graph_layout(bucketed.graph).graph_for(t) for t in TENANTS}
        assert len(graphs) > 1  # the tenants spread
        # Run again: nothing left to do, nothing copied twice.
        assert await graph_migration.migrate(settings, checkpoint, buckets=4) == 0
        assert await target.reader.count_memories() == sum(n + 2 for n in range(len(TENANTS)))
        assert await shared.reader.count_memories() == sum(n + 2 for n in range(len(TENANTS)))  # left as it was
        # The recall check can fail: a memory missing from the copy shows in its listing and keyword arm.
        await target.connection.query(
            "MATCH (m:Memory {id: $id}) DETACH DELETE m", {"id": ID("hooli/1"), "tenant": "hooli"}
        )
        assert await graph_migration.same_recall(shared, target, "hooli") != []
    finally:
        await target.lifecycle.close()
