"""The tombstone check is part of the create's own query (writes.py's guard),
on a real FalkorDB: a tombstone left before the write, even after any check
ingest could make beforehand, refuses it with nothing left behind (no
memory, outbox row, audit entry or idempotency key), and force stores it
with its event saying so."""

from __future__ import annotations

import pytest

from services.core.domain.drafts import Draft
from services.core.domain.errors import AlreadyExists
from services.core.domain.idempotency import IdempotencyClaim
from services.core.domain.model import EventKind, MemoryEvent
from services.core.domain.supersede import close_superseded, supersession_edge
from services.core.domain.tombstones import TombstoneGuard, TombstoneHeld, content_hash, tombstone_for
from services.core.relay import OutboxRelay
from services.core.settings import Settings
from services.ingest.use_cases import IngestHandlers, WritePolicy
from tests.fakes import RecordingPublisher
from tests.integration.test_falkor_store import T0, memory, put

pytestmark = pytest.mark.integration

A, B, C = (f"00000000-0000-4000-8000-{i:012d}" for i in range(1, 4))
REJECTED_TEXT = "The deploy key lives in the wiki"


async def leave_tombstone(store, text: str = REJECTED_TEXT, tenant: str = "default"):
    stone = tombstone_for(tenant, "gone", text, "rejected", T0)
    event = MemoryEvent.tombstone(EventKind.TOMBSTONE_SET, tenant, "gone", stone.id, stone.reason, T0)
    await store.trust.set_tombstone(stone, event, now_us=1)
    return stone


async def left_behind(store, memory_id: str) -> tuple[bool, int, int]:
    """(memory stored, its outbox rows, its audit entries)."""
    stored = await store.reader.get_memory("default", memory_id) is not None
    rows = [e for e in await store.outbox.pending_outbox(2**62, 1000) if e.event.memory_id == memory_id]
    entries = await store.connection.query("MATCH (a:AuditEntry {memory_id: $id}) RETURN count(a)", {"id": memory_id})
    return stored, len(rows), int(entries.result_set[0][0])


def created(m) -> MemoryEvent:
    return MemoryEvent.for_memory(EventKind.CREATED, m, T0)


def guard_of(*memories, forced=None) -> TombstoneGuard:
    return TombstoneGuard.of("default", [[content_hash(m.content)] for m in memories], forced)


async def test_the_create_query_itself_refuses_tombstoned_content_and_leaves_nothing(store):
    stone = await leave_tombstone(store)  # no check runs before the write: only the query's own
    fresh = memory(A, content="  the DEPLOY key lives in the   wiki")  # the same content, normalised
    claim = IdempotencyClaim("default", "key-1", "owner-1", "hash-1", 2**62)
    with pytest.raises(TombstoneHeld) as held:
        await store.writer.create_memories([fresh], [created(fresh)], now_us=1, claim=claim, guard=guard_of(fresh))
    assert [t.id for t in held.value.held.values()] == [stone.id]
    assert list(held.value.held.values())[0].reason == "rejected"
    assert await left_behind(store, A) == (False, 0, 0)
    assert await store.writer.get_idempotency("default", "key-1", 1) is None  # the key was not claimed either
    # Forced past that tombstone, the same query stores it, with its event and audit entry.
    forced = guard_of(fresh, forced={0: stone})
    assert await store.writer.create_memories([fresh], [created(fresh)], now_us=1, claim=claim, guard=forced)
    assert await left_behind(store, A) == (True, 1, 1)
    assert await store.writer.get_idempotency("default", "key-1", 1) == ("hash-1", [A])
    # Sent again (its reply lost), the repeat answers as the first run did, with no second event.
    assert await store.writer.create_memories([fresh], [created(fresh)], now_us=1, claim=claim, guard=forced)
    assert await left_behind(store, A) == (True, 1, 1)


async def test_a_batch_with_one_tombstoned_item_is_refused_whole_and_other_tenants_are_not_held(store):
    await leave_tombstone(store)
    items = [memory(A), memory(B, content=REJECTED_TEXT), memory(C)]
    with pytest.raises(TombstoneHeld) as held:
        await store.writer.create_memories(items, [created(m) for m in items], now_us=1, guard=guard_of(*items))
    assert guard_of(*items).hits(held.value.held).keys() == {1}
    assert [await left_behind(store, m) for m in (A, B, C)] == [(False, 0, 0)] * 3
    # A forced pass names one tombstone: one that went meanwhile refuses the write again.
    gone = tombstone_for("default", "x", "some other text", "rejected", T0)
    with pytest.raises(TombstoneHeld):
        await store.writer.create_memories(
            items, [created(m) for m in items], now_us=1, guard=guard_of(*items, forced={1: gone})
        )
    other = memory(A, tenant="other", content=REJECTED_TEXT)
    other_guard = TombstoneGuard.of("other", [[content_hash(other.content)]])
    assert await store.writer.create_memories([other], [created(other)], now_us=1, guard=other_guard)


