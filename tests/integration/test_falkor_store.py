"""FalkorGraph against a real FalkorDB server."""

from __future__ import annotations

import asyncio
import time
from datetime import UTC, datetime, timedelta

import pytest

from devstack.servers import free_port, start_falkordb
from services.core.adapters.falkor import FalkorGraph
from services.core.adapters.falkor.connection import FalkorConnection
from services.core.adapters.falkor.reads import EntityBounds, FalkorMemoryReader
from services.core.domain.errors import FailedPrecondition, Unavailable
from services.core.domain.model import EventKind, Memory, MemoryEvent, Relation
from services.core.domain.recall_request import Scope
from services.core.domain.recall_text import DF_REACH

pytestmark = pytest.mark.integration

T0 = datetime(2025, 1, 15, 10, 30, 0, 123456, tzinfo=UTC)


def memory(memory_id: str, tenant: str = "default", **fields) -> Memory:
    values = dict(
        id=memory_id,
        tenant=tenant,
        content=f"content of {memory_id}",
        type="Decision",
        confidence=0.9,
        importance=0.7,
        timestamp=T0,
        t_valid=T0,
        updated_at=T0,
        last_accessed=T0,
        recorded_at=T0,
        tags=["Project:Alpha", "db"],
        tag_prefixes=["project", "project:alpha", "db"],
        metadata={"n": 3, "nested": {"x": [1, 2.5, "s"]}, "quote": 'it\'s "quoted"'},
    )
    values.update(fields)
    return Memory(**values)


async def put(store, memories: list[Memory]) -> None:
    """Create memories with their CREATED events, as ingest does."""
    events = [MemoryEvent.for_memory(EventKind.CREATED, m, T0) for m in memories]
    await store.writer.create_memories(memories, events, now_us=1)


async def test_create_and_get_round_trips_every_field(store):
    full = memory(
        "m1",
        embedding=[0.5, -0.25, 0.125],
        t_invalid=T0 + timedelta(days=7),
        enriched_at=T0,
        summary="First sentence.",
        archived=True,
        relevance_score=0.42,
        version=3,
    )
    await put(store, [full, memory("m2")])
    assert await store.reader.get_memory("default", "m1") == full
    assert (await store.reader.get_memory("default", "m2")).t_invalid is None


async def test_every_read_is_scoped_to_the_tenant(store):
    await put(store, [memory("a1", tenant="a"), memory("b1", tenant="b")])
    assert await store.reader.get_memory("a", "b1") is None
    assert (await store.reader.get_memory("b", "b1")).tenant == "b"
    assert await store.reader.count_memories("a") == 1
    assert await store.reader.count_memories() == 2
    await store.reader.touch_memories("a", ["b1"], 0)  # another tenant's id: nothing changes
    assert (await store.reader.get_memory("b", "b1")).last_accessed == T0


async def test_the_enrichment_backlog_counts_are_the_tenants_own(store):
    await put(
        store,
        [
            memory("a1", tenant="a"),
            memory("a2", tenant="a", enriched_at=T0, embedding=[0.1, 0.2]),
            memory("b1", tenant="b"),
            memory("b2", tenant="b"),
        ],
    )
    assert (await store.enrichment.count_unenriched("a"), await store.enrichment.count_unenriched("b")) == (1, 2)
    assert (await store.enrichment.count_unembedded("a"), await store.enrichment.count_unembedded("b")) == (1, 2)
    assert await store.enrichment.count_unenriched("c") == 0


async def test_a_scan_pages_through_one_tenant_or_every_tenant(store):
    await put(store, [memory(f"{tenant}{n}", tenant=tenant) for n in range(3) for tenant in ("a", "b")])

    async def scan(tenant):
        seen, cursor = [], -1
        while True:
            cursor, page = await store.index_source.scan_memories(cursor, 2, tenant)
            if not page:
                return seen
            seen += [m.id for m in page]

    assert sorted(await scan("a")) == ["a0", "a1", "a2"]
    assert sorted(await scan(None)) == ["a0", "a1", "a2", "b0", "b1", "b2"]
    assert await scan("c") == []


async def test_touch_moves_last_accessed_only(store):
    await put(store, [memory("m1")])
    later = T0 + timedelta(hours=1)
    await store.reader.touch_memories("default", ["m1"], int(later.timestamp() * 1_000_000))
    touched = await store.reader.get_memory("default", "m1")
    assert touched.last_accessed == later and touched.version == 1


