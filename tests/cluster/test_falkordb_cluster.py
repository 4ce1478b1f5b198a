"""Losing a FalkorDB master of a Redis Cluster loses no acknowledged write
and stops no other tenant.

The graph store (FalkorGraph, as every service builds it) runs against 3
masters with a replica each on loopback (FALKORDB_GRAPH_LAYOUT=bucket, 12
buckets over the masters; FALKORDB_WRITE_REPLICAS=1: a write is
acknowledged once its master's replica holds it). 24 tenants have a writer
each, each write one query with its outbox event; a refused write is sent
again with the same id, as a client with an Idempotency-Key would. Readers
run recall's graph reads (a listing and the keyword arm) for the tenants on
the other masters. One master is killed with SIGKILL under that load.

Checked, each within a bound: its replica is promoted and every slot is
served again; the promoted master has no replica left, so its writes are
refused (FALKORDB_WRITE_UNREPLICATED) until the old master, started again at
once as its pod would be, rejoins as its replica, and then the victim's
tenants are written again; no read of another tenant failed meanwhile; at
the end every acknowledged write is in the graph exactly once, with its one
event beside it in its tenant's graph. The fault table goes to
build/reliability/falkordb_cluster.json and is printed (pytest -s).
"""

from __future__ import annotations

import asyncio
import json
import time
import uuid
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from pathlib import Path

import pytest

from services.core.adapters.falkor import FalkorGraph
from services.core.domain.graph_layout import GraphLayout
from services.core.domain.model import EventKind, MemoryEvent
from services.core.domain.recall_request import Scope
from tests.factories import memory_at

pytestmark = [pytest.mark.cluster, pytest.mark.timeout(240)]

BUCKETS = 12
TENANTS = [f"tenant-{n:02d}" for n in range(24)]
#: Between two writes of one tenant's writer.
PAUSE_SECONDS = 0.02
READERS = 4
#: Load before the kill, and after the replica took over.
BEFORE_SECONDS, AFTER_SECONDS = 3.0, 4.0
#: From the kill: the replica promoted (node timeout 2 s plus the election), and the victim's tenants written again.
PROMOTED_WITHIN, WRITTEN_WITHIN = 15.0, 20.0
FIGURES = Path("build/reliability/falkordb_cluster.json")


@dataclass
class Attempt:
    tenant: str
    memory_id: str
    at: float
    ok: bool
    seconds: float
    reason: str = ""


@dataclass
class Load:
    attempts: list[Attempt] = field(default_factory=list)
    reads: list[Attempt] = field(default_factory=list)
    stop: asyncio.Event = field(default_factory=asyncio.Event)


async def until(check, within: float, what: str, *, blocking: bool = True) -> float:
    """Poll `check` until it holds (a blocking one off the loop, so the load goes on); the moment it did."""
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        try:
            if await asyncio.to_thread(check) if blocking else check():
                return time.monotonic()
        except Exception:  # noqa: BLE001, S110  a node that does not answer yet is not there yet
            pass
        await asyncio.sleep(0.05)
    raise AssertionError(f"{what}: not within {within} s")


def memory_id(tenant: str, n: int) -> str:
    return str(uuid.uuid5(uuid.NAMESPACE_URL, f"memgrid-cluster/{tenant}/{n}"))


async def writer(store: FalkorGraph, load: Load, tenant: str) -> None:
    """Writes the tenant's memories one at a time (a client of its own); a refused write is sent again, same id."""
    n = 0
    while not load.stop.is_set():
        ident = memory_id(tenant, n)
        while True:
            now = datetime.now(UTC)
            memory = memory_at(ident, now, tenant=tenant, content=f"cluster write {ident} of {tenant} keepsake")
            started = time.monotonic()
            try:
                await store.writer.create_memories(
                    [memory],
                    [MemoryEvent.for_memory(EventKind.CREATED, memory, now)],
                    now_us=int(now.timestamp() * 1e6),
                )
            except Exception as exc:  # noqa: BLE001  a refusal is an outcome, counted
                load.attempts.append(
                    Attempt(tenant, ident, started, False, time.monotonic() - started, repr(exc)[:160])
                )
                await asyncio.sleep(0.05)
                if load.stop.is_set():
                    break
                continue
            load.attempts.append(Attempt(tenant, ident, started, True, time.monotonic() - started))
            break
        n += 1
        await asyncio.sleep(PAUSE_SECONDS)


async def reader(store: FalkorGraph, load: Load, tenants: list[str], index: int) -> None:
    """Recall's graph reads for `tenants`: a listing and the keyword arm, in turn."""
    n = 0
    while not load.stop.is_set():
        tenant = tenants[(index + n) % len(tenants)]
        started = time.monotonic()
        try:
            if n % 2:
                await store.reader.list_memories(Scope(tenant=tenant, at=datetime.now(UTC)), "importance", 10)
            else:
                await store.text.search_text(Scope(tenant=tenant, at=datetime.now(UTC)), "keyword", ["keepsake"], 10)
            load.reads.append(Attempt(tenant, "", started, True, time.monotonic() - started))
        except Exception as exc:  # noqa: BLE001  a failed read is an outcome, counted
            load.reads.append(Attempt(tenant, "", started, False, time.monotonic() - started, repr(exc)[:160]))
        n += 1
        await asyncio.sleep(0.01)


def longest_gap(attempts: list[Attempt], tenants: set[str]) -> float:
    """The longest time between two acknowledged writes of `tenants` (the write outage they saw)."""
    times = sorted(a.at + a.seconds for a in attempts if a.ok and a.tenant in tenants)
    return max((b - a for a, b in zip(times, times[1:], strict=False)), default=0.0)


