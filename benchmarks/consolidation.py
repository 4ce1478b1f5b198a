"""Consolidation's decay over a seeded store, and recall's latency while it runs.

The store is seeded as the recall benchmark seeds it (benchmarks/recall_latency.py:
straight into the graph, with entities and 0-2 edges a memory, then a
rebuild of the vector index). Then, through REST:

- recall p95 at rest: a fixed set of distinct queries, once to warm the
  full-text counts and once measured (recall's query-embedding cache is off,
  RECALL_QUERY_CACHE_SIZE=0, so the same set can be asked again and
  every query is embedded);
- a real decay run (POST /consolidate {mode: decay, dry_run: false}) over
  every memory, timed (target < 60 s at 100k);
- recall p95 while that decay runs: the same query set, asked over and over
  until the run ends, and the ratio to the figure at rest (target < 1.5).

    python -m benchmarks --only consolidate --consolidate-size 10000
"""

from __future__ import annotations

import asyncio
import threading
import time

import httpx
import numpy as np

from benchmarks.recall_latency import distinct_queries, reindex, seed, vocabulary
from benchmarks.report import line, p95, percentiles, progress
from benchmarks.stack import TOKEN, BenchStack, KeepAlive
from services.core.adapters.falkor import FalkorGraph


def _recall(client: KeepAlive, queries: list[str]) -> list[float]:
    samples = []
    for query in queries:
        started = time.perf_counter()
        client.request("GET", "/recall", params={"query": query, "limit": 10})
        samples.append(time.perf_counter() - started)
    return samples


def _decay_under_recall(stack: BenchStack, client: KeepAlive, texts: list[str]) -> tuple[float, dict, list[float]]:
    """A real decay run, with the query set asked over and over until it ends:
    (its seconds, its run report, the recall latencies meanwhile)."""
    answer: dict = {}

    def decay() -> None:
        started = time.perf_counter()
        with httpx.Client(base_url=stack.url, headers={"Authorization": f"Bearer {TOKEN}"}, timeout=3600) as http:
            answer["reply"] = http.post("/consolidate", json={"mode": "decay", "dry_run": False})
        answer["seconds"] = time.perf_counter() - started

    worker = threading.Thread(target=decay)
    worker.start()
    during: list[float] = []
    while worker.is_alive() or not during:
        for query in texts:
            if not worker.is_alive() and during:
                break
            during += _recall(client, [query])
    worker.join()
    reply = answer["reply"]
    if reply.status_code != 200:
        raise RuntimeError(f"POST /consolidate: {reply.status_code} {reply.text[:300]}")
    [run_] = reply.json()["runs"]
    return answer["seconds"], run_, during


def run(size: int = 100_000, queries: int = 200, words_from: str = "locomo") -> None:
    rng = np.random.default_rng(11)
    words = vocabulary(rng, words_from)
    env = {
        "ENRICHMENT_ENABLED": "false",
        "EMBEDDING_PROVIDER": "local",
        "RECALL_QUERY_CACHE_SIZE": "0",
        "CONSOLIDATION_TICK_SECONDS": "0",  # only the run asked for below
    }
    with BenchStack(**env) as stack:
        print(f"\nconsolidation: decay over {size} memories, recall p95 at rest and while it runs ({queries} queries)")

        async def grow() -> None:
            graph = FalkorGraph(host="127.0.0.1", port=int(stack.env["FALKORDB_PORT"]), graph="memories")
            try:
                await seed(graph, rng, words, 0, size, 384, [])
            finally:
                await graph.lifecycle.close()
            await reindex(stack)

        asyncio.run(grow())
        progress(f"stack quiet after {stack.settle():.0f} s")
        client = KeepAlive(stack.url, TOKEN)
        texts = distinct_queries(rng, words, queries)
        _recall(client, texts)  # warm: full-text counts, caches of the graph
        rest = _recall(client, texts)
        line(f"{size // 1000}k memories, recall at rest", percentiles(rest))

        # The first run writes every score and emits an event for each (no
        # score before); the second is a daily pass over a stable store.
        for label in ("first decay", "second decay"):
            # A new connection: the gateway closes one left idle while the stack settled.
            client.close()
            client = KeepAlive(stack.url, TOKEN)
            seconds, run_, during = _decay_under_recall(stack, client, texts)
            counts = run_["counts"]
            line(
                f"{size // 1000}k memories, {label} run",
                f"{seconds:7.1f} s  {counts.get('scanned', 0) / seconds:8.0f} memories/s  "
                f"updated {counts.get('updated', 0)}  events {counts.get('events', 0)}  errors {len(run_['errors'])}",
            )
            line(f"{size // 1000}k memories, recall during it", percentiles(during) + f"  ({len(during)} queries)")
            line(f"{size // 1000}k memories, p95 during / at rest", f"{p95(during) / p95(rest):5.2f}x")
            progress(f"stack quiet after {stack.settle():.0f} s")
        client.close()