async def test_a_tenant_s_tombstones_hold_only_their_content_whether_it_has_any_or_not(store):
    # No tombstone of its own (another tenant's holds the same text): its hashes are not looked up.
    await leave_tombstone(store, tenant="other")
    first = memory(A, content=REJECTED_TEXT)
    assert await store.writer.create_memories([first], [created(first)], now_us=1, guard=guard_of(first))
    # Tombstones of its own, of other content: each hash looked up, none held.
    await leave_tombstone(store, text="another rejected text")
    items = [memory(B, content="a new text"), memory(C, content="and one more")]
    assert await store.writer.create_memories(items, [created(m) for m in items], now_us=1, guard=guard_of(*items))
    assert [await left_behind(store, m) for m in (A, B, C)] == [(True, 1, 1)] * 3
    # And its own tombstone of that content holds it.
    await leave_tombstone(store)
    again = memory("00000000-0000-4000-8000-000000000009", content=REJECTED_TEXT)
    with pytest.raises(TombstoneHeld):
        await store.writer.create_memories([again], [created(again)], now_us=1, guard=guard_of(again))


async def test_the_supersede_query_refuses_a_tombstoned_replacement_and_changes_nothing(store):
    await put(store, [memory(A)])
    stone = await leave_tombstone(store)
    old = await store.reader.get_memory("default", A)
    new = memory(B, content=REJECTED_TEXT)
    closed = close_superseded(old, new, reason="", now=T0)
    edge = supersession_edge(old, new, "EVOLVED_INTO", reason="", now=T0)
    events = [
        created(new),
        MemoryEvent.for_memory(EventKind.SUPERSEDED, closed, T0),
        MemoryEvent.associated("default", edge),
    ]
    with pytest.raises(TombstoneHeld):
        await store.writer.supersede(closed, old.version, new, edge, events, now_us=2, before=old, guard=guard_of(new))
    assert await store.reader.get_memory("default", A) == old
    assert await left_behind(store, B) == (False, 0, 0)
    forced = guard_of(new, forced={0: stone})
    assert await store.writer.supersede(closed, old.version, new, edge, events, now_us=2, before=old, guard=forced)
    assert (await store.reader.get_memory("default", A)).version == closed.version
    assert await left_behind(store, B) == (True, 1, 1)


class RejectedMeanwhile:
    """The real writer, with a rejection of the content landing right before
    each create: after any check ingest made beforehand, before the write."""

    def __init__(self, store, text: str):
        self._store, self._text, self.stone = store, text, None

    def __getattr__(self, name):
        return getattr(self._store.writer, name)

    async def create_memories(self, memories, events, **kwargs):
        self.stone = await leave_tombstone(self._store, self._text)
        return await self._store.writer.create_memories(memories, events, **kwargs)


def handlers(store, writer, ids) -> IngestHandlers:
    relay = OutboxRelay(
        outbox=store.outbox,
        events=RecordingPublisher(connected=False),  # the events stay in the outbox, to be read
        sweep_seconds=1.0,
        grace_seconds=0.0,
        batch_size=100,
        concurrency=1,
        sweeps=False,
    )
    policy = WritePolicy(
        auto_summarize=False,
        summary_target_length=300,
        idempotency_ttl_seconds=60,
        delete_page_size=100,
        conflict_retries=3,
    )
    limits = Settings(_env_file=None).limits
    ids = iter(ids)
    return IngestHandlers(
        writer=writer, relay=relay, limits=limits, policy=policy, trust=store.trust, new_id=lambda: next(ids)
    )


async def test_a_rejection_racing_a_create_still_refuses_it_and_force_stores_it_marked(store):
    writer = RejectedMeanwhile(store, REJECTED_TEXT)
    ingest = handlers(store, writer, [A, B])
    with pytest.raises(AlreadyExists) as refused:
        await ingest.create_memory("default", Draft(content=REJECTED_TEXT, type="Context"))
    assert refused.value.reason == "CONTENT_TOMBSTONED"
    assert refused.value.details["tombstone_id"] == writer.stone.id
    assert refused.value.details["tombstone_reason"] == "rejected"
    assert await left_behind(store, A) == (False, 0, 0)
    done = await ingest.create_memory("default", Draft(content=REJECTED_TEXT, type="Context"), force=True)
    assert done.memory.id == B and await left_behind(store, B) == (True, 1, 1)
    event = next(e.event for e in await store.outbox.pending_outbox(2**62, 1000) if e.event.memory_id == B)
    assert (event.kind, event.forced, event.tombstone_id, event.reason) == (
        EventKind.CREATED,
        True,
        writer.stone.id,
        "rejected",
    )


async def test_a_batch_racing_a_rejection_is_refused_naming_the_item(store):
    writer = RejectedMeanwhile(store, "second item text")
    ingest = handlers(store, writer, [A, B, C])
    drafts = [Draft(content="first item text"), Draft(content="second item text")]
    with pytest.raises(AlreadyExists) as refused:
        await ingest.batch_create("default", drafts)
    assert refused.value.details["index"] == "1" and "Memory at index 1" in refused.value.message
    assert [await left_behind(store, m) for m in (A, B)] == [(False, 0, 0)] * 2
    assert (await ingest.batch_create("default", drafts[:1])).memory.id == C  # the other content is not held
    assert await left_behind(store, C) == (True, 1, 1)
