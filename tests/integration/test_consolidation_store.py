"""The consolidation store on a real FalkorDB: pages, batched writes with their
events, archive CAS, discovered links, MetaPatterns, run history, leases."""

from __future__ import annotations

import asyncio
from array import array
from dataclasses import replace
from datetime import timedelta

import pytest

from services.core.adapters.falkor import FalkorGraph
from services.core.adapters.falkor.consolidation import IN_PATTERN
from services.core.domain.association import Discovery
from services.core.domain.clustering import Cluster
from services.core.domain.consolidation import RunRecord
from services.core.domain.decay import RelevanceUpdate
from services.core.domain.model import EventKind, MemoryEvent, Relation
from services.core.domain.times import to_micros
from services.core.wiring import graph_store
from tests.integration.test_falkor_store import T0, memory, put

pytestmark = pytest.mark.integration

NOW_US = to_micros(T0 + timedelta(days=30))


def ids(n: int, prefix: str = "a") -> list[str]:
    return [f"{prefix}{i:04d}" for i in range(n)]


async def pending(store, kind: EventKind | None = None) -> list[MemoryEvent]:
    entries = await store.outbox.pending_outbox(older_than_us=2**62, limit=10_000)
    return [e.event for e in entries if kind is None or e.event.kind == kind]


async def relate(store, tenant: str, a: str, b: str, rel_type: str = "RELATES_TO") -> None:
    relation = Relation(a, b, rel_type, 0.5, T0)
    await store.writer.create_relations(tenant, [relation], [MemoryEvent.associated(tenant, relation)], now_us=1)


async def test_a_page_walk_covers_every_memory_of_the_tenant_once(store):
    mine = ids(23)
    await put(store, [memory(m) for m in mine] + [memory(m, tenant="other") for m in ids(5, "b")])
    await relate(store, "default", mine[0], mine[1])
    await relate(store, "default", mine[2], mine[0], "LEADS_TO")
    node_ids = await store.connection.query("MATCH (n:Memory) RETURN n.id, ID(n)")
    order = dict(node_ids.result_set)  # the walk's order: internal ids, not memory ids
    seen, cursor = [], -1
    while True:
        cursor, page = await store.consolidation.decay_page("default", cursor, 5)
        if not page:
            break
        assert len(page) <= 5 and cursor == order[page[-1].id]
        seen.extend(page)
    assert [r.id for r in seen] == sorted(mine, key=order.get)
    rows = {r.id: r for r in seen}
    assert (rows[mine[0]].edges, rows[mine[1]].edges, rows[mine[3]].edges) == (2, 1, 0)
    first = rows[mine[0]]
    assert (first.version, first.type, first.importance, first.timestamp) == (1, "Decision", 0.7, T0)
    assert first.relevance_score is None and not first.archived and not first.has_embedding
    assert await store.consolidation.tenants() == ["default", "other"]


async def edge_counts(store, tenant: str = "default") -> dict[str, int]:
    cursor, counts = -1, {}
    while True:
        cursor, page = await store.consolidation.decay_page(tenant, cursor, 2)
        if not page:
            return counts
        counts.update((r.id, r.edges) for r in page)


