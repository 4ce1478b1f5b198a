"""Writes through REST on one FalkorDB node and on a FalkorDB cluster, by concurrency: what a write
costs each process, and which one saturates first.

For each layout a fresh stack, each process its own (tests/reliability/procstack.py): one node with
the shared graph; or 3 masters with a replica each, the bucket layout (64) and FALKORDB_WRITE_REPLICAS=1,
as the prod overlay. Nine tenants (three per master's slots), `c` clients each writing one memory at a
time (POST /memory, a tenant's token in turn) for PHASE_SECONDS at each concurrency. Reported per
phase: writes a second, latency, and each kind of process's CPU, in ms per write and in share of one
core (a process at 100 % of a core is saturated: one Python process uses at most one).

    .venv/bin/python -m benchmarks.cluster_writes            # about 3 minutes
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import json
import secrets
import tempfile
import time
from pathlib import Path

import httpx

from benchmarks.report import line, percentiles, progress
from tests.cluster.test_stack_on_falkordb_cluster import TENANTS, cost_per_write, cpu_seconds, cpu_used, stack_env
from tests.reliability.procstack import ProcessStack

PHASE_SECONDS = 15.0
CONCURRENCY = (1, 8, 32)


def tokens_file(directory: Path) -> dict[str, str]:
    """A write token per tenant, in a tokens file the gateway reads; {tenant: token}."""
    tokens = {tenant: secrets.token_urlsafe(24) for tenant in TENANTS}
    entries = [
        {"token_sha256": hashlib.sha256(t.encode()).hexdigest(), "tenant": tenant, "role": "write"}
        for tenant, t in tokens.items()
    ]
    (directory / "tokens.json").write_text(json.dumps(entries))
    return tokens


async def phase(stack: ProcessStack, tokens: dict[str, str], clients: int) -> dict:
    """`clients` closed-loop writers for PHASE_SECONDS: throughput, latency and CPU by kind of process."""
    tenants = sorted(tokens)
    latencies: list[float] = []
    failed = 0
    stop = time.monotonic() + PHASE_SECONDS

    async def writer(index: int) -> None:
        nonlocal failed
        async with httpx.AsyncClient(base_url=stack.url, timeout=30) as http:
            n = 0
            while time.monotonic() < stop:
                tenant = tenants[(index + n) % len(tenants)]
                started = time.perf_counter()
                reply = await http.post(
                    "/memory",
                    json={"content": f"{tenant} bench write {index}-{n} {secrets.token_hex(6)}"},
                    headers={"Authorization": f"Bearer {tokens[tenant]}"},
                )
                if reply.is_success:
                    latencies.append(time.perf_counter() - started)
                else:
                    failed += 1
                n += 1

    before = cpu_seconds(stack)
    began = time.monotonic()
    await asyncio.gather(*(writer(i) for i in range(clients)))
    seconds = time.monotonic() - began
    used = cpu_used([before, cpu_seconds(stack)])
    writes = len(latencies)
    per_second = cost_per_write(used, seconds)  # CPU ms a second, by kind: a tenth of that is % of a core
    return {
        "clients": clients,
        "writes_per_second": round(writes / seconds, 1),
        "failed": failed,
        "latency": percentiles(latencies),
        "cpu_ms_per_write": cost_per_write(used, writes),
        "percent_of_a_core": {kind: round(value / 10, 1) for kind, value in per_second.items()},
    }


async def run(layout: str, out: list[dict]) -> None:
    data = Path(tempfile.mkdtemp(prefix=f"memgrid-bench-{layout}-"))
    tokens = tokens_file(data)
    env = {"MEMGRID_TOKENS_FILE": str(data / "tokens.json"), "CONSOLIDATION_TICK_SECONDS": "0"}
    if layout == "cluster":
        env |= stack_env()
    progress(f"{layout}: starting the stack")
    with ProcessStack(falkordb_cluster=(3, 1) if layout == "cluster" else None, **env) as stack:
        for clients in CONCURRENCY:
            figures = await phase(stack, tokens, clients)
            figures["layout"] = layout
            out.append(figures)
            line(
                f"{layout} c={clients}",
                f"{figures['writes_per_second']:7.1f} writes/s  {figures['latency']}  failed {figures['failed']}",
            )
            line("  CPU ms/write", json.dumps(figures["cpu_ms_per_write"]))
            line("  % of a core", json.dumps(figures["percent_of_a_core"]))


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.cluster_writes", description=__doc__)
    parser.add_argument("--out", type=Path, default=Path("build/bench/cluster_writes.json"))
    args = parser.parse_args(argv)
    out: list[dict] = []
    for layout in ("one node", "cluster"):
        asyncio.run(run(layout, out))
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
