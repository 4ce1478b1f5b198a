"""One search of the embedded index: a walk of its HNSW graph, or an exact
scan of the points its filter passes (domain/exact_search.py says when), with
the int8 copies read deeper than the hits asked for (VECTOR_OVERSAMPLING).

Runs on the index's worker thread, under its lock: the estimate, the search
and a scan after a short walk see one state of the shard."""

from __future__ import annotations

from dataclasses import dataclass

from prometheus_client import Counter
from qdrant_edge import (
    AcornSearchParams,
    CountRequest,
    EdgeShard,
    Filter,
    PayloadSelector,
    QuantizationSearchParams,
    Query,
    SearchParams,
    SearchRequest,
)

from services.core.domain import exact_search
from services.core.domain.projection import VectorQuery

#: What a search without payload still reads of each hit: the memory id.
MEMORY_ID = PayloadSelector.Include(["memory_id"])

EXACT_SEARCHES = Counter(
    "memgrid_vector_exact_searches_total",
    "Narrowed vector searches scanned exactly: few points passed (small), or a graph walk came back short (short)",
    ["reason"],
)


@dataclass(frozen=True, slots=True)
class SearchPlan:
    """How this shard searches: ACORN on its graph walks (VECTOR_SEARCH_ACORN, when
    the shard lacks links for a narrowing field), the int8 copies read this many
    times deeper than the hits asked for (VECTOR_OVERSAMPLING; None: Qdrant's
    default), and the estimate of passing points at or under which a narrowed
    search scans them (VECTOR_EXACT_BELOW)."""

    acorn: bool = False
    oversampling: float | None = None
    exact_below: int = 0

    def _params(self, exact: bool) -> SearchParams | None:
        quantization = (
            QuantizationSearchParams(rescore=True, oversampling=self.oversampling) if self.oversampling else None
        )
        if exact:
            return SearchParams(exact=True, quantization=quantization)
        if not self.acorn and quantization is None:
            return None
        return SearchParams(acorn=AcornSearchParams(enable=True) if self.acorn else None, quantization=quantization)

    def search(self, shard: EdgeShard, query: VectorQuery, where: Filter, with_payload: bool) -> list:
        """The query's hits (Qdrant's scored points), best first."""

        def run(exact: bool) -> list:
            request = SearchRequest(
                query=Query.Nearest(query.vector),
                limit=query.limit,
                filter=where,
                params=self._params(exact),
                with_payload=True if with_payload else MEMORY_ID,
                score_threshold=query.min_score,
            )
            return shard.search(request)

        if exact_search.narrowed(query):
            estimated = shard.count(CountRequest(exact=False, filter=where))
            if exact_search.scan_first(query, estimated, self.exact_below):
                EXACT_SEARCHES.labels("small").inc()
                return run(exact=True)
        hits = run(exact=False)
        if exact_search.scan_after(query, len(hits)):
            EXACT_SEARCHES.labels("short").inc()
            return run(exact=True)
        return hits
