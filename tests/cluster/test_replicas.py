"""Two recall and two ingest replicas behind one gateway lose nothing and
fail no call when one of each is killed.

The stack runs recall, recall-1, ingest, ingest-1, one enrich and one
consolidate, each its own process (tests/reliability/procstack.py); the
gateway and enrich dial each pair by one list address, balanced round robin
by gRPC with client-side health checking (services/core/grpc/balancing.py).
Under a steady load of writes and recalls through the gateway, recall-1 and
ingest-1 are killed with SIGKILL at once, left down, then started again on
their data. Then: no recall failed (the gateway's channel retried what the
dead replica refused on the other), no write was refused, every
acknowledged write is in the graph exactly once and found, and the restarted
recall's own index (fed by its own durable) holds every memory again. The
fault table goes to build/cluster/replicas.json and is printed (pytest -s).
"""

from __future__ import annotations

import asyncio
import json
import time
from dataclasses import asdict, dataclass
from pathlib import Path

import grpc
import httpx
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc

from memgrid.v1 import recall_service_pb2, recall_service_pb2_grpc
from services.core.grpc.claims import claim_metadata
from tests.reliability.procstack import ProcessStack
from tests.reliability.writes import Outcome, duplicated_and_lost, found, graph_rows, write_load
from tests.waiting import wait_for

pytestmark = [pytest.mark.cluster, pytest.mark.timeout(420)]

WRITE_RATE, RECALL_RATE = 5.0, 4.0
#: Load before the kill, with the two replicas down, and after they are back.
WARM_SECONDS, DOWN_SECONDS, AFTER_SECONDS = 4.0, 6.0, 6.0
#: The restarted recall's index holds every memory again within this.
CONVERGE_WITHIN = 120.0
KILLED = ("recall-1", "ingest-1")
RECALL = "memgrid.v1.RecallService"
FIGURES = Path("build/cluster/replicas.json")


@dataclass
class Figures:
    killed: tuple = KILLED
    writes: int = 0
    acknowledged: int = 0
    refused: int = 0
    lost: int = 0
    duplicated: int = 0
    found: int = 0
    recalls: int = 0
    recalls_failed: int = 0
    #: Failed recalls by when they started: before the kill, while down, while restarting, after.
    recalls_failed_by_phase: dict | None = None
    write_p50_ms: float = 0.0
    write_max_down_ms: float = 0.0  # the outage a writer saw: the slowest write started while the replicas were down
    recall_p50_ms: float = 0.0
    recall_max_down_ms: float = 0.0  # the slowest recall started while they were down
    restart_seconds: float = 0.0  # until both restarted replicas listen again
    converge_seconds: float = 0.0  # restart until the restarted recall's index holds every memory
    restarted_points: int = 0
    memories: int = 0


@pytest.fixture(scope="module")
def stack():
    env = {
        "CONSUMER_ACK_WAIT_SECONDS": "6",
        "CONSUMER_HEARTBEAT_SECONDS": "2",
        "CONSOLIDATION_TICK_SECONDS": "0",
    }
    with ProcessStack(replicas={"recall": 2, "ingest": 2}, **env) as s:
        yield s


async def recall_load(client: httpx.AsyncClient, stop: asyncio.Event, rate: float) -> list[Outcome]:
    """GET /recall at `rate` a second until `stop` (an open loop), each outcome kept."""

    async def one(n: int) -> Outcome:
        query = f"reliability cluster write {n % 50}"
        started = time.monotonic()
        try:
            reply = await client.get("/recall", params={"query": query, "limit": 5})
        except httpx.HTTPError as exc:
            return Outcome(query, 0, time.monotonic() - started, started, message=repr(exc))
        ok = reply.status_code == 200
        return Outcome(query, reply.status_code, time.monotonic() - started, started, "ok" if ok else None, reply.text)

    tasks: list[asyncio.Task] = []
    tick = time.monotonic()
    while not stop.is_set():
        tasks.append(asyncio.create_task(one(len(tasks))))
        tick += 1.0 / rate
        await asyncio.sleep(max(0.0, tick - time.monotonic()))
    return list(await asyncio.gather(*tasks))


