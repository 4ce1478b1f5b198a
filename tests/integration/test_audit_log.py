"""The audit log on FalkorDB: entries written by the writes' own queries with
a gapless per-tenant sequence, sealed by the sealer, and verify naming the
first entry edited or removed directly in the store."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest

from services.consolidate.audit_sealer import AuditSealer
from services.core.actor import acting_as
from services.core.domain.model import EventKind, MemoryEvent, Relation
from services.recall.audit import AuditLimits, AuditReads
from tests.integration.test_falkor_store import T0, memory, put

pytestmark = pytest.mark.integration


def ids(n: int) -> list[str]:
    return [f"00000000-0000-4000-8000-{i:012d}" for i in range(n)]


def sealer(store) -> AuditSealer:
    return AuditSealer(store.audit, seal_seconds=0, batch=2)  # a small batch: sealing crosses batches


def reads(store) -> AuditReads:
    return AuditReads(store.audit, AuditLimits(default_limit=100, max_limit=1000, verify_page=3))


async def _writes(store) -> list[str]:
    """Create two memories, patch one, link them, delete the other: five entries of tenant `default`."""
    a, b = ids(2)
    with acting_as("alice"):
        await put(store, [memory(a), memory(b)])
        current = await store.reader.get_memory("default", a)
        changed = replace(current, content="new text", version=2)
        event = MemoryEvent.for_memory(EventKind.UPDATED, changed, T0, content_changed=True)
        assert await store.writer.update_memory(changed, 1, event, now_us=2, before=current)
        relation = Relation(a, b, "RELATES_TO", 0.5, T0)
        await store.writer.create_relations(
            "default", [relation], [MemoryEvent.associated("default", relation)], now_us=3
        )
        assert await store.writer.delete_memories("default", [MemoryEvent.deleted("default", b, T0)], now_us=4) == [b]
    return [a, b]


async def test_each_write_appends_entries_in_sequence_with_actor_and_diff(store):
    a, b = await _writes(store)
    # Another tenant's writes number their own entries from 1.
    await put(store, [memory(ids(3)[2], tenant="other")])
    entries, token = await reads(store).list_entries("default")
    assert token == ""
    assert [e.seq for e in entries] == [1, 2, 3, 4, 5]
    kinds = [(e.parsed["kind"], e.parsed["memory_id"]) for e in entries]
    assert kinds == [("created", a), ("created", b), ("updated", a), ("associated", a), ("deleted", b)]
    assert {e.parsed["actor"] for e in entries} == {"alice"}
    update = entries[2].parsed
    assert update["diff"]["content"] == [f"content of {a}", "new text"]
    assert update["before_hash"] == entries[0].parsed["after_hash"] != update["after_hash"]
    assert [e.seq for e in (await reads(store).list_entries("other"))[0]] == [1]
    assert await store.audit.last_seq("default") == 5
    history = await reads(store).history("default", b)
    assert [e.parsed["kind"] for e in history] == ["created", "deleted"]


async def test_a_failed_compare_and_set_writes_no_entry(store):
    [a] = ids(1)
    await put(store, [memory(a)])
    current = await store.reader.get_memory("default", a)
    stale = replace(current, content="lost", version=5)
    event = MemoryEvent.for_memory(EventKind.UPDATED, stale, T0)
    assert not await store.writer.update_memory(stale, 4, event, now_us=2, before=current)
    assert await store.audit.last_seq("default") == 1


async def test_the_sealer_chains_and_verify_passes(store):
    await _writes(store)
    assert await sealer(store).seal_all() == 5
    assert await sealer(store).seal_all() == 0  # nothing new
    check, last = await reads(store).verify("default")
    assert check.ok and check.checked == 5 and check.sealed_through == 5 and last == 5
    # New entries after a seal chain on from the head.
    await put(store, [memory(ids(5)[4])])
    assert await sealer(store).seal_all() == 1
    check, _ = await reads(store).verify("default")
    assert check.ok and check.sealed_through == 6


async def test_verify_names_an_entry_edited_in_the_store(store):
    await _writes(store)
    await sealer(store).seal_all()
    row = await store.connection.query("MATCH (a:AuditEntry {seq: 3}) WHERE a.tenant = 'default' RETURN a.record")
    record = json.loads(row.result_set[0][0])
    record["actor"] = "mallory"
    await store.connection.query(
        "MATCH (a:AuditEntry {seq: 3}) WHERE a.tenant = 'default' SET a.record = $r", {"r": json.dumps(record)}
    )
    check, _ = await reads(store).verify("default")
    assert not check.ok and check.broken_seq == 3 and "edited" in check.reason
    assert check.sealed_through == 2


async def test_verify_names_an_entry_removed_from_the_store(store):
    await _writes(store)
    await sealer(store).seal_all()
    await store.connection.query("MATCH (a:AuditEntry {seq: 2}) WHERE a.tenant = 'default' DELETE a")
    check, _ = await reads(store).verify("default")
    assert not check.ok and check.broken_seq == 2 and "missing" in check.reason


async def test_verify_names_the_latest_entry_removed_and_a_rewritten_chain(store):
    await _writes(store)
    await sealer(store).seal_all()
    await store.connection.query("MATCH (a:AuditEntry {seq: 5}) WHERE a.tenant = 'default' DELETE a")
    check, last = await reads(store).verify("default")
    assert last == 5 and check.broken_seq == 5 and "missing" in check.reason
    # Re-hashing an edited entry's content without the chain after it is caught at that entry.
    await store.connection.query(
        "MATCH (a:AuditEntry {seq: 1}) WHERE a.tenant = 'default' SET a.chain = $c", {"c": "f" * 64}
    )
    check, _ = await reads(store).verify("default")
    assert check.broken_seq == 1 and "chain" in check.reason


async def test_an_unsealed_tail_is_checked_for_gaps_only(store):
    await _writes(store)
    await store.connection.query("MATCH (a:AuditEntry {seq: 4}) WHERE a.tenant = 'default' DELETE a")
    check, _ = await reads(store).verify("default")
    assert check.sealed_through == 0 and check.broken_seq == 4


async def test_off_writes_no_entries(settings):
    from services.core.wiring import graph_store

    graph = graph_store(settings.graph.model_copy(update={"audit_log_enabled": False}), settings.process)
    await graph.lifecycle.ensure_schema()
    try:
        a, b = ids(2)
        await put(graph, [memory(a), memory(b)])
        assert await graph.writer.delete_memories("default", [MemoryEvent.deleted("default", b, T0)], now_us=4) == [b]
        assert await graph.audit.last_seq("default") == 0
        assert await graph.reader.get_memory("default", a) is not None
    finally:
        await graph.lifecycle.close()


async def test_decay_s_score_writes_are_not_audited(store):
    from services.core.domain.decay import RelevanceUpdate

    a, b = ids(2)
    await put(store, [memory(a), memory(b)])
    with acting_as("system:consolidate"):
        written = await store.consolidation.write_relevance(
            "default", [RelevanceUpdate(a, 1, 0.4, True), RelevanceUpdate(b, 1, 0.5, False)], now_us=5
        )
    assert sorted(written) == sorted([a, b])  # both scores written, one with an event ...
    entries, _ = await reads(store).list_entries("default", kind="decayed")
    assert entries == []  # ... and neither audited: the score is derived data
    assert await store.audit.last_seq("default") == 2  # the two creates


async def test_the_sealer_crosses_a_gap_wider_than_its_batch(store):
    await _writes(store)
    await store.connection.query("MATCH (a:AuditEntry) WHERE a.tenant = 'default' AND a.seq IN [2, 3] DELETE a")
    assert await sealer(store).seal_all() == 3  # 1, then 4 and 5 past the gap
    check, _ = await reads(store).verify("default")
    assert check.broken_seq == 2 and check.sealed_through == 1


async def test_a_listing_reads_windows_and_finds_what_a_whole_scan_finds(store):
    """Listings read widening windows of the log (never the rest of it) and seek `since` by halving:
    page by page, with every filter, they give exactly what filtering the whole log gives, with
    entries whose times run a little out of step with their numbers, and another tenant's beside."""
    n, base = 400, 1_700_000_000_000_000
    rows = [
        {
            "seq": i,
            # A minute apart, each third one's clock a little behind the one before it.
            "at": base + i * 60_000_000 - (20_000_000 if i % 3 == 0 else 0),
            "kind": ("created", "updated", "deleted")[i % 3],
            "memory_id": f"m{i % 9}",
        }
        for i in range(1, n + 1)
    ]
    for tenant in ("t", "u"):
        await store.connection.query(
            """
            UNWIND $rows AS r
            CREATE (:AuditEntry {tenant: $tenant, seq: r.seq, at: r.at, kind: r.kind, memory_id: r.memory_id,
                                 event_id: $tenant + toString(r.seq), akey: $tenant + '/' + r.key})
            """,
            {"tenant": tenant, "rows": [{**r, "key": f"{r['seq']:015d}"} for r in rows]},
        )
        await store.connection.query("CREATE (:AuditCounter {tenant: $tenant, seq: $n})", {"tenant": tenant, "n": n})

    async def walk(limit: int, **filters) -> list[int]:
        seen, after = [], 0
        while page := await store.audit.list_entries("t", after_seq=after, limit=limit, **filters):
            seen += [e.seq for e in page]
            after = page[-1].seq
            if len(page) < limit:
                break
        return seen

    def expected(since_us=None, until_us=None, kind="", memory_id="") -> list[int]:
        return [
            r["seq"]
            for r in rows
            if (since_us is None or r["at"] >= since_us)
            and (until_us is None or r["at"] < until_us)
            and (not kind or r["kind"] == kind)
            and (not memory_id or r["memory_id"] == memory_id)
        ]

    since, until = base + 150 * 60_000_000, base + 260 * 60_000_000
    for filters in (
        {},
        {"since_us": since},
        {"until_us": until},
        {"since_us": since, "until_us": until},
        {"kind": "updated"},
        {"memory_id": "m4"},
        {"memory_id": "m4", "kind": "created", "since_us": since},
        {"since_us": base + (n + 10) * 60_000_000},
    ):
        want = expected(**filters)
        for limit in (1, 7, 100):
            assert await walk(limit, **filters) == want, (filters, limit)