async def test_the_page_edge_count_follows_every_write_that_adds_or_removes_edges(store):
    a, b, c, d, e = ids(5)
    await put(store, [memory(m, embedding=[1.0, float(i)]) for i, m in enumerate((a, b, c, d))] + [memory(e)])
    await relate(store, "default", a, b)
    await relate(store, "default", b, a, "LEADS_TO")  # a second edge between the pair counts: 2 each
    await relate(store, "default", a, b)  # a repeat of the same edge is merged: still 2
    assert (await edge_counts(store))[a] == 2
    # Enrichment's links: SIMILAR_TO counts, MENTIONS (to an Entity) does not.
    await store.enrichment.link_similar("default", [(c, a, 0.9)], now_us=NOW_US)
    mentions = [(a, "Decision", ["entity:x"]), (c, "Decision", ["entity:x"])]
    await store.enrichment.link_entities_and_patterns("default", mentions, min_members=2, max_members=5, now_us=1)
    assert await edge_counts(store) == {a: 3, b: 2, c: 1, d: 0, e: 0}
    # Consolidation's association (and nothing for a pair already joined).
    made = await store.consolidation.link_discovered(
        "default",
        [Discovery(c, d, "DISCOVERED", 0.9, 0.7, "similar"), Discovery(a, c, "DISCOVERED", 0.9, 0.7)],
        now_us=NOW_US,
    )
    assert [(m.source_id, m.target_id) for m in made] == [(c, d)]
    assert await edge_counts(store) == {a: 3, b: 2, c: 2, d: 1, e: 0}
    # Supersession: the old memory and its replacement are joined by one edge.
    old = await store.reader.get_memory("default", e)
    new = memory("a0009")
    edge = Relation(e, new.id, "EVOLVED_INTO", 1.0, T0)
    events = [MemoryEvent.for_memory(EventKind.CREATED, new, T0), MemoryEvent.associated("default", edge)]
    assert await store.writer.supersede(replace(old, version=2), 1, new, edge, events, now_us=NOW_US)
    # A deleted memory's edges go from its neighbours' counts.
    await store.writer.delete_memories("default", [MemoryEvent.deleted("default", a, T0)], now_us=NOW_US)
    assert await edge_counts(store) == {b: 0, c: 1, d: 1, e: 1, new.id: 1}


async def test_write_relevance_writes_only_the_tenants_at_the_version_read_with_events_for_moves(store):
    a, b, c = ids(3)
    await put(store, [memory(a), memory(b), memory(c, tenant="other")])
    await store.outbox.delete_outbox([e.event_id for e in await store.outbox.pending_outbox(2**62, 100)])
    written = await store.consolidation.write_relevance(
        "default",
        [
            RelevanceUpdate(a, 1, 0.42, emit=True),
            RelevanceUpdate(b, 1, 0.5, emit=False),
            RelevanceUpdate(c, 1, 0.9, emit=True),  # another tenant's: untouched
            RelevanceUpdate("missing", 1, 0.9, emit=True),
        ],
        now_us=NOW_US,
    )
    assert sorted(written) == [a, b]
    got = await store.reader.get_memories("default", [a, b])
    assert (got[a].relevance_score, got[b].relevance_score) == (0.42, 0.5)
    assert got[a].version == 1  # derived data: no version bump
    assert (await store.reader.get_memory("other", c)).relevance_score is None
    events = await pending(store)
    assert [(e.kind, e.memory_id) for e in events] == [(EventKind.DECAYED, a)]
    # A stale version writes nothing.
    assert await store.consolidation.write_relevance("default", [RelevanceUpdate(a, 7, 0.1, True)], now_us=NOW_US) == []
    assert (await store.reader.get_memory("default", a)).relevance_score == 0.42


async def test_archive_is_compare_and_set_and_records_archived_events(store):
    a, b = ids(2)
    await put(store, [memory(a, embedding=[1.0, 0.0]), memory(b)])
    await store.outbox.delete_outbox([e.event_id for e in await store.outbox.pending_outbox(2**62, 100)])
    rows = {r.id: r for r in (await store.consolidation.decay_page("default", -1, 10))[1]}
    edited = replace(await store.reader.get_memory("default", b), content="edited", version=2)
    event = MemoryEvent.for_memory(EventKind.UPDATED, edited, T0)
    assert await store.writer.update_memory(edited, expected_version=1, event=event, now_us=1)
    await store.outbox.delete_outbox([e.event_id for e in await store.outbox.pending_outbox(2**62, 100)])
    archived = await store.consolidation.archive("default", [rows[a], rows[b]], now_us=NOW_US)
    assert archived == [a]  # b changed since it was read
    got = await store.reader.get_memories("default", [a, b])
    assert got[a].archived and got[a].version == 2 and to_micros(got[a].archived_at) == NOW_US
    assert not got[b].archived
    [event] = await pending(store)
    assert (event.kind, event.memory_id, event.version, event.has_embedding) == (EventKind.ARCHIVED, a, 2, True)
    # Archiving again (even at the new version) does nothing.
    again = {r.id: r for r in (await store.consolidation.decay_page("default", -1, 10))[1]}[a]
    assert again.archived and await store.consolidation.archive("default", [again], now_us=NOW_US) == []
    assert await store.consolidation.archive("other", [again], now_us=NOW_US) == []


