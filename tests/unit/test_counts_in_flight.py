"""Counts under way: a request waits for a count that answers it, and an abandoned one sends it back to count."""

import asyncio

import pytest

from services.core.adapters.falkor.counts_in_flight import CountsInFlight, awaited


async def test_a_count_under_way_answers_a_request_it_counts_far_enough_for():
    counts = CountsInFlight()
    with counts.taking(["hub", "rare"], 2001) as futures:
        assert counts.covering("hub", 2001) is futures["hub"]
        assert counts.covering("hub", 201) is futures["hub"]  # counted further than asked
        assert counts.covering("hub", 20_001) is None  # might be more than 2001
        assert counts.covering("hub", None) is None  # an exact count is asked
        assert counts.covering("other", 10) is None
        futures["hub"].set_result(2001)
        futures["rare"].set_result(3)
    assert len(counts) == 0  # done: answered by the cache from now on
    with counts.taking(["exact"], None) as futures:
        assert counts.covering("exact", None) is futures["exact"]
        assert counts.covering("exact", 5) is futures["exact"]


async def test_a_waiter_gets_the_count_when_it_is_taken():
    counts = CountsInFlight()
    with counts.taking(["w"], 10) as futures:
        waiter = asyncio.create_task(awaited(counts.covering("w", 10)))
        await asyncio.sleep(0)
        assert not waiter.done()
        futures["w"].set_result(7)
    assert await waiter == 7


async def test_a_count_left_unfinished_tells_its_waiters_to_count_for_themselves():
    counts = CountsInFlight()
    waiter = None
    with pytest.raises(RuntimeError), counts.taking(["w"], 10):
        waiter = asyncio.create_task(awaited(counts.covering("w", 10)))
        raise RuntimeError("the query failed")
    assert waiter is not None and await waiter is None
    assert len(counts) == 0


async def test_a_cancelled_waiter_leaves_the_count_running():
    counts = CountsInFlight()
    with counts.taking(["w"], 10) as futures:
        waiter = asyncio.create_task(awaited(counts.covering("w", 10)))
        await asyncio.sleep(0)
        waiter.cancel()
        with pytest.raises(asyncio.CancelledError):
            await waiter
        assert not futures["w"].cancelled()
        futures["w"].set_result(4)


async def test_a_wider_count_replaces_a_narrower_one_and_outlives_its_end():
    counts = CountsInFlight()
    narrower = counts.taking(["w"], 10)
    older = narrower.__enter__()
    with counts.taking(["w"], 100) as wider:
        assert counts.covering("w", 10) is wider["w"]
        older["w"].set_result(10)
        narrower.__exit__(None, None, None)
        assert counts.covering("w", 100) is wider["w"]  # the narrower one's end leaves it announced
        wider["w"].set_result(100)
    assert counts.covering("w", 10) is None
