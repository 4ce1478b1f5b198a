"""A narrowed search of the embedded index (a tag, a time window) scans the
points its filter passes when they are few, and after a walk of the HNSW
graph that came back short (edge_search.SearchPlan, domain/exact_search.py),
on real qdrant-edge with its graph built. A walk that misses points the
filter passes needs a large clustered shard (docs/performance.md: a rebuilt
100k shard, a 30-day window); tests/unit/test_exact_search.py shows the scan
replacing such a walk's hits on a stand-in for the shard."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta

import numpy as np
import pytest
from qdrant_edge import Query, SearchParams, SearchRequest

from services.core.adapters.edge_filter import to_edge
from services.core.adapters.edge_index import EdgeVectorIndex
from services.core.adapters.edge_search import EXACT_SEARCHES
from services.core.domain import vector_filter as vf
from services.core.domain.model import Memory
from services.core.domain.projection import VectorQuery, vector_payload

pytestmark = pytest.mark.integration

NOW = datetime(2026, 6, 1, tzinfo=UTC)
DIM = 384  # Qdrant walks the graph for a filter passing more than 10 MB of vectors: 6,667 points at 384
ISLANDS, RECENT_EACH, OLD_EACH = 800, 10, 12
RECENT = ISLANDS * RECENT_EACH
RARE = 5  # memories with the tag "rare": fewer than a search asks for


@pytest.fixture(scope="module")
def clusters(tmp_path_factory):
    """A shard made and optimised once (its graph built): islands far apart,
    each of recent and old memories, the first RARE tagged "rare"; its points
    and a query near the first island."""
    rng = np.random.default_rng(3)
    centres = rng.normal(size=(ISLANDS, DIM))
    rows = []
    for centre in centres:
        for age_days, count, tag in ((5, RECENT_EACH, "recent"), (200, OLD_EACH, "old")):
            for _ in range(count):
                vector = centre + rng.normal(scale=0.15, size=DIM)
                moment = NOW - timedelta(days=age_days + float(rng.uniform(0, 10)))
                memory = Memory(
                    id=str(uuid.uuid4()), tenant="a", content="x", type="Context", confidence=0.5, importance=0.5,
                    timestamp=moment, t_valid=moment, updated_at=NOW, last_accessed=NOW, recorded_at=moment,
                    tags=[tag, *(["rare"] if len(rows) < RARE else [])], tag_prefixes=[tag],
                    embedding=[float(x) for x in vector / np.linalg.norm(vector)],
                )  # fmt: skip
                rows.append((memory.id, memory.embedding, vector_payload(memory)))
    query = centres[0] + rng.normal(scale=0.15, size=DIM)
    return tmp_path_factory.mktemp("exact") / "memories", rows, [float(x) for x in query / np.linalg.norm(query)]


async def _index(clusters, **settings) -> EdgeVectorIndex:
    path, rows, _ = clusters
    index = EdgeVectorIndex(path=path, collection="memories", vector_size=DIM, optimize_every=10**9, **settings)
    index.open()
    if await index.count() == 0:
        async with index.bulk_load():
            for start in range(0, len(rows), 1000):
                await index.upsert(rows[start : start + 1000])
        await index.optimize()
    return index


def _recent(vector: list[float], limit: int = 50) -> VectorQuery:
    return VectorQuery(vector=vector, tenant="a", limit=limit, current_at=NOW, window_start=NOW - timedelta(days=30))


def _exact(index: EdgeVectorIndex, query: VectorQuery) -> list[str]:
    """What an exact scan of the shard finds, straight from qdrant-edge."""
    request = SearchRequest(
        query=Query.Nearest(query.vector), limit=query.limit, filter=to_edge(vf.vector_filter(query)),
        params=SearchParams(exact=True), with_payload=True,
    )  # fmt: skip
    return [str(p.payload["memory_id"]) for p in index._shard.search(request)]


def _walked(index: EdgeVectorIndex, query: VectorQuery) -> int:
    request = SearchRequest(
        query=Query.Nearest(query.vector), limit=query.limit, filter=to_edge(vf.vector_filter(query)), params=None
    )
    return len(index._shard.search(request))


def _counted(reason: str) -> float:
    return EXACT_SEARCHES.labels(reason)._value.get()


async def test_a_walk_that_comes_back_short_is_followed_by_a_scan(clusters):
    index = await _index(clusters, exact_below=0)  # never a scan first
    try:
        _, _, vector = clusters
        rare = VectorQuery(vector=vector, tenant="a", limit=50, current_at=NOW, tags=("rare",), tag_match="exact")
        assert _walked(index, rare) == RARE < rare.limit
        short = _counted("short")
        [hits] = await index.search_many([rare])
        assert [h.id for h in hits] == _exact(index, rare) and len(hits) == RARE
        assert _counted("short") == short + 1
        # A window whose walk finds as many as asked for is not scanned.
        query = _recent(vector)
        assert index._shard.info().indexed_vectors_count == len(clusters[1])  # the graph is built
        [found] = await index.search_many([query])
        assert len(found) == query.limit and _counted("short") == short + 1
    finally:
        await index.close()


async def test_a_search_narrowed_to_few_points_scans_them_first(clusters):
    index = await _index(clusters, exact_below=RECENT * 3)  # the estimate is an upper bound of the 7,000
    try:
        _, _, vector = clusters
        query = _recent(vector)
        small, short = _counted("small"), _counted("short")
        [hits] = await index.search_many([query])
        assert [h.id for h in hits] == _exact(index, query)
        assert _counted("small") == small + 1 and _counted("short") == short
        # A plain search is never scanned: its walk has the whole graph.
        [plain] = await index.search_many([VectorQuery(vector=vector, tenant="a", limit=50, current_at=NOW)])
        assert len(plain) == 50 and _counted("small") == small + 1
    finally:
        await index.close()


async def test_a_score_threshold_may_leave_a_window_short_without_a_scan(clusters):
    """A threshold cuts hits by itself: a short answer then says nothing of the walk."""
    index = await _index(clusters, exact_below=0)
    try:
        _, _, vector = clusters
        query = VectorQuery(
            vector=vector, tenant="a", limit=50, current_at=NOW, window_start=NOW - timedelta(days=30), min_score=0.99
        )
        short = _counted("short")
        [hits] = await index.search_many([query])
        assert hits == [] and _counted("short") == short
    finally:
        await index.close()
