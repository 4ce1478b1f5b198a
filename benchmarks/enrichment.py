"""Enrichment with the local embedder: throughput from store to searchable by
vector, and time-to-searchable at a steady store rate."""

from __future__ import annotations

import asyncio
import time

import grpc

from benchmarks.report import line, percentiles, progress
from benchmarks.stack import BenchStack
from memgrid.v1 import recall_service_pb2, recall_service_pb2_grpc

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


async def points(recall) -> int:
    status = await recall.GetSystemStatus(recall_service_pb2.GetSystemStatusRequest())
    index = next(c for c in status.components if c.name == "vector_index")
    return int(index.figures["points"])


async def throughput(stack: BenchStack, count: int) -> None:
    async with grpc.aio.insecure_channel(stack.grpc_target("recall")) as channel:
        recall = recall_service_pb2_grpc.RecallServiceStub(channel)
        base = await points(recall)
        with stack.client() as client:
            started = time.perf_counter()
            for offset in range(0, count, 500):
                memories = [{"content": text(i)} for i in range(offset, min(count, offset + 500))]
                client.post("/memory/batch", json={"memories": memories}).raise_for_status()
        stored = time.perf_counter() - started
        while (done := await points(recall) - base) < count:
            progress(f"enrichment: {done}/{count} searchable")
            await asyncio.sleep(1.0)
        elapsed = time.perf_counter() - started
    line(
        "enrichment throughput (local model)",
        f"{count / elapsed:9.1f} memories/s  ({count} stored in {stored:.1f} s, all searchable after {elapsed:.1f} s)",
    )


async def time_to_searchable(stack: BenchStack, rate: float, count: int) -> None:
    """Store at a steady rate; the k-th store is searchable when the index holds k new points."""
    async with grpc.aio.insecure_channel(stack.grpc_target("recall")) as channel:
        recall = recall_service_pb2_grpc.RecallServiceStub(channel)
        base = await points(recall)
        stored_at: list[float] = []
        searchable_at: list[float] = []
        done = asyncio.Event()

        async def watch():
            while len(searchable_at) < count:
                now = time.perf_counter()
                reached = await points(recall) - base
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
    delays = [s - t for s, t in zip(searchable_at, stored_at, strict=True)]
    line(f"time to searchable at {rate:.0f} stores/s", percentiles(delays))


def run(count: int, rate: float, steady: int) -> None:
    with BenchStack() as stack:
        print(f"\nenrichment: local all-MiniLM-L6-v2 (ONNX) and spaCy en_core_web_sm, {count} memories")
        asyncio.run(throughput(stack, count))
        asyncio.run(time_to_searchable(stack, rate, steady))
