"""Enrichment with the local embedder: throughput from store to searchable by
vector (the embedding stage) and to fully enriched (entities and links too),
and time-to-searchable at a steady store rate."""

from __future__ import annotations

import asyncio
import os
import time

import grpc

from benchmarks.report import line, percentiles, progress
from benchmarks.stack import BenchStack, cpu_seconds
from memgrid.v1 import enrich_service_pb2, enrich_service_pb2_grpc, recall_service_pb2, recall_service_pb2_grpc

SENTENCES = (
    "We chose {tool} for the {area} service after comparing it with the alternatives.",
    "The {area} team usually deploys {tool} on Fridays, which caused an outage once.",
    "Realized that {tool} needs more memory when the {area} backlog grows.",
    "Prefer {tool} over handwritten scripts for {area} jobs.",
)
TOOLS = ("PostgreSQL", "Redis", "Kubernetes", "Terraform", "Kafka", "Docker", "pytest", "FastAPI")
AREAS = ("billing", "search", "reporting", "auth", "ingest", "mobile")


def text(i: int) -> str:
    return SENTENCES[i % len(SENTENCES)].format(tool=TOOLS[i % len(TOOLS)], area=AREAS[i % len(AREAS)]) + f" (#{i})"


def cpu_per_memory(before: dict[str, float], after: dict[str, float], count: int) -> str:
    """CPU milliseconds per memory by process, largest first: on a shared
    machine this moves far less than the wall-clock rate."""
    spent = {name: (after[name] - before.get(name, 0.0)) * 1000 / count for name in after}
    ranked = sorted(((ms, name) for name, ms in spent.items() if ms >= 0.05), reverse=True)
    return f"{sum(spent.values()):5.1f} ms  (" + ", ".join(f"{name} {ms:.1f}" for ms, name in ranked) + ")"


async def points(recall, stack: BenchStack) -> int:
    status = await recall.GetSystemStatus(recall_service_pb2.GetSystemStatusRequest(), metadata=stack.claim(None))
    index = next(c for c in status.components if c.name == "vector_index")
    return int(index.figures["points"])


async def unenriched(enrich, stack: BenchStack) -> int:
    """Memories without enriched_at, plus events enrichment has not acknowledged."""
    status = await enrich.GetEnrichmentStatus(enrich_service_pb2.GetEnrichmentStatusRequest(), metadata=stack.claim())
    return int(status.pending) + int(status.queue_size)


async def throughput(stack: BenchStack, count: int) -> float:
    """Memories a second from store to searchable (and prints the figures)."""
    async with (
        grpc.aio.insecure_channel(stack.grpc_target("recall")) as channel,
        grpc.aio.insecure_channel(stack.grpc_target("enrich")) as enrich_channel,
    ):
        recall = recall_service_pb2_grpc.RecallServiceStub(channel)
        enrich = enrich_service_pb2_grpc.EnrichServiceStub(enrich_channel)
        base = await points(recall, stack)
        load_before = os.getloadavg()[0]
        cpu_before = cpu_seconds(stack.process.pid)
        with stack.client() as client:
            started = time.perf_counter()
            for offset in range(0, count, 500):
                memories = [{"content": text(i)} for i in range(offset, min(count, offset + 500))]
                client.post("/memory/batch", json={"memories": memories}).raise_for_status()
        stored = time.perf_counter() - started
        while (done := await points(recall, stack) - base) < count:
            progress(f"enrichment: {done}/{count} searchable")
            await asyncio.sleep(1.0)
        elapsed = time.perf_counter() - started
        cpu_after = cpu_seconds(stack.process.pid)
        load_searchable = os.getloadavg()[0]
        while (left := await unenriched(enrich, stack)) > 0:
            progress(f"enrichment: {count - min(left, count)}/{count} enriched")
            await asyncio.sleep(1.0)
        enriched = time.perf_counter() - started
        cpu_enriched = cpu_seconds(stack.process.pid)
    line(
        "enrichment throughput (local model)",
        f"{count / elapsed:9.1f} memories/s  ({count} stored in {stored:.1f} s, all searchable after {elapsed:.1f} s)",
    )
    line(
        "  fully enriched (entities, links)",
        f"{count / enriched:9.1f} memories/s  (all enriched after {enriched:.1f} s)",
    )
    if cpu_after:
        line("  CPU per memory until searchable", cpu_per_memory(cpu_before, cpu_after, count))
        line("  CPU per memory until enriched", cpu_per_memory(cpu_before, cpu_enriched, count))
        line("  load average (1 min) before", f"{load_before:5.2f} on {os.cpu_count()} CPUs")
        line("  load average (1 min) when searchable", f"{load_searchable:5.2f} on {os.cpu_count()} CPUs")
        line("  load average (1 min) at the end", f"{os.getloadavg()[0]:5.2f} on {os.cpu_count()} CPUs")
    return count / elapsed


