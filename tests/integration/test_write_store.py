"""The write operations of FalkorGraph: outbox, compare-and-set,
supersession in one query, idempotency claims, relations."""

from __future__ import annotations

import asyncio
from dataclasses import replace
from datetime import timedelta

import pytest

from services.core.domain.idempotency import IdempotencyClaim
from services.core.domain.model import EventKind, MemoryEvent, Relation
from tests.integration.test_falkor_store import T0, memory, put

pytestmark = pytest.mark.integration


def ids(n: int) -> list[str]:
    return [f"00000000-0000-4000-8000-{i:012d}" for i in range(n)]


async def test_every_write_records_its_events_in_the_outbox(store):
    a, b = ids(2)
    await put(store, [memory(a), memory(b)])
    pending = await store.outbox.pending_outbox(older_than_us=2**62, limit=10)
    assert sorted(e.event.memory_id for e in pending) == [a, b]
    assert {e.event.kind for e in pending} == {EventKind.CREATED}
    await store.outbox.delete_outbox([pending[0].event_id])
    assert [e.event_id for e in await store.outbox.pending_outbox(2**62, 10)] == [pending[1].event_id]
    assert await store.outbox.pending_outbox(older_than_us=0, limit=10) == []


async def test_update_is_compare_and_set_on_the_version(store):
    [a] = ids(1)
    await put(store, [memory(a, t_invalid=T0 + timedelta(days=1), embedding=[1.0, 0.0])])
    current = await store.reader.get_memory("default", a)
    changed = replace(current, content="new text", t_invalid=None, embedding=None, version=2)
    event = MemoryEvent.for_memory(EventKind.UPDATED, changed, T0)
    assert await store.writer.update_memory(changed, expected_version=1, event=event, now_us=1)
    stored = await store.reader.get_memory("default", a)
    assert stored.content == "new text" and stored.t_invalid is None and stored.embedding is None
    assert stored.version == 2
    stale = replace(changed, content="lost update", version=2)
    assert not await store.writer.update_memory(stale, expected_version=1, event=event, now_us=1)
    assert (await store.reader.get_memory("default", a)).content == "new text"
    other_tenant = replace(changed, tenant="intruder", version=3)
    assert not await store.writer.update_memory(other_tenant, expected_version=2, event=event, now_us=1)


async def test_delete_removes_node_and_edges_within_the_tenant(store):
    a, b = ids(2)
    await put(store, [memory(a), memory(b)])
    relation = Relation(a, b, "RELATES_TO", 0.5, T0)
    assert await store.writer.create_relations(
        "default", [relation], [MemoryEvent.associated("default", relation)], now_us=1
    ) == [0]
    assert await store.writer.delete_memories("other", [MemoryEvent.deleted("other", a, T0)], now_us=1) == []
    assert await store.writer.delete_memories("default", [MemoryEvent.deleted("default", a, T0)], now_us=1) == [a]
    edges = await store.connection.query("MATCH ()-[e]->() RETURN count(e)")
    assert edges.result_set[0][0] == 0
    assert await store.reader.get_memory("default", b) is not None


async def test_find_by_tags_is_exact_case_insensitive_any_of(store):
    a, b, c, d = ids(4)
    await put(
        store,
        [
            memory(a, tags=["Foo"]),
            memory(b, tags=["bar", "x"]),
            memory(c, tags=["foo:bar", "food"]),
            memory(d, tenant="other", tags=["foo"]),
        ],
    )
    assert sorted(await store.writer.find_ids_by_tags("default", ["foo", "bar"], 10)) == [a, b]
    assert len(await store.writer.find_ids_by_tags("default", ["foo", "bar"], 1)) == 1


async def test_relations_are_merged_and_missing_ends_reported(store):
    a, b, missing = ids(3)
    await put(store, [memory(a), memory(b), memory(missing, tenant="other")])
    first = Relation(a, b, "PREFERS_OVER", 0.5, T0, {"reason": "faster"})
    dangling = Relation(a, missing, "RELATES_TO", 0.5, T0)
    events = [MemoryEvent.associated("default", r) for r in (first, dangling)]
    assert await store.writer.create_relations("default", [first, dangling], events, now_us=1) == [0]
    again = replace(first, strength=0.9, created_at=T0 + timedelta(seconds=1))
    await store.writer.create_relations("default", [again], [MemoryEvent.associated("default", again)], now_us=1)
    rows = await store.connection.query("MATCH (:Memory)-[e:PREFERS_OVER]->(:Memory) RETURN e.strength, e.reason")
    assert rows.result_set == [[0.9, "faster"]]


async def test_supersede_is_all_or_nothing(store):
    old_id, new_id, other_id = ids(3)
    await put(store, [memory(old_id)])
    old = await store.reader.get_memory("default", old_id)
    closed = replace(old, t_invalid=T0, superseded_at=T0, version=2, metadata={"superseded_by": new_id})
    new = memory(new_id, content="the replacement")
    edge = Relation(old_id, new_id, "INVALIDATED_BY", 1.0, T0, {"reason": "corrected"})
    events = [
        MemoryEvent.for_memory(EventKind.CREATED, new, T0),
        MemoryEvent.for_memory(EventKind.SUPERSEDED, closed, T0),
        MemoryEvent.associated("default", edge),
    ]
    # A stale version writes nothing at all: no replacement, no edge, no events.
    before = len(await store.outbox.pending_outbox(2**62, 100))
    assert not await store.writer.supersede(closed, 7, new, edge, events, now_us=1)
    assert await store.reader.get_memory("default", new_id) is None
    assert len(await store.outbox.pending_outbox(2**62, 100)) == before
    assert await store.writer.supersede(closed, 1, new, edge, events, now_us=1)
    stored_old = await store.reader.get_memory("default", old_id)
    assert stored_old.t_invalid == T0 and stored_old.superseded_at == T0 and stored_old.version == 2
    assert (await store.reader.get_memory("default", new_id)).content == "the replacement"
    rows = await store.connection.query("MATCH (a:Memory)-[e:INVALIDATED_BY]->(b:Memory) RETURN a.id, b.id, e.reason")
    assert rows.result_set == [[old_id, new_id, "corrected"]]
    assert len(await store.outbox.pending_outbox(2**62, 100)) == before + 3
    intruder = replace(closed, tenant="other")
    assert not await store.writer.supersede(intruder, 2, memory(other_id), edge, events, now_us=1)


