"""Write and read latency (REST and gRPC side by side) and batch throughput."""

from __future__ import annotations

import asyncio
import os
import statistics
import subprocess
import sys
import time
from contextlib import contextmanager
from pathlib import Path

import grpc

from benchmarks.report import line, percentiles, progress
from benchmarks.stack import TOKEN, BenchStack, KeepAlive, process_cpu_seconds
from devstack.servers import free_port, wait_for_port
from memgrid.v1 import (
    ingest_service_pb2,
    ingest_service_pb2_grpc,
    memory_pb2,
    recall_service_pb2,
    recall_service_pb2_grpc,
)


def timed(label: str, n: int, call) -> list:
    samples, results = [], []
    for i in range(n):
        started = time.perf_counter()
        results.append(call(i))
        samples.append(time.perf_counter() - started)
        if (i + 1) % max(1, n // 4) == 0:
            progress(f"{label}: {i + 1}/{n}")
    line(label, f"{percentiles(samples)}  ({n / sum(samples):6.0f} req/s, one client)")
    return results


async def timed_async(label: str, n: int, call) -> list:
    samples, results = [], []
    for i in range(n):
        started = time.perf_counter()
        results.append(await call(i))
        samples.append(time.perf_counter() - started)
    line(label, f"{percentiles(samples)}  ({n / sum(samples):6.0f} req/s, one client)")
    return results


def rest_batches(client, batches: int, size: int = 500) -> None:
    started = time.perf_counter()
    for b in range(batches):
        memories = [
            {"content": f"rest batch {b} memory {i}", "tags": ["bench"], "type": "Context"} for i in range(size)
        ]
        client.post("/memory/batch", json={"memories": memories}).raise_for_status()
        progress(f"REST batch {b + 1}/{batches}")
    elapsed = time.perf_counter() - started
    line(
        f"REST POST /memory/batch x{size}",
        f"{batches * size / elapsed:9.0f} memories/s  ({elapsed / batches * 1000:.1f} ms per batch)",
    )


async def grpc_part(stack: BenchStack, n: int, batches: int) -> None:
    meta = stack.claim("default", "write")
    async with (
        grpc.aio.insecure_channel(stack.grpc_target("ingest")) as ic,
        grpc.aio.insecure_channel(stack.grpc_target("recall")) as rc,
    ):
        ingest, recall = ingest_service_pb2_grpc.IngestServiceStub(ic), recall_service_pb2_grpc.RecallServiceStub(rc)

        async def create(i):
            draft = memory_pb2.MemoryDraft(content=f"grpc memory {i}", type="Context")
            return (
                await ingest.CreateMemory(ingest_service_pb2.CreateMemoryRequest(memory=draft), metadata=meta)
            ).memory.id

        ids = await timed_async("gRPC CreateMemory", n, create)
        await timed_async(
            "gRPC GetMemory",
            n,
            lambda i: recall.GetMemory(recall_service_pb2.GetMemoryRequest(id=ids[i]), metadata=meta),
        )
        started = time.perf_counter()
        for b in range(batches):
            drafts = [memory_pb2.MemoryDraft(content=f"batch {b} memory {i}", type="Context") for i in range(500)]
            await ingest.BatchCreateMemories(
                ingest_service_pb2.BatchCreateMemoriesRequest(memories=drafts), metadata=meta, timeout=60
            )
            progress(f"gRPC batch {b + 1}/{batches}")
        elapsed = time.perf_counter() - started
        line(
            "gRPC BatchCreateMemories x500",
            f"{batches * 500 / elapsed:9.0f} memories/s  ({elapsed / batches * 1000:.1f} ms per batch)",
        )


def _gateway_pid(stack: BenchStack) -> int | None:
    for pid in Path("/proc").glob("[0-9]*") if Path("/proc").is_dir() else ():
        try:
            words = (pid / "cmdline").read_bytes().split(b"\0")
            environ = (pid / "environ").read_bytes()
        except OSError:
            continue
        if b"gateway.main" in words and f"MEMGRID_DATA_DIR={stack.data}".encode() in environ:
            return int(pid.name)
    return None


def _cpu(pid: int | None) -> float:
    """CPU seconds (user + system) of one process so far; 0 when unknown."""
    return 0.0 if pid is None else process_cpu_seconds(pid)


@contextmanager
def bare_relay(stack: BenchStack):
    """benchmarks/bare_relay.py on a free port, relaying to the stack's ingest: (url, pid)."""
    port = free_port()
    process = subprocess.Popen(  # noqa: S603  this venv's python on the benchmark's own module
        [sys.executable, "-m", "benchmarks.bare_relay", str(port), stack.grpc_target("ingest")],
        env={**os.environ, "SERVICE_CLAIM_KEY": stack.env["SERVICE_CLAIM_KEY"]},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        wait_for_port(port, 30)
        yield f"http://127.0.0.1:{port}", process.pid
    finally:
        process.terminate()
        process.wait(timeout=30)


async def gateway_overhead(stack: BenchStack, n: int) -> None:
    """The same call through REST and straight to the service over gRPC,
    alternately, so both see the same machine: the p50 of the paired
    differences is the gateway's overhead, and the gateway's own CPU per
    request (from /proc) is a figure the neighbours' load moves far less.
    The same pairs through benchmarks/bare_relay.py give the floor a Python
    relay starts from on this machine, next to which the gateway's figure
    is read."""
    client = KeepAlive(stack.url, TOKEN)
    with bare_relay(stack) as (relay_url, relay_pid):
        relay = KeepAlive(relay_url, TOKEN)
        try:
            await _paired(stack, client, relay, relay_pid, n)
        finally:
            relay.close()
            client.close()


async def _paired(stack: BenchStack, client: KeepAlive, relay: KeepAlive, relay_pid: int, n: int) -> None:
    meta = stack.claim("default", "write")
    async with (
        grpc.aio.insecure_channel(stack.grpc_target("ingest")) as ic,
        grpc.aio.insecure_channel(stack.grpc_target("recall")) as rc,
    ):
        ingest, recall = ingest_service_pb2_grpc.IngestServiceStub(ic), recall_service_pb2_grpc.RecallServiceStub(rc)

        async def create_grpc(i: int) -> str:
            draft = memory_pb2.MemoryDraft(content=f"paired grpc memory {i}", type="Context")
            reply = await ingest.CreateMemory(ingest_service_pb2.CreateMemoryRequest(memory=draft), metadata=meta)
            return reply.memory.id

        def create_rest(i: int) -> str:
            return client.request("POST", "/memory", {"content": f"paired rest memory {i}", "type": "Context"})[
                "memory_id"
            ]

        async def get_grpc(memory_id: str) -> None:
            await recall.GetMemory(recall_service_pb2.GetMemoryRequest(id=memory_id), metadata=meta)

        def get_rest(memory_id: str) -> None:
            client.request("GET", f"/memory/{memory_id}")

        def create_bare(i: int) -> str:
            return relay.request("POST", "/memory", {"content": f"paired relay memory {i}", "type": "Context"})[
                "memory_id"
            ]

        ids: list[str] = []
        gateway = _gateway_pid(stack)
        for who, label, rest_call, grpc_call, pid in (
            ("gateway", "create", create_rest, create_grpc, gateway),
            ("gateway", "get by id", lambda i: get_rest(ids[i]), lambda i: get_grpc(ids[i]), gateway),
            ("bare relay", "create", create_bare, create_grpc, relay_pid),
        ):
            rest, direct, cpu = [], [], 0.0
            for i in range(n):
                before = _cpu(pid)
                started = time.perf_counter()
                result = rest_call(i)
                rest.append(time.perf_counter() - started)
                cpu += _cpu(pid) - before
                started = time.perf_counter()
                await grpc_call(i)
                direct.append(time.perf_counter() - started)
                if pid == gateway and label == "create":
                    ids.append(result)
            paired = sorted(r - d for r, d in zip(rest, direct, strict=True))
            line(f"  {label}: REST" + (" (bare relay)" if who != "gateway" else ""), percentiles(rest))
            line(f"  {label}: gRPC", percentiles(direct))
            line(
                f"{who} overhead, {label}",
                f"p50 {paired[len(paired) // 2] * 1000:8.2f} ms  (paired REST - gRPC; "
                f"{who} CPU {cpu * 1000 / n:.2f} ms a request)",
            )


def audit_overhead(on: BenchStack, n: int) -> None:
    """Create latency with the audit log on (`on`, the default) against a
    second stack with AUDIT_LOG_ENABLED=false, both up at once and called
    alternately, so both see the same machine; the target is an on/off p50
    ratio within 1.2 (docs/performance.md)."""
    with BenchStack(ENRICHMENT_ENABLED="false", AUDIT_LOG_ENABLED="false") as off:
        clients = {"on": KeepAlive(on.url, TOKEN), "off": KeepAlive(off.url, TOKEN)}
        samples: dict[str, list[float]] = {"on": [], "off": []}
        try:
            for i in range(n):
                for name in ("on", "off") if i % 2 else ("off", "on"):  # neither always goes first
                    started = time.perf_counter()
                    clients[name].request("POST", "/memory", {"content": f"audit bench memory {i}", "type": "Context"})
                    samples[name].append(time.perf_counter() - started)
        finally:
            for client in clients.values():
                client.close()
    for name in ("on", "off"):
        line(f"  create, audit log {name}", percentiles(samples[name]))
    ratio = statistics.median(samples["on"]) / statistics.median(samples["off"])
    line("audit log on / off, create p50", f"{ratio:8.2f}x  (target <= 1.20x)")


def run(n: int, batches: int) -> None:
    # Enrichment off: this measures the write path alone, not the CPU the models take.
    with BenchStack(ENRICHMENT_ENABLED="false") as stack, stack.client() as client:
        print(f"\nwrite path: {n} sequential requests each, one client, loopback (enrichment off)")
        ids = timed(
            "REST POST /memory",
            n,
            lambda i: client.post("/memory", json={"content": f"benchmark memory {i}", "type": "Context"}).json()[
                "memory_id"
            ],
        )
        timed("REST GET /memory/{id}", n, lambda i: client.get(f"/memory/{ids[i]}"))
        rest_batches(client, batches)
        asyncio.run(grpc_part(stack, n, batches))
        print(f"\ngateway overhead: {n} pairs of the same call, REST then gRPC, alternately (and through a bare relay)")
        asyncio.run(gateway_overhead(stack, n))
        print(f"\naudit log: {n} creates on each of two stacks, audit log on and off, alternately")
        audit_overhead(stack, n)
