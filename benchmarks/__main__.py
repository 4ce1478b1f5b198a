"""`make bench`: latency of the write and read paths on the embedded stack.

Starts the real stack (python -m devstack) on free ports in a temporary data
directory, then times POST /memory and GET /memory/{id} through the gateway
and the same calls straight over gRPC, so the gateway's overhead shows.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import grpc
import httpx

from devstack.servers import free_port
from memgrid.v1 import (
    ingest_service_pb2,
    ingest_service_pb2_grpc,
    memory_pb2,
    recall_service_pb2,
    recall_service_pb2_grpc,
)
from services.core.grpc.tenant import tenant_metadata
from services.core.settings import SERVICE_NAMES

TOKEN = "bench-token"


def percentiles(samples: list[float]) -> str:
    ordered = sorted(samples)
    pick = lambda q: ordered[min(len(ordered) - 1, int(q * len(ordered)))]  # noqa: E731
    return (
        f"p50 {pick(0.50) * 1000:7.2f} ms  p95 {pick(0.95) * 1000:7.2f} ms  p99 {pick(0.99) * 1000:7.2f} ms  "
        f"mean {statistics.fmean(ordered) * 1000:7.2f} ms  ({len(ordered) / sum(ordered):7.0f} req/s sequential)"
    )


def timed(label: str, n: int, call) -> list:
    samples, results = [], []
    for i in range(n):
        started = time.perf_counter()
        results.append(call(i))
        samples.append(time.perf_counter() - started)
        if (i + 1) % max(1, n // 4) == 0:
            print(f"  {label}: {i + 1}/{n}", file=sys.stderr, flush=True)
    print(f"{label:<28} {percentiles(samples)}", flush=True)
    return results


async def timed_async(label: str, n: int, call) -> list:
    samples, results = [], []
    for i in range(n):
        started = time.perf_counter()
        results.append(await call(i))
        samples.append(time.perf_counter() - started)
    print(f"{label:<28} {percentiles(samples)}", flush=True)
    return results


async def batch_bench(label: str, ingest, meta, batches: int = 20, size: int = 500) -> None:
    """Throughput of 500-item batches, one batch in flight at a time."""
    started = time.perf_counter()
    for b in range(batches):
        drafts = [memory_pb2.MemoryDraft(content=f"batch {b} memory {i}") for i in range(size)]
        await ingest.BatchCreateMemories(
            ingest_service_pb2.BatchCreateMemoriesRequest(memories=drafts), metadata=meta, timeout=60
        )
    elapsed = time.perf_counter() - started
    print(f"{label:<28} {batches * size / elapsed:9.0f} memories/s  ({elapsed / batches * 1000:.1f} ms per batch)")


def rest_batch_bench(client: httpx.Client, batches: int = 20, size: int = 500) -> None:
    started = time.perf_counter()
    for b in range(batches):
        memories = [{"content": f"rest batch {b} memory {i}", "tags": ["bench"]} for i in range(size)]
        reply = client.post("/memory/batch", json={"memories": memories}, timeout=60)
        reply.raise_for_status()
    elapsed = time.perf_counter() - started
    label = "REST POST /memory/batch x500"
    print(f"{label:<28} {batches * size / elapsed:9.0f} memories/s  ({elapsed / batches * 1000:.1f} ms per batch)")


async def grpc_bench(env: dict[str, str], n: int) -> None:
    meta = tenant_metadata("default")
    async with (
        grpc.aio.insecure_channel(f"127.0.0.1:{env['INGEST_GRPC_PORT']}") as ic,
        grpc.aio.insecure_channel(f"127.0.0.1:{env['RECALL_GRPC_PORT']}") as rc,
    ):
        ingest, recall = ingest_service_pb2_grpc.IngestServiceStub(ic), recall_service_pb2_grpc.RecallServiceStub(rc)

        async def create(i):
            request = ingest_service_pb2.CreateMemoryRequest(memory=memory_pb2.MemoryDraft(content=f"grpc memory {i}"))
            return (await ingest.CreateMemory(request, metadata=meta)).memory.id

        ids = await timed_async("gRPC CreateMemory", n, create)
        await batch_bench("gRPC BatchCreate x500", ingest, meta)
        await timed_async(
            "gRPC GetMemory",
            n,
            lambda i: recall.GetMemory(recall_service_pb2.GetMemoryRequest(id=ids[i]), metadata=meta),
        )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("-n", type=int, default=500, help="requests per measurement")
    args = parser.parse_args()
    data = Path(tempfile.mkdtemp(prefix="memgrid-bench-"))
    env = {
        **os.environ,
        "MEMGRID_DATA_DIR": str(data),
        "AUTOMEM_API_TOKEN": TOKEN,
        "PORT": str(free_port()),
        "FALKORDB_PORT": str(free_port()),
        "NATS_URL": f"nats://127.0.0.1:{free_port()}",
        "LOG_LEVEL": "WARNING",
    }
    for name in SERVICE_NAMES:
        env[f"{name.upper()}_GRPC_PORT"] = str(free_port())
        env[f"{name.upper()}_METRICS_PORT"] = str(free_port())
    url = f"http://127.0.0.1:{env['PORT']}"
    print(f"starting the stack in {data} ...", file=sys.stderr, flush=True)
    stack = subprocess.Popen(
        [sys.executable, "-m", "devstack"], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    try:
        with httpx.Client(base_url=url, headers={"Authorization": f"Bearer {TOKEN}"}, timeout=10) as client:
            deadline = time.monotonic() + 90
            while True:
                try:
                    if client.get("/health").status_code == 200:
                        break
                except httpx.HTTPError:
                    pass
                if time.monotonic() > deadline or stack.poll() is not None:
                    print("the stack did not become healthy", file=sys.stderr)
                    return 1
                time.sleep(0.3)
            print(f"memgrid benchmark: {args.n} sequential requests each, one client, loopback")
            ids = timed(
                "REST POST /memory",
                args.n,
                lambda i: client.post("/memory", json={"content": f"benchmark memory {i}", "tags": ["bench"]}).json()[
                    "memory_id"
                ],
            )
            timed("REST GET /memory/{id}", args.n, lambda i: client.get(f"/memory/{ids[i]}"))
            rest_batch_bench(client)
        asyncio.run(grpc_bench(env, args.n))
    finally:
        stack.send_signal(signal.SIGTERM)
        stack.wait(timeout=60)
    return 0


if __name__ == "__main__":
    sys.exit(main())
