"""`make soak`: mixed load at a fixed rate on the embedded stack, watching for
errors and memory growth. Not part of `make test` (five minutes by default).

The stack is `python -m devstack` on free ports (benchmarks/stack.py), the
local embedder included. An open loop starts operations on a clock
(writes, recalls, patches, deletes, in the --mix shares), so a slow answer
never slows the load; every answer that is not a 2xx counts as an error.
Every --sample seconds the VmRSS of each process of the stack is read from
/proc/<pid>/status. After --warmup seconds (the models loaded, the caches
and pools filled) the RSS then is the baseline; the run passes when no
operation failed and no process's RSS at the end exceeds its baseline by
more than --rss-growth (a share). FalkorDB holds the data, which grows by
design (every write adds a memory and an audit entry): its verdict takes
the growth of its own data accounting (INFO memory: used_memory) out of
its RSS growth, so what is judged is memory beyond the data. A table of
both is printed, and the figures written to --json.

    python -m benchmarks.soak --duration 300 --rate 10
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import statistics
import sys
import time
import uuid
from pathlib import Path

import httpx
from rich.console import Console
from rich.table import Table

from benchmarks.stack import TOKEN, BenchStack, _process_name, _stat

KINDS = ("write", "recall", "patch", "delete")


def stack_pids(root: int) -> dict[str, int]:
    """The pid of each process under `root` (devstack), by name; the
    supervisor itself as "devstack"."""
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                children.setdefault(int(_stat(int(entry.name))[1]), []).append(int(entry.name))
            except (OSError, IndexError, ValueError):
                continue
    found, todo = {}, [root]
    while todo:
        pid = todo.pop()
        todo += children.get(pid, [])
        try:
            name = "devstack" if pid == root else _process_name(str(pid))
        except OSError:
            continue
        found[name if name not in found else f"{name}-{pid}"] = pid
    return found


def rss_kib(pid: int) -> int | None:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    except OSError:
        return None
    return None


class Load:
    """The open loop: one operation every 1/rate seconds, of a kind drawn from the mix."""

    def __init__(self, client: httpx.AsyncClient, mix: dict[str, float], seed: int = 7):
        self.client = client
        self.kinds = list(mix)
        self.weights = [mix[k] for k in self.kinds]
        self.random = random.Random(seed)  # noqa: S311  a seeded load pattern, not a secret
        self.live: list[str] = []  # ids this run wrote and has not deleted
        self.latencies: dict[str, list[float]] = {k: [] for k in KINDS}
        self.errors: dict[str, list[str]] = {k: [] for k in KINDS}

    def _words(self) -> str:
        return " ".join(self.random.choice(VOCABULARY) for _ in range(8))

    async def one(self, kind: str) -> None:
        if kind in ("patch", "delete") and not self.live:
            kind = "write"
        started = time.monotonic()
        try:
            if kind == "write":
                reply = await self.client.post(
                    "/memory", json={"content": f"{self._words()} {uuid.uuid4().hex}", "tags": ["soak"]}
                )
                if reply.is_success:
                    self.live.append(reply.json()["memory_id"])
            elif kind == "recall":
                reply = await self.client.get("/recall", params={"query": self._words(), "limit": 10})
            elif kind == "patch":
                target = self.random.choice(self.live)
                reply = await self.client.patch(f"/memory/{target}", json={"importance": self.random.random()})
            else:
                target = self.live.pop(self.random.randrange(len(self.live)))
                reply = await self.client.delete(f"/memory/{target}")
            if not reply.is_success:
                self.errors[kind].append(f"{reply.status_code} {reply.text[:200]}")
        except httpx.HTTPError as exc:
            self.errors[kind].append(repr(exc))
        self.latencies[kind].append(time.monotonic() - started)

    async def run(self, seconds: float, rate: float) -> None:
        tasks: set[asyncio.Task] = set()
        end = time.monotonic() + seconds
        tick = time.monotonic()
        while tick < end:
            kind = self.random.choices(self.kinds, self.weights)[0]
            task = asyncio.create_task(self.one(kind))
            tasks.add(task)
            task.add_done_callback(tasks.discard)
            tick += 1.0 / rate
            await asyncio.sleep(max(0.0, tick - time.monotonic()))
        if tasks:
            await asyncio.gather(*tasks)


#: Words for contents and queries, so recall's arms have something to match.
VOCABULARY = tuple(
    [
        "postgres",
        "mongodb",
        "redis",
        "kafka",
        "deploy",
        "rollback",
        "latency",
        "cache",
        "index",
        "schema",
        "migration",
        "review",
        "python",
        "rust",
        "golang",
        "typescript",
        "docker",
        "kubernetes",
        "terraform",
        "budget",
        "deadline",
        "customer",
        "invoice",
        "meeting",
        "decision",
        "preference",
        "pattern",
        "lesson",
        "outage",
        "incident",
        "backup",
        "restore",
        "tenant",
        "token",
    ]
)


#: A process over the bound passes ("settled") when its second half grew less than this share of the bound.
SETTLED_SHARE = 0.1

#: The name benchmarks.stack gives FalkorDB's process (redis-server with the module).
FALKORDB = "redis-server"


def falkordb_data_kib(port: int) -> int | None:
    """FalkorDB's own count of the memory its data takes (used_memory), in KiB."""
    import redis

    try:
        return int(redis.Redis(port=port, socket_timeout=5).info("memory")["used_memory"]) // 1024
    except (redis.RedisError, KeyError, ValueError):
        return None


