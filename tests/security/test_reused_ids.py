"""Consolidation and the paged reads after node ids are reused (issue 24, "decay
stops for a whole tenant"), on a real FalkorDB, as it happened: a tenant's
memories are created and deleted, the tenant goes on writing (audit entries,
outbox events) until the deleted memories' node ids belong to other labels,
then every pass (decay, creative, cluster, forget, scheduled too) and every
paged read (the index rebuild's scan, export, a backup's node windows) runs.

The decay page used to be an id seek with the label in the WHERE, which
FalkorDB's label test gets wrong for a reused id: it handed back AuditEntry
rows, and the first row without a timestamp ended the pass for the whole
tenant (`TypeError ... 'datetime.datetime' and 'NoneType'`, scanned 0, run
reported as success). A record a pass cannot score is now skipped, counted,
logged and named, and the run says it was not a plain success."""

from __future__ import annotations

import dataclasses
import hashlib
import json
from datetime import UTC, datetime, timedelta

import httpx
import pytest

from gateway.routes.consolidation import run_record
from memgrid.v1 import consolidate_service_pb2 as consolidate
from services.consolidate.scheduler import ConsolidationRunner, ConsolidationScheduler
from services.consolidate.servicer import run_to_pb
from services.consolidate.tasks import ConsolidationTasks, TaskPolicies
from services.core.adapters.falkor.backups import FalkorSnapshot
from services.core.domain.consolidation import Schedule, Task
from services.core.domain.forgetting import ForgetPolicy
from services.core.domain.model import EventKind, Memory, MemoryEvent
from services.core.domain.times import to_micros
from services.core.wiring import graph_store
from tests.e2e.conftest import gateway_url as gateway_url  # noqa: F401 (the e2e stack's fixtures)
from tests.e2e.conftest import stack_services as stack_services  # noqa: F401
from tests.e2e.test_cli import memgrid

pytestmark = pytest.mark.integration

NOW = datetime.now(UTC)
OLD = NOW - timedelta(days=400)
TENANT, OTHER = "alpha", "beta"


@pytest.fixture
async def graph(settings):
    """The graph store on the test's FalkorDB, schema made (as tests/integration's)."""
    store = graph_store(settings.graph, settings.process, recall=settings.recall, backup=settings.backup)
    await store.lifecycle.ensure_schema()
    yield store
    await store.lifecycle.close()


def memory(memory_id: str, tenant: str, i: int) -> Memory:
    return Memory(
        id=memory_id,
        tenant=tenant,
        content=f"content of {memory_id}",
        type="Context",
        confidence=0.8,
        importance=0.2,
        timestamp=OLD,
        t_valid=OLD,
        updated_at=OLD,
        last_accessed=OLD,
        recorded_at=OLD,
        embedding=[1.0, float(i % 7), 0.5, float(i % 3)],
    )


async def put(graph, memories: list[Memory]) -> None:
    events = [MemoryEvent.for_memory(EventKind.CREATED, m, NOW) for m in memories]
    await graph.writer.create_memories(memories, events, now_us=to_micros(NOW))


async def node_ids(graph, label: str) -> set[int]:
    result = await graph.connection.query(f"MATCH (n:{label}) RETURN ID(n)")
    return {int(row[0]) for row in result.result_set}


async def reuse_ids(graph) -> list[str]:
    """Alpha writes 120 memories and deletes 100, one call each (beta keeps
    30), the relay clears the outbox, then alpha goes on writing (updates:
    an audit entry and an outbox event each) until other labels hold the
    deleted memories' node ids; alpha's live memory ids."""
    alpha = [memory(f"{TENANT}-{i:03d}", TENANT, i) for i in range(120)]
    await put(graph, alpha)
    await put(graph, [memory(f"{OTHER}-{i:03d}", OTHER, i) for i in range(30)])
    deleted_nodes = set()
    by_id = {
        row[0]: int(row[1]) for row in (await graph.connection.query("MATCH (m:Memory) RETURN m.id, ID(m)")).result_set
    }
    for m in alpha[:100]:
        deleted_nodes.add(by_id[m.id])
        await graph.writer.delete_memories(TENANT, [MemoryEvent.deleted(TENANT, m.id, NOW)], now_us=to_micros(NOW))
    await graph.connection.query("MATCH (o:Outbox) DELETE o")  # the relay's acknowledgement
    live = alpha[100:]
    for round_ in range(8):
        for m in live:
            before = dataclasses.replace(m, version=round_ + 1)
            after = dataclasses.replace(m, content=f"{m.content} (edit {round_})", version=round_ + 2)
            event = MemoryEvent.for_memory(EventKind.UPDATED, after, NOW)
            assert await graph.writer.update_memory(after, round_ + 1, event, now_us=to_micros(NOW), before=before)
    reused = deleted_nodes & ((await node_ids(graph, "AuditEntry")) | (await node_ids(graph, "Outbox")))
    assert len(reused) > 50, "the deleted memories' node ids are held by other labels now"
    return [m.id for m in live]