async def stored(store: FalkorGraph) -> tuple[dict[str, int], dict[str, int]]:
    """Per memory id, how many Memory nodes and how many CREATED outbox events hold it, over every graph."""
    memories: dict[str, int] = {}
    events: dict[str, int] = {}
    for graph in store.connection.graphs():
        rows = await store.connection.query("MATCH (m:Memory) RETURN m.id, count(m)", graph=graph)
        for ident, count in rows.result_set:
            memories[ident] = memories.get(ident, 0) + int(count)
        rows = await store.connection.query(
            "MATCH (x:Outbox) WHERE x.kind = 'created' RETURN x.memory_id, count(x)", graph=graph
        )
        for ident, count in rows.result_set:
            events[ident] = events.get(ident, 0) + int(count)
    return memories, events


async def test_a_master_killed_under_writes_loses_no_acknowledged_write(falkordb_cluster):
    cluster = falkordb_cluster
    host, port = cluster.startup
    layout = GraphLayout(f"c{uuid.uuid4().hex[:6]}", "bucket", BUCKETS)
    store = FalkorGraph(
        host=host, port=port, graph=layout.base, layout=layout, write_replicas=1, write_replicas_timeout_ms=500
    )
    await store.lifecycle.ensure_schema()
    try:
        master_of = {t: cluster.master_of_slot(cluster.keyslot(layout.graph_for(t))) for t in TENANTS}
        victim = master_of[TENANTS[0]]
        [replica] = cluster.replicas_of(victim)
        hit = {t for t in TENANTS if master_of[t] == victim}
        spared = [t for t in TENANTS if master_of[t] != victim]
        assert hit and spared, master_of

        load = Load()
        tasks = [asyncio.create_task(writer(store, load, tenant)) for tenant in TENANTS]
        tasks += [asyncio.create_task(reader(store, load, spared, i)) for i in range(READERS)]
        await asyncio.sleep(BEFORE_SECONDS)
        killed_at = time.monotonic()
        cluster.nodes[victim].kill()
        promoted = await until(lambda: cluster.role(replica) == "master", PROMOTED_WITHIN, "the replica promoted")
        promoted -= killed_at
        survivors = [i for i in cluster.nodes if i != victim]
        await asyncio.to_thread(cluster.wait_ok, PROMOTED_WITHIN, survivors)
        served = time.monotonic() - killed_at

        # The promoted master has no replica left, so FALKORDB_WRITE_REPLICAS=1 refuses its writes until one
        # is back: the old master is started again at once (as its pod would be) and rejoins as a replica.
        await asyncio.to_thread(cluster.start_node, victim)
        rejoined = await until(lambda: cluster.role(victim) == "slave", 30, "the old master a replica") - killed_at

        def victim_written() -> bool:
            return any(a.ok and a.tenant in hit and a.at > killed_at + rejoined for a in load.attempts)

        written = await until(victim_written, WRITTEN_WITHIN, "a write of the victim's tenants", blocking=False)
        written -= killed_at
        await asyncio.sleep(AFTER_SECONDS)
        load.stop.set()
        await asyncio.gather(*tasks)
        await asyncio.to_thread(cluster.wait_ok, 30)

        down = [a for a in load.reads if killed_at <= a.at <= killed_at + written]
        failed_reads = [a for a in load.reads if not a.ok]
        acked = {a.memory_id: a.tenant for a in load.attempts if a.ok}
        memories, events = await stored(store)
        lost = [i for i in acked if memories.get(i, 0) == 0]
        duplicated = [i for i, count in memories.items() if count > 1]
        unevented = [i for i in acked if events.get(i, 0) != 1]
        for ident, tenant in list(acked.items())[:: max(1, len(acked) // 50)]:
            assert await store.reader.get_memory(tenant, ident) is not None

        writes = len({a.memory_id for a in load.attempts})
        refused = [a for a in load.attempts if not a.ok]
        figures = {
            "writes": writes,
            "attempts": len(load.attempts),
            "acknowledged": len(acked),
            "refused_attempts": len(refused),
            "refusals": sorted({a.reason.split("(")[0] + ": " + a.reason[:90] for a in refused})[:5],
            "lost": len(lost),
            "duplicated": len(duplicated),
            "acked_without_one_event": len(unevented),
            "victim_tenants": len(hit),
            "write_outage_victim_s": round(longest_gap(load.attempts, hit), 2),
            "write_outage_others_s": round(longest_gap(load.attempts, set(spared)), 2),
            "reads_other_tenants_during_failover": len(down),
            "reads_failed": len(failed_reads),
            "read_p50_ms": round(sorted(a.seconds for a in load.reads)[len(load.reads) // 2] * 1000, 2),
            "replica_promoted_s": round(promoted, 2),
            "every_slot_served_s": round(served, 2),
            "victim_written_again_s": round(written, 2),
            "old_master_restarted_and_a_replica_s": round(rejoined, 2),
        }
        await asyncio.to_thread(FIGURES.parent.mkdir, parents=True, exist_ok=True)
        await asyncio.to_thread(FIGURES.write_text, json.dumps(figures, indent=2))
        print("\nFalkorDB cluster, kill -9 of a master under writes:\n" + json.dumps(figures, indent=2))

        assert not lost, f"acknowledged writes lost: {lost[:5]}"
        assert not duplicated, f"memories stored twice: {duplicated[:5]}"
        assert not unevented, f"acknowledged writes without exactly one event beside them: {unevented[:5]}"
        assert down and not failed_reads, [asdict(a) for a in failed_reads[:5]]
        assert any(a.ok and a.tenant in hit and a.at < killed_at for a in load.attempts)
        assert figures["write_outage_others_s"] < 2.0, figures
    finally:
        await store.lifecycle.close()
