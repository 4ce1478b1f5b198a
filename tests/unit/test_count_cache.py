"""Counts kept for a while (document frequencies, entity mentions): fresh, far enough, bounded."""

from services.core.adapters.falkor.count_cache import CountCache


def test_a_count_answers_until_it_is_older_than_its_seconds():
    cache = CountCache(seconds=10, size=10)
    cache.put("k", 7, now=100.0, cap=None)
    assert cache.get("k", now=109.9, cap=None) == 7
    assert cache.get("k", now=110.0, cap=None) is None
    assert cache.get("other", now=100.0, cap=None) is None


def test_a_capped_count_answers_only_a_request_it_was_counted_far_enough_for():
    cache = CountCache(seconds=10, size=10)
    cache.put("hub", 201, now=0.0, cap=201)  # stopped at the cap: at least 201
    assert cache.get("hub", now=1.0, cap=201) == 201
    assert cache.get("hub", now=1.0, cap=50) == 201  # counted further than asked
    assert cache.get("hub", now=1.0, cap=500) is None  # might be more than 201
    assert cache.get("hub", now=1.0, cap=None) is None  # an exact count is asked
    cache.put("rare", 3, now=0.0, cap=201)  # under its cap: exact
    assert cache.get("rare", now=1.0, cap=None) == 3
    assert cache.get("rare", now=1.0, cap=10_000) == 3


def test_the_oldest_counts_go_first_past_the_size_and_a_recount_is_newest():
    cache = CountCache(seconds=100, size=2)
    cache.put("a", 1, now=0.0, cap=None)
    cache.put("b", 2, now=0.0, cap=None)
    cache.put("a", 3, now=1.0, cap=None)  # a recount: now the newest
    cache.put("c", 4, now=1.0, cap=None)
    assert len(cache) == 2
    assert cache.snapshot() == {"a": (3, None), "c": (4, None)}
