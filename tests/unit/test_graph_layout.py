"""Which graph holds a tenant (domain/graph_layout.py) and which graph a query
goes to (adapters/falkor/routing.py): no network."""

from __future__ import annotations

import pytest

from services.core.adapters.falkor.routing import GraphRouter, UnroutedQuery, tenants_in
from services.core.domain.graph_layout import GraphLayout, bucket_of


def test_the_shared_layout_is_one_graph_named_as_before():
    layout = GraphLayout("memories")
    assert layout.graphs() == ("memories",)
    assert {layout.graph_for(t) for t in ("acme", "other", "x" * 64)} == {"memories"}


def test_a_bucket_is_the_same_in_every_process_and_spreads_tenants():
    # SHA-1, not hash(): Python salts str hashes per process, a layout must not move between restarts.
    assert (
        bucket_of("acme", 64)
        == bucket_of("acme", 64)
        == int.from_bytes(__import__("hashlib").sha1(b"acme").digest()[:8], "big") % 64
    )
    counts = [0] * 16
    for n in range(16_000):
        counts[bucket_of(f"tenant-{n}", 16)] += 1
    assert min(counts) > 800 and max(counts) < 1200  # about 1,000 each


def test_a_bucket_layout_names_its_graphs_after_the_stem():
    layout = GraphLayout("memories", "bucket", 4)
    assert layout.graphs() == ("memories:b0", "memories:b1", "memories:b2", "memories:b3")
    assert layout.graph_for("acme") == f"memories:b{bucket_of('acme', 4)}"
    assert all(layout.graph_for(f"t{n}") in layout.graphs() for n in range(100))


@pytest.mark.parametrize("bad", [{"mode": "tenant"}, {"mode": "bucket", "buckets": 0}])
def test_a_layout_that_is_not_offered_is_refused(bad):
    with pytest.raises(ValueError):
        GraphLayout("memories", **bad)


def test_tenants_are_found_in_nested_rows():
    params = {"rows": [{"node": {"tenant": "a"}, "outbox": {"tenant": "a"}}, {"node": {"tenant": "b"}}], "n": 1}
    assert tenants_in(params) == {"a", "b"}
    assert tenants_in({"tenant": None, "ids": ["tenant"]}) == set()


def two_tenants_in_two_buckets(layout: GraphLayout) -> tuple[str, str]:
    first = "acme"
    other = next(f"t{n}" for n in range(1000) if layout.graph_for(f"t{n}") != layout.graph_for(first))
    return first, other


def test_a_query_goes_to_its_tenants_graph():
    layout = GraphLayout("g", "bucket", 8)
    router = GraphRouter(layout)
    a, b = two_tenants_in_two_buckets(layout)
    assert router.route({"tenant": a, "x": 1}) == layout.graph_for(a)
    assert router.route({"rows": [{"tenant": b}]}) == layout.graph_for(b)
    # $tenant is what the query filters on: it decides over rows of another tenant.
    assert router.route({"tenant": a, "outbox": {"tenant": b}}) == layout.graph_for(a)
    assert router.route({"ids": [1]}, tenant=b) == layout.graph_for(b)
    assert router.route({"tenant": a}, graph="g:b7") == "g:b7"


def test_a_query_of_no_tenant_or_of_two_graphs_is_refused_not_guessed():
    layout = GraphLayout("g", "bucket", 8)
    router = GraphRouter(layout)
    a, b = two_tenants_in_two_buckets(layout)
    with pytest.raises(UnroutedQuery, match="names no tenant"):
        router.route({"limit": 5})
    with pytest.raises(UnroutedQuery, match="spans 2 graphs"):
        router.route({"rows": [{"tenant": a}, {"tenant": b}]})
    groups = router.by_graph([a, b, a], lambda t: t)
    assert groups == {layout.graph_for(a): [a, a], layout.graph_for(b): [b]}


def test_the_shared_layout_routes_everything_to_its_graph_without_looking():
    router = GraphRouter(GraphLayout("memories"))
    assert router.single
    assert router.route({"limit": 5}) == router.route({"rows": [{"tenant": "a"}, {"tenant": "b"}]}) == "memories"