async def test_schema_creation_is_idempotent(store):
    await store.lifecycle.ensure_schema()
    indexes = await store.connection.query("CALL db.indexes() YIELD label, properties RETURN label, properties")
    indexed = {p for label, props in indexes.result_set if label == "Memory" for p in props}
    assert {"id", "tenant"} <= indexed


async def test_status_reports_count_and_unavailability(store, settings):
    await put(store, [memory("m1")])
    status = await store.lifecycle.status()
    assert status.ok and status.figures["memories"] == 1.0
    dead = FalkorGraph(host="127.0.0.1", port=free_port(), graph="g", request_retry_seconds=0.3)
    assert (await dead.lifecycle.status()).status == "unavailable"
    with pytest.raises(Unavailable):
        await dead.reader.get_memory("default", "x")


async def test_data_survives_a_restart_and_the_store_waits_for_it(tmp_path):
    data = tmp_path / "falkordb"
    server = start_falkordb(free_port(), data)
    store = FalkorGraph(host="127.0.0.1", port=server.port, graph="persist", wait_seconds=20)
    try:
        await store.lifecycle.ensure_schema()
        await put(store, [memory("kept")])
        server.stop()
        with pytest.raises(Unavailable):
            await FalkorGraph(
                host="127.0.0.1", port=server.port, graph="persist", request_retry_seconds=0.3
            ).reader.get_memory("default", "kept")
        server = start_falkordb(server.port, data)
        assert (await store.reader.get_memory("default", "kept")).content == "content of kept"
    finally:
        await store.lifecycle.close()
        server.stop()


@pytest.mark.parametrize(
    "text",
    [
        "line\nbreak\ttab\rreturn",
        'quote " backslash \\ and \\n literal',
        "ctrl \x01\x1f \b \f",
        "émoji 🎉 中文 \u2028",
        'looks like a key": 1, "id":',
        "\\u0041 is not A",
    ],
)
async def test_any_text_round_trips_exactly(store, text):
    m = memory("tricky", content=text, tags=[text, "t"], metadata={"k": text, "tiny": 1e-7, "big": 2**53})
    await put(store, [m])
    got = await store.reader.get_memory("default", "tricky")
    assert (got.content, got.tags, got.metadata) == (text, [text, "t"], m.metadata)


async def test_capped_document_frequencies_stop_counting_at_the_cap(store):
    await put(store, [memory(f"df-{i}", content=f"common word{i % 3} rare{i}") for i in range(12)])
    capped = await store.text.document_frequencies("default", "content", ["common", "word0", "rare5", "absent"], cap=5)
    assert capped == {"common": 5, "word0": 4, "rare5": 1, "absent": 0}
    # A count that stopped at the cap does not answer a request for more; one below it does.
    exact = await store.text.document_frequencies("default", "content", ["common", "word0", "rare5", "absent"])
    assert exact == {"common": 12, "word0": 4, "rare5": 1, "absent": 0}
    await store.connection.query("MATCH (n:Memory) WHERE n.id STARTS WITH 'df-' DETACH DELETE n")
    assert await store.text.document_frequencies("default", "content", ["common", "word0"], cap=5) == {
        "common": 12,
        "word0": 4,
    }


async def test_the_arms_words_are_counted_in_one_query_and_cached_for_each_field(store):
    await put(store, [memory(f"af-{i}", content=f"common word{i % 3}", tags=["common"]) for i in range(6)])
    queries = []
    real_query = store.connection.query

    async def counting(cypher, params=None, **options):
        queries.append(params or {})
        return await real_query(cypher, params, **options)

    store.connection.query = counting
    await store.text.arm_frequencies("default", ["keyword", "tag", "metadata"], ["common", "word0", "absent"], cap=4)
    assert len(queries) == 1
    # Each field's counts are now cached: the per-field reads make no query.
    assert await store.text.document_frequencies("default", "content", ["common", "word0", "absent"], cap=4) == {
        "common": 4,
        "word0": 2,
        "absent": 0,
    }
    assert await store.text.document_frequencies("default", "search_tags", ["common", "word0"], cap=4) == {
        "common": 4,
        "word0": 0,
    }
    assert await store.text.document_frequencies("default", "search_meta", ["common"], cap=4) == {"common": 0}
    assert len(queries) == 1
    # A count that stopped at the cap is counted again for a higher one; exact ones are not.
    assert await store.text.document_frequencies("default", "content", ["common", "word0"], cap=10) == {
        "common": 6,
        "word0": 2,
    }
    assert len(queries) == 2 and "common" in queries[1].values() and "word0" not in queries[1].values()