def runner(graph, *, forget: bool = False) -> ConsolidationRunner:
    async def submit(events):
        return None

    policies = TaskPolicies(forget=ForgetPolicy(archive_below=0.9, protect_days=1) if forget else ForgetPolicy())
    tasks = ConsolidationTasks(
        store=graph.consolidation, writer=graph.writer, submit=submit, policies=policies, page_size=7, sample_size=5
    )
    return ConsolidationRunner(
        store=graph.consolidation,
        tasks=tasks,
        schedule=Schedule({Task.DECAY.value: 3600}),
        lease_seconds=30,
        history_keep=50,
    )


#: A record a page hands back that does not read: what the wrong label test returned (an AuditEntry
#: row, no timestamp, no content), or a Memory node written by hand or by an old version.
UNREADABLE = "CREATE (:Memory {id: 'no-timestamp', tenant: $t, version: 1})"


async def test_every_pass_and_paged_read_covers_the_tenant_after_ids_are_reused(graph):
    live = await reuse_ids(graph)
    await graph.connection.query(UNREADABLE, {"t": TENANT})
    reports = await runner(graph, forget=True).run_mode(
        (Task.DECAY, Task.CREATIVE, Task.CLUSTER, Task.FORGET), [TENANT], mode="full", dry_run=False
    )
    by_task = {r.record.task: r.record for r in reports}
    for task in ("decay", "forget"):  # the passes that page: the record is skipped, counted and named
        assert by_task[task].counts["scanned"] == len(live) + 1 and by_task[task].counts["skipped"] == 1
        assert len(by_task[task].errors) == 1 and "no-timestamp" in by_task[task].errors[0]
    assert not by_task["creative"].errors and not by_task["cluster"].errors
    assert by_task["decay"].counts["updated"] == len(live)
    assert by_task["creative"].counts["sampled"] == len(live)
    assert by_task["cluster"].counts["read"] == len(live)
    assert by_task["forget"].counts["archived"] == len(live)
    scored = await graph.connection.query(
        "MATCH (m:Memory) WHERE m.tenant = $t AND m.relevance_score IS NOT NULL RETURN count(m)", {"t": TENANT}
    )
    assert scored.result_set[0][0] == len(live)

    # The index rebuild's scan, one tenant's and every tenant's: Memory nodes only, each once.
    for tenant, expected in ((TENANT, len(live)), (None, len(live) + 30)):
        cursor, seen = -1, []
        while True:
            cursor, page = await graph.index_source.scan_memories(cursor, 9, tenant)
            if not page:
                break
            seen.extend(page)
        assert len(seen) == expected == len({m.id for m in seen})
        assert all(m.tenant in (TENANT, OTHER) and m.content for m in seen)

    # The export's pages (the ids, then the records: the unreadable one is left out).
    after, exported = "", []
    while page := await graph.export.memory_ids(TENANT, after, 6):
        exported.extend(page)
        after = page[-1]
    assert sorted(exported) == sorted([*live, "no-timestamp"])
    found = await graph.reader.get_memories(TENANT, exported)
    assert sorted(found) == sorted(live)

    # A backup's node windows (here over the live store: the scratch replica reads the same way).
    snapshot = FalkorSnapshot(graph.connection)
    top = await snapshot.max_node_id()
    nodes = [n for start in range(0, top + 1, 64) for n in await snapshot.nodes(TENANT, start, start + 64)]
    assert not any({"Outbox", "Lease", "IdempotencyKey"} & set(n.labels) for n in nodes)
    assert sorted(n.properties["id"] for n in nodes if "Memory" in n.labels) == sorted([*live, "no-timestamp"])


async def test_a_record_decay_cannot_score_is_skipped_counted_and_named_never_the_end_of_the_pass(graph):
    live = await reuse_ids(graph)
    await graph.connection.query(UNREADABLE, {"t": TENANT})
    report = await runner(graph).run(Task.DECAY, TENANT, mode="decay", dry_run=True)
    record = report.record
    assert record.counts["scanned"] == len(live) + 1
    assert record.counts["updated"] == len(live) and record.counts["skipped"] == 1
    assert len(record.errors) == 1 and "no-timestamp" in record.errors[0], record.errors
    assert not record.ok
    # The gateway does not call it a plain success.
    answer = run_record(run_to_pb(record), with_sample=False)
    assert answer["status"] == "partial" and answer["counts"]["skipped"] == 1

    # Creative association and clustering skip a vector that does not decode the same way.
    await graph.connection.query("MATCH (m:Memory {id: $id}) SET m.embedding = 'not base64!'", {"id": live[0]})
    for task, read in ((Task.CREATIVE, "sampled"), (Task.CLUSTER, "read")):
        other = (await runner(graph).run(task, TENANT, mode=task.value, dry_run=True)).record
        assert other.counts["skipped"] == 1 and other.counts[read] == len(live) - 1, other
        assert live[0] in other.errors[0] and not other.ok

    # The scheduled pass and a forget pass that rescores skip it the same way.
    scheduled = await ConsolidationScheduler(runner(graph), graph.consolidation, tick_seconds=60).tick()
    [alpha] = [r.record for r in scheduled if r.record.tenant == TENANT]
    assert alpha.counts["skipped"] == 1 and alpha.counts["updated"] == len(live) and alpha.errors
    forget = await runner(graph, forget=True).run(
        Task.FORGET, TENANT, mode="forget", dry_run=True, after_dry_decay=True
    )
    assert forget.record.counts["scanned"] == len(live) + 1 and forget.record.counts["skipped"] == 1
    assert forget.record.counts["archived"] == len(live)