async def test_a_keyed_supersede_of_a_stale_version_claims_no_key(store):
    """The key is claimed with the write or not at all: a supersede whose old
    memory moved on (an enrichment bumped its version) leaves the key free
    for the retry, which then writes and records it."""
    old_id, new_id = ids(2)
    await put(store, [memory(old_id)])
    old = await store.reader.get_memory("default", old_id)
    closed = replace(old, t_invalid=T0, superseded_at=T0, version=2, metadata={"superseded_by": new_id})
    new = memory(new_id, content="the replacement")
    edge = Relation(old_id, new_id, "EVOLVED_INTO", 1.0, T0, {})
    events = [MemoryEvent.for_memory(EventKind.CREATED, new, T0), MemoryEvent.associated("default", edge)]
    claim = IdempotencyClaim("default", "supersede-key", "owner-1", "hash", expires_us=10**18)
    assert not await store.writer.supersede(closed, 7, new, edge, events, now_us=5, claim=claim)
    assert await store.writer.get_idempotency("default", "supersede-key", now_us=5) is None
    assert await store.writer.supersede(closed, 1, new, edge, events, now_us=5, claim=claim)
    assert await store.writer.get_idempotency("default", "supersede-key", now_us=5) == ("hash", [new_id])


async def test_idempotency_claim_lets_exactly_one_request_write(store):
    def attempt(owner: str, memory_id: str):
        claim = IdempotencyClaim("default", "key-1", owner, "hash", expires_us=10**18)
        m = memory(memory_id)
        return store.writer.create_memories(
            [m], [MemoryEvent.for_memory(EventKind.CREATED, m, T0)], now_us=5, claim=claim
        )

    outcomes = await asyncio.gather(*(attempt(f"owner-{i}", i_d) for i, i_d in enumerate(ids(5))))
    assert sorted(outcomes) == [False, False, False, False, True]
    assert await store.reader.count_memories("default") == 1
    winner = ids(5)[outcomes.index(True)]
    assert await store.writer.get_idempotency("default", "key-1", now_us=5) == ("hash", [winner])
    assert await store.writer.get_idempotency("other", "key-1", now_us=5) is None


async def test_an_expired_idempotency_key_can_be_claimed_again(store):
    a, b = ids(2)
    first = IdempotencyClaim("default", "k", "one", "h1", expires_us=100)
    second = IdempotencyClaim("default", "k", "two", "h2", expires_us=500)
    m1, m2 = memory(a), memory(b)
    assert await store.writer.create_memories(
        [m1], [MemoryEvent.for_memory(EventKind.CREATED, m1, T0)], now_us=50, claim=first
    )
    assert await store.writer.get_idempotency("default", "k", now_us=200) is None
    assert await store.writer.create_memories(
        [m2], [MemoryEvent.for_memory(EventKind.CREATED, m2, T0)], now_us=200, claim=second
    )
    assert await store.writer.get_idempotency("default", "k", now_us=200) == ("h2", [b])


async def test_expired_idempotency_keys_are_purged(store):
    a, b = ids(2)
    for key, memory_id, expires in (("old", a, 100), ("live", b, 10**18)):
        m = memory(memory_id)
        claim = IdempotencyClaim("default", key, "o", "h", expires_us=expires)
        await store.writer.create_memories(
            [m], [MemoryEvent.for_memory(EventKind.CREATED, m, T0)], now_us=50, claim=claim
        )
    assert await store.outbox.purge_idempotency(now_us=200) == 1
    assert await store.writer.get_idempotency("default", "live", now_us=200) == ("h", [b])
    assert await store.reader.count_memories("default") == 2  # the memories themselves stay


async def test_a_read_by_id_is_one_query_with_access_time_and_relations(store):
    a, b, c = ids(3)
    await put(store, [memory(a), memory(b), memory(c)])
    assert (await store.reader.read_memory("default", a, accessed_us=7, relation_limit=5))[1] == []
    relations = [Relation(a, b, "RELATES_TO", 0.3, T0), Relation(c, a, "LEADS_TO", 0.9, T0, {"reason": "r"})]
    await store.writer.create_relations(
        "default", relations, [MemoryEvent.associated("default", r) for r in relations], now_us=1
    )
    found, edges = await store.reader.read_memory("default", a, accessed_us=7_000_000, relation_limit=5)
    assert found.last_accessed.timestamp() == 7.0
    assert [(e.source_id, e.target_id, e.type, e.properties) for e in edges] == [
        (c, a, "LEADS_TO", {"reason": "r"}),
        (a, b, "RELATES_TO", {}),
    ]
    assert len((await store.reader.read_memory("default", a, accessed_us=8, relation_limit=1))[1]) == 1
    assert await store.reader.read_memory("other", a, accessed_us=8, relation_limit=5) is None
