"""When a vector search scans rather than walks (domain/exact_search.py), and
SearchPlan following it on a stand-in for the shard whose walk misses points
(a real shard does so only at scale: docs/performance.md; the real shard's
scans: tests/integration/test_vector_exact_search.py)."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from qdrant_edge import Filter

from services.core.adapters.edge_search import EXACT_SEARCHES, SearchPlan
from services.core.domain.exact_search import narrowed, scan_after, scan_first
from services.core.domain.projection import VectorQuery

NOW = datetime(2026, 6, 1, tzinfo=UTC)


def query(**fields) -> VectorQuery:
    return VectorQuery(vector=[1.0, 0.0], tenant="a", limit=10, current_at=NOW, **fields)


@pytest.mark.parametrize(
    ("fields", "expected"),
    [
        ({}, False),
        ({"tags": ("project",)}, True),
        ({"window_start": NOW}, True),
        ({"window_end": NOW}, True),
        ({"exclude_tags": ("x",)}, False),  # drops few: the walk keeps its way
        ({"exclude_ids": ("m1",)}, False),
        ({"recorded_before": NOW}, False),
    ],
)
def test_narrowed_means_a_tag_or_a_time_window(fields, expected):
    assert narrowed(query(**fields)) is expected


def test_scan_first_only_a_narrowed_search_of_few_points():
    tagged = query(tags=("project",))
    assert scan_first(tagged, 5_000, 5_000) and not scan_first(tagged, 5_001, 5_000)
    assert not scan_first(query(), 10, 5_000)  # a plain search walks the whole graph
    assert not scan_first(tagged, 1, 0) and scan_first(tagged, 0, 0)


def test_scan_after_a_short_walk_unless_a_threshold_cut_it():
    tagged = query(tags=("project",))
    assert scan_after(tagged, 9) and not scan_after(tagged, 10)
    assert not scan_after(query(), 3)
    assert not scan_after(query(tags=("project",), min_score=0.8), 3)


class Shard:
    """qdrant-edge's EdgeShard as SearchPlan uses it: count(request) and
    search(request), the walk finding only `walked` of the points."""

    def __init__(self, points: int, walked: int, estimate: int):
        self.points, self.walked, self.estimate = points, walked, estimate
        self.searches: list[bool] = []  # exact or not, in order

    def count(self, request) -> int:
        assert request.exact is False  # the estimate: a tenth of a millisecond
        return self.estimate

    def search(self, request) -> list[int]:
        exact = bool(request.params is not None and request.params.exact)
        self.searches.append(exact)
        return list(range(min(request.limit, self.points if exact else self.walked)))


def counted(reason: str) -> float:
    return EXACT_SEARCHES.labels(reason)._value.get()


def test_a_short_walk_is_replaced_by_the_scan_of_the_points():
    shard = Shard(points=8_000, walked=4, estimate=20_000)
    plan = SearchPlan(acorn=True, oversampling=3.0, exact_below=10_000)
    short = counted("short")
    assert plan.search(shard, query(window_start=NOW), Filter(), False) == list(range(10))
    assert shard.searches == [False, True] and counted("short") == short + 1


def test_few_points_are_scanned_without_a_walk_and_plain_searches_walk():
    plan = SearchPlan(exact_below=10_000)
    shard = Shard(points=300, walked=2, estimate=600)
    small = counted("small")
    assert len(plan.search(shard, query(tags=("rare",)), Filter(), False)) == 10
    assert shard.searches == [True] and counted("small") == small + 1
    plain = Shard(points=10**6, walked=10, estimate=10**6)
    assert len(plan.search(plain, query(), Filter(), False)) == 10 and plain.searches == [False]


def test_the_search_params_carry_acorn_and_oversampling():
    walk, scan = SearchPlan(acorn=True, oversampling=3.0)._params(False), SearchPlan(oversampling=3.0)._params(True)
    assert walk.acorn.enable and walk.quantization.oversampling == 3.0 and walk.quantization.rescore
    assert scan.exact and scan.quantization.oversampling == 3.0
    assert SearchPlan()._params(False) is None  # Qdrant's defaults
