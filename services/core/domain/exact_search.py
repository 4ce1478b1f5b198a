"""When a vector search scans the points that pass its filter exactly rather
than walking the HNSW graph (pure; edge_search.py applies it).

The embedded index builds HNSW links of their own for the tenant and, by
default, for slices of time (VECTOR_PAYLOAD_LINKS), not for tags: a search
narrowed to a tag (or, on a shard made without time links, to a window)
walks the whole graph and keeps what passes. Where what passes is a small or
clustered part of the graph, the walk reaches few of them and stops: with
tenant links only, at 100k memories a 30-day window (8 % of them) came back
with fewer than the hits asked for in 9 searches of 100, one with 12 of
positive score where a scan found 116, and at 1M a project tag (2 %) gave
recall 63 vector hits of 100 on average. A scan of the passing points is
exact and costs in proportion to them, so a narrowed search:

- scans when the index's estimate of the points passing (an upper bound
  from its payload indexes, read in a tenth of a millisecond) is at most
  `exact_below` (VECTOR_EXACT_BELOW);
- else walks the graph, and scans after all when the walk came back with
  fewer hits than asked for (without a score threshold, which may leave
  fewer hits than asked on its own).
"""

from __future__ import annotations

from services.core.domain.projection import VectorQuery


def narrowed(query: VectorQuery) -> bool:
    """Whether the search keeps only part of its tenant's points by their
    tags or time (the filters the graph has no links for); the state terms
    (archived, not yet valid, expired) drop few points and are not counted."""
    return bool(query.tags or query.window_start is not None or query.window_end is not None)


def scan_first(query: VectorQuery, estimated: int, exact_below: int) -> bool:
    """Scan rather than walk: a narrowed search whose passing points are estimated at most `exact_below`."""
    return narrowed(query) and estimated <= exact_below


def scan_after(query: VectorQuery, found: int) -> bool:
    """Scan after a walk that came back short: the walk lost its way, unless a score threshold cut the hits."""
    return narrowed(query) and query.min_score is None and found < query.limit