async def test_samples_hold_only_current_memories_with_vectors_of_the_tenant(store):
    a, b, c, d, e = ids(5)
    await put(
        store,
        [
            memory(a, embedding=[1.0, 0.0]),
            memory(b, embedding=[0.0, 1.0], content="second"),
            memory(c),  # no vector
            memory(d, embedding=[1.0, 1.0], archived=True),
            memory(e, tenant="other", embedding=[1.0, 0.0]),
        ],
    )
    sample = await store.consolidation.association_sample("default", 10, now_us=NOW_US)
    assert sorted(s.id for s in sample) == [a, b]
    # Packed float32, not a list of floats: a clustering run holds thousands of them.
    vector = {s.id: s.embedding for s in sample}[b]
    assert isinstance(vector, array) and vector.typecode == "f" and list(vector) == [0.0, 1.0]
    assert len(await store.consolidation.association_sample("default", 1, now_us=NOW_US)) == 1
    page = await store.consolidation.cluster_inputs("default", "", 1, now_us=NOW_US)
    assert [s.id for s in page] == [a]
    page = await store.consolidation.cluster_inputs("default", a, 10, now_us=NOW_US)
    assert [(s.id, s.content, s.type) for s in page] == [(b, "second", "Decision")]


async def test_link_discovered_never_duplicates_and_never_crosses_tenants(store):
    a, b, c, d = ids(4)
    x = "zz-other"
    await put(store, [memory(m) for m in (a, b, c, d)] + [memory(x, tenant="other")])
    await relate(store, "default", b, a)  # already connected (reverse direction)
    assert await store.consolidation.connected_pairs("default", [a, b, c]) == {(a, b)}
    links = [
        Discovery(a, b, "DISCOVERED", 0.9, 0.7, "similar"),  # connected: skipped
        Discovery(a, c, "DISCOVERED", 0.88, 0.66, "similar"),
        Discovery(c, a, "CONTRADICTS", 0.9, 0.6, "negation"),  # the same pair again: made once
        Discovery(c, d, "CONTRADICTS", 0.91, 0.6, "negation"),
        Discovery(a, x, "DISCOVERED", 0.99, 0.9, "similar"),  # another tenant's memory
    ]
    made = await store.consolidation.link_discovered("default", links, now_us=NOW_US)
    assert sorted((m.source_id, m.target_id, m.type) for m in made) == [(a, c, "DISCOVERED"), (c, d, "CONTRADICTS")]
    again = await store.consolidation.link_discovered("default", links, now_us=NOW_US + 1)
    assert again == []
    result = await store.connection.query(
        "MATCH (s:Memory)-[e]->(t:Memory) WHERE type(e) IN ['DISCOVERED', 'CONTRADICTS'] "
        "RETURN s.id, type(e), t.id, e.similarity, e.confidence, e.reason, e.strength, e.created_at ORDER BY s.id"
    )
    assert result.result_set == [
        [a, "DISCOVERED", c, 0.88, 0.66, "similar", 0.88, NOW_US],
        [c, "CONTRADICTS", d, 0.91, 0.6, "negation", 0.91, NOW_US],
    ]
    crossed = await store.connection.query("MATCH (:Memory {tenant: 'default'})--(:Memory {tenant: 'other'}) RETURN 1")
    assert crossed.result_set == []
    associated = await pending(store, EventKind.ASSOCIATED)
    discovered = [e for e in associated if e.relation.type in ("DISCOVERED", "CONTRADICTS")]
    assert sorted((e.relation.source_id, e.relation.type) for e in discovered) == [
        (a, "DISCOVERED"),
        (c, "CONTRADICTS"),
    ]


async def _meta_patterns(store, tenant: str, limit: int) -> list[dict]:
    """The tenant's MetaPatterns as stored, newest first, with their member ids
    (closest to the centre first): read from the graph, as no port lists them."""
    result = await store.connection.query(
        f"""
        MATCH (p:MetaPattern {{tenant: $tenant}})
        WITH p ORDER BY p.created_at DESC, p.id LIMIT $limit
        OPTIONAL MATCH (m:Memory)-[e:{IN_PATTERN}]->(p)
        WITH p, m, e ORDER BY e.rank
        RETURN properties(p), collect(m.id)
        """,
        {"tenant": tenant, "limit": limit},
    )
    patterns = [{**dict(props), "member_ids": [m for m in members if m]} for props, members in result.result_set]
    return sorted(patterns, key=lambda p: (-p["created_at"], p["id"]))