async def time_to_searchable(stack: BenchStack, rate: float, count: int) -> None:
    """Store at a steady rate; the k-th store is searchable when the index holds k new points.
    The CPU per memory is measured until enrichment is idle again (so it
    includes the neighbours a one-at-a-time write embeds again)."""
    cpu_before = cpu_seconds(stack.process.pid)
    async with (
        grpc.aio.insecure_channel(stack.grpc_target("recall")) as channel,
        grpc.aio.insecure_channel(stack.grpc_target("enrich")) as enrich_channel,
    ):
        recall = recall_service_pb2_grpc.RecallServiceStub(channel)
        base = await points(recall, stack)
        stored_at: list[float] = []
        searchable_at: list[float] = []
        done = asyncio.Event()

        async def watch():
            while len(searchable_at) < count:
                now = time.perf_counter()
                reached = await points(recall, stack) - base
                while len(searchable_at) < min(reached, len(stored_at)):
                    searchable_at.append(now)
                await asyncio.sleep(0.02)
            done.set()

        watcher = asyncio.create_task(watch())
        with stack.client() as client:
            started = time.perf_counter()
            for i in range(count):
                await asyncio.sleep(max(0.0, started + i / rate - time.perf_counter()))
                await asyncio.to_thread(client.post, "/memory", json={"content": text(10_000 + i)})
                stored_at.append(time.perf_counter())
                if (i + 1) % max(1, count // 4) == 0:
                    progress(f"steady stores: {i + 1}/{count}")
        await asyncio.wait_for(done.wait(), timeout=120)
        await watcher
        enrich = enrich_service_pb2_grpc.EnrichServiceStub(enrich_channel)
        while (left := await unenriched(enrich, stack)) > 0:
            progress(f"steady stores: {left} not yet enriched")
            await asyncio.sleep(0.5)
    delays = [s - t for s, t in zip(searchable_at, stored_at, strict=True)]
    line(f"time to searchable at {rate:.0f} stores/s", percentiles(delays))
    if cpu_before:
        line("  CPU per memory, one at a time", cpu_per_memory(cpu_before, cpu_seconds(stack.process.pid), count))


#: Contextual embedding off (the content alone), as served (the memory
#: before), then with the memory after too: each one's cost is its ratio to the first.
CONTEXTS = (
    ("content alone (EMBEDDING_CONTEXT_SECONDS=0)", {"EMBEDDING_CONTEXT_SECONDS": "0"}),
    ("as served", {}),
    ("the memory after too (EMBEDDING_CONTEXT_FOLLOWING=true)", {"EMBEDDING_CONTEXT_FOLLOWING": "true"}),
)


def run(count: int, rate: float, steady: int) -> None:
    rates = []
    for label, env in CONTEXTS:
        with BenchStack(**env) as stack:
            print(f"\nenrichment, {label}: local all-MiniLM-L6-v2 (ONNX) and spaCy en_core_web_sm, {count} memories")
            rates.append(asyncio.run(throughput(stack, count)))
            asyncio.run(time_to_searchable(stack, rate, steady))
    line("throughput as served / content alone", f"{rates[1] / rates[0]:5.2f}x")
    line("throughput with the memory after too / content alone", f"{rates[2] / rates[0]:5.2f}x")