async def sample_rss(
    pids: dict[str, int], falkordb_port: int, every: float, stop: asyncio.Event, samples: list
) -> None:
    started = time.monotonic()
    while not stop.is_set():
        sizes = {n: rss_kib(p) for n, p in pids.items()}
        sizes["falkordb-data"] = await asyncio.to_thread(falkordb_data_kib, falkordb_port)
        samples.append((time.monotonic() - started, sizes))
        try:
            await asyncio.wait_for(stop.wait(), every)
        except TimeoutError:
            pass


async def soak(stack: BenchStack, args) -> dict:
    pids = stack_pids(stack.process.pid)
    mix = dict(zip(KINDS, (float(x) for x in args.mix.split(",")), strict=True))
    samples: list = []
    stop = asyncio.Event()
    async with httpx.AsyncClient(base_url=stack.url, headers={"Authorization": f"Bearer {TOKEN}"}, timeout=60) as c:
        load = Load(c, mix)
        port = int(stack.env["FALKORDB_PORT"])
        sampler = asyncio.create_task(sample_rss(pids, port, args.sample, stop, samples))
        started = time.monotonic()
        await load.run(args.duration, args.rate)
        elapsed = time.monotonic() - started
        stop.set()
        await sampler
    warm = [s for t, s in samples if t >= args.warmup] or [samples[-1][1]]
    processes = {}
    for name in pids:
        series = [s[name] for s in warm if s.get(name)]
        if not series:
            continue
        baseline, last = series[0], series[-1]
        data = [s.get("falkordb-data") or 0 for s in warm if s.get(name)] if name == FALKORDB else [0] * len(series)
        data_growth = data[-1] - data[0]
        # Growth over the second half of the window alone (beyond the data's too): a leak keeps
        # growing there, where caches and a garbage-collected heap have settled.
        half = len(series) // 2
        late = (last - series[half]) - (data[-1] - data[half])
        processes[name] = {
            "baseline_kib": baseline,
            "end_kib": last,
            "max_kib": max(series),
            "data_growth_kib": data_growth,
            "growth": (last - baseline - data_growth) / baseline,
            "late_growth": late / baseline,
            "series_kib": [[round(t, 1), s.get(name)] for t, s in samples],
        }
    operations = {}
    for kind in KINDS:
        lat = sorted(load.latencies[kind])
        operations[kind] = {
            "count": len(lat),
            "errors": len(load.errors[kind]),
            "p50_ms": 1000 * statistics.median(lat) if lat else None,
            "p99_ms": 1000 * lat[min(len(lat) - 1, int(0.99 * len(lat)))] if lat else None,
            "first_errors": load.errors[kind][:3],
        }
    return {
        "duration_seconds": elapsed,
        "rate": args.rate,
        "warmup_seconds": args.warmup,
        "rss_growth_bound": args.rss_growth,
        "operations": operations,
        "processes": processes,
        "samples": len(samples),
    }