async def test_write_clusters_replaces_the_tasks_patterns_and_never_labels_them_memory(store):
    members = ids(4)
    await put(store, [memory(m, embedding=[1.0, 0.0]) for m in members] + [memory("o1", tenant="other")])
    first = [Cluster(tuple(members[:3]), "3 Decision memories on x", 0.9, "Decision")]
    [pattern] = await store.consolidation.write_clusters("default", "cluster", first, now_us=NOW_US)
    await store.consolidation.write_clusters(
        "other", "cluster", [Cluster(("o1",), "other's", 1.0, "Decision")], now_us=NOW_US
    )
    [stored] = await _meta_patterns(store, "default", 10)
    assert stored["id"] == pattern and stored["member_ids"] == members[:3]
    assert (stored["summary"], stored["size"], stored["task"], stored["created_at"]) == (
        "3 Decision memories on x",
        3,
        "cluster",
        NOW_US,
    )
    labels = await store.connection.query("MATCH (p:MetaPattern) RETURN DISTINCT labels(p)")
    assert labels.result_set == [[["MetaPattern"]]]
    assert await store.reader.count_memories("default") == 4
    clustered = await pending(store, EventKind.CLUSTERED)
    assert sorted(e.memory_id for e in clustered if e.tenant == "default") == members[:3]
    # A second run replaces the first run's patterns (and only that tenant's).
    second = [Cluster((members[3], members[0], members[1]), "again", 0.8, "Decision")]
    [replacement] = await store.consolidation.write_clusters("default", "cluster", second, now_us=NOW_US + 5)
    [stored] = await _meta_patterns(store, "default", 10)
    assert stored["id"] == replacement != pattern and stored["member_ids"] == [members[3], members[0], members[1]]
    assert len(await _meta_patterns(store, "other", 10)) == 1
    # The edge count of decay counts memories only, not pattern membership.
    rows = {r.id: r.edges for r in (await store.consolidation.decay_page("default", -1, 10))[1]}
    assert rows[members[0]] == 0
    # Members deleted since they were read: the size follows; a pattern with none is not kept.
    await store.writer.delete_memories("default", [MemoryEvent.deleted("default", members[2], T0)], now_us=1)
    gone = [Cluster((members[2], "never-there"), "gone", 0.9, "Decision")]
    kept = [Cluster((members[0], members[1], members[2]), "kept", 0.9, "Decision")]
    [survivor] = await store.consolidation.write_clusters("default", "cluster", kept + gone, now_us=NOW_US + 7)
    [stored] = await _meta_patterns(store, "default", 10)
    assert (stored["id"], stored["size"], stored["member_ids"]) == (survivor, 2, [members[0], members[1]])
    # No clusters: the task's patterns go.
    assert await store.consolidation.write_clusters("default", "cluster", [], now_us=NOW_US + 9) == []
    assert await _meta_patterns(store, "default", 10) == []


def _run(tenant: str, n: int, task: str = "decay", dry_run: bool = False) -> RunRecord:
    started = T0 + timedelta(hours=n)
    return RunRecord(
        id=f"run-{tenant}-{n}",
        tenant=tenant,
        task=task,
        mode="full",
        dry_run=dry_run,
        started_at=started,
        finished_at=started + timedelta(seconds=3),
        counts={"scanned": n, "updated": 1},
        errors=["boom"] if n == 2 else [],
        trigger="scheduled",
    )


