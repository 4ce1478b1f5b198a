"""What a graph costs FalkorDB at many small tenants: the figures behind
FALKORDB_GRAPH_LAYOUT (docs/scaling.md, FalkorDB).

For each count of tenants it starts a fresh redis-server with the module
(devstack.servers.start_falkordb, the packaged one) and lays the same
tenants out three ways: one shared graph (today's layout), a graph per
bucket of tenants, and a graph per tenant. Each graph gets memgrid's whole
schema (the range indexes, the full-text index and the unique constraint of
services/core/adapters/falkor/schema.py), each tenant `--memories` memories
shaped as the writer stores them (a 384-dimension embedding, content,
tags), and one outbox event each. It reads the server's used_memory and RSS
(INFO memory) before and after, and times what cross-tenant work does: list
the graphs (GRAPH.LIST) and visit each with the relay's outbox query.

python -m benchmarks.graph_layout [--tenants 1000 10000] [--buckets 64] [--memories 5]"""

from __future__ import annotations

import argparse
import random
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path

import redis

from benchmarks.report import line, progress
from devstack.servers import free_port, start_falkordb
from services.core.adapters.falkor.reply import params_header
from services.core.adapters.falkor.rows import memory_to_row
from services.core.adapters.falkor.schema import _FULLTEXT_FIELDS, _INDEXES, _UNIQUE
from services.core.domain.graph_layout import GraphLayout
from services.core.domain.model import Memory

DIM = 384


def schema_commands(graph: str) -> list[tuple]:
    """The commands FalkorLifecycle.ensure_schema sends to make one graph's schema."""
    commands: list[tuple] = [
        ("GRAPH.QUERY", graph, f"CREATE INDEX FOR (n:{label}) ON (n.{prop})") for label, prop in _INDEXES
    ]
    fields = ", ".join(f"'{f}'" for f in _FULLTEXT_FIELDS)
    commands.append(
        (
            "GRAPH.QUERY",
            graph,
            f"CALL db.idx.fulltext.createNodeIndex({{label: 'Memory', language: 'english'}}, {fields})",
        )
    )
    for label, props in _UNIQUE:
        commands.append(
            ("GRAPH.CONSTRAINT", "CREATE", graph, "UNIQUE", "NODE", label, "PROPERTIES", str(len(props)), *props)
        )
    return commands


def memory_rows(tenant: str, count: int, rng: random.Random) -> list[dict]:
    now = datetime.now(UTC)
    rows = []
    for n in range(count):
        memory = Memory(
            id=f"{tenant}-m{n}", tenant=tenant, type="Context", confidence=0.5, importance=0.5,
            content=f"{tenant} said something, number {n}: " + " ".join(rng.choice(WORDS) for _ in range(25)),
            tags=("project/memgrid", f"topic/{rng.choice(WORDS)}"),
            embedding=tuple(rng.random() for _ in range(DIM)),
            timestamp=now, t_valid=now, updated_at=now, last_accessed=now, recorded_at=now,
        )  # fmt: skip
        rows.append(memory_to_row(memory))
    return rows


WORDS = [
    "graph",
    "memory",
    "recall",
    "tenant",
    "vector",
    "cluster",
    "shard",
    "replica",
    "bucket",
    "event",
    "outbox",
    "relay",
    "write",
    "read",
]


def write_commands(graph: str, tenant: str, count: int, rng: random.Random) -> tuple:
    params = {
        "rows": memory_rows(tenant, count, rng),
        "outbox": {"id": f"{tenant}-e", "created_at": 1, "payload": "x" * 600},
    }
    cypher = "UNWIND $rows AS r CREATE (n:Memory) SET n = r WITH count(n) AS c CREATE (x:Outbox) SET x = $outbox"
    return ("GRAPH.QUERY", graph, params_header(params) + cypher, "--compact")


def memory_info(client: redis.Redis) -> tuple[int, int]:
    info = client.info("memory")
    return int(info["used_memory"]), int(info["used_memory_rss"])


class PerTenant:
    """A graph per tenant: measured here, not offered (services/core/domain/graph_layout.py)."""

    mode = "tenant"

    def graph_for(self, tenant: str) -> str:
        return f"memories:t:{tenant}"

    def describe(self) -> str:
        return "tenant"


def lay_out(tenants: int, layout: GraphLayout | PerTenant, memories: int, data_dir: Path) -> dict:
    port = free_port()
    server = start_falkordb(port, data_dir)
    try:
        client = redis.Redis(port=port)
        client.ping()
        time.sleep(0.5)
        before = memory_info(client)
        rng = random.Random(7)  # noqa: S311  seeded sample text, not a secret
        names = sorted({layout.graph_for(f"t{i:05d}") for i in range(tenants)})
        started = time.perf_counter()
        pipe = client.pipeline(transaction=False)
        for n, graph in enumerate(names):
            for command in schema_commands(graph):
                pipe.execute_command(*command)
            if n % 200 == 199:
                pipe.execute(raise_on_error=False)
        pipe.execute(raise_on_error=False)
        schema_seconds = time.perf_counter() - started
        started = time.perf_counter()
        for i in range(tenants):
            tenant = f"t{i:05d}"
            pipe.execute_command(*write_commands(layout.graph_for(tenant), tenant, memories, rng))
            if i % 100 == 99:
                for reply in pipe.execute(raise_on_error=False):
                    if isinstance(reply, Exception):
                        raise reply
        pipe.execute()
        write_seconds = time.perf_counter() - started
        time.sleep(1.0)
        after = memory_info(client)
        started = time.perf_counter()
        listed = client.execute_command("GRAPH.LIST")
        list_seconds = time.perf_counter() - started
        started = time.perf_counter()
        pending = 0
        for graph in listed:
            reply = client.execute_command(
                "GRAPH.QUERY", graph, "MATCH (x:Outbox) WHERE x.created_at < 2 RETURN x.id LIMIT 100000", "--compact"
            )
            pending += len(reply[1])
        visit_seconds = time.perf_counter() - started
        if len(listed) != len(names) or pending != tenants:
            raise RuntimeError(f"listed {len(listed)} of {len(names)} graphs, {pending} of {tenants} events")
        return {
            "graphs": len(names),
            "used": after[0] - before[0],
            "rss": after[1] - before[1],
            "schema_s": schema_seconds,
            "write_s": write_seconds,
            "list_ms": list_seconds * 1000,
            "visit_s": visit_seconds,
        }
    finally:
        server.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tenants", type=int, nargs="+", default=[1000, 10000])
    parser.add_argument("--buckets", type=int, default=64)
    parser.add_argument("--memories", type=int, default=5)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        for tenants in args.tenants:
            for layout in (
                GraphLayout("memories", "shared"),
                GraphLayout("memories", "bucket", args.buckets),
                PerTenant(),
            ):
                progress(f"{tenants} tenants, {layout.describe()}")
                got = lay_out(tenants, layout, args.memories, Path(tmp) / f"{tenants}-{layout.mode}")
                used, graphs = got["used"], got["graphs"]
                line(
                    f"{tenants:>6} tenants, {layout.describe():<18}",
                    f"{graphs:>6} graphs  used {used / 2**20:8.1f} MiB ({used / graphs / 1024:8.1f} KiB/graph,"
                    f" {used / tenants / 1024:6.1f} KiB/tenant)  rss {got['rss'] / 2**20:8.1f} MiB"
                    f"  schema {got['schema_s']:6.1f} s  writes {got['write_s']:6.1f} s"
                    f"  GRAPH.LIST {got['list_ms']:7.1f} ms  visit all {got['visit_s']:6.2f} s",
                )


if __name__ == "__main__":
    main()
