"""FalkorGraph's graph views, analysis figures and id pages against a
real FalkorDB server; another tenant's nodes and edges are always present
and never show."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from services.core.domain.model import EventKind, Memory, MemoryEvent, Relation
from services.core.domain.times import to_micros
from services.core.domain.trust import ALL_STATES

pytestmark = pytest.mark.integration

T0 = datetime(2025, 1, 15, 10, 30, 0, 123456, tzinfo=UTC)  # a Wednesday, 10h UTC


def memory(memory_id: str, tenant: str = "acme", **fields) -> Memory:
    values = dict(
        id=memory_id,
        tenant=tenant,
        content=f"content of {memory_id}",
        type="Decision",
        confidence=0.9,
        importance=0.5,
        timestamp=T0,
        t_valid=T0,
        updated_at=T0,
        last_accessed=T0,
        recorded_at=T0,
        tags=["Project:Alpha"],
        tag_prefixes=["project", "project:alpha"],
    )
    values.update(fields)
    return Memory(**values)


async def put(store, *memories: Memory) -> None:
    events = [MemoryEvent.for_memory(EventKind.CREATED, m, T0) for m in memories]
    await store.writer.create_memories(list(memories), events, now_us=1)


async def link(store, tenant: str, source: str, target: str, kind: str = "RELATES_TO", strength: float = 0.5) -> None:
    relation = Relation(source, target, kind, strength, T0, {"reason": "test"} if kind == "PREFERS_OVER" else {})
    await store.writer.create_relations(tenant, [relation], [MemoryEvent.associated(tenant, relation)], now_us=1)


@pytest.fixture
async def graph(store):
    """acme: a - b - c - d in a chain (strengths 0.9, 0.5, 0.3), a - e, and
    a supersession b -> f; other: x linked to acme-looking ids of its own."""
    await put(
        store,
        memory("a", importance=0.9, type="Decision", tags=["db", "entity:tools:postgres"]),
        memory("b", importance=0.8, type="Preference", confidence=0.3, tags=["db", "entity:tools:postgres"]),
        memory("c", importance=0.7, type="Preference", timestamp=T0 + timedelta(days=40, hours=3)),
        memory("d", importance=0.2, type="Context", t_invalid=T0, archived=True),
        memory("e", importance=0.6, type="Insight", tags=["DB ", "entity:people:ada"]),
        memory("f", importance=0.5, type="Decision"),
        memory("x", tenant="other", importance=1.0, type="Habit", tags=["db"]),
        memory("y", tenant="other", importance=1.0, type="Habit"),
    )
    await link(store, "acme", "a", "b", strength=0.9)
    await link(store, "acme", "b", "c", "PREFERS_OVER", strength=0.5)
    await link(store, "acme", "c", "d", strength=0.3)
    await link(store, "acme", "e", "a", "SIMILAR_TO", strength=0.4)
    await link(store, "acme", "b", "f", "INVALIDATED_BY", strength=1.0)
    await link(store, "other", "x", "y", strength=1.0)
    await store.enrichment.link_entities_and_patterns(
        "acme",
        [("a", "Decision", ["entity:tools:postgres"]), ("f", "Decision", ["entity:tools:postgres"])],
        min_members=2,
        max_members=10,
        now_us=2,
    )
    return store


async def test_stats_count_the_tenants_memories_and_memory_edges(graph):
    stats = await graph.views.graph_stats("acme")
    assert stats.memories == 6 and stats.relations == 5
    assert stats.memories_by_type == {"Decision": 2, "Preference": 2, "Context": 1, "Insight": 1}
    assert stats.relations_by_type == {"RELATES_TO": 2, "PREFERS_OVER": 1, "SIMILAR_TO": 1, "INVALIDATED_BY": 1}
    other = await graph.views.graph_stats("other")
    assert (other.memories, other.relations, other.memories_by_type) == (2, 1, {"Habit": 2})
    assert (await graph.views.graph_stats("nobody")).memories == 0


async def test_frontier_is_one_hop_strongest_first_and_scoped(graph):
    found = await graph.views.frontier("acme", ["a"], ["a"], 10)
    assert [(m.id, s) for m, s in found] == [("b", 0.9), ("e", 0.4)]
    assert found[0][0].embedding is None and found[0][0].tenant == "acme"
    two = await graph.views.frontier("acme", ["b", "e"], ["a", "b", "e"], 10)
    assert [m.id for m, _ in two] == ["f", "c"]  # 1.0, then 0.5
    assert [m.id for m, _ in await graph.views.frontier("acme", ["b", "e"], ["a", "b", "e"], 1)] == ["f"]
    assert await graph.views.frontier("other", ["a"], [], 10) == []
    assert await graph.views.frontier("acme", ["x"], [], 10) == []


async def test_edges_among_keeps_only_edges_between_the_ids(graph):
    edges = await graph.views.edges_among("acme", ["a", "b", "c", "x", "y"], 10)
    assert [(e.source_id, e.type, e.target_id, e.strength) for e in edges] == [
        ("a", "RELATES_TO", "b", 0.9),
        ("b", "PREFERS_OVER", "c", 0.5),
    ]
    assert edges[1].properties == {"reason": "test"} and edges[1].created_at == T0
    assert len(await graph.views.edges_among("acme", ["a", "b", "c"], 1)) == 1
    assert await graph.views.edges_among("other", ["a", "b"], 10) == []


async def test_analysis_figures_cover_every_memory_of_the_tenant(graph):
    figures = await graph.views.analysis_figures("acme", now_us=to_micros(T0 + timedelta(days=1)), top=10)
    assert figures.total == 6
    assert figures.average_importance == pytest.approx((0.9 + 0.8 + 0.7 + 0.2 + 0.6 + 0.5) / 6)
    assert (figures.first, figures.last) == (T0, T0 + timedelta(days=40, hours=3))
    # d is archived (and expired); b is superseded; the rest current.
    assert figures.states == {"current": 4, "archived": 1, "expired": 0, "not_yet_valid": 0, "superseded": 1}
    assert sum(figures.trust_states.values()) == 6 and set(figures.trust_states) <= set(ALL_STATES)
    assert {t.type: t.count for t in figures.by_type} == {"Decision": 2, "Preference": 2, "Context": 1, "Insight": 1}
    preference = next(t for t in figures.by_type if t.type == "Preference")
    assert preference.average_confidence == pytest.approx(0.6)
    assert figures.confidence_buckets == {"low": 1, "medium": 0, "high": 5}
    assert figures.importance_buckets == {"low": 1, "medium": 3, "high": 2}
    epoch_day = to_micros(T0) // 86_400_000_000
    assert sorted(figures.days) == [(epoch_day, 5), (epoch_day + 40, 1)]
    assert sorted((h, n) for h, n, _ in figures.hours) == [(10, 5), (13, 1)]
    assert figures.tags[0] == ("db", 3) and ("project:alpha", 3) in figures.tags  # lowercased, trimmed
    assert figures.entity_tags == [("entity:tools:postgres", 2), ("entity:people:ada", 1)]
    assert figures.patterns == [("Decision", "entity:tools:postgres", 2)]
    assert figures.preferences == [("b", "content of b", "c", "content of c", None, 0.5)]
    empty = await graph.views.analysis_figures("nobody", now_us=0, top=10)
    assert empty.total == 0 and empty.average_importance is None and empty.first is None


async def test_export_pages_memory_ids_of_the_tenant(graph):
    assert await graph.export.memory_ids("acme", "", 2) == ["a", "b"]
    assert await graph.export.memory_ids("acme", "c", 2) == ["d", "e"]
    assert await graph.export.memory_ids("acme", "f", 10) == []
    assert await graph.export.memory_ids("other", "", 10) == ["x", "y"]


async def test_analysis_counts_as_superseded_only_memories_a_current_one_replaces(graph):
    """As the state pass: a dead successor supersedes nothing; a chain's dead
    links are walked through; a cycle back to the memory itself is no head."""
    dead = {"t_invalid": T0 - timedelta(hours=1)}
    await put(
        graph,
        memory("p", "beta"),  # -> q, expired: p stays current
        memory("q", "beta", **dead),
        memory("r", "beta", **dead),  # -> s (expired) -> t (current): r superseded through s
        memory("s", "beta", **dead),
        memory("t", "beta"),
        memory("u", "beta"),  # -> v (archived) -> u: a cycle back to u is no head
        memory("v", "beta", archived=True),
        memory("w", "beta"),  # -> x, not yet valid: w stays current
        memory("x", "beta", t_valid=T0 + timedelta(days=30)),
    )
    for source, target in (("p", "q"), ("r", "s"), ("s", "t"), ("u", "v"), ("v", "u"), ("w", "x")):
        await link(graph, "beta", source, target, "INVALIDATED_BY", strength=1.0)
    figures = await graph.views.analysis_figures("beta", now_us=to_micros(T0 + timedelta(days=1)), top=10)
    # r and s are superseded (t is current); q expired; v archived (u, its successor, is current, but archived
    # comes after superseded: v is superseded by u); x not yet valid; p, t, u, w current.
    assert figures.states == {"current": 4, "archived": 0, "expired": 1, "not_yet_valid": 1, "superseded": 3}
    # A chain longer than the bound finds no head.
    short = await graph.views.analysis_figures("beta", now_us=to_micros(T0 + timedelta(days=1)), top=10, max_hops=1)
    assert short.states["superseded"] == 2  # s (-> t) and v (-> u); r's head is two hops away
