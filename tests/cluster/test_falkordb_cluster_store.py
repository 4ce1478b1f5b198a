"""The graph store on a FalkorDB cluster: a backup restores every tenant of
every shard, each tenant at one point in time, taken while writes go on; a
write no replica holds is never acknowledged, retried or not.

For the backup, the graph store runs in the bucket layout on 3 masters with a replica each
(loopback), with tenants on every master. Each tenant's writer stores its
memories one after another (memory n only once n-1 is acknowledged) while
an every-tenant backup is taken: a scratch replica per master, synced and
cut loose together (services/core/adapters/falkor/backups.py). Checked: the
archive holds every tenant; for each, a prefix of its writes (a point in
its own history) holding every write acknowledged before the backup began;
and the archive, restored into a fresh bucket layout on the same cluster,
gives back each tenant's memories, events' order aside, readable by id.
"""

from __future__ import annotations

import asyncio
import gzip
import json
import uuid
from datetime import UTC, datetime

import pytest

from services.consolidate.archive_reader import read_archive
from services.consolidate.backup import BackupWriter
from services.consolidate.backup_files import BackupFiles
from services.consolidate.restore import Restorer
from services.core.adapters.falkor import FalkorGraph
from services.core.adapters.falkor.scratch_replica import ScratchSpec
from services.core.domain.errors import Unavailable
from services.core.domain.graph_layout import GraphLayout
from services.core.domain.idempotency import IdempotencyClaim
from services.core.domain.model import EventKind, MemoryEvent
from tests.factories import memory_at

pytestmark = [pytest.mark.cluster, pytest.mark.timeout(180)]

BUCKETS = 12
KEY = b"memgrid-test-cluster-backup-key-0123456789"
#: Memories each tenant holds before the backup begins; writes go on while it runs.
BEFORE = 8


def memory_id(tenant: str, n: int) -> str:
    return str(uuid.uuid5(uuid.NAMESPACE_URL, f"memgrid-cluster-backup/{tenant}/{n}"))


def store_on(cluster, base: str, scratch, **options) -> FalkorGraph:
    host, port = cluster.startup
    nodes = ",".join(f"127.0.0.1:{p}" for p in cluster.ports)
    assert host == "127.0.0.1" and port == cluster.ports[0]
    return FalkorGraph(
        host=nodes,
        port=port,
        graph=base,
        layout=GraphLayout(base, "bucket", BUCKETS),
        write_replicas=1,
        backup_scratch=ScratchSpec(root=scratch, sync_timeout_seconds=60),
        **options,
    )


async def write(store: FalkorGraph, tenant: str, n: int) -> None:
    now = datetime.now(UTC)
    memory = memory_at(memory_id(tenant, n), now, tenant=tenant, content=f"{tenant} backup write {n}")
    await store.writer.create_memories(
        [memory], [MemoryEvent.for_memory(EventKind.CREATED, memory, now)], now_us=int(now.timestamp() * 1e6)
    )


def archived(path) -> dict[str, set[str]]:
    """Memory ids per tenant in an archive."""
    held: dict[str, set[str]] = {}
    with gzip.open(path, "rt") as lines:
        for line in lines:
            record = json.loads(line)
            if "node" in record and "Memory" in record.get("labels", ()):
                props = record["properties"]
                held.setdefault(props["tenant"], set()).add(props["id"])
    return held


