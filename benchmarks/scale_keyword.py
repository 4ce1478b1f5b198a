"""The keyword arm's two reads at scale, and expand_entities' read, on FalkorDB alone (issue 27).

    python -m benchmarks.scale_keyword [--sizes 100000,1000000] [--bounds 2000,5000] [--queries 150]

Starts a FalkorDB of its own, grows the scale loader's store
(benchmarks/scale_seed.py) through the sizes, and at each times, for
distinct queries, what recall's keyword arm asks of the graph: the
document frequencies of the query's words, counted as far as BM25 counts
them (df_count_cap), then the full-text search with the document-frequency
bound and the scan bound (FalkorTextSearch.search_text), one after the
other, each bound with a fresh frequency cache. The bound 0 stands for the
2 % share alone. Prints a line a size and bound: p50/p95 of each read and
p95 of both. Then expand_entities' read (FalkorMemoryReader.entity_neighbours)
for `queries` sets of ten memories drawn at random (a recall's seeds), twice:
the first round counts the entities' mentions, the second finds them cached.
"""

from __future__ import annotations

import argparse
import asyncio
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path

import numpy as np

from benchmarks.recall_latency import distinct_queries, vocabulary
from benchmarks.scale_seed import Seeder
from devstack.servers import free_port, start_falkordb
from services.core.adapters.falkor import FalkorGraph
from services.core.adapters.falkor.fulltext import FalkorTextSearch
from services.core.domain.query_focus import focus_terms
from services.core.domain.recall_request import Scope
from services.core.domain.recall_text import df_count_cap
from services.core.settings.recall import RecallSettings

#: The recall defaults the arm runs with (RECALL_KEYWORD_MAX_DF_RATIO, _MIN_DF, _SCAN, _CANDIDATES): the settings'.
_DEFAULTS = RecallSettings.model_fields
SHARE = _DEFAULTS["recall_keyword_max_df_ratio"].default
FLOOR = _DEFAULTS["recall_keyword_min_df"].default
SCAN = _DEFAULTS["recall_keyword_scan"].default
CANDIDATES = _DEFAULTS["recall_keyword_candidates"].default


def _ms(samples: list[float], q: float) -> float:
    ordered = sorted(samples)
    return 1000 * ordered[min(len(ordered) - 1, int(q * len(ordered)))]


async def measure(graph: FalkorGraph, texts: list[str], size: int, bound: int) -> dict[str, float]:
    share = int(SHARE * size)
    max_df = max(FLOOR, min(share, bound) if bound else share)
    text = FalkorTextSearch(graph.connection)
    scope = Scope(tenant="default", at=datetime.now(UTC))
    counts, searches, both = [], [], []
    for query in texts:
        words = focus_terms(query)
        started = time.perf_counter()
        await text.document_frequencies("default", "content", words, cap=df_count_cap(max_df))
        counted = time.perf_counter()
        await text.search_text(scope, "keyword", words, CANDIDATES, max_df=max_df, scan=SCAN)
        done = time.perf_counter()
        counts.append(counted - started)
        searches.append(done - counted)
        both.append(done - started)
    figures = {
        "max_df": max_df,
        "count_p50": _ms(counts, 0.5),
        "count_p95": _ms(counts, 0.95),
        "search_p50": _ms(searches, 0.5),
        "search_p95": _ms(searches, 0.95),
        "both_p95": _ms(both, 0.95),
    }
    print(
        f"{size:>9} max_df {max_df:>6}: count p50/p95 {figures['count_p50']:6.1f}/{figures['count_p95']:6.1f} ms"
        f"  search p50/p95 {figures['search_p50']:6.1f}/{figures['search_p95']:6.1f} ms"
        f"  both p95 {figures['both_p95']:6.1f} ms",
        flush=True,
    )
    return figures


async def measure_entities(graph: FalkorGraph, seeder: Seeder, size: int, queries: int) -> dict[str, float]:
    rng = np.random.default_rng(size)
    figures: dict[str, float] = {}
    for round_ in ("first", "cached"):
        samples = []
        for _ in range(queries):
            seeds = [seeder.ids[int(i)] for i in rng.integers(0, seeder.count, 10)]
            started = time.perf_counter()
            await graph.reader.entity_neighbours("default", seeds, 10)
            samples.append(time.perf_counter() - started)
        figures.update({f"{round_}_p{q}": _ms(samples, q / 100) for q in (50, 95, 99)})
        print(
            f"{size:>9} entity expansion, {round_:>6}: p50/p95/p99"
            f" {figures[f'{round_}_p50']:6.1f}/{figures[f'{round_}_p95']:6.1f}/{figures[f'{round_}_p99']:6.1f} ms",
            flush=True,
        )
    return figures


async def run(sizes: list[int], bounds: list[int], queries: int) -> None:
    data = Path(tempfile.mkdtemp(prefix="scale-keyword-"))
    port = free_port()
    server = start_falkordb(port, data)
    try:
        graph = FalkorGraph(host="127.0.0.1", port=port, graph="memories")
        await graph.lifecycle.ensure_schema()
        seeder = Seeder(vocabulary(np.random.default_rng(7), "locomo"))
        texts = distinct_queries(np.random.default_rng(5), seeder.words, queries)
        for size in sizes:
            await seeder.grow(graph, size)
            for bound in bounds:
                await measure(graph, texts, size, bound)
            await measure_entities(graph, seeder, size, queries)
        await graph.lifecycle.close()
    finally:
        server.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="100000,1000000")
    parser.add_argument("--bounds", default="0,5000,2000", help="RECALL_KEYWORD_MAX_DF values (0: the share alone)")
    parser.add_argument("--queries", type=int, default=150)
    args = parser.parse_args()
    asyncio.run(run([int(s) for s in args.sizes.split(",")], [int(b) for b in args.bounds.split(",")], args.queries))


if __name__ == "__main__":
    main()
