"""The vector index's one HNSW build, alone: CPU a point by size and by
configuration (issue 27's open problem, docs/performance.md).

    python -m benchmarks.scale_hnsw --size 50000 [--vectors text|clustered] [--fetch 100 --asks 200,116]

Loads `size` points of the scale loader's memories (benchmarks/scale_seed.py:
its payloads, and its random unit vectors; with --vectors text, vectors built
from its words' MiniLM vectors (benchmarks/scale_vectors.py); with --vectors
clustered, vectors drawn around a few hundred centres) into a fresh EdgeVectorIndex in a
bulk load, then times its one optimize(): wall seconds and the process's CPU
seconds (every thread; nothing else runs meanwhile), so the figure holds on a
shared machine as a CPU cost. Prints one JSON line.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import resource
import tempfile
import time
from datetime import timedelta
from pathlib import Path

import numpy as np
from qdrant_edge import AcornSearchParams, QuantizationSearchParams, Query, SearchParams, SearchRequest

from benchmarks.recall_latency import PROJECTS, vocabulary
from benchmarks.scale_seed import DAYS, TOPICS, Seeder
from benchmarks.scale_vectors import TextVectors
from services.core.adapters.edge_filter import to_edge
from services.core.adapters.edge_index import EdgeVectorIndex
from services.core.domain import vector_filter as vf
from services.core.domain.projection import VectorQuery, vector_payload

#: Searches a kind of filter is measured with (recall@10 against an exact search, and time).
SEARCHES = 100


def _cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def _rss_kib() -> dict[str, int]:
    """This process's resident memory after the build, anonymous and file-backed (the shard's mmaps), KiB."""
    out = {}
    for row in Path("/proc/self/status").read_text().splitlines():
        name, _, value = row.partition(":")
        if name in ("RssAnon", "RssFile"):
            out[name] = int(value.split()[0])
    return out


def _clustered(rng: np.random.Generator, count: int, dimension: int, centres: np.ndarray) -> np.ndarray:
    picks = centres[rng.integers(0, len(centres), size=count)]
    vectors = picks + 0.6 * rng.standard_normal((count, dimension)).astype(np.float32) / np.sqrt(dimension)
    return vectors / np.linalg.norm(vectors, axis=1, keepdims=True)


def _near(stored: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """A query near a stored memory, as a real one is: its vector with noise."""
    return stored[int(rng.integers(0, len(stored)))] + 0.02 * rng.standard_normal(stored.shape[1])


def _searches(
    index: EdgeVectorIndex,
    seeder: Seeder,
    stored: np.ndarray,
    rng: np.random.Generator,
    acorn: bool = False,
    ef: int | None = None,
    limit: int = 10,
    oversampling: float | None = None,
) -> dict:
    """Each kind of filter recall sends: the HNSW search's recall@10 against an
    exact search with the same filter, and its p50 in ms. The queries are
    stored vectors with noise (a query near a memory, as a real one is).
    With `acorn` the HNSW searches use Qdrant's ACORN (filtered searches
    explore neighbours' neighbours); `ef` is their beam (None: Qdrant's default)."""
    shard = index._shard
    if shard is None:
        raise RuntimeError("the index is not open")
    out = {}
    for kind in ("plain", "project", "topic", "topic_exact", "window"):
        found, times, short = 0, [], 0
        for i in range(SEARCHES):
            vector = _near(stored, rng)
            extra: dict = {}
            if kind == "project":
                extra["tags"] = (PROJECTS[i % len(PROJECTS)],)
            elif kind == "topic":
                extra["tags"] = (TOPICS[i % len(TOPICS)],)
            elif kind == "topic_exact":
                extra.update(tags=(TOPICS[i % len(TOPICS)],), tag_match="exact")
            elif kind == "window":
                end = seeder.now - timedelta(days=float(rng.uniform(0, DAYS - 30)))
                extra.update(window_start=end - timedelta(days=30), window_end=end)
            query = VectorQuery(
                vector=[float(x) for x in vector], tenant="default", limit=limit, current_at=seeder.now, **extra
            )
            request = {"query": Query.Nearest(query.vector), "limit": limit, "filter": to_edge(vf.vector_filter(query))}
            started = time.perf_counter()
            params = SearchParams(
                hnsw_ef=ef,
                acorn=AcornSearchParams(enable=True) if acorn else None,
                quantization=QuantizationSearchParams(rescore=True, oversampling=oversampling)
                if oversampling
                else None,
            )
            approximate = {p.id for p in shard.search(SearchRequest(**request, params=params))}
            times.append(time.perf_counter() - started)
            exact = {p.id for p in shard.search(SearchRequest(**request, params=SearchParams(exact=True)))}
            found += len(approximate & exact) / max(1, len(exact))
            short += len(approximate) < len(exact)
        out[kind] = {
            f"recall_at_{limit}": round(found / SEARCHES, 3),
            "short": short,
            "p50_ms": round(1000 * sorted(times)[len(times) // 2], 2),
        }
    return out


def _fetch_recall(
    index: EdgeVectorIndex, seeder: Seeder, stored: np.ndarray, rng: np.random.Generator, fetch: int, asks: list[int]
) -> dict:
    """What recall's vector arm keeps for each size of ask (its fetch plus
    the tie margin, services/recall/vector_arm.py): the share of an exact
    search's best `fetch` among the best `fetch` of an HNSW search asked for
    `ask` hits (the beam is at least the ask; the int8 index rescores only
    those), plain and within a project, and that search's p50 in ms."""
    shard = index._shard
    if shard is None:
        raise RuntimeError("the index is not open")
    out: dict = {}
    for kind in ("plain", "project"):
        found, times = dict.fromkeys(asks, 0.0), {ask: [] for ask in asks}
        for i in range(SEARCHES):
            vector = _near(stored, rng)
            extra = {"tags": (PROJECTS[i % len(PROJECTS)],)} if kind == "project" else {}
            query = VectorQuery(
                vector=[float(x) for x in vector], tenant="default", limit=fetch, current_at=seeder.now, **extra
            )
            request = {"query": Query.Nearest(query.vector), "filter": to_edge(vf.vector_filter(query))}
            exact = shard.search(SearchRequest(**request, limit=fetch, params=SearchParams(exact=True)))
            best = {p.id for p in exact}
            for ask in asks:
                started = time.perf_counter()
                hits = shard.search(SearchRequest(**request, limit=ask))
                times[ask].append(time.perf_counter() - started)
                kept = {p.id for p in sorted(hits, key=lambda p: -p.score)[:fetch]}
                found[ask] += len(kept & best) / max(1, len(best))
        out[kind] = {
            f"ask_{ask}": {
                f"recall_at_{fetch}": round(found[ask] / SEARCHES, 4),
                "p50_ms": round(1000 * sorted(times[ask])[SEARCHES // 2], 2),
            }
            for ask in asks
        }
    return out


async def probe(
    size: int,
    payload_links: str,
    vectors: str,
    quantization: str,
    acorn: bool = False,
    fetch: int = 0,
    asks: tuple[int, ...] = (),
    efs: tuple[int, ...] = (),
    limit: int = 10,
    oversampling: float | None = None,
) -> dict:
    words = vocabulary(np.random.default_rng(7), "locomo")
    seeder = Seeder(words, text_vectors=await TextVectors.embedded(words) if vectors == "text" else None)
    rng = np.random.default_rng(3)
    centres = rng.standard_normal((300, seeder.dimension)).astype(np.float32)
    centres /= np.linalg.norm(centres, axis=1, keepdims=True)
    with tempfile.TemporaryDirectory(prefix="hnsw-probe-") as tmp:
        index = EdgeVectorIndex(
            path=Path(tmp) / "memories",
            collection="memories",
            vector_size=seeder.dimension,
            optimize_every=1000,
            quantization=quantization,
            payload_links=payload_links,
        )
        index.open()
        started = time.perf_counter()
        sample = []  # some stored vectors, to search near
        async with index.bulk_load():
            for start in range(0, size, 2000):
                batch = seeder.batch(min(2000, size - start), start)
                if vectors == "clustered":
                    drawn = _clustered(rng, len(batch), seeder.dimension, centres)
                    for memory, vector in zip(batch, drawn, strict=True):
                        memory.embedding = vector.tolist()
                await index.upsert([(m.id, m.embedding, vector_payload(m)) for m in batch])
                sample.append(np.array(batch[0].embedding, dtype=np.float32))
            loaded = time.perf_counter() - started
            cpu, wall = _cpu(), time.perf_counter()
        build_wall, build_cpu = time.perf_counter() - wall, _cpu() - cpu
        rss = _rss_kib()
        segments = index._shard.info().segments_count if index._shard is not None else 0
        searches = _searches(index, seeder, np.stack(sample), rng, acorn, limit=limit, oversampling=oversampling)
        by_ef = {
            f"ef_{ef}": _searches(index, seeder, np.stack(sample), rng, acorn, ef, limit, oversampling) for ef in efs
        }
        fetched = _fetch_recall(index, seeder, np.stack(sample), rng, fetch, list(asks)) if fetch and asks else {}
        shard = sum(f.stat().st_size for f in (Path(tmp) / "memories").rglob("*") if f.is_file())
        parts: dict[str, int] = {}  # the shard's bytes by what holds them (a segment's files, the WAL)
        for f in (Path(tmp) / "memories").rglob("*"):
            if f.is_file():
                rel = f.relative_to(Path(tmp) / "memories").parts
                key = rel[2] if rel[0] == "segments" and len(rel) > 2 else rel[0]
                parts[key] = parts.get(key, 0) + f.stat().st_size
        await index.close()
    return {
        "size": size,
        "payload_links": payload_links,
        "vectors": vectors,
        "quantization": quantization,
        "acorn": acorn,
        "load_seconds": round(loaded, 1),
        "build_seconds": round(build_wall, 1),
        "build_cpu_seconds": round(build_cpu, 1),
        "build_cpu_ms_a_point": round(1000 * build_cpu / size, 3),
        "segments": segments,
        "shard_bytes_a_point": round(shard / size),
        "shard_parts_bytes_a_point": {k: round(v / size) for k, v in sorted(parts.items(), key=lambda kv: -kv[1])},
        "searches": searches,
        **({"searches_by_ef": by_ef} if by_ef else {}),
        **({"fetch_recall": fetched} if fetched else {}),
        "max_rss_mib": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024),
        "rss_anon_mib": round(rss.get("RssAnon", 0) / 1024),
        "rss_file_mib": round(rss.get("RssFile", 0) / 1024),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", type=int, default=50_000)
    parser.add_argument(
        "--payload-links", default="all", help="VECTOR_PAYLOAD_LINKS: all, selective, window, tenant or none"
    )
    parser.add_argument("--oversampling", type=float, default=None, help="VECTOR_OVERSAMPLING for the searches")
    parser.add_argument("--limit", type=int, default=10, help="hits each measured search asks for (recall asks 100)")
    parser.add_argument("--vectors", choices=("random", "clustered", "text"), default="random")
    parser.add_argument("--quantization", default="int8")
    parser.add_argument("--acorn", action="store_true", help="search with Qdrant's ACORN")
    parser.add_argument("--fetch", type=int, default=0, help="recall's vector fetch, to compare asks for it")
    parser.add_argument("--asks", default="", help="hits asked for that fetch, comma-separated (e.g. 200,116)")
    parser.add_argument("--efs", default="", help="search beams to measure the searches with too (e.g. 128,256)")
    args = parser.parse_args()
    asks = tuple(int(a) for a in args.asks.split(",") if a.strip())
    efs = tuple(int(e) for e in args.efs.split(",") if e.strip())
    report = asyncio.run(
        probe(
            args.size,
            args.payload_links,
            args.vectors,
            args.quantization,
            args.acorn,
            args.fetch,
            asks,
            efs,
            args.limit,
        )
    )
    print(json.dumps(report), flush=True)


if __name__ == "__main__":
    main()
