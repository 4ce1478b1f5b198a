"""The whole stack on a FalkorDB cluster: a master killed under write load
through REST loses no acknowledged write, stops no other tenant, and the
stack converges; services start while a node is down; a backup visits
every shard.

FalkorDB runs as a Redis Cluster of 3 masters, each with a replica, on
loopback, in the bucket layout with the prod overlay's settings
(FALKORDB_GRAPH_BUCKETS=64, FALKORDB_WRITE_REPLICAS=1; FALKORDB_HOST lists
every node); the four services and the gateway are processes of their own
(tests/reliability/procstack.py). Tenants come from a tokens file, each
with a writer of its own: one write at a time through POST /memory with an
Idempotency-Key, a refused write sent again with the same key (as a client
should) for up to RETRY_FOR_SECONDS. Readers recall for the tenants of the
other masters.

The master of the first tenant's bucket is killed with SIGKILL, then,
once its replica is promoted, started again at once (as its pod would be);
with one replica a master, the promoted one refuses writes until it has a
replica back (FALKORDB_WRITE_REPLICAS=1). Checked: no acknowledged write
lost or stored twice, no recall of another shard's tenants failed during
the failover, and every acknowledged memory reads back and is recalled by
its vector afterwards. The fault table goes to
build/cluster/stack_falkordb_cluster.json and is printed (pytest -s).
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
import secrets
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path

import httpx
import pytest
from redis.crc import key_slot

from devstack.servers import SLOTS
from services.core.domain.graph_layout import GraphLayout
from tests.reliability.procstack import ProcessStack
from tests.waiting import wait_for

pytestmark = [pytest.mark.cluster, pytest.mark.timeout(420)]

BUCKETS = 64
MASTERS = 3
#: The node FALKORDB_HOST names first, a master when the cluster is joined: the one killed.
VICTIM = 0


def spread(per_master: int) -> list[str]:
    """Tenant names, `per_master` on each master's slots (FalkorCluster gives master m the m-th equal range)."""
    layout, chosen = GraphLayout("memories", "bucket", BUCKETS), {m: [] for m in range(MASTERS)}
    for n in range(1000):
        tenant = f"tenant-{n:03d}"
        master = min(key_slot(layout.graph_for(tenant).encode()) // (SLOTS // MASTERS), MASTERS - 1)
        if len(chosen[master]) < per_master:
            chosen[master].append(tenant)
    return sorted(t for group in chosen.values() for t in group)


TENANTS = spread(3)
#: Between two writes of one tenant's writer; readers pause as long between two recalls.
WRITE_PAUSE_SECONDS, READ_PAUSE_SECONDS = 0.6, 0.5
READERS = 2
#: A refused write is sent again with its key for this long, then given up (counted, never acknowledged).
RETRY_FOR_SECONDS = 30.0
#: The stack's CPU is read with no load for this long first.
IDLE_SECONDS = 5.0
#: Load before the kill, and after the victim's tenants are written again.
BEFORE_SECONDS, AFTER_SECONDS = 5.0, 5.0
PROMOTED_WITHIN, WRITTEN_WITHIN, CONVERGE_WITHIN = 20.0, 40.0, 120.0
ADMIN = "cluster-admin-token"
FIGURES = Path("build/cluster/stack_falkordb_cluster.json")


def tokens(tenants: list[str]) -> dict[str, str]:
    return {tenant: secrets.token_urlsafe(24) for tenant in tenants}


def stack_env() -> dict[str, str]:
    """The stack's settings; the graph store's are the prod overlay's (tests/deploy checks they agree)."""
    return {
        "FALKORDB_GRAPH_LAYOUT": "bucket",
        "FALKORDB_GRAPH_BUCKETS": str(BUCKETS),
        "FALKORDB_WRITE_REPLICAS": "1",
        "CONSUMER_ACK_WAIT_SECONDS": "6",
        "CONSUMER_HEARTBEAT_SECONDS": "2",
        "CONSOLIDATION_TICK_SECONDS": "0",
    }


@pytest.fixture(scope="module")
def tenant_tokens() -> dict[str, str]:
    return tokens(TENANTS)


@pytest.fixture(scope="module")
def stack(tmp_path_factory, tenant_tokens):
    path = tmp_path_factory.mktemp("tokens") / "tokens.json"
    entries = [
        {"token_sha256": hashlib.sha256(token.encode()).hexdigest(), "tenant": tenant, "role": "admin"}
        for tenant, token in tenant_tokens.items()
    ]
    path.write_text(json.dumps(entries))
    env = {**stack_env(), "MEMGRID_TOKENS_FILE": str(path), "ADMIN_API_TOKEN": ADMIN}
    with ProcessStack(falkordb_cluster=(MASTERS, 1), **env) as s:
        yield s


@dataclass
class Write:
    tenant: str
    key: str
    content: str
    started: float
    attempts: int = 0
    refused: list[str] = field(default_factory=list)
    memory_id: str | None = None
    done: float = 0.0


@dataclass
class Read:
    tenant: str
    started: float
    seconds: float
    status: int


@dataclass
class Load:
    writes: list[Write] = field(default_factory=list)
    reads: list[Read] = field(default_factory=list)
    stop: asyncio.Event = field(default_factory=asyncio.Event)


def client(stack: ProcessStack, token: str) -> httpx.AsyncClient:
    return httpx.AsyncClient(base_url=stack.url, headers={"Authorization": f"Bearer {token}"}, timeout=30)


async def writer(http: httpx.AsyncClient, load: Load, tenant: str) -> None:
    """The tenant's writes, one at a time; a refused one is sent again with its Idempotency-Key."""
    n = 0
    while not load.stop.is_set():
        write = Write(tenant, f"cluster-{uuid.uuid4().hex}", f"{tenant} cluster write {n} marker{uuid.uuid4().hex}", 0)
        write.started = time.monotonic()
        load.writes.append(write)
        while time.monotonic() - write.started < RETRY_FOR_SECONDS:
            write.attempts += 1
            try:
                reply = await http.post(
                    "/memory",
                    json={"content": write.content, "tags": ["cluster"]},
                    headers={"Idempotency-Key": write.key},
                )
                if reply.is_success:
                    write.memory_id, write.done = reply.json()["memory_id"], time.monotonic()
                    break
                write.refused.append(f"{reply.status_code} {reply.json().get('code')}")
            except (httpx.HTTPError, ValueError) as exc:
                write.refused.append(repr(exc)[:80])
            await asyncio.sleep(0.2)
        n += 1
        await asyncio.sleep(WRITE_PAUSE_SECONDS)


async def reader(clients: dict[str, httpx.AsyncClient], load: Load, index: int) -> None:
    """Recalls for `clients`' tenants in turn."""
    tenants = sorted(clients)
    n = index
    while not load.stop.is_set():
        tenant = tenants[n % len(tenants)]
        started = time.monotonic()
        try:
            reply = await clients[tenant].get("/recall", params={"query": f"{tenant} cluster write", "limit": 5})
            status = reply.status_code
        except httpx.HTTPError:
            status = 0
        load.reads.append(Read(tenant, started, time.monotonic() - started, status))
        n += 1
        await asyncio.sleep(READ_PAUSE_SECONDS)


async def until(check, within: float, what: str) -> float:
    """Poll a blocking `check` off the loop until it holds; the moment it did."""
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        try:
            if await asyncio.to_thread(check):
                return time.monotonic()
        except Exception:  # noqa: BLE001, S110  a node that does not answer yet is not there yet
            pass
        await asyncio.sleep(0.1)
    raise AssertionError(f"{what}: not within {within} s")


def cpu_seconds(stack: ProcessStack) -> dict[str, tuple[int, float]]:
    """(pid, CPU seconds so far: user and system) of each running process of the stack."""
    tick = os.sysconf("SC_CLK_TCK")
    seconds = {}
    for name, pid in stack.pids().items():
        try:
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        seconds[name] = (pid, (int(fields[11]) + int(fields[12])) / tick)
    return seconds


def cpu_used(marks: list[dict[str, tuple[int, float]]]) -> dict[str, float]:
    """CPU seconds each process used between the first and the last of `marks`, a restarted one's
    (another pid) counted from its start; the killed one's after its last mark is not known."""
    used: dict[str, float] = {}
    for before, after in zip(marks, marks[1:], strict=False):
        for name, (pid, cpu) in after.items():
            start = before[name][1] if name in before and before[name][0] == pid else 0.0
            used[name] = used.get(name, 0.0) + cpu - start
    return used


def cost_per_write(used: dict[str, float], writes: float) -> dict[str, float]:
    """CPU ms per write (or per second) by kind of process (the FalkorDB nodes together, each service, the
    gateway)."""
    kinds: dict[str, float] = {}
    for name, seconds in used.items():
        kind = "falkordb" if name.startswith("falkordb") else name
        kinds[kind] = kinds.get(kind, 0.0) + seconds
    return {kind: round(1000 * seconds / max(1, writes), 1) for kind, seconds in sorted(kinds.items())}


def longest_gap(times: list[float], start: float, end: float) -> float:
    """The longest stretch within [start, end] without one of `times`."""
    marks = sorted([start, *(t for t in times if start <= t <= end), end])
    return max(b - a for a, b in zip(marks, marks[1:], strict=False))


async def recallable(clients: dict[str, httpx.AsyncClient], write: Write) -> bool:
    """The memory reads back with its content and recall's vector arm finds it."""
    http = clients[write.tenant]
    reply = await http.get(f"/memory/{write.memory_id}")
    if reply.status_code != 200 or reply.json()["memory"]["content"] != write.content:
        return False
    reply = await http.get("/recall", params={"query": write.content, "limit": 3})
    if reply.status_code != 200:
        return False
    hit = next((r for r in reply.json()["results"] if r["id"] == write.memory_id), None)
    return hit is not None and hit["score_components"].get("vector", 0.0) > 0.5


async def test_a_master_killed_under_rest_writes_loses_nothing_and_stops_no_other_tenant(stack, tenant_tokens):
    cluster = stack.falkor_cluster
    layout = GraphLayout("memories", "bucket", BUCKETS)
    master_of = {t: cluster.master_of_slot(cluster.keyslot(layout.graph_for(t))) for t in TENANTS}
    hit = {t for t in TENANTS if master_of[t] == VICTIM}
    spared = [t for t in TENANTS if master_of[t] != VICTIM]
    assert hit and spared, master_of
    [replica] = cluster.replicas_of(VICTIM)
    victim_buckets = sum(1 for g in layout.graphs() if cluster.master_of_slot(cluster.keyslot(g)) == VICTIM)
    clients = {t: client(stack, token) for t, token in tenant_tokens.items()}
    load = Load()
    idle = [cpu_seconds(stack)]  # what the stack costs with no load: sweeps, consumers, the cluster's gossip
    await asyncio.sleep(IDLE_SECONDS)
    idle.append(cpu_seconds(stack))
    marks = [cpu_seconds(stack)]
    began = time.monotonic()
    try:
        tasks = [asyncio.create_task(writer(clients[t], load, t)) for t in TENANTS]
        tasks += [asyncio.create_task(reader({t: clients[t] for t in spared}, load, i)) for i in range(READERS)]
        await asyncio.sleep(BEFORE_SECONDS)
        marks.append(cpu_seconds(stack))
        killed_at = time.monotonic()
        stack.kill(f"falkordb-{VICTIM}")
        promoted = await until(lambda: cluster.role(replica) == "master", PROMOTED_WITHIN, "replica promoted")
        survivors = [i for i in cluster.nodes if i != VICTIM]
        await asyncio.to_thread(cluster.wait_ok, PROMOTED_WITHIN, survivors)
        served = time.monotonic()
        await asyncio.to_thread(stack.start, f"falkordb-{VICTIM}")  # at once, as its pod would be
        rejoined = await until(lambda: cluster.role(VICTIM) == "slave", 30, "the old master a replica")

        async def victim_written():
            return any(w.memory_id and w.tenant in hit and w.started > rejoined for w in load.writes)

        await wait_for(victim_written, within=WRITTEN_WITHIN, every=0.1)
        written = time.monotonic()
        await asyncio.sleep(AFTER_SECONDS)
        load.stop.set()
        await asyncio.gather(*tasks)
        stopped = time.monotonic()
        marks.append(cpu_seconds(stack))

        acked = [w for w in load.writes if w.memory_id]
        given_up = [w for w in load.writes if not w.memory_id]

        async def converged():
            rows = await asyncio.to_thread(stack.graph_query, "MATCH (m:Memory) RETURN m.id, m.enriched_at")
            enriched = {i for i, at in rows if at is not None}
            return rows if {w.memory_id for w in acked} <= enriched else None

        rows = await wait_for(converged, within=CONVERGE_WITHIN, every=0.5)
        semaphore = asyncio.Semaphore(6)

        async def check(write: Write) -> bool:
            async with semaphore:
                return await recallable(clients, write)

        async def all_recallable():
            pending = [w for w in acked if not w.__dict__.get("found")]
            for write, ok in zip(pending, await asyncio.gather(*(check(w) for w in pending)), strict=True):
                write.__dict__["found"] = ok
            return all(w.__dict__.get("found") for w in acked)

        await wait_for(all_recallable, within=CONVERGE_WITHIN, every=1.0)
        converge = time.monotonic() - stopped
        contents = await asyncio.to_thread(stack.graph_query, "MATCH (m:Memory) RETURN m.id, m.content")
    finally:
        for http in clients.values():
            await http.aclose()

    by_id: dict[str, int] = {}
    by_content: dict[str, int] = {}
    for ident, content in contents:
        by_id[ident] = by_id.get(ident, 0) + 1
        by_content[content] = by_content.get(content, 0) + 1
    lost = [w for w in acked if by_id.get(w.memory_id, 0) == 0]
    duplicated = [c for c, n in by_content.items() if n > 1] + [i for i, n in by_id.items() if n > 1]
    failover = (killed_at, written)
    reads_during = [r for r in load.reads if failover[0] <= r.started <= failover[1]]
    failed_reads = [r for r in load.reads if r.status != 200]
    figures = {
        "victim": f"falkordb-{VICTIM}, master of {victim_buckets} of {BUCKETS} buckets",
        "tenants_on_victim": len(hit),
        "tenants_elsewhere": len(spared),
        "writes": len(load.writes),
        "acknowledged": len(acked),
        "refused_attempts": sum(len(w.refused) for w in load.writes),
        "refusals": sorted({r for w in load.writes for r in w.refused})[:6],
        "given_up": len(given_up),
        "acknowledged_after_a_refusal": sum(1 for w in acked if w.refused),
        "lost": len(lost),
        "duplicated": len(duplicated),
        "memories_in_graph": len(rows),
        "write_outage_victim_tenants_s": round(
            longest_gap([w.done for w in acked if w.tenant in hit], killed_at, written), 2
        ),
        "write_outage_other_tenants_s": round(
            longest_gap([w.done for w in acked if w.tenant not in hit], killed_at, written), 2
        ),
        "recalls_other_tenants_during_failover": len(reads_during),
        "recalls_failed": len(failed_reads),
        "recall_outage_other_tenants_s": round(
            longest_gap([r.started + r.seconds for r in load.reads if r.status == 200], killed_at, written), 2
        ),
        "replica_promoted_s": round(promoted - killed_at, 2),
        "every_slot_served_s": round(served - killed_at, 2),
        "old_master_a_replica_s": round(rejoined - killed_at, 2),
        "victim_tenants_written_again_s": round(written - killed_at, 2),
        "converged_after_load_s": round(converge, 2),
        "write_p50_ms": round(1000 * sorted(w.done - w.started for w in acked)[len(acked) // 2], 1),
        "load_seconds": round(stopped - began, 1),
        "recalls": len(load.reads),
        # CPU by kind of process: idle, ms a second; over the load (writes and recalls), ms per acknowledged
        # write, with and without the idle share.
        "cpu_ms_per_second_idle": cost_per_write(cpu_used(idle), IDLE_SECONDS),
        "cpu_ms_per_write": cost_per_write(cpu_used(marks), len(acked)),
        "cpu_ms_per_write_above_idle": cost_per_write(
            {k: v - cpu_used(idle).get(k, 0.0) * (stopped - began) / IDLE_SECONDS for k, v in cpu_used(marks).items()},
            len(acked),
        ),
    }
    await asyncio.to_thread(FIGURES.parent.mkdir, parents=True, exist_ok=True)
    await asyncio.to_thread(FIGURES.write_text, json.dumps(figures, indent=2))
    print("\nThe stack on a FalkorDB cluster, kill -9 of a master under REST writes:\n" + json.dumps(figures, indent=2))

    assert any(w.memory_id and w.tenant in hit and w.done < killed_at for w in load.writes)
    assert not lost, f"acknowledged writes lost: {[w.memory_id for w in lost[:5]]}"
    assert not duplicated, f"stored twice: {duplicated[:5]}"
    assert not given_up, [(w.tenant, w.refused[-3:]) for w in given_up[:3]]
    assert reads_during and not failed_reads, [(r.tenant, r.status) for r in failed_reads[:5]]
    assert figures["write_outage_other_tenants_s"] < 5.0, figures


async def test_services_start_while_a_node_is_down_and_a_backup_visits_every_shard(stack, tenant_tokens):
    """The node FALKORDB_HOST names first is down (a replica since the failover above): enrich and
    consolidate, started again meanwhile, come up on the other nodes; the stack is healthy; a write
    to a tenant of a shard with both nodes is acknowledged and enriched; one to the shard that lost
    its replica is refused (FALKORDB_WRITE_REPLICAS=1); an every-tenant backup holds every memory."""
    cluster = stack.falkor_cluster
    layout = GraphLayout("memories", "bucket", BUCKETS)
    assert cluster.role(VICTIM) == "slave"
    orphaned = next(m for m in cluster.nodes if m != VICTIM and VICTIM in cluster.replicas_of(m))
    stack.kill(f"falkordb-{VICTIM}")
    began = time.monotonic()
    restarted = ("enrich", "consolidate")
    await asyncio.gather(*(asyncio.to_thread(stack.stop, name) for name in restarted))
    await asyncio.gather(*(asyncio.to_thread(stack.start, name) for name in restarted))
    listening = time.monotonic() - began
    healthy = listening + await asyncio.to_thread(stack.wait_healthy, 60)
    whole = next(t for t in TENANTS if cluster.master_of_slot(cluster.keyslot(layout.graph_for(t))) != orphaned)
    lonely = next(t for t in TENANTS if cluster.master_of_slot(cluster.keyslot(layout.graph_for(t))) == orphaned)
    clients = {t: client(stack, tenant_tokens[t]) for t in (whole, lonely)}
    operator = httpx.AsyncClient(base_url=stack.url, headers={**stack.headers, "X-Admin-Token": ADMIN}, timeout=120)
    try:
        stored = await clients[whole].post("/memory", json={"content": f"{whole} written with a node down"})
        assert stored.status_code == 201, stored.text
        memory = stored.json()["memory_id"]

        async def enriched():
            reply = await clients[whole].get(f"/memory/{memory}")
            return reply.status_code == 200 and reply.json()["memory"].get("enriched_at")

        await wait_for(enriched, within=60, every=0.5)
        refused = await clients[lonely].post("/memory", json={"content": f"{lonely} written with no replica"})
        assert refused.status_code == 503, refused.text
        assert refused.json()["reason"] == "FALKORDB_WRITE_UNREPLICATED", refused.text

        backup = await operator.post("/backup", json={"every_tenant": True})
        assert backup.status_code in (200, 201), backup.text
        in_graph = await asyncio.to_thread(stack.graph_query, "MATCH (m:Memory) RETURN m.tenant, count(m)")
        per_tenant = {tenant: int(count) for tenant, count in in_graph}
        listing = (await operator.get("/backups")).json()
        print(
            f"\nwith falkordb-{VICTIM} down: started in {listening:.1f} s, healthy {healthy:.1f} s; "
            f"backup {backup.json()}"
        )
        assert backup.json()["memories"] == sum(per_tenant.values()), (backup.json(), per_tenant)
        assert listing
    finally:
        for http in (*clients.values(), operator):
            await http.aclose()
        await asyncio.to_thread(stack.start, f"falkordb-{VICTIM}")
        await until(lambda: cluster.role(VICTIM) == "slave", 30, "the node a replica again")
