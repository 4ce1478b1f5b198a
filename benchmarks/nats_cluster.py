"""What a 3-node JetStream cluster (the stream at 3 replicas) costs the
publisher against one node (1 replica), in one run on this machine: the
latency of one acknowledged publish, as a write's own publish waits for it,
and the throughput of the outbox relay's batches (publish_many). Both
through NatsEventBus, each server fsyncing as --sync says (always, every
message: NATS_SYNC_INTERVAL's default; or an interval such as 2m, NATS's
own). Figures in docs/scaling.md.

python -m benchmarks.nats_cluster [-n 500] [--batches 20] [--sync always]"""

from __future__ import annotations

import argparse
import asyncio
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path

from benchmarks.report import line, percentiles, progress
from devstack.servers import free_port, start_nats, start_nats_cluster
from services.core.adapters.nats_bus import NatsEventBus
from services.core.domain.model import EventKind, Memory, MemoryEvent

BATCH = 500  # OUTBOX_BATCH_SIZE's default


def events(count: int, start: int) -> list[MemoryEvent]:
    now = datetime.now(UTC)
    out = []
    for n in range(start, start + count):
        memory = Memory(
            id=f"m{n}", tenant="bench", content=f"memory {n}", type="Context", confidence=0.5, importance=0.5,
            timestamp=now, t_valid=now, updated_at=now, last_accessed=now, recorded_at=now,
        )  # fmt: skip
        out.append(MemoryEvent.for_memory(EventKind.CREATED, memory, now))
    return out


async def measure(label: str, url: str, replicas: int, n: int, batches: int) -> None:
    bus = NatsEventBus(url=url, stream="BENCH", subject_prefix="bench.events", stream_replicas=replicas)
    await bus.connect()
    try:
        samples = []
        for event in events(n, 0):
            started = time.perf_counter()
            await bus.publish(event)
            samples.append(time.perf_counter() - started)
        line(f"{label}: publish", percentiles(samples))
        started, sent = time.perf_counter(), 0
        for b in range(batches):
            outcomes = await bus.publish_many(events(BATCH, n + b * BATCH))
            sent += outcomes.count(True)
        line(f"{label}: relay batches of {BATCH}", f"{sent / (time.perf_counter() - started):8.0f} events/s")
    finally:
        await bus.close()


def run(n: int, batches: int, sync: str) -> None:
    root = Path(tempfile.mkdtemp(prefix="memgrid-bench-nats-"))
    progress(f"one node, 1 replica, sync_interval {sync}")
    single = start_nats(free_port(), root / "single", sync_interval=sync)
    try:
        asyncio.run(measure("1 node, R1", f"nats://127.0.0.1:{single.port}", 1, n, batches))
    finally:
        single.stop()
    progress(f"three nodes, 3 replicas, sync_interval {sync}")
    cluster = start_nats_cluster(root / "cluster", sync_interval=sync)
    try:
        asyncio.run(measure("3 nodes, R3", cluster.url, 3, n, batches))
    finally:
        cluster.stop()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("-n", type=int, default=500, help="sequential publishes for the latency figure")
    parser.add_argument("--batches", type=int, default=20, help=f"relay batches of {BATCH} for the throughput")
    parser.add_argument("--sync", default="always", help="the servers' sync_interval: always, or e.g. 2m")
    args = parser.parse_args()
    run(args.n, args.batches, args.sync)
    return 0


if __name__ == "__main__":
    sys.exit(main())
