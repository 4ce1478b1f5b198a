"""A write whose reply is lost: a create keyed by id is sent again and leaves
one node and one event; a write that is not idempotent is never sent blindly
again; the unique constraint refuses a second node with the same tenant and id."""

from __future__ import annotations

from dataclasses import replace

import pytest
import redis.exceptions as redis_errors

from services.core.adapters.falkor.connection import FalkorConnection
from services.core.domain.errors import Unavailable
from services.core.domain.idempotency import IdempotencyClaim
from services.core.domain.model import EventKind, MemoryEvent
from tests.integration.test_falkor_store import T0, memory, put

pytestmark = pytest.mark.integration


def lose_replies(connection: FalkorConnection, times: int) -> list[str]:
    """Make the next `times` queries reach FalkorDB and run there, then fail
    as a connection dropped before the reply would: what a network cut or a
    proxy restart does to a call in flight. Returns the queries sent."""
    sent: list[str] = []
    send = connection._send
    left = [times]

    async def send_then_drop(graph, cypher, params, *options):
        sent.append(cypher)
        reply = await send(graph, cypher, params, *options)
        if left[0] > 0:
            left[0] -= 1
            raise redis_errors.ConnectionError("Connection closed by server.")
        return reply

    connection._send = send_then_drop
    return sent


async def counts(store, memory_id: str) -> tuple[int, int]:
    nodes = await store.connection.query("MATCH (m:Memory {id: $id}) RETURN count(m)", {"id": memory_id})
    outbox = await store.outbox.pending_outbox(older_than_us=2**62, limit=100)
    return nodes.result_set[0][0], sum(1 for e in outbox if e.event.memory_id == memory_id)


async def test_a_create_whose_reply_was_lost_is_sent_again_and_leaves_one_node_and_one_event(store):
    sent = lose_replies(store.connection, times=1)
    await put(store, [memory("m1")])
    assert len(sent) == 2  # it ran, its reply was lost, it was sent again
    assert await counts(store, "m1") == (1, 1)


async def test_a_claimed_create_sent_twice_reports_written_once(store):
    claim = IdempotencyClaim("default", "key-1", "owner-1", "hash", 2**62)
    m = memory("m2")
    events = [MemoryEvent.for_memory(EventKind.CREATED, m, T0)]
    sent = lose_replies(store.connection, times=1)
    assert await store.writer.create_memories([m], events, now_us=1, claim=claim)
    assert len(sent) == 2
    assert await counts(store, "m2") == (1, 1)


async def test_the_same_create_twice_leaves_one_node_and_one_event(store):
    await put(store, [memory("m3")])
    await put(store, [memory("m3", content="a second attempt")])
    assert await counts(store, "m3") == (1, 1)
    assert (await store.reader.get_memory("default", "m3")).content == "content of m3"


async def test_an_update_whose_reply_was_lost_is_not_sent_again(store):
    await put(store, [memory("m4")])
    current = await store.reader.get_memory("default", "m4")
    changed = replace(current, content="changed", version=current.version + 1)
    event = MemoryEvent.for_memory(EventKind.UPDATED, changed, T0)
    sent = lose_replies(store.connection, times=1)
    with pytest.raises(Unavailable) as raised:
        await store.writer.update_memory(changed, expected_version=current.version, event=event, now_us=1)
    assert raised.value.reason == "FALKORDB_WRITE_UNCONFIRMED"
    assert len(sent) == 1
    # It did run once: one UPDATED event, no second.
    outbox = await store.outbox.pending_outbox(older_than_us=2**62, limit=100)
    assert [e.event.kind for e in outbox if e.event.memory_id == "m4"] == [EventKind.CREATED, EventKind.UPDATED]


async def test_a_read_whose_reply_was_lost_is_sent_again(store):
    await put(store, [memory("m5")])
    sent = lose_replies(store.connection, times=1)
    assert (await store.reader.get_memory("default", "m5")).id == "m5"
    assert len(sent) == 2


async def test_a_supersede_whose_reply_was_lost_creates_the_replacement_once(store):
    from services.core.domain.model import Relation

    await put(store, [memory("old")])
    old = await store.reader.get_memory("default", "old")
    closed = replace(old, t_invalid=T0, version=old.version + 1)
    new = memory("new")
    edge = Relation("old", "new", "EVOLVED_INTO", 1.0, T0)
    events = [MemoryEvent.for_memory(EventKind.CREATED, new, T0), MemoryEvent.associated("default", edge)]
    sent = lose_replies(store.connection, times=1)
    with pytest.raises(Unavailable):
        await store.writer.supersede(closed, old.version, new, edge, events, now_us=1)
    assert len(sent) == 1
    # The caller (or the handler's conflict loop) trying again creates no second replacement.
    assert not await store.writer.supersede(closed, closed.version, new, edge, events, now_us=1)
    assert (await counts(store, "new"))[0] == 1


async def test_the_unique_constraint_refuses_a_second_node_with_the_same_tenant_and_id(store):
    assert (await store.lifecycle.constraints())[("Memory", ("id", "tenant"))] == "OPERATIONAL"
    await store.connection.query("CREATE (:Memory {tenant: 'acme', id: 'dup'})")
    with pytest.raises(redis_errors.ResponseError, match="unique constraint violation"):
        await store.connection.query("CREATE (:Memory {tenant: 'acme', id: 'dup'})")
    # The same id in another tenant is another memory.
    await store.connection.query("CREATE (:Memory {tenant: 'other', id: 'dup'})")
    nodes = await store.connection.query("MATCH (m:Memory {id: 'dup'}) RETURN count(m)")
    assert nodes.result_set[0][0] == 2


async def test_ensure_schema_again_keeps_the_constraint(store):
    await store.lifecycle.ensure_schema()
    assert (await store.lifecycle.constraints())[("Memory", ("id", "tenant"))] == "OPERATIONAL"


async def test_a_graph_holding_duplicates_starts_without_the_constraint_and_says_so(settings):
    from structlog.testing import capture_logs

    from services.core.wiring import graph_store

    graph = graph_store(settings.graph, settings.process, recall=settings.recall, backup=settings.backup)
    try:
        # Written before the constraint existed (an earlier release's blind retry).
        await graph.connection.query(
            "CREATE (:Memory {tenant: 'acme', id: 'twice'}), (:Memory {tenant: 'acme', id: 'twice'})"
        )
        with capture_logs() as logged:
            await graph.lifecycle.ensure_schema()
        assert ("Memory", ("id", "tenant")) not in await graph.lifecycle.constraints()  # dropped: tried at next start
        assert any(e["event"].startswith("unique constraint could not be built") for e in logged)
        await graph.connection.query("MATCH (m:Memory {id: 'twice'}) WITH m LIMIT 1 DELETE m")
        await graph.lifecycle.ensure_schema()  # the duplicate resolved: the next start builds it
        assert (await graph.lifecycle.constraints())[("Memory", ("id", "tenant"))] == "OPERATIONAL"
    finally:
        await graph.lifecycle.close()