async def test_a_count_under_way_is_waited_for_not_taken_again(store):
    await put(store, [memory(f"fl-{i}", content=f"flight word{i % 2}") for i in range(6)])
    queries = []
    real_query = store.connection.query

    async def counting(cypher, params=None, **options):
        queries.append(params or {})
        await asyncio.sleep(0.05)  # long enough for the other requests to find the count under way
        return await real_query(cypher, params, **options)

    store.connection.query = counting
    try:
        wide, narrow, exact = await asyncio.gather(
            store.text.document_frequencies("default", "content", ["flight", "word0"], cap=100),
            store.text.document_frequencies("default", "content", ["flight"], cap=4),
            store.text.document_frequencies("default", "content", ["word1"]),
        )
        assert wide == {"flight": 6, "word0": 3} and narrow == {"flight": 6} and exact == {"word1": 3}
        # The narrow request waited for the wide count; word1 was counted on its own.
        assert len(queries) == 2
        # A count that fails leaves its waiters to count for themselves.
        fails = True

        async def failing(cypher, params=None, **options):
            nonlocal fails
            queries.append(params or {})
            await asyncio.sleep(0.05)
            if fails:
                fails = False
                raise ConnectionError("lost")
            return await real_query(cypher, params, **options)

        store.connection.query = failing
        first, second = await asyncio.gather(
            store.text.document_frequencies("default", "content", ["flight"], recount=True),
            store.text.document_frequencies("default", "content", ["flight"], recount=True),
            return_exceptions=True,
        )
        assert isinstance(first, ConnectionError) and second == {"flight": 6}
    finally:
        store.connection.query = real_query


async def test_the_keyword_arm_leaves_out_common_words_and_bounds_the_rarest_word_fallback(store):
    # "often" in 13 memories, "sometimes" in 6, "once" in 1; max_df 4 leaves out the first two.
    def numbered(i: int) -> Memory:
        half = "late" if i >= 6 else "early"
        content = " ".join(w for w, every in (("often", 1), ("sometimes", 2)) if i % every == 0)
        return memory(f"kw-{i}", content=content, tags=[half], tag_prefixes=[half])

    for i in range(12):  # one at a time: the index's order is the order they were written
        await put(store, [numbered(i)])
    await put(store, [memory("kw-once", content="once often")])
    scope = Scope(tenant="default", at=T0 + timedelta(days=1))
    late = Scope(tenant="default", at=scope.at, tags=("late",))

    async def found(words: list[str], within: Scope = scope, **options) -> set[str]:
        return {h.id for h in await store.text.search_text(within, "keyword", words, 50, max_df=4, **options)}

    assert await found(["often", "once"]) == {"kw-once"}  # the common word is left out
    # Every word common: the rarest ("sometimes", 6 <= DF_REACH x 4) alone, read in full...
    assert await found(["often", "sometimes"]) == {f"kw-{i}" for i in range(0, 12, 2)}
    assert await found(["often", "sometimes"], late) == {"kw-6", "kw-8", "kw-10"}
    # ... or reading at most scan of its matches, the scope applied to
    # those read: the first three are all "early", so "late" finds none of them.
    assert await found(["often", "sometimes"], scan=3) == {"kw-0", "kw-2", "kw-4"}
    assert await found(["often", "sometimes"], late, scan=3) == set()
    # Words under max_df are searched rarest first while their matches add up
    # to scan: "once" (1) and "sometimes" (6) within 7, "sometimes" left out within 6.
    within = {h.id for h in await store.text.search_text(scope, "keyword", ["sometimes", "once"], 50, max_df=6, scan=7)}
    assert within == {"kw-once"} | {f"kw-{i}" for i in range(0, 12, 2)}
    assert {
        h.id for h in await store.text.search_text(scope, "keyword", ["sometimes", "once"], 50, max_df=6, scan=6)
    } == {"kw-once"}
    # A word past DF_REACH x max_df finds nothing; without max_df every word counts.
    assert DF_REACH * 1 < 13
    assert await store.text.search_text(scope, "keyword", ["often"], 50, max_df=1) == []
    assert len(await store.text.search_text(scope, "keyword", ["often"], 50)) == 13


