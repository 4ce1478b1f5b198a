"""Move a shared graph (FALKORDB_GRAPH_LAYOUT=shared) into the bucket layout.

    python -m services.core.graph_migration --checkpoint data/graph-migration.json [--buckets 64]

Run it with the writers stopped (a maintenance window: the copy reads the
live graph, not a snapshot), then start the services with
FALKORDB_GRAPH_LAYOUT=bucket and the same FALKORDB_GRAPH_BUCKETS. It copies
each tenant whole (adapters/falkor/migration.py) into `<FALKORDB_GRAPH>:b<n>`
and checks it before it records the tenant in the checkpoint file: its
nodes by label and edges by type are the same in both, and recall's graph
reads give the same answer (its listing by importance, and the keyword arm
for words of its memories finds the same memories). A tenant already in the checkpoint is skipped,
so a run cut short resumes where it stopped; a tenant cut short is cleared
from its bucket and copied again. The shared graph is left as it was.
Prints one JSON line per tenant; exit status 1 when a check failed.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import re
import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from services.core.domain.recall_request import Scope
from services.core.settings import Settings
from services.core.wiring import graph_migration_stores

#: Memories whose words the keyword-arm comparison searches, per tenant, and the matches it compares.
SAMPLED = 5
MATCHES = 10_000


def _load(path: Path) -> dict:
    return json.loads(path.read_text()) if path.exists() else {"done": {}}


def _save(path: Path, state: dict) -> None:
    partial = path.with_name(path.name + ".partial")
    partial.write_text(json.dumps(state, indent=1, sort_keys=True))
    partial.replace(path)


async def same_recall(source: Any, target: Any, tenant: str) -> list[str]:
    """Where recall's graph reads of the tenant differ between two graph stores (none: empty)."""
    scope = Scope(tenant=tenant, at=datetime.now(UTC))
    differ = []
    listed = [m.id for m in await source.reader.list_memories(scope, "importance", 50)]
    if listed != [m.id for m in await target.reader.list_memories(scope, "importance", 50)]:
        differ.append("listing")
    for memory_id in listed[:SAMPLED]:
        memory = await source.reader.get_memory(tenant, memory_id)
        words = [w for w in re.findall(r"[a-z0-9]{4,}", (memory.content if memory else "").lower())][:3]
        if not words:
            continue
        # The same memories, not the same scores: FalkorDB's full-text scores count the words over the
        # whole graph, and a bucket holds fewer tenants than the shared graph (recall ranks by its own BM25).
        hits = {h.id for h in await source.text.search_text(scope, "keyword", words, MATCHES)}
        again = {h.id for h in await target.text.search_text(scope, "keyword", words, MATCHES)}
        if hits != again:
            differ.append(f"keyword {words}")
    return differ


async def migrate(settings: Settings, checkpoint: Path, buckets: int, page_size: int = 500) -> int:
    """Copy every tenant not yet in the checkpoint; the number of tenants whose check failed."""
    source, target, copy = graph_migration_stores(settings.graph, settings.process, buckets, page_size)
    state = _load(checkpoint)
    if (
        state.get("buckets", buckets) != buckets
        or state.get("graph", settings.graph.falkordb_graph) != settings.graph.falkordb_graph
    ):
        raise SystemExit(f"{checkpoint} is of another migration ({state.get('graph')}, {state.get('buckets')} buckets)")
    state.update(graph=settings.graph.falkordb_graph, buckets=buckets)
    failed = 0
    try:
        await source.lifecycle.ensure_schema()
        await target.lifecycle.ensure_schema()
        for tenant in await copy.tenants():
            if tenant in state["done"]:
                continue
            cleared = await copy.clear(tenant)
            nodes, edges = await copy.copy(tenant)
            before, after = await copy.counts(source.connection, tenant), await copy.counts(target.connection, tenant)
            differ = await same_recall(source, target, tenant)
            ok = before == after and not differ
            line = {
                "tenant": tenant,
                "graph": target.connection.router.route(None, tenant=tenant),
                "nodes": nodes,
                "edges": edges,
                "cleared_first": cleared,
                "counts_match": before == after,
                "recall_differs": differ,
            }
            print(json.dumps(line), flush=True)
            if ok:
                state["done"][tenant] = {"nodes": nodes, "edges": edges}
                _save(checkpoint, state)
            else:
                failed += 1
    finally:
        await source.lifecycle.close()
        await target.lifecycle.close()
    return failed


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m services.core.graph_migration", description=__doc__.split("\n")[0])
    parser.add_argument("--checkpoint", type=Path, required=True, help="the tenants done so far (JSON), to resume")
    parser.add_argument("--buckets", type=int, default=None, help="FALKORDB_GRAPH_BUCKETS of the target layout")
    parser.add_argument("--page-size", type=int, default=500, help="nodes read per query")
    args = parser.parse_args(argv)
    settings = Settings.load("process", "graph")
    failed = asyncio.run(
        migrate(settings, args.checkpoint, args.buckets or settings.graph.falkordb_graph_buckets, args.page_size)
    )
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
