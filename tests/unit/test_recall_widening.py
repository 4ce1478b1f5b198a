"""auto_decompose's widening picks what its sub-queries found, nearest first (services/recall/widening.py)."""

from services.recall.widening import nearest_first


def test_the_best_place_in_any_list_orders_and_the_pool_is_left_out():
    lists = [["a", "b", "c"], ["c", "d"], ["e"]]
    # c is first in the second list; a is already a candidate.
    assert nearest_first(lists, exclude={"a"}, most=10) == ["c", "e", "b", "d"]


def test_at_most_one_arms_depth_joins_however_many_sub_queries():
    lists = [[f"m{q}-{i}" for i in range(50)] for q in range(5)]
    picked = nearest_first(lists, exclude=set(), most=20)
    assert len(picked) == 20 and {p.rsplit("-", 1)[1] for p in picked} == {"0", "1", "2", "3"}
    assert nearest_first([], exclude=set(), most=5) == []
