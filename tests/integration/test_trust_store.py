"""FalkorTrustStore on a real FalkorDB: the trust state's compare-and-set
with its events, tombstones per tenant and hash, the review queue, and a
record written without a trust state read as active."""

from __future__ import annotations

from dataclasses import replace

import pytest

from services.core.disputes import Disputes
from services.core.domain.model import EventKind, MemoryEvent
from services.core.domain.recall_request import Scope
from services.core.domain.review_policy import ReviewPolicy
from services.core.domain.tombstones import tombstone_for
from tests.integration.test_falkor_store import T0, memory, put

pytestmark = pytest.mark.integration

A, B, C = (f"00000000-0000-4000-8000-{i:012d}" for i in range(1, 4))


async def outbox_kinds(store) -> list[str]:
    return sorted(e.event.kind.value for e in await store.outbox.pending_outbox(2**62, 100))


async def test_set_trust_is_compare_and_set_and_records_its_events(store):
    await put(store, [memory(A)])
    current = await store.trust.get_memory("default", A)
    assert current.trust_state == "active"
    disputed = replace(current, trust_state="disputed", version=2)
    event = MemoryEvent.trust_moved(EventKind.TRUST_CHANGED, disputed, "active", T0, reason="contradicted by x")
    assert await store.trust.set_trust(disputed, 1, [event], now_us=2, before=current)
    assert (await store.reader.get_memory("default", A)).trust_state == "disputed"
    assert not await store.trust.set_trust(replace(disputed, trust_state="verified"), 1, [event], now_us=3)
    assert (await store.reader.get_memory("default", A)).version == 2
    pending = [e.event for e in await store.outbox.pending_outbox(2**62, 100)]
    moved = next(e for e in pending if e.kind is EventKind.TRUST_CHANGED)
    assert (moved.trust_state, moved.previous_trust_state, moved.reason) == ("disputed", "active", "contradicted by x")


async def test_a_rejection_leaves_one_tombstone_per_tenant_and_content(store):
    await put(store, [memory(A, trust_state="pending_review", review_rule="tenant"), memory(B, tenant="other")])
    record = await store.trust.get_memory("default", A)
    rejected = replace(record, trust_state="rejected", version=2)
    stone = tombstone_for("default", A, record.content, "review_rejected", T0)
    events = [
        MemoryEvent.trust_moved(EventKind.REVIEWED, rejected, "pending_review", T0),
        MemoryEvent.tombstone(EventKind.TOMBSTONE_SET, "default", A, stone.id, stone.reason, T0),
    ]
    assert await store.trust.set_trust(rejected, 1, events, now_us=2, tombstone=stone)
    again = tombstone_for("default", A, record.content.upper(), "rejected", T0)
    await store.trust.set_tombstone(again, events[1], now_us=3)  # the same content: the same node
    found = await store.trust.get_tombstone("default", stone.id)
    assert found is not None and found.id == again.id == stone.id and found.reason == "rejected"
    assert [t.id for t in await store.trust.list_tombstones("default", 10, 0)] == [stone.id]
    assert await store.trust.list_tombstones("other", 10, 0) == []
    assert await store.trust.get_tombstone("other", stone.id) is None
    removal = MemoryEvent.tombstone(EventKind.TOMBSTONE_REMOVED, "other", A, stone.id, "rejected", T0)
    assert not await store.trust.remove_tombstone("other", stone.id, removal, now_us=4)
    assert await store.trust.remove_tombstone("default", stone.id, removal, now_us=4)
    assert await store.trust.get_tombstone("default", stone.id) is None


async def test_delete_with_tombstone_is_one_write_and_refuses_a_missing_memory(store):
    await put(store, [memory(A)])
    stone = tombstone_for("default", A, "content of x", "rejected", T0)
    events = [
        MemoryEvent.deleted("default", A, T0),
        MemoryEvent.tombstone(EventKind.TOMBSTONE_SET, "default", A, stone.id, stone.reason, T0),
    ]
    assert not await store.trust.delete_with_tombstone("other", A, stone, events, now_us=2)
    assert await store.trust.list_tombstones("default", 10, 0) == []
    assert await store.trust.delete_with_tombstone("default", A, stone, events, now_us=2)
    assert await store.reader.get_memory("default", A) is None
    assert [t.id for t in await store.trust.list_tombstones("default", 10, 0)] == [stone.id]
    assert {"deleted", "tombstone_set"} <= set(await outbox_kinds(store))


async def test_the_review_queue_lists_pending_memories_oldest_first_and_listings_withhold_them(store):
    await put(
        store,
        [
            memory(A, trust_state="pending_review", review_rule="low_confidence", recorded_at=T0),
            memory(B, trust_state="pending_review", review_rule="tenant", recorded_at=T0.replace(year=2024)),
            memory(C),
        ],
    )
    queue = await store.trust.review_queue("default", 10, 0)
    assert [m.id for m in queue] == [B, A] and queue[0].review_rule == "tenant"
    assert [m.id for m in await store.trust.review_queue("default", 1, 1)] == [A]
    assert await store.trust.review_queue("other", 10, 0) == []
    scope = Scope(tenant="default", at=T0, history=True)
    assert [m.id for m in await store.reader.list_memories(scope, "importance", 10)] == [C]
    asked = replace(scope, trust_states=("pending_review",))
    assert {m.id for m in await store.reader.list_memories(asked, "importance", 10)} == {A, B}


async def test_a_record_without_a_trust_state_reads_as_active_and_is_listed(store):
    await put(store, [memory(A)])
    await store.connection.query("MATCH (m:Memory {id: $id}) REMOVE m.trust_state", {"id": A})
    assert (await store.reader.get_memory("default", A)).trust_state == "active"
    scope = Scope(tenant="default", at=T0)
    assert [m.id for m in await store.reader.list_memories(scope, "importance", 10)] == [A]


async def test_a_contradiction_disputes_the_older_memory_and_may_send_the_newer_to_review(store):
    """services/core/disputes.py over the real store, as /associate and consolidation's creative pass use it."""
    await put(
        store,
        [
            memory(A, timestamp=T0.replace(year=2024)),
            memory(B, timestamp=T0),
            memory(C, trust_state="rejected", timestamp=T0.replace(year=2023)),
        ],
    )
    published: list[MemoryEvent] = []

    async def submit(events):
        published.extend(events)

    disputes = Disputes(store.trust, submit, ReviewPolicy(contradictions=True), clock=lambda: T0)
    assert await disputes.contradicted("default", [(B, A), (B, C)]) == 2
    found = await store.trust.get_memories("default", [A, B, C])
    assert found[A].trust_state == "disputed" and found[A].version == 2
    assert found[B].trust_state == "pending_review" and found[B].review_rule == "contradicts"
    assert found[C].trust_state == "rejected"  # a rejected memory stays as it is
    assert {(e.memory_id, e.kind, e.previous_trust_state) for e in published} == {
        (A, EventKind.TRUST_CHANGED, "active"),
        (B, EventKind.TRUST_CHANGED, "active"),
    }
    # Without the review rule, the newer one stands; a second edge changes nothing more.
    assert await Disputes(store.trust, submit).contradicted("default", [(B, A)]) == 0
