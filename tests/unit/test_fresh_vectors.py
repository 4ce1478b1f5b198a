"""The notes of memories a recall process's index still lacks, and the bounded
wait a recall makes for them (services/recall/fresh_reads.py)."""

from __future__ import annotations

import asyncio

from services.core.domain.fresh_vectors import FreshPolicy, FreshVectors
from services.recall.fresh_reads import FreshReads


def test_a_memory_is_awaited_from_its_note_until_its_vector_arrives():
    notes = FreshVectors(capacity=10, expire_seconds=60)
    notes.expect("t", ["a", "b"], now=0.0)
    assert notes.awaited("t", now=1.0) == {"a", "b"}
    assert notes.awaited("other", now=1.0) == frozenset()  # per tenant
    notes.arrived("t", ["a"], now=2.0)
    assert notes.awaited("t", now=2.0) == {"b"} and notes.left("t", frozenset({"a", "b"})) == 1
    notes.forget("t", ["b"])  # deleted: no vector to come
    assert notes.awaited("t", now=3.0) == frozenset() and len(notes) == 0


def test_notes_past_the_capacity_are_not_taken_and_old_ones_are_let_go():
    notes = FreshVectors(capacity=2, expire_seconds=10)
    assert notes.expect("t", ["a", "b", "c"], now=0.0) == 2
    assert notes.expect("u", ["x"], now=0.0) == 0  # the capacity is every tenant's together
    assert len(notes) == 2
    assert notes.awaited("t", now=11.0) == frozenset() and len(notes) == 0  # expired
    assert notes.expect("u", ["x"], now=11.0) == 1  # room again


def test_only_the_notes_older_than_the_expiry_are_let_go():
    notes = FreshVectors(capacity=10, expire_seconds=10)
    notes.expect("t", ["a"], now=0.0)
    notes.expect("t", ["b", "a"], now=5.0)  # a is noted once, at 0
    assert notes.count("t", now=12.0) == 1 and notes.awaited("t", now=12.0) == {"b"}
    assert notes.count("t", now=16.0) == 0 and notes.count("nobody", now=16.0) == 0


def test_progress_is_the_last_vector_or_the_start_of_a_wait():
    notes = FreshVectors(capacity=10, expire_seconds=60)
    notes.expect("t", ["a", "b"], now=5.0)
    assert notes.idle_for("t", now=8.0) == 3.0
    notes.arrived("t", ["a"], now=9.0)
    assert notes.idle_for("t", now=10.0) == 1.0
    notes.arrived("t", ["zzz"], now=20.0)  # not one it awaited: no progress
    assert notes.idle_for("t", now=20.0) == 11.0


def policy(**overrides) -> FreshPolicy:
    values = {"wait_seconds": 1.0, "stall_seconds": 5.0, "max_awaited": 100, "capacity": 1000, "expire_seconds": 600}
    return FreshPolicy(**(values | overrides))


def test_a_recall_waits_until_what_was_stored_before_it_arrives():
    async def run():
        fresh = FreshReads(policy(wait_seconds=5.0))
        fresh.expect("t", ["a", "b"])
        debug: dict = {}
        waiting = asyncio.ensure_future(fresh.wait("t", debug))
        await asyncio.sleep(0.05)
        fresh.expect("t", ["later"])  # stored after the recall began: not waited for
        fresh.projected("t", ["a"], [])
        await asyncio.sleep(0.05)
        assert not waiting.done()
        fresh.projected("t", ["b"], [])
        await asyncio.wait_for(waiting, 1.0)  # woken by the arrival, long before its 5 s
        return debug["fresh"]

    fresh = asyncio.run(run())
    assert fresh["awaited"] == 2 and fresh["left"] == 0 and fresh["waits"]
    assert 50 <= fresh["waited_ms"] < 1000


def test_a_recall_waits_no_longer_than_the_bound_and_says_what_is_missing():
    async def run():
        fresh = FreshReads(policy(wait_seconds=0.2))
        fresh.expect("t", ["a"])
        debug: dict = {}
        await fresh.wait("t", debug)
        return debug["fresh"]

    fresh = asyncio.run(run())
    assert fresh["left"] == 1 and 200 <= fresh["waited_ms"] < 600


def test_no_wait_for_a_bulk_load_a_stalled_tenant_or_with_the_wait_off():
    async def waited(fresh: FreshReads) -> dict:
        debug: dict = {}
        await fresh.wait("t", debug)
        return debug

    bulk = FreshReads(policy(max_awaited=1))
    bulk.expect("t", ["a", "b"])
    assert asyncio.run(waited(bulk))["fresh"]["waits"] is False
    now = [0.0]
    stalled = FreshReads(policy(stall_seconds=5.0), clock=lambda: now[0])
    stalled.expect("t", ["a"])
    now[0] = 6.0  # nothing arrived for longer than the stall
    answer = asyncio.run(waited(stalled))["fresh"]
    assert answer["waits"] is False and answer["waited_ms"] == 0
    off = FreshReads(policy(wait_seconds=0))
    off.expect("t", ["a"])
    assert asyncio.run(waited(off)) == {}
    nothing = FreshReads(policy())
    assert asyncio.run(waited(nothing)) == {}  # nothing awaited: no entry at all