async def test_an_every_tenant_backup_of_the_cluster_restores_each_tenant_at_a_point(falkordb_cluster, tmp_path):
    cluster = falkordb_cluster
    base = f"bk{uuid.uuid4().hex[:6]}"
    layout = GraphLayout(base, "bucket", BUCKETS)
    per_master: dict[int, list[str]] = {}
    for n in range(200):
        tenant = f"tenant-{n:03d}"
        group = per_master.setdefault(cluster.master_of_slot(cluster.keyslot(layout.graph_for(tenant))), [])
        if len(group) < 2:
            group.append(tenant)
    tenants = sorted(t for group in per_master.values() for t in group)
    assert len(per_master) == 3, per_master

    store = store_on(cluster, base, tmp_path / "scratch")
    await store.lifecycle.ensure_schema()
    fresh = store_on(cluster, f"rs{uuid.uuid4().hex[:6]}", tmp_path / "scratch")
    await fresh.lifecycle.ensure_schema()
    try:
        for tenant in tenants:
            for n in range(BEFORE):
                await write(store, tenant, n)
        acked = dict.fromkeys(tenants, BEFORE)
        stop = asyncio.Event()

        async def writer(tenant: str) -> None:
            while not stop.is_set():
                await write(store, tenant, acked[tenant])
                acked[tenant] += 1
                await asyncio.sleep(0.01)

        tasks = [asyncio.create_task(writer(t)) for t in tenants]
        writer_files = BackupFiles(tmp_path / "backups")
        result = await BackupWriter(graph=store.backups, files=writer_files, page_size=50, keep=0, key=KEY).create(None)
        stop.set()
        await asyncio.gather(*tasks)

        held = archived(result.path)
        assert set(held) == set(tenants), f"tenants missing from the archive: {set(tenants) - set(held)}"
        for tenant in tenants:
            count = len(held[tenant])
            assert count >= BEFORE, (tenant, count)
            assert held[tenant] == {memory_id(tenant, n) for n in range(count)}, f"{tenant}: not a prefix"
        assert any(len(held[t]) > BEFORE for t in tenants), "no write made while the backup ran was in it"

        restorer = Restorer(graph=fresh.restore, read=read_archive, page_size=50, keys=(KEY,))
        progress = [p async for p in restorer.restore(result.path, caller=tenants[0], every_tenant=True, merge=False)]
        assert progress[-1].done
        for tenant in tenants:
            assert await fresh.reader.count_memories(tenant) == len(held[tenant]), tenant
            assert await fresh.reader.get_memory(tenant, memory_id(tenant, BEFORE - 1)) is not None
        print(
            f"\nbackup of the cluster: {result.memories} memories of {len(tenants)} tenants on 3 masters, "
            f"{sum(acked.values())} written by then; restored: {progress[-1].nodes_done} nodes"
        )
    finally:
        await store.lifecycle.close()
        await fresh.lifecycle.close()


async def test_a_keyed_write_no_replica_holds_is_refused_again_when_replayed(falkordb_cluster, tmp_path):
    """A write whose master has lost its replica is refused (FALKORDB_WRITE_UNREPLICATED) though it is
    on the master; the client sends it again with its Idempotency-Key, and the replay (which finds the
    key) must not acknowledge it either until a replica holds it: else a master lost then loses an
    acknowledged write."""
    cluster = falkordb_cluster
    base = f"rp{uuid.uuid4().hex[:6]}"
    store = store_on(cluster, base, tmp_path / "scratch", write_replicas_timeout_ms=300)
    await store.lifecycle.ensure_schema()
    tenant = "tenant-replayed"
    master = cluster.master_of_slot(cluster.keyslot(GraphLayout(base, "bucket", BUCKETS).graph_for(tenant)))
    [replica] = cluster.replicas_of(master)
    now = datetime.now(UTC)
    now_us = int(now.timestamp() * 1e6)
    claim = IdempotencyClaim(tenant, "key-1", "owner-1", "hash-1", now_us + 60_000_000)
    memory = memory_at(memory_id(tenant, 0), now, tenant=tenant, content="written while the replica was down")
    try:
        cluster.nodes[replica].kill()
        with pytest.raises(Unavailable) as refused:
            await store.writer.create_memories(
                [memory], [MemoryEvent.for_memory(EventKind.CREATED, memory, now)], now_us=now_us, claim=claim
            )
        assert refused.value.reason == "FALKORDB_WRITE_UNREPLICATED"
        with pytest.raises(Unavailable) as replayed:
            await store.writer.get_idempotency(tenant, "key-1", now_us)
        assert replayed.value.reason == "FALKORDB_WRITE_UNREPLICATED"
    finally:
        cluster.start_node(replica)
        cluster.wait_ok(30)
    deadline = asyncio.get_running_loop().time() + 30
    while True:  # the replica back and in sync: the replay answers
        try:
            assert await store.writer.get_idempotency(tenant, "key-1", now_us) == ("hash-1", [memory.id])
            break
        except Unavailable:
            assert asyncio.get_running_loop().time() < deadline, "the replay still refused with the replica back"
            await asyncio.sleep(0.2)
    await store.lifecycle.close()
