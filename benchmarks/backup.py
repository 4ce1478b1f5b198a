"""Backup and restore over a seeded store: how long each takes, how big the archive is.

The store is seeded as the recall benchmark seeds it (benchmarks/recall_latency.py:
straight into the graph, 384-dimension embeddings, entities and 0-2 edges a
memory). Then, through REST:

- POST /backup: the archive of the tenant (a scratch replica synced and cut
  loose, then the export), timed; meanwhile a probe stores a memory and runs
  a recall in turn, ten a second, and its latencies are set against the same
  probe's at rest just before (writes and recall must not wait for a backup);
- GET /backup/{name}: the download, timed, and the archive's size;
- POST /restore of the downloaded bytes into a second, fresh stack, timed
  (checking the archive whole, writing nodes and edges, rebuilding the vector
  index from the stored vectors; nothing is re-embedded).

    python -m benchmarks --only backup --backup-size 100000
"""

from __future__ import annotations

import asyncio
import threading
import time
from pathlib import Path

import httpx
import numpy as np

from benchmarks.recall_latency import seed, vocabulary
from benchmarks.report import line, progress
from benchmarks.stack import TOKEN, BenchStack
from services.core.adapters.falkor import FalkorGraph

ADMIN = "bench-admin"
HEADERS = {"Authorization": f"Bearer {TOKEN}", "X-Admin-Token": ADMIN}
ENV = {
    "ENRICHMENT_ENABLED": "false",
    "EMBEDDING_PROVIDER": "local",
    "CONSOLIDATION_TICK_SECONDS": "0",
    "ADMIN_API_TOKEN": ADMIN,
}


def _chunks(path: Path, size: int = 1 << 20):
    with path.open("rb") as stream:
        while chunk := stream.read(size):
            yield chunk


class Probe(threading.Thread):
    """A memory stored and a recall run in turn, ten a second, latencies kept per kind."""

    def __init__(self, url: str, words: list[str]):
        super().__init__(daemon=True)
        self._url, self._words = url, words
        self.stop = threading.Event()
        self.seconds: dict[str, list[float]] = {"store": [], "recall": []}

    def run(self) -> None:
        with httpx.Client(base_url=self._url, headers=HEADERS, timeout=120) as http:
            i = 0
            while not self.stop.is_set():
                kind = "store" if i % 2 == 0 else "recall"
                word = self._words[i % len(self._words)]
                started = time.perf_counter()
                if kind == "store":
                    reply = http.post("/memory", json={"content": f"probe {i} about {word}", "tags": ["probe"]})
                else:
                    reply = http.get("/recall", params={"query": word, "limit": 5})
                if reply.status_code >= 400:
                    raise RuntimeError(f"probe {kind}: {reply.status_code} {reply.text[:200]}")
                self.seconds[kind].append(time.perf_counter() - started)
                i += 1
                self.stop.wait(0.1)


def _quantiles(values: list[float]) -> tuple[float, float, float]:
    ordered = np.sort(np.asarray(values))
    return tuple(float(np.quantile(ordered, q)) * 1000 for q in (0.5, 0.95)) + (float(ordered[-1]) * 1000,)


def _probe_lines(size: int, rest: Probe, during: Probe) -> None:
    for kind in ("store", "recall"):
        (r50, r95, _), (d50, d95, dmax) = _quantiles(rest.seconds[kind]), _quantiles(during.seconds[kind])
        line(
            f"{size // 1000}k memories, {kind} during ÷ before the backup",
            f"p50 {d50 / r50:4.2f}x  p95 {d95 / r95:4.2f}x  ({d50:.1f}/{d95:.1f} ms against {r50:.1f}/{r95:.1f} ms;"
            f" longest {dmax:.0f} ms; {len(during.seconds[kind])} calls)",
        )


def run(size: int = 100_000, words_from: str = "locomo") -> None:
    rng = np.random.default_rng(13)
    words = vocabulary(rng, words_from)
    print(f"\nbackup and restore: {size} memories")
    with BenchStack(**ENV) as stack:

        async def grow() -> None:
            graph = FalkorGraph(host="127.0.0.1", port=int(stack.env["FALKORDB_PORT"]), graph="memories")
            try:
                await seed(graph, rng, words, 0, size, 384, [])
            finally:
                await graph.lifecycle.close()

        asyncio.run(grow())
        progress(f"seeded; stack quiet after {stack.settle():.0f} s")
        rest = Probe(stack.url, words)
        rest.start()
        time.sleep(20)
        rest.stop.set()
        rest.join()
        with httpx.Client(base_url=stack.url, headers=HEADERS, timeout=7200) as http:
            during = Probe(stack.url, words)
            during.start()
            started = time.perf_counter()
            reply = http.post("/backup")
            backup_seconds = time.perf_counter() - started
            during.stop.set()
            during.join()
            if reply.status_code != 200:
                raise RuntimeError(f"POST /backup: {reply.status_code} {reply.text[:300]}")
            made = reply.json()
            nodes, edges = sum(made["nodes"].values()), sum(made["edges"].values())
            line(
                f"{size // 1000}k memories, POST /backup",
                f"{backup_seconds:7.1f} s  {nodes / backup_seconds:8.0f} nodes/s  {nodes} nodes  {edges} edges",
            )
            _probe_lines(size, rest, during)
            archive = stack.data / "downloaded.jsonl.gz"
            started = time.perf_counter()
            with http.stream("GET", f"/backup/{made['name']}") as download, archive.open("wb") as out:
                for chunk in download.iter_bytes():
                    out.write(chunk)
            seconds = time.perf_counter() - started
            mb = archive.stat().st_size / 1e6
            line(f"{size // 1000}k memories, archive", f"{mb:7.1f} MB  ({mb * 1e3 / size:.1f} KB a memory)")
            line(f"{size // 1000}k memories, GET /backup/{{name}}", f"{seconds:7.1f} s  {mb / seconds:6.0f} MB/s")
        with BenchStack(**ENV) as fresh, httpx.Client(base_url=fresh.url, headers=HEADERS, timeout=7200) as http:
            started = time.perf_counter()
            reply = http.post("/restore", content=_chunks(archive), headers={"Content-Type": "application/gzip"})
            seconds = time.perf_counter() - started
            if reply.status_code != 200:
                raise RuntimeError(f"POST /restore: {reply.status_code} {reply.text[:300]}")
            body = reply.json()
            [tenant] = body["tenants"]
            line(
                f"{size // 1000}k memories, POST /restore",
                f"{seconds:7.1f} s  (upload {seconds - body['elapsed_seconds'] - body['reindex_seconds']:.1f} s,"
                f" check and write {body['elapsed_seconds']:.1f} s, index rebuild {body['reindex_seconds']:.1f} s)  "
                f"{body['nodes'] / seconds:8.0f} nodes/s  indexed {tenant['indexed']}"
                f"  re-embedding {tenant['reembedding']}",
            )