async def test_read_candidates_finds_supersession_edges_and_backfills_superseded_at(store):
    old, head, plain = memory("rc-old"), memory("rc-head"), memory("rc-plain")
    await put(store, [old, head, plain])
    edge = Relation("rc-old", "rc-head", "INVALIDATED_BY", 1.0, T0 + timedelta(days=1))
    event = MemoryEvent.for_memory(EventKind.ASSOCIATED, old, T0)
    assert await store.writer.create_relations("default", [edge], [event], now_us=2) == [0]
    found = await store.reader.read_candidates("default", ["rc-old", "rc-head", "rc-plain"])
    assert found["rc-old"][0].superseded_at is not None
    assert [(s.target_id, s.type) for s in found["rc-old"][1]] == [("rc-head", "INVALIDATED_BY")]
    assert found["rc-head"][1] == [] and found["rc-plain"][1] == []
    # Data written before superseded_at was kept: the edge is there, the time is not.
    await store.connection.query("MATCH (n:Memory {id: 'rc-old'}) REMOVE n.superseded_at")
    assert (await store.reader.read_candidates("default", ["rc-old"]))["rc-old"][1] == []
    await store.lifecycle.ensure_schema()
    (successor,) = (await store.reader.read_candidates("default", ["rc-old"]))["rc-old"][1]
    assert successor.target_id == "rc-head" and successor.created_at == T0 + timedelta(days=1)


async def test_document_frequencies_count_the_tenants_own_memories(store):
    await put(store, [memory(f"big-{i}", tenant="big", content=f"alpha word{i}") for i in range(30)])
    await put(store, [memory(f"small-{i}", tenant="small", content="alpha beta") for i in range(2)])
    assert await store.text.document_frequencies("small", "content", ["alpha", "beta", "word1"]) == {
        "alpha": 2,
        "beta": 2,
        "word1": 0,
    }
    # Capped, the other tenant's matches do not use up the cap.
    assert await store.text.document_frequencies("small", "content", ["alpha"], cap=5, recount=True) == {"alpha": 2}
    assert await store.text.document_frequencies("big", "content", ["alpha"], cap=5) == {"alpha": 5}
    await store.text.arm_frequencies("small", ["keyword"], ["alpha"], cap=1000)
    assert store.text._df_cache.get(("small", "content", "alpha"), now=time.monotonic(), cap=1000) == 2
    assert await store.text.sample_texts("small", "content", 100) == ["alpha beta", "alpha beta"]


async def test_list_memories_lists_archived_ones_only_when_asked(store):
    await put(store, [memory("kept"), memory("gone", archived=True)])
    scope = Scope(tenant="default", at=T0 + timedelta(days=1), history=True)
    assert [m.id for m in await store.reader.list_memories(scope, "importance", 10)] == ["kept"]
    listed = await store.reader.list_memories(scope, "importance", 10, with_archived=True)
    assert sorted(m.id for m in listed) == ["gone", "kept"]


async def test_touch_memories_moves_last_accessed_of_many_in_one_query_never_backwards(store):
    await put(store, [memory("t1"), memory("t2"), memory("t3"), memory("o1", tenant="other")])
    later = T0 + timedelta(hours=2)
    later_us = int(later.timestamp() * 1_000_000)
    queries = []
    real_query = store.connection.query

    async def counting(cypher, params=None, **options):
        queries.append(cypher)
        return await real_query(cypher, params, **options)

    store.connection.query = counting
    await store.reader.touch_memories("default", ["t1", "t2", "o1"], later_us)
    assert len(queries) == 1
    store.connection.query = real_query
    got = await store.reader.get_memories("default", ["t1", "t2", "t3"])
    assert [got[i].last_accessed for i in ("t1", "t2", "t3")] == [later, later, T0]
    assert {m.version for m in got.values()} == {1} and {m.updated_at for m in got.values()} == {T0}
    assert (await store.reader.get_memory("other", "o1")).last_accessed == T0  # another tenant's id
    await store.reader.touch_memories("default", ["t1"], int(T0.timestamp() * 1_000_000))  # older: ignored
    assert (await store.reader.get_memory("default", "t1")).last_accessed == later