async def test_a_failed_run_is_not_reported_as_success():
    failed = consolidate.ConsolidationRun(task="decay", tenant=TENANT, errors=["TypeError: boom"])
    failed.finished.GetCurrentTime()
    assert run_record(failed, with_sample=False)["status"] == "failed"
    done = consolidate.ConsolidationRun(task="decay", tenant=TENANT, counts={"scanned": 3})
    done.finished.GetCurrentTime()
    assert run_record(done, with_sample=False)["status"] == "success"


ADMIN = "alpha-admin"


@pytest.fixture
def stack_settings(settings, tmp_path):
    path = tmp_path / "tokens.json"
    entry = {"token_sha256": hashlib.sha256(ADMIN.encode()).hexdigest(), "tenant": TENANT, "role": "admin"}
    path.write_text(json.dumps([entry]))
    return settings.override({"memgrid_tokens_file": path, "enrichment_enabled": False})


@pytest.mark.e2e
async def test_from_outside_decay_export_reindex_and_backup_after_ids_are_reused(settings, gateway_url):  # noqa: F811
    """As the issue found it: a tenant's memories deleted, the tenant writing on until their node
    ids are reused, then POST /consolidate, the export, a reindex and a backup through the gateway."""
    client = httpx.AsyncClient(base_url=gateway_url, headers={"Authorization": f"Bearer {ADMIN}"}, timeout=120)
    graph = graph_store(settings.graph, settings.process, recall=settings.recall, backup=settings.backup)
    try:
        batch = {"memories": [{"content": f"note {i} of alpha", "type": "Context"} for i in range(60)]}
        created = (await client.post("/memory/batch", json=batch)).json()
        ids = created["memory_ids"]
        nodes = dict((await graph.connection.query("MATCH (m:Memory) RETURN m.id, ID(m)")).result_set)
        for memory_id in ids[:50]:
            assert (await client.delete(f"/memory/{memory_id}")).status_code == 200
        live = ids[50:]
        for n in range(6):
            for memory_id in live:
                reply = await client.patch(f"/memory/{memory_id}", json={"content": f"note {memory_id} edit {n}"})
                assert reply.status_code == 200, reply.text
        reused = {nodes[i] for i in ids[:50]} & (await node_ids(graph, "AuditEntry"))
        assert reused, "the deleted memories' node ids are held by audit entries now"
        await graph.connection.query(UNREADABLE, {"t": TENANT})

        async def decay() -> dict:
            reply = await client.post("/consolidate", json={"mode": "decay", "dry_run": False})
            assert reply.status_code == 200, reply.text
            return reply.json()

        answer = await decay()
        [run] = answer["runs"]
        assert answer["status"] == "partial" and run["status"] == "partial", answer
        assert (run["counts"]["scanned"], run["counts"]["updated"], run["counts"]["skipped"]) == (11, 10, 1), run
        assert "no-timestamp" in run["errors"][0]
        # The CLI says so too: the errors printed, exit 5 (docs/cli.md), not a plain success.
        code, out, err = await memgrid(gateway_url, ADMIN, "consolidate", "--mode", "decay", "--apply")
        assert code == 5 and "no-timestamp" in out, (code, out, err)

        exported, token = [], None
        while True:
            page = (
                await client.get("/memories/export", params={"limit": 4, **({"page_token": token} if token else {})})
            ).json()
            exported += [m["id"] for m in page["memories"]]
            if not (token := page["next_page_token"]):
                break
        assert sorted(exported) == sorted(live)
        reindex = await client.post("/admin/reindex", json={})
        # Each readable memory read once (unembedded here: enrichment is off), the unreadable one left out.
        rebuilt = reindex.json()
        assert reindex.status_code == 200 and rebuilt["indexed"] + rebuilt["skipped"] == len(live), reindex.text
        backup = await client.post("/backup", json={})
        assert backup.status_code == 200 and backup.json()["memories"] == len(live) + 1, backup.text

        await graph.connection.query("MATCH (m:Memory {id: 'no-timestamp'}) DELETE m")
        clean = await decay()
        assert clean["status"] == "success" and clean["runs"][0]["counts"]["scanned"] == len(live), clean
    finally:
        await client.aclose()
        await graph.lifecycle.close()