def report(result: dict, console: Console) -> bool:
    ops = Table(title=f"soak: {result['duration_seconds']:.0f} s at {result['rate']:g} ops/s")
    for column in ("operation", "count", "errors", "p50 ms", "p99 ms"):
        ops.add_column(column, justify="right" if column != "operation" else "left")
    for kind, o in result["operations"].items():
        p50 = f"{o['p50_ms']:.1f}" if o["p50_ms"] is not None else "-"
        p99 = f"{o['p99_ms']:.1f}" if o["p99_ms"] is not None else "-"
        ops.add_row(kind, str(o["count"]), str(o["errors"]), p50, p99)
    console.print(ops)
    bound = result["rss_growth_bound"]
    rss = Table(
        title=f"VmRSS after {result['warmup_seconds']:g} s warm-up (bound: growth < {bound:.0%}, or under"
        f" {bound * SETTLED_SHARE:.0%} in the second half; FalkorDB's beyond its data's)"
    )
    columns = ("process", "baseline MiB", "end MiB", "max MiB", "data growth MiB", "growth", "2nd half", "verdict")
    for column in columns:
        rss.add_column(column, justify="right" if column != "process" else "left")
    ok = all(o["errors"] == 0 for o in result["operations"].values())
    for name, p in sorted(result["processes"].items()):
        flat = p["growth"] < bound
        # Over the bound, yet no longer growing: a step taken once (a Go heap, a store's
        # block cache reaching its size), not a leak, which grows in the second half too.
        settled = not flat and p["late_growth"] < bound * SETTLED_SHARE
        ok = ok and (flat or settled)
        rss.add_row(
            "falkordb" if name == FALKORDB else name,
            f"{p['baseline_kib'] / 1024:.1f}",
            f"{p['end_kib'] / 1024:.1f}",
            f"{p['max_kib'] / 1024:.1f}",
            f"{p['data_growth_kib'] / 1024:.1f}" if name == FALKORDB else "-",
            f"{p['growth']:+.1%}",
            f"{p['late_growth']:+.1%}",
            "flat" if flat else "settled" if settled else "GROWING",
        )
    console.print(rss)
    for kind, o in result["operations"].items():
        for error in o["first_errors"]:
            console.print(f"[red]{kind} error:[/red] {error}")
    console.print("[green]PASS[/green]" if ok else "[red]FAIL[/red]")
    return ok


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--duration", type=float, default=300.0, help="seconds of load")
    parser.add_argument("--rate", type=float, default=10.0, help="operations a second")
    parser.add_argument("--mix", default="0.4,0.35,0.15,0.1", help="shares of write,recall,patch,delete")
    parser.add_argument("--warmup", type=float, default=None, help="seconds before the RSS baseline (default: a fifth)")
    parser.add_argument("--sample", type=float, default=5.0, help="seconds between RSS samples")
    parser.add_argument("--rss-growth", type=float, default=0.20, help="largest RSS growth after warm-up, a share")
    parser.add_argument("--json", type=Path, default=Path("build/soak.json"), help="where the figures go")
    parser.add_argument(
        "--env", action="append", default=[], metavar="NAME=VALUE", help="a setting for the stack (repeatable)"
    )
    args = parser.parse_args()
    if args.warmup is None:
        args.warmup = min(60.0, args.duration / 5)
    console = Console(width=130)  # the tables whole, in a pipe too
    with BenchStack(**dict(e.split("=", 1) for e in args.env)) as stack:
        result = asyncio.run(soak(stack, args))
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps(result, indent=2))
    return 0 if report(result, console) else 1


if __name__ == "__main__":
    sys.exit(main())