async def test_entity_expansion_reads_the_rarest_entities_within_its_bounds(store):
    seed = memory("seed")
    await put(store, [seed] + [memory(f"n{i}") for i in range(12)] + [memory("x1", tenant="other")])
    mentions = [("seed", "Context", ["entity:a", "entity:b", "entity:common"])]
    mentions += [(f"n{i}", "Context", ["entity:common"]) for i in range(12)]  # 13 mentions: a stopword at 10
    mentions += [("n0", "Context", ["entity:a", "entity:b"]), ("n1", "Context", ["entity:a"])]
    await store.enrichment.link_entities_and_patterns("default", mentions, min_members=100, max_members=100, now_us=1)
    await store.enrichment.link_entities_and_patterns(
        "other", [("x1", "Context", ["entity:a"])], min_members=9, max_members=9, now_us=1
    )

    found = await store.reader.entity_neighbours("default", ["seed"], 20, max_mentions=10)
    assert found == [("n0", 2), ("n1", 1)]  # common (13 mentions) is skipped
    assert len(await store.reader.entity_neighbours("default", ["seed"], 20, max_mentions=20)) == 12
    # One entity per seed, the rarest: b (2 mentions) before a (3).
    assert await store.reader.entity_neighbours("default", ["seed"], 20, per_seed=1, max_mentions=10) == [("n0", 1)]
    # At most max_reads mentions read in all.
    assert len(await store.reader.entity_neighbours("default", ["seed"], 20, max_mentions=20, max_reads=4)) <= 4


async def test_entity_expansion_counts_an_entitys_mentions_once_while_the_count_is_fresh(store):
    await put(store, [memory("seed")] + [memory(f"n{i}") for i in range(4)])
    mentions = [("seed", "Context", ["entity:a", "entity:b"])] + [(f"n{i}", "Context", ["entity:a"]) for i in range(4)]
    mentions += [("n0", "Context", ["entity:b"])]
    await store.enrichment.link_entities_and_patterns("default", mentions, min_members=100, max_members=100, now_us=1)
    queries: list[str] = []
    real_query = store.connection.query

    async def counting(cypher, params=None, **options):
        queries.append(cypher)
        return await real_query(cypher, params, **options)

    def counted() -> int:
        return sum("count(x) AS mentions" in q for q in queries)

    store.connection.query = counting
    try:
        assert await store.reader.entity_neighbours("default", ["seed"], 10) == [
            ("n0", 2), ("n1", 1), ("n2", 1), ("n3", 1)
        ]  # fmt: skip
        assert counted() == 1
        # Asked again: the counts are the cached ones, the mentions are read as they are now.
        await store.writer.delete_memories("default", [MemoryEvent.deleted("default", "n0", T0)], now_us=2)
        assert await store.reader.entity_neighbours("default", ["seed"], 10) == [("n1", 1), ("n2", 1), ("n3", 1)]
        assert counted() == 1
        # A stricter bound than the counts were taken to still uses them.
        # As counted, a (5 mentions) is over 3 and b (2) is read: its other mention, n0, is gone.
        assert await store.reader.entity_neighbours("default", ["seed"], 10, max_mentions=3) == []
        assert counted() == 1
        # A count stopped at its cap answers no looser bound: counted again.
        capped = FalkorMemoryReader(store.connection, EntityBounds(max_mentions=2))
        assert await capped.entity_neighbours("default", ["seed"], 10) == []  # a: 3 or more, over 2
        assert counted() == 2
        assert await capped.entity_neighbours("default", ["seed"], 10, max_mentions=10) == [
            ("n1", 1), ("n2", 1), ("n3", 1)
        ]  # fmt: skip
        assert counted() == 3
        # A reader whose counts have expired counts again.
        short = FalkorMemoryReader(store.connection, EntityBounds(cache_seconds=1.0))
        await short.entity_neighbours("default", ["seed"], 10)
        await short.entity_neighbours("default", ["seed"], 10)
        assert counted() == 4
        await asyncio.sleep(1.1)
        await short.entity_neighbours("default", ["seed"], 10)
        assert counted() == 5
    finally:
        store.connection.query = real_query


async def test_schema_indexes_entity_and_pattern_lookups(store):
    result = await store.connection.query("CALL db.indexes() YIELD label, properties RETURN label, properties")
    indexed = {(label, prop) for label, props in result.result_set for prop in props}
    assert {("Entity", "tag"), ("Entity", "tenant"), ("Pattern", "key"), ("Pattern", "tenant")} <= indexed


async def test_several_nodes_in_falkordb_host_must_be_one_clusters(falkordb_server):
    """A list names a Redis Cluster's nodes (any of which has the slot map); two servers of their
    own would each hold other data, so the list is refused rather than the first to answer used."""
    nodes = f"127.0.0.1:{free_port()},127.0.0.1:{falkordb_server.port}"  # the first down, the second alone
    connection = FalkorConnection(host=nodes, port=0, graph="g", request_retry_seconds=0.5)
    with pytest.raises(FailedPrecondition) as refused:
        await connection.query("RETURN 1")
    assert refused.value.reason == "FALKORDB_HOST_NOT_A_CLUSTER"
    await connection.close()
