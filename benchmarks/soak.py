"""`make soak`: mixed load at a fixed rate on the embedded stack, watching for
errors and memory growth. Not part of `make test` (five minutes by default;
tests/reliability/test_soak_short.py runs it for under a minute).

The stack is `python -m devstack` on free ports (benchmarks/stack.py), the
local embedder included. An open loop starts operations on a clock
(writes, recalls, patches, deletes, in the --mix shares), so a slow answer
never slows the load; once the run holds --live-cap memories a write
becomes a delete, so the store stops growing and what still grows is not
data. Beside it, on a schedule of their own, SSE clients
connect to GET /stream every --sse-every seconds and leave after 5-30 s, a
consolidation pass (full, for real) runs every --consolidate-every seconds
from a tenth of the run on, and one POST /backup is taken at --backup-at of
the run. Every answer that is not a 2xx counts as an error; each kind's
p50 and p99 are reported (an SSE client's: to its `ready` event).
Every --sample seconds each process of the stack (nats-server and
FalkorDB included) is read from /proc/<pid>/status: VmRSS and its parts.
After --warmup seconds (the models loaded, the caches and pools filled)
the figures then are the baseline; the run passes when no operation failed
and no process's held memory (RssAnon + RssShmem: heaps, stacks, shared
memory, what the kernel cannot take back) grew by more than --late-growth
(a share of its baseline, 2 %) over the second half of the window, where a
one-off step (a model, a pool, a Go heap) is over and a leak still grows:
the median of the tenth of the samples after the half against that of the
last tenth, so that a batch's working memory or a garbage collection
caught by one sample does not decide. VmRSS is shown beside it; it also
counts the pages of the files a process maps (RssFile), page cache the
kernel drops under pressure and reads again when touched: recall's vector
index (segments, WAL) grows and shrinks there, so recall's mapped index
pages (from smaps) and the index's size on disk, their ceiling, are
reported too. FalkorDB holds data that grows by design (every change adds
an audit entry), taken out of its growth (its own accounting, INFO memory
used_memory). nats-server's memory saws with the events stream's newest
message block (kept in memory while the consumers read it, up to 8 MiB,
plus Go's heap headroom; read as the newest *.blk file's size): its last
tenth is compared with the samples of an earlier block at the same fill
(block_matched); its live heap is read every --nats-heap-every seconds
and shown (benchmarks/soak_nats_heap.py: with NATS_GOGC=off its resident
memory is a budget, flat whether or not something inside it leaks).
Recall's memory that fills with the corpus's new words up to a bound
(its word and stem caches, its index's native memory between reopens)
is run at small bounds, --cache-cap and --reopen-every, reached before
the second half (benchmarks/soak_caches.py), and each cache's fill
is read from recall's /metrics and reported. A table is printed, the figures (with each process's
series) written to --json, and devstack's output to --log; --reanalyse
judges an earlier run's --json again.

    python -m benchmarks.soak --duration 300 --rate 10
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import statistics
import sys
import time
import uuid
from pathlib import Path

import httpx
from rich.console import Console
from rich.table import Table

from benchmarks.soak_caches import cache_figures, cache_notes, recall_figures, stack_bounds
from benchmarks.soak_nats_heap import live_heap_kib
from benchmarks.soak_rule import DATA_OF, FALKORDB, NATS_BLOCK, NATS_LIVE_HEAP, analyse, samples_of
from benchmarks.stack import TOKEN, BenchStack, _process_name, _stat
from devstack.servers import free_port

KINDS = ("write", "recall", "patch", "delete")
#: Operations on a schedule of their own beside the open loop's mix: an SSE
#: client connecting (its latency: to the `ready` event) and leaving after a
#: while, a consolidation pass, a backup.
SCHEDULED = ("sse", "consolidate", "backup")
ADMIN = "soak-admin"


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
    return rss_parts_kib(pid).get("VmRSS")


def rss_parts_kib(pid: int) -> dict[str, int]:
    """VmRSS and its parts (RssAnon: heaps and stacks; RssFile: mapped files,
    such as libraries and the vector index's segments and WAL; RssShmem), in
    KiB; empty once the process is gone."""
    try:
        lines = Path(f"/proc/{pid}/status").read_text().splitlines()
    except OSError:
        return {}
    wanted = ("VmRSS:", "RssAnon:", "RssFile:", "RssShmem:")
    return {line.split(":")[0]: int(line.split()[1]) for line in lines if line.startswith(wanted)}


def held_kib(parts: dict[str, int]) -> int | None:
    """The resident memory the kernel cannot take back from the process
    (RssAnon + RssShmem): its heaps, stacks and shared memory. VmRSS also
    counts the pages of files it maps (RssFile), which are page cache: clean
    ones the kernel drops under pressure and reads again on the next touch,
    dirty ones it writes back first (docs/reliability.md, make soak)."""
    if "RssAnon" not in parts:
        return None
    return parts["RssAnon"] + parts.get("RssShmem", 0)


def mapped_under_kib(pid: int, directory: Path) -> int | None:
    """The resident pages of the files under `directory` the process maps
    (from /proc/<pid>/smaps), in KiB: recall's vector index (segments, WAL)."""
    try:
        text = Path(f"/proc/{pid}/smaps").read_text()
    except OSError:
        return None
    prefix, total, inside = str(directory), 0, False
    for line in text.splitlines():
        head = line.split(maxsplit=6)
        if head and "-" in head[0] and not head[0].endswith(":"):  # a mapping's first line
            inside = len(head) > 5 and head[5].startswith(prefix)
        elif inside and head[0] == "Rss:":
            total += int(head[1])
    return total


def tree_kib(directory: Path) -> int:
    """The size of the files under `directory`, in KiB (what the mapped pages above can reach)."""
    total = 0
    # os.walk, not rglob: a directory the index removes while it is read (a WAL's
    # atomic-write temporary) is skipped, where rglob's scandir raised and ended the soak.
    for root, _, files in os.walk(directory):
        for name in files:
            try:
                total += os.stat(os.path.join(root, name)).st_size
            except OSError:
                continue  # replaced or removed meanwhile (an optimisation's old segment)
    return total // 1024


class Load:
    """The open loop: one operation every 1/rate seconds, of a kind drawn from the mix."""

    def __init__(self, client: httpx.AsyncClient, mix: dict[str, float], seed: int = 7, live_cap: int = 0):
        self.client = client
        #: The most memories the run keeps: at the cap a write becomes a delete (0: no cap).
        self.live_cap = live_cap
        self.kinds = list(mix)
        self.weights = [mix[k] for k in self.kinds]
        self.random = random.Random(seed)  # noqa: S311  a seeded load pattern, not a secret
        self.live: list[str] = []  # ids this run wrote and has not deleted
        #: Patches under way, by id: a delete leaves those ids alone, else a patch sent before it
        #: and served after it answers 404, the load's own race, not the service's error.
        self.patching: dict[str, int] = {}
        self.latencies: dict[str, list[float]] = {k: [] for k in (*KINDS, *SCHEDULED)}
        self.errors: dict[str, list[str]] = {k: [] for k in (*KINDS, *SCHEDULED)}
        #: Events the SSE clients received, all told.
        self.sse_events = 0

    def _words(self) -> str:
        return " ".join(self.random.choice(VOCABULARY) for _ in range(8))

    async def one(self, kind: str) -> None:
        if kind in ("patch", "delete") and not self.live:
            kind = "write"
        elif kind == "write" and self.live_cap and len(self.live) >= self.live_cap:
            kind = "delete"
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
                self.patching[target] = self.patching.get(target, 0) + 1
                try:
                    reply = await self.client.patch(f"/memory/{target}", json={"importance": self.random.random()})
                finally:
                    if (left := self.patching.pop(target) - 1) > 0:
                        self.patching[target] = left
            else:
                reply = await self.client.delete(f"/memory/{self._deletable()}")
            if not reply.is_success:
                self.errors[kind].append(f"{reply.status_code} {reply.text[:200]}")
        except httpx.HTTPError as exc:
            self.errors[kind].append(repr(exc))
        self.latencies[kind].append(time.monotonic() - started)

    def _deletable(self) -> str:
        """A live id to delete, taken out of the live ones: a random one, else the
        first no patch is under way for (any, when every one is being patched)."""
        at = self.random.randrange(len(self.live))
        if self.live[at] in self.patching:
            at = next((i for i, memory in enumerate(self.live) if memory not in self.patching), at)
        return self.live.pop(at)

    async def sse_client(self, hold: float) -> None:
        """Connect to GET /stream, read events for `hold` seconds, leave."""
        started = time.monotonic()
        try:
            async with self.client.stream("GET", "/stream", timeout=httpx.Timeout(60, read=hold + 30)) as reply:
                if not reply.is_success:
                    await reply.aread()
                    self.errors["sse"].append(f"{reply.status_code} {reply.text[:200]}")
                    return
                ready = False
                async for line in reply.aiter_lines():
                    if line.startswith("event:"):
                        if not ready and line.split(":", 1)[1].strip() == "ready":
                            ready = True
                            self.latencies["sse"].append(time.monotonic() - started)
                        else:
                            self.sse_events += 1
                    if time.monotonic() - started >= hold:
                        break
        except httpx.HTTPError as exc:
            self.errors["sse"].append(repr(exc))

    async def timed(self, kind: str, method: str, path: str, body: dict | None = None) -> None:
        """One admin call (a consolidation pass, a backup), timed; a non-2xx counts as an error."""
        started = time.monotonic()
        try:
            reply = await self.client.request(method, path, json=body, headers={"X-Admin-Token": ADMIN}, timeout=600)
            if not reply.is_success:
                self.errors[kind].append(f"{reply.status_code} {reply.text[:200]}")
        except httpx.HTTPError as exc:
            self.errors[kind].append(repr(exc))
        self.latencies[kind].append(time.monotonic() - started)

    async def scheduled(self, seconds: float, sse_every: float, consolidate_every: float, backup_at: float) -> None:
        """SSE clients arriving every `sse_every` s, each staying 5-30 s (capped
        by the run's end); a consolidation pass (decay, creative, cluster,
        forget for real) every `consolidate_every` s from the first tenth
        on; one backup at `backup_at` of the run."""
        tasks: set[asyncio.Task] = set()
        start = time.monotonic()
        end = start + seconds
        next_sse, next_consolidation, backup_due = start, start + seconds / 10, start + backup_at * seconds
        backed_up = False
        while (now := time.monotonic()) < end:
            if now >= next_sse:
                hold = min(self.random.uniform(5, 30), max(1.0, end - now))
                tasks.add(asyncio.create_task(self.sse_client(hold)))
                next_sse += sse_every
            if now >= next_consolidation:
                body = {"mode": "full", "dry_run": False}
                tasks.add(asyncio.create_task(self.timed("consolidate", "POST", "/consolidate", body)))
                next_consolidation += consolidate_every
            if not backed_up and now >= backup_due:
                tasks.add(asyncio.create_task(self.timed("backup", "POST", "/backup")))
                backed_up = True
            tasks = {t for t in tasks if not t.done()}
            await asyncio.sleep(0.2)
        if tasks:
            await asyncio.gather(*tasks)

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


def falkordb_data_kib(port: int) -> int | None:
    """FalkorDB's own count of the memory its data takes (used_memory), in KiB."""
    import redis

    try:
        return int(redis.Redis(port=port, socket_timeout=5).info("memory")["used_memory"]) // 1024
    except (redis.RedisError, KeyError, ValueError):
        return None


def newest_blocks_kib(nats_dir: Path) -> int:
    """The size of each JetStream stream's newest message block, summed, in
    KiB: the block being written, which nats-server keeps in memory as it
    grows (up to 8 MiB a stream at our limits: the server derives it from max_bytes)."""
    total = 0
    for msgs in nats_dir.glob("jetstream/*/streams/*/msgs"):
        blocks = [(int(b.stem), b) for b in msgs.glob("*.blk") if b.stem.isdigit()]
        if blocks:
            try:
                total += max(blocks)[1].stat().st_size
            except OSError:
                continue  # sealed and removed meanwhile
    return total // 1024


async def sample_rss(
    pids: dict[str, int],
    falkordb_port: int,
    data_dir: Path,
    every: float,
    stop: asyncio.Event,
    samples: list,
    recall_metrics_port: int | None = None,
    nats_profile: tuple[int, float] | None = None,
) -> None:
    """Every `every` seconds each process's memory and the figures beside it;
    nats-server's live heap every `nats_profile[1]` seconds from its profiler
    on port `nats_profile[0]` (soak_nats_heap)."""
    started = time.monotonic()
    vectors = data_dir / "vectors"
    heap_read_at = -float("inf")
    while not stop.is_set():
        parts = {n: rss_parts_kib(p) for n, p in pids.items()}
        sizes: dict[str, int | None] = {n: part.get("VmRSS") for n, part in parts.items()}
        sizes |= {f"{n}:anon": part.get("RssAnon") for n, part in parts.items()}
        sizes |= {f"{n}:held": held_kib(part) for n, part in parts.items()}
        sizes |= {f"{n}:file": part.get("RssFile") for n, part in parts.items()}
        sizes["falkordb-data"] = await asyncio.to_thread(falkordb_data_kib, falkordb_port)
        sizes[NATS_BLOCK] = newest_blocks_kib(data_dir / "nats")
        mapped = [mapped_under_kib(p, vectors) for n, p in pids.items() if n.startswith("recall")]
        sizes["index-mapped"] = sum(m for m in mapped if m is not None) if any(m is not None for m in mapped) else None
        sizes["index-disk"] = await asyncio.to_thread(tree_kib, vectors)
        sizes |= await asyncio.to_thread(recall_figures, recall_metrics_port)
        if nats_profile and time.monotonic() - heap_read_at >= nats_profile[1]:
            heap_read_at = time.monotonic()
            sizes[NATS_LIVE_HEAP] = await live_heap_kib(nats_profile[0])
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
        load = Load(c, mix, live_cap=args.live_cap)
        port = int(stack.env["FALKORDB_PORT"])
        recall_port = int(stack.env["RECALL_METRICS_PORT"])
        profile = (int(stack.env["NATS_PROFILE_PORT"]), args.nats_heap_every) if args.nats_heap_every > 0 else None
        sampler = asyncio.create_task(
            sample_rss(pids, port, stack.data, args.sample, stop, samples, recall_port, profile)
        )
        started = time.monotonic()
        await asyncio.gather(
            load.run(args.duration, args.rate),
            load.scheduled(args.duration, args.sse_every, args.consolidate_every, args.backup_at),
        )
        elapsed = time.monotonic() - started
        stop.set()
        await sampler
    operations = {}
    for kind in (*KINDS, *SCHEDULED):
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
        "late_growth_bound": args.late_growth,
        "operations": operations,
        "sse_events": load.sse_events,
        "live_cap": args.live_cap,
        "live_at_end": len(load.live),
        "processes": analyse(samples, list(pids), args.warmup),
        "cache_cap": args.cache_cap,
        "reopen_every": args.reopen_every,
        "recall_caches": cache_figures(samples, args.warmup),
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
    bound = result["late_growth_bound"]
    rss = Table(
        title=f"Memory after {result['warmup_seconds']:g} s warm-up. Verdict: under {bound:.0%} growth in the second"
        " half of RssAnon+RssShmem (memory the kernel cannot take back; medians of a tenth of the samples at each end;"
        " FalkorDB's beyond its data, nats-server's at the same fill of its newest block). VmRSS shown beside it."
    )
    columns = (
        "process",
        "VmRSS MiB (base/end/max)",
        "data growth MiB",
        "VmRSS growth",
        "VmRSS 2nd half",
        "held MiB (base/end)",
        "held 2nd half",
        "verdict",
    )
    for column in columns:
        rss.add_column(column, justify="right" if column != "process" else "left")
    ok = all(o["errors"] == 0 for o in result["operations"].values())
    notes = []
    for name, p in sorted(result["processes"].items()):
        flat = p["late_held_growth"] < bound
        ok = ok and flat
        rss.add_row(
            "falkordb" if name == FALKORDB else name,
            f"{p['baseline_kib'] / 1024:.1f}/{p['end_kib'] / 1024:.1f}/{p['max_kib'] / 1024:.1f}",
            f"{p['data_growth_kib'] / 1024:.1f}" if name in DATA_OF else "-",
            f"{p['growth']:+.1%}",
            f"{p['late_growth']:+.1%}",
            f"{p['held_baseline_kib'] / 1024:.1f}/{p['held_end_kib'] / 1024:.1f}",
            f"{p['late_held_growth']:+.1%}",
            "flat" if flat else "GROWING",
        )
        if name == "nats-server":
            notes.append(f"nats-server: {p['measure']}; {p['blocks_begun']} block(s) begun after the warm-up")
            if heap := p.get("live_heap_series_kib"):
                notes.append(
                    f"nats-server's live heap (after a collection, {len(heap)} reads): {heap[0][1] / 1024:.1f} ->"
                    f" {heap[-1][1] / 1024:.1f} MiB; beyond its newest block, 2nd half"
                    f" {p['late_live_heap_beyond_block_kib'] / 1024:+.1f} MiB"
                )
        if "index_mapped_kib" in p:
            m, d = p["index_mapped_kib"], p["index_disk_kib"]
            notes.append(
                f"{name}: the vector index's mapped pages {m[0] / 1024:.1f} -> {m[1] / 1024:.1f} MiB (max"
                f" {m[2] / 1024:.1f}; 2nd half {p['late_index_mapped_kib'] / 1024:+.1f}), page cache within its files"
                f" on disk: {d[0] / 1024:.1f} -> {d[1] / 1024:.1f} MiB (max {d[2] / 1024:.1f};"
                f" 2nd half {p['late_index_disk_kib'] / 1024:+.1f})"
            )
    console.print(rss)
    notes += cache_notes(result.get("recall_caches", {}))
    for note in notes:
        console.print(note)
    for kind, o in result["operations"].items():
        for error in o["first_errors"]:
            console.print(f"[red]{kind} error:[/red] {error}")
    console.print("[green]PASS[/green]" if ok else "[red]FAIL[/red]")
    return ok


def parse(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--duration", type=float, default=300.0, help="seconds of load")
    parser.add_argument("--rate", type=float, default=10.0, help="operations a second")
    parser.add_argument("--mix", default="0.4,0.35,0.15,0.1", help="shares of write,recall,patch,delete")
    parser.add_argument("--warmup", type=float, default=None, help="seconds before the RSS baseline (default: a fifth)")
    parser.add_argument("--sample", type=float, default=5.0, help="seconds between RSS samples")
    parser.add_argument(
        "--nats-heap-every",
        type=float,
        default=300.0,
        help="seconds between reads of nats-server's live heap (each runs one collection; 0: none)",
    )
    parser.add_argument(
        "--late-growth", type=float, default=0.02, help="largest RSS growth over the second half, a share"
    )
    parser.add_argument(
        "--live-cap",
        type=int,
        default=3000,
        help="most memories the run keeps: at the cap a write becomes a delete, so the store's size holds (0: none)",
    )
    parser.add_argument(
        "--cache-cap",
        type=int,
        default=4000,
        help="recall's word, stem and text caches bounded at this (full before the second half; 0: the defaults)",
    )
    parser.add_argument(
        "--reopen-every",
        type=int,
        default=2000,
        help="recall's embedded index reopened after this many changes (VECTOR_REOPEN_EVERY; 0: the default)",
    )
    parser.add_argument("--sse-every", type=float, default=10.0, help="seconds between SSE clients connecting")
    parser.add_argument("--consolidate-every", type=float, default=600.0, help="seconds between consolidation passes")
    parser.add_argument("--backup-at", type=float, default=0.3, help="when the backup is taken, a share of the run")
    parser.add_argument("--json", type=Path, default=Path("build/soak.json"), help="where the figures go")
    parser.add_argument(
        "--log", type=Path, default=Path("build/soak-devstack.log"), help="where the stack's output goes"
    )
    parser.add_argument(
        "--env", action="append", default=[], metavar="NAME=VALUE", help="a setting for the stack (repeatable)"
    )
    parser.add_argument(
        "--reanalyse",
        type=Path,
        metavar="JSON",
        help="no run: judge an earlier run's figures (its --json) by today's rule, the result to --json",
    )
    args = parser.parse_args(argv)
    if args.warmup is None:
        args.warmup = min(60.0, args.duration / 5)
    return args


def run(args: argparse.Namespace, console: Console | None = None) -> tuple[dict, bool]:
    """The soak on a stack of its own; its figures (also written to args.json) and the verdict."""
    console = console or Console(width=130)  # the tables whole, in a pipe too
    bounds = stack_bounds(args.cache_cap, args.reopen_every)
    env = {"ADMIN_API_TOKEN": ADMIN, "NATS_PROFILE_PORT": str(free_port()), **bounds}
    env |= dict(e.split("=", 1) for e in args.env)
    with BenchStack(log_path=args.log, **env) as stack:
        result = asyncio.run(soak(stack, args))
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps(result, indent=2))
    return result, report(result, console)


def reanalyse(args: argparse.Namespace, console: Console | None = None) -> tuple[dict, bool]:
    """An earlier run's samples (args.reanalyse) judged again; written to args.json."""
    result = json.loads(args.reanalyse.read_text())
    result["processes"] = analyse(samples_of(result), list(result["processes"]), result["warmup_seconds"])
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps(result, indent=2))
    return result, report(result, console or Console(width=130))


def main() -> int:
    args = parse()
    _, ok = reanalyse(args) if args.reanalyse else run(args)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
