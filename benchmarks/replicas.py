"""Recall throughput at a fixed concurrency with one and with two recall
replicas behind one gateway, in one run on this machine: the same memories
loaded into a fresh stack (python -m devstack --replicas recall=N) for each,
each replica's own index converged, then CONCURRENCY clients GET /recall
for SECONDS, each on its own kept-alive connection. Reports requests a
second, latency, and the CPU each kind of process used per request (the
replicas' together). Figures in docs/scaling.md (Replicas).

python -m benchmarks.replicas [--memories 2000] [--seconds 30] [--concurrency 16] [--replicas 1 2]"""

from __future__ import annotations

import argparse
import json
import random
import threading
import time
from pathlib import Path

import grpc

from benchmarks.report import line, percentiles, progress
from benchmarks.stack import TOKEN, BenchStack, KeepAlive, cpu_seconds
from devstack.__main__ import REPLICA_PORT_STEP
from memgrid.v1 import recall_service_pb2, recall_service_pb2_grpc

WORDS = [
    *("alpha", "river", "meeting", "budget", "travel", "garden", "piano", "coffee", "invoice", "project"),
    *("deadline", "family", "doctor", "holiday", "recipe", "museum", "contract", "launch", "review"),
    *("design", "server", "backup", "friend", "birthday", "concert"),
]
FIGURES = Path("build/bench/replicas.json")


def sentence(rng: random.Random, n: int) -> str:
    return f"note {n}: " + " ".join(rng.choice(WORDS) for _ in range(12))


def load(stack: BenchStack, memories: int, rng: random.Random) -> None:
    with stack.client() as client:
        for start in range(0, memories, 100):
            batch = [{"content": sentence(rng, n), "tags": ["bench"]} for n in range(start, min(memories, start + 100))]
            client.post("/memory/batch", json={"memories": batch}).raise_for_status()


def replica_points(stack: BenchStack, index: int) -> int:
    """Points in recall replica `index`'s own index, asked of it directly."""
    port = int(stack.env["RECALL_GRPC_PORT"]) + REPLICA_PORT_STEP * index
    with grpc.insecure_channel(f"127.0.0.1:{port}") as channel:
        status = recall_service_pb2_grpc.RecallServiceStub(channel).GetSystemStatus(
            recall_service_pb2.GetSystemStatusRequest(), metadata=stack.claim(None, "read"), timeout=10
        )
    vector = next(c for c in status.components if c.name == "vector_index")
    return int(vector.figures.get("points", -1))


def wait_converged(stack: BenchStack, replicas: int, memories: int, within: float = 600.0) -> float:
    started = time.monotonic()
    while True:
        try:
            if all(replica_points(stack, i) >= memories for i in range(replicas)):
                return time.monotonic() - started
        except grpc.RpcError:
            pass
        if time.monotonic() - started > within:
            raise TimeoutError(f"the replicas' indexes did not reach {memories} points in {within}s")
        time.sleep(0.5)


def measure(stack: BenchStack, concurrency: int, seconds: float, rng: random.Random) -> dict:
    """CONCURRENCY threads recalling for SECONDS: requests, errors, latencies, CPU by process."""
    latencies: list[float] = []
    errors = [0]
    lock = threading.Lock()
    queries = [" ".join(rng.sample(WORDS, 3)) for _ in range(500)]
    deadline = time.monotonic() + seconds

    def client(seed: int) -> None:
        own = random.Random(seed)  # noqa: S311  a benchmark's query picks, not secrets
        connection = KeepAlive(stack.url, TOKEN)
        try:
            while time.monotonic() < deadline:
                started = time.perf_counter()
                try:
                    connection.request("GET", "/recall", params={"query": own.choice(queries), "limit": 10})
                except Exception:  # noqa: BLE001  counted, the run goes on
                    with lock:
                        errors[0] += 1
                    connection.close()
                    connection = KeepAlive(stack.url, TOKEN)
                    continue
                with lock:
                    latencies.append(time.perf_counter() - started)
        finally:
            connection.close()

    cpu_before = cpu_seconds(stack.process.pid)
    began = time.monotonic()
    threads = [threading.Thread(target=client, args=(i,)) for i in range(concurrency)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    elapsed = time.monotonic() - began
    cpu_after = cpu_seconds(stack.process.pid)
    done = len(latencies)
    cpu = {k: round((cpu_after.get(k, 0) - cpu_before.get(k, 0)) * 1000 / max(done, 1), 2) for k in cpu_after}
    return {
        "requests": done,
        "errors": errors[0],
        "seconds": round(elapsed, 1),
        "per_second": round(done / elapsed, 1),
        "latencies": latencies,
        "cpu_ms_per_request": {k: v for k, v in sorted(cpu.items()) if v > 0.05},
    }


def run(memories: int, seconds: float, concurrency: int, counts: list[int]) -> list[dict]:
    results = []
    for replicas in counts:
        rng = random.Random(7)  # noqa: S311  the same memories and queries for each
        progress(f"{replicas} recall replica(s): loading {memories} memories ...")
        with BenchStack("--replicas", f"recall={replicas}", EMBEDDING_PROVIDER="placeholder") as stack:
            load(stack, memories, rng)
            converged = wait_converged(stack, replicas, memories)
            settled = stack.settle()
            progress(f"converged in {converged:.1f}s, settled {settled:.1f}s; measuring c={concurrency} ...")
            measure(stack, concurrency, 3.0, rng)  # warm-up: connections, caches
            figures = measure(stack, concurrency, seconds, rng)
        latencies = figures.pop("latencies")
        line(
            f"recall, {replicas} replica(s), c={concurrency}",
            f"{figures['per_second']:7.1f} req/s  {percentiles(latencies)}  errors {figures['errors']}",
        )
        line("  CPU ms per request", json.dumps(figures["cpu_ms_per_request"]))
        ordered = sorted(latencies)
        results.append(
            {
                "replicas": replicas,
                "concurrency": concurrency,
                "memories": memories,
                **figures,
                "p50_ms": round(1000 * ordered[len(ordered) // 2], 1),
                "p95_ms": round(1000 * ordered[int(0.95 * len(ordered))], 1),
            }
        )
    FIGURES.parent.mkdir(parents=True, exist_ok=True)
    FIGURES.write_text(json.dumps(results, indent=2))
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--memories", type=int, default=2000)
    parser.add_argument("--seconds", type=float, default=30.0)
    parser.add_argument("--concurrency", type=int, default=16)
    parser.add_argument("--replicas", type=int, nargs="+", default=[1, 2])
    args = parser.parse_args()
    run(args.memories, args.seconds, args.concurrency, args.replicas)


if __name__ == "__main__":
    main()