async def test_run_history_is_per_tenant_newest_first_bounded_and_survives_a_new_connection(store, settings):
    for n in range(5):
        await store.consolidation.record_run(_run("default", n, task="decay" if n % 2 else "cluster"), keep=4)
    await store.consolidation.record_run(_run("other", 9), keep=4)
    running = RunRecord("run-default-live", "default", "forget", "forget", True, T0 + timedelta(hours=9))
    await store.consolidation.record_run(running, keep=4)  # the oldest (run 1) goes
    running.finished_at = T0 + timedelta(hours=10)
    running.counts = {"archived": 2}
    await store.consolidation.record_run(running, keep=4)  # replaced by id, not added
    fresh: FalkorGraph = graph_store(settings.graph, settings.process, recall=settings.recall, backup=settings.backup)
    try:
        history = await fresh.consolidation.run_history("default", 10)
        assert [r.id for r in history] == ["run-default-live", "run-default-4", "run-default-3", "run-default-2"]
        assert history[0].counts == {"archived": 2} and history[0].finished_at == T0 + timedelta(hours=10)
        assert history[0].dry_run and history[3].errors == ["boom"] and not history[3].ok
        assert history[1] == _run("default", 4, task="cluster")
        assert [r.id for r in await fresh.consolidation.run_history("default", 10, task="decay")] == ["run-default-3"]
        assert len(await fresh.consolidation.run_history("default", 2)) == 2
        last = await fresh.consolidation.last_runs("default")
        assert {task: r.id for task, r in last.items()} == {"cluster": "run-default-4", "decay": "run-default-3"}
        assert [r.id for r in await fresh.consolidation.run_history("other", 10)] == ["run-other-9"]
        # A replacement that also prunes keeps its new values.
        running.counts = {"archived": 3}
        await fresh.consolidation.record_run(running, keep=2)
        history = await fresh.consolidation.run_history("default", 10)
        assert [r.id for r in history] == ["run-default-live", "run-default-4"]
        assert history[0].counts == {"archived": 3}
    finally:
        await fresh.lifecycle.close()


async def test_two_racing_acquire_lease_calls_exactly_one_wins(store, settings):
    others = [
        graph_store(settings.graph, settings.process, recall=settings.recall, backup=settings.backup) for _ in range(6)
    ]
    try:
        for round_ in range(10):
            task = f"decay-{round_}"
            results = await asyncio.gather(
                *(
                    g.consolidation.acquire_lease(task, "default", f"owner-{i}", now_us=NOW_US, ttl_us=60_000_000)
                    for i, g in enumerate(others)
                )
            )
            assert sum(results) == 1, results
            [lease] = [x for x in await store.consolidation.leases("default", now_us=NOW_US) if x.task == task]
            assert lease.owner == f"owner-{results.index(True)}"
    finally:
        for g in others:
            await g.lifecycle.close()
    nodes = await store.connection.query("MATCH (l:Lease) RETURN l.task, count(l)")
    assert all(count == 1 for _, count in nodes.result_set)


async def test_a_lease_is_held_renewed_released_by_its_owner_and_taken_over_when_expired(store):
    leases = store.consolidation
    ttl = 10_000_000
    assert await leases.acquire_lease("decay", "default", "a", now_us=NOW_US, ttl_us=ttl)
    assert not await leases.acquire_lease("decay", "default", "b", now_us=NOW_US + 1, ttl_us=ttl)
    assert await leases.acquire_lease("decay", "other", "b", now_us=NOW_US + 1, ttl_us=ttl)  # per tenant
    assert await leases.acquire_lease("decay", "default", "a", now_us=NOW_US + 2, ttl_us=ttl)  # held: extended
    assert await leases.renew_lease("decay", "default", "a", now_us=NOW_US + 5, ttl_us=ttl, progress={"done": 7})
    [held] = await leases.leases("default", now_us=NOW_US + 6)
    assert (held.owner, held.progress, to_micros(held.acquired_at)) == ("a", {"done": 7}, NOW_US)
    assert to_micros(held.expires_at) == NOW_US + 5 + ttl
    assert not await leases.release_lease("decay", "default", "b")
    assert not await leases.renew_lease("decay", "default", "b", now_us=NOW_US + 6, ttl_us=ttl)
    # Expired: another owner takes it over; the old owner can neither renew nor release it.
    later = NOW_US + 5 + ttl
    assert await leases.leases("default", now_us=later) == []
    assert await leases.acquire_lease("decay", "default", "b", now_us=later, ttl_us=ttl)
    [taken] = await leases.leases("default", now_us=later)
    assert (taken.owner, taken.progress, to_micros(taken.acquired_at)) == ("b", {}, later)
    assert not await leases.renew_lease("decay", "default", "a", now_us=later, ttl_us=ttl)
    assert not await leases.release_lease("decay", "default", "a")
    assert await leases.release_lease("decay", "default", "b")
    assert await leases.leases("default", now_us=later) == []
    assert await leases.acquire_lease("decay", "default", "a", now_us=later, ttl_us=ttl)