async def replica_index(stack: ProcessStack, name: str) -> tuple[int, str]:
    """(points in replica `name`'s own vector index, its RecallService health), asked of it directly."""
    port = next(r.grpc_port for r in stack.replicas["recall"] if r.name == name)
    claim = claim_metadata(stack.env["SERVICE_CLAIM_KEY"].encode(), None, "read", audience=("recall",))
    async with grpc.aio.insecure_channel(f"127.0.0.1:{port}") as channel:
        status = await recall_service_pb2_grpc.RecallServiceStub(channel).GetSystemStatus(
            recall_service_pb2.GetSystemStatusRequest(), metadata=claim, timeout=10
        )
        health = await health_pb2_grpc.HealthStub(channel).Check(
            health_pb2.HealthCheckRequest(service=RECALL), timeout=5
        )
    vector = next(c for c in status.components if c.name == "vector_index")
    return int(vector.figures.get("points", -1)), health_pb2.HealthCheckResponse.ServingStatus.Name(health.status)


def p50_ms(outcomes: list[Outcome]) -> float:
    latencies = sorted(o.latency for o in outcomes)
    return 1000 * latencies[len(latencies) // 2] if latencies else 0.0


def record(figures: Figures) -> None:
    FIGURES.parent.mkdir(parents=True, exist_ok=True)
    FIGURES.write_text(json.dumps(asdict(figures), indent=2))
    print(f"\nkill -9 {' and '.join(KILLED)}: {asdict(figures)}")


async def test_killing_a_recall_and_an_ingest_replica_fails_no_call(stack):
    figures = Figures()
    async with httpx.AsyncClient(base_url=stack.url, headers=stack.headers, timeout=30) as client:
        stop = asyncio.Event()
        writes = asyncio.create_task(write_load(client, "cluster", stop, WRITE_RATE))
        recalls = asyncio.create_task(recall_load(client, stop, RECALL_RATE))
        await asyncio.sleep(WARM_SECONDS)
        killed_at = time.monotonic()
        for name in KILLED:
            stack.kill(name)
        await asyncio.sleep(DOWN_SECONDS)
        restarted_at = time.monotonic()
        for name in KILLED:
            await asyncio.to_thread(stack.start, name)
        figures.restart_seconds = time.monotonic() - restarted_at
        await asyncio.sleep(AFTER_SECONDS)
        stop.set()
        wrote, recalled = await writes, await recalls

        acked = {o.memory_id: o.content for o in wrote if o.memory_id}
        refused = [o for o in wrote if not o.memory_id]
        failed = [o for o in recalled if o.status != 200]
        figures.writes, figures.acknowledged, figures.refused = len(wrote), len(acked), len(refused)
        figures.recalls, figures.recalls_failed = len(recalled), len(failed)
        down = killed_at, restarted_at
        back = restarted_at + figures.restart_seconds
        phases = {"before": (0, killed_at), "down": down, "restarting": (restarted_at, back), "after": (back, 1e12)}
        figures.recalls_failed_by_phase = {
            phase: sum(1 for o in failed if start <= o.started < end) for phase, (start, end) in phases.items()
        }
        figures.write_p50_ms, figures.recall_p50_ms = p50_ms(wrote), p50_ms(recalled)
        figures.write_max_down_ms = 1000 * max((o.latency for o in wrote if down[0] <= o.started < down[1]), default=0)
        figures.recall_max_down_ms = 1000 * max(
            (o.latency for o in recalled if down[0] <= o.started < down[1]), default=0
        )

        async def restarted_converged():
            rows = await asyncio.to_thread(graph_rows, stack)
            if not set(acked) <= {i for i, _, at in rows if at is not None}:
                return None  # not every acknowledged write enriched (and so embedded) yet
            try:
                points, health = await replica_index(stack, "recall-1")
                others, _ = await replica_index(stack, "recall")
            except grpc.aio.AioRpcError:
                return None  # still starting
            return rows if points == others == len(rows) and health == "SERVING" else None

        rows = await wait_for(restarted_converged, within=CONVERGE_WITHIN, every=0.5)
        figures.converge_seconds = time.monotonic() - restarted_at
        figures.restarted_points, figures.memories = (await replica_index(stack, "recall-1"))[0], len(rows)
        figures.duplicated, figures.lost = duplicated_and_lost(rows, acked)
        figures.found = await found(client, acked)

    record(figures)
    assert figures.acknowledged > 0 and figures.recalls > 0
    assert not failed, f"recalls failed despite the retry: {[(o.status, o.message[:200]) for o in failed[:3]]}"
    assert not refused, f"writes refused with a replica left: {[(o.status, o.message[:200]) for o in refused[:3]]}"
    assert figures.lost == 0 and figures.duplicated == 0, figures
    assert figures.found == figures.acknowledged, figures
